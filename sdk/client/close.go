package client

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/blanket-dp/blanket/sdk/plan"
	"github.com/blanket-dp/blanket/sdk/report"
)

// Closing a period. closePeriods runs when Records are staged (buffer.go;
// when a staged period may have ended), at every upload tick and Flush, at
// Shutdown, and when a Provider starts. It reads every staged value and draw, groups them by
// pool and period, and closes each group whose period has ended (its end
// <= now) in one Outbox.ClosePeriod, with what the period's travel mode
// makes of it (travel.go):
//
//   - ended more than the grace ago: dropped unsent (Stats.Expired);
//   - values staged under another plan than the current one: dropped
//     (Stats.Superseded), since a report is sealed under its plan's
//     binding, which the Provider no longer holds. A plan change closes
//     the periods that ended under the plan it replaces first (swapPlan,
//     and closeCachedPlan at start), so only values staged for a period
//     still open at the change come here;
//   - the current plan's values: randomized at the plan's eps0, sealed
//     under the period's binding and committed as the period's one report
//     or message, with its ledger charge, in the same transaction that
//     removes the values and marks the period closed;
//   - a state metric's period, with or without a value staged: stepped
//     with its randomizer's state, and the new state committed with the
//     report, if any (close_state.go).
//
// A value changed between the read and the commit (a Record, or another
// process) makes the commit fail with ErrStalePeriod, and the pass reads
// again. Periods close in order of their start.

// maxCloseTries bounds how often a closing reads the outbox again after
// another Record or process changed a period it was closing.
const maxCloseTries = 8

// periodGroup is what is staged for one period of one pool.
type periodGroup struct {
	key    periodKey
	values []Value
	draws  []Draw
}

// closePeriods closes every staged period that has ended, under the
// current plan.
func (p *Provider) closePeriods(ctx context.Context) error {
	p.closeMu.Lock()
	defer p.closeMu.Unlock()
	return p.closeEnded(ctx, p.plan.Load(), p.now(), false)
}

// swapPlan makes v the plan the Provider reports by, unless it is the plan
// in use already, and reports whether it did. Before the swap it closes,
// under the plan in use, every staged period that has ended by now, so
// that their values are sealed under the plan they were recorded under
// and sent: after the swap the Provider no longer holds that plan, and
// closing would drop them (Stats.Superseded). Only the values staged for a
// period still open at the swap are dropped so. It holds closeMu from the
// closing to the swap, so that no other closing runs in between. When the
// closing fails the plan in use stays and the error is returned: the
// values stay staged, and the next refresh tries again (a period that
// cannot be sealed expires after the grace, which ends the wait).
func (p *Provider) swapPlan(ctx context.Context, v *verifiedPlan) (bool, error) {
	p.closeMu.Lock()
	defer p.closeMu.Unlock()
	cur := p.plan.Load()
	switch {
	case cur.etag == v.etag:
		return false, nil // a concurrent refresh took it
	case cur.digest == v.digest:
		// The same epoch under another key schedule (the collector
		// published its next key, or dropped a deleted one): what is
		// staged is v's, and closes under v's schedule.
		p.plan.Store(v)
		return true, nil
	}
	// The ended periods close under the plan they were staged under, with
	// the collector's key schedule as v (just fetched) has it: keys are
	// the collector's, not a plan's.
	if err := p.closeEnded(ctx, cur.withKeys(v.keys), p.now(), false); err != nil {
		if ctx.Err() != nil {
			return false, ctx.Err()
		}
		return false, fmt.Errorf("client: plan %s not taken yet: closing the periods that ended under plan %s: %w", v.epoch, cur.epoch, err)
	}
	p.plan.Store(v)
	p.nextClose.Store(0) // the new plan's periods may end sooner
	return true, nil
}

// closeEnded closes every staged period that has ended by now, sealing
// plan v's values under v. With own, only the periods holding a value or
// draw of plan v are closed (v is not the plan in use: the others are
// left for it). The caller holds closeMu.
func (p *Provider) closeEnded(ctx context.Context, v *verifiedPlan, now time.Time, own bool) error {
	// The Records buffered in memory are staged first, so that no period
	// closes without them (buffer.go). One that fails to stage stays
	// buffered, and is late if its period closes meanwhile.
	if err := p.stageBuffered(ctx); err != nil && ctx.Err() == nil {
		p.log.Warn("blanket staging Records", "error", err)
	}
	grace := p.graceOf(v)
	var lastErr error
	for range maxCloseTries {
		groups, next, err := p.readGroups(ctx, v, now, grace)
		if err != nil {
			return err
		}
		stale, committed := false, false
		lastErr = nil
		for _, g := range groups {
			if own && !g.holds(v.digest) {
				continue
			}
			sent, err := p.closeGroup(ctx, v, g, now, grace)
			committed = committed || sent
			switch {
			case errors.Is(err, ErrStalePeriod):
				stale = true
			case err != nil:
				lastErr = err
				next = 0 // try again at the next Record
			}
		}
		if committed && p.up != nil {
			p.up.notify()
		}
		if !stale {
			p.nextClose.Store(next)
			return lastErr
		}
	}
	p.nextClose.Store(0)
	if lastErr == nil {
		lastErr = fmt.Errorf("%w: periods kept changing while closing; they close at the next try", ErrStalePeriod)
	}
	return lastErr
}

// closeCachedPlan closes, when a Provider starts, the staged periods that
// ended under pl, the plan the last run cached in DataDir (planCacheFile;
// openCachedPlan), the plan their values were recorded under, before
// NewProvider takes the collector's plan: when the collector has moved on
// to a new plan, closing them under it would drop them (Stats.Superseded),
// as swapPlan prevents for a running Provider. When the collector still
// serves the cached plan this is the closing NewProvider does anyway. It
// does nothing when nothing staged under the cached plan has ended, and
// cannot help when no plan is cached (pl is nil: no DataDir, the cache
// write failed, the file is gone or does not authenticate) or the cached
// plan no longer passes verifyPlan (a lower MaxEps0, a randomizer gone):
// then the values of a plan the collector replaced are superseded when
// they close, as before. It returns only ctx's error; other failures are
// logged and leave the values staged.
func (p *Provider) closeCachedPlan(ctx context.Context, pl *plan.Plan) error {
	if pl == nil {
		return nil
	}
	fail := func(what string, err error) error {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		p.log.Warn("blanket closing periods under the cached plan", "step", what, "error", err)
		return nil
	}
	digest, now := pl.EpochDigest(), p.now()
	vals, err := p.outbox.Staged(ctx)
	if err != nil {
		return fail("read", err)
	}
	if !slices.ContainsFunc(vals, func(val Value) bool { return val.Plan == digest && val.Period.End() <= now.Unix() }) {
		return nil // spare verifying the plan (opening its randomizers)
	}
	v, err := verifyPlan(ctx, pl, p.cfg.MaxEps0, p.cache)
	if err != nil {
		return fail("verify", err)
	}
	p.closeMu.Lock()
	defer p.closeMu.Unlock()
	// Only the periods with values of the cached plan: a period holding
	// only a newer plan's values (the cache write after a plan change was
	// lost) waits for that plan.
	if err := p.closeEnded(ctx, v, now, true); err != nil {
		return fail("close", err)
	}
	return nil
}

// withKeys returns v with the collector key schedule keys.
func (v *verifiedPlan) withKeys(keys plan.KeySchedule) *verifiedPlan {
	c := *v
	c.keys = keys
	return &c
}

// holds reports whether g has a value or draw of the plan of digest.
func (g *periodGroup) holds(digest string) bool {
	for _, val := range g.values {
		if val.Plan == digest {
			return true
		}
	}
	for _, d := range g.draws {
		if d.Plan == digest {
			return true
		}
	}
	return false
}

// readGroups returns the staged periods that have ended by now, and the
// periods of plan v's state metrics to step within the grace
// (stateGroups), in order of start, and the Unix second before which no
// other can end: the earliest end of the periods still open, at most the
// end of the current period of plan v.
func (p *Provider) readGroups(ctx context.Context, v *verifiedPlan, now time.Time, grace time.Duration) ([]*periodGroup, int64, error) {
	vals, err := p.outbox.Staged(ctx)
	if err != nil {
		return nil, 0, err
	}
	draws, err := p.outbox.Draws(ctx)
	if err != nil {
		return nil, 0, err
	}
	next := v.plan.ReportPeriod(now).End()
	t := now.Unix()
	byKey := map[periodKey]*periodGroup{}
	var groups []*periodGroup
	group := func(k periodKey) *periodGroup {
		g := byKey[k]
		if g == nil {
			g = &periodGroup{key: k}
			byKey[k] = g
			groups = append(groups, g)
		}
		return g
	}
	for _, val := range vals {
		if end := val.Period.End(); end > t {
			next = min(next, end)
			continue
		}
		g := group(periodKey{val.Pool, val.Period})
		g.values = append(g.values, val)
	}
	for _, d := range draws {
		if end := d.Period.End(); end > t {
			next = min(next, end)
			continue
		}
		g := group(periodKey{d.Pool, d.Period})
		g.draws = append(g.draws, d)
	}
	if err := p.stateGroups(ctx, v, now, grace, vals, group); err != nil {
		return nil, 0, err
	}
	// Keep the order of period start overall.
	sortGroups(groups)
	return groups, next, nil
}

// closeGroup closes one ended period of one pool. It reports whether it
// committed an envelope.
func (p *Provider) closeGroup(ctx context.Context, v *verifiedPlan, g *periodGroup, now time.Time, grace time.Duration) (bool, error) {
	if ms := v.metrics[g.key.pool]; ms != nil && ms.state != nil {
		return p.closeStateGroup(ctx, v, ms, g, now, grace)
	}
	c := PeriodClose{Pool: g.key.pool, Period: g.key.period, Unstage: g.values, Undraw: g.draws}
	end := time.Unix(g.key.period.End(), 0)
	if now.Sub(end) > grace {
		if err := p.closeOutboxPeriod(ctx, c); err != nil {
			return false, err
		}
		if len(g.values) > 0 {
			p.expired(g.key.pool, g.key.period)
		}
		return false, nil
	}
	var cur []Value
	for _, val := range g.values {
		if val.Plan == v.digest {
			cur = append(cur, val)
		}
	}
	var draw *Draw
	for i := range g.draws {
		if g.draws[i].Plan == v.digest {
			draw = &g.draws[i]
		}
	}
	superseded := int64(len(g.values) - len(cur))
	out, err := p.makeReport(ctx, v, g.key, cur, draw)
	if err != nil {
		return false, err
	}
	if out.envelope != nil {
		c.Envelope, c.Local, c.Epoch, c.Charges = out.envelope, p.mode == ModeLocal, v.epoch, out.charges
	}
	err = p.closeOutboxPeriod(ctx, c)
	if errors.Is(err, ErrPeriodClosed) && c.Envelope != nil {
		// Values staged for a period closed already (which Stage
		// refuses, so only an outbox that lost that check has them): drop
		// them as late rather than send a second report.
		c.Envelope = nil
		if err = p.closeOutboxPeriod(ctx, c); err == nil {
			p.lateValues(g.values, "the period was closed for a metric it carries")
			return false, nil
		}
	}
	if err != nil {
		return false, err
	}
	p.stats.superseded.Add(superseded)
	if out.incomplete {
		p.stats.incomplete.Add(1)
	}
	if c.Envelope != nil {
		p.stats.messages.Add(1)
	}
	return c.Envelope != nil, nil
}

// sealed is what a period's values make: an envelope with its ledger
// charges, or nothing (and why).
type sealed struct {
	envelope *report.Envelope
	charges  []Charge
	// incomplete marks a joint period without a value of some
	// categorical metric: it sends nothing.
	incomplete bool
}

// seal seals plaintext under binding for period, to the collector's key
// of that period in plan v's key schedule, and wraps it in an envelope of
// pool, tagged with plan v's epoch and the period (report.PeriodPoolKey).
// A period no key of the schedule covers (its keys were all deleted) is
// refused with ErrNoCollectorKey: it stays staged until it expires.
func seal(v *verifiedPlan, pool string, period report.Period, binding report.Binding, plaintext []byte) (*report.Envelope, error) {
	binding.Period = period
	key, ok := v.keys.For(period)
	if !ok {
		return nil, fmt.Errorf("client: %s: %w: no key of the plan's schedule seals period %s (its first starts at %d)", pool, ErrNoCollectorKey, period, v.keys[0].From)
	}
	b, err := report.Seal(key.Key, binding, plaintext)
	if err != nil {
		return nil, fmt.Errorf("client: %s: seal: %w", pool, err)
	}
	return &report.Envelope{ID: report.NewID(), Metric: report.PeriodPoolKey(pool, v.epoch, period), Suite: report.SuiteX25519ChaCha, Sealed: b}, nil
}

// sortGroups orders groups by period, then pool.
func sortGroups(gs []*periodGroup) {
	slices.SortFunc(gs, func(a, b *periodGroup) int {
		return cmp.Or(comparePeriod(a.key.period, b.key.period), cmp.Compare(a.key.pool, b.key.pool))
	})
}
