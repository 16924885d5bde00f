package client

import (
	"context"
	"errors"
	"fmt"

	"github.com/blanket-dp/blanket/accountant/declare"
	"github.com/blanket-dp/blanket/sdk"
	"github.com/blanket-dp/blanket/sdk/ldp"
	"github.com/blanket-dp/blanket/sdk/report"
)

// A Record does not report its value: it stages it for its reporting
// period (plan.Plan.ReportPeriod of the Provider's clock), in clear, in
// the outbox, keyed by metric, plan and period. A categorical value
// replaces the period's earlier value; a real value adds to the period's
// total, and every value to the period's count of values (a mean is the
// total over the count, taken at closing). When the period has closed
// (close.go), the staged value is randomized, sealed and committed as the
// period's one report, so a user sends at most one report per metric
// (separate travel) or one message (joint, parallel travel) per period
// however often the app records.
//
// Before staging, a Record closes the periods that have ended, so that a
// Record in a new period seals the last one. A Record whose period is
// already closed for its pool, or for its metric (a report of it went out
// in the period, in whatever pool), is dropped (Stats.Late): the clock
// went back, or another process on the outbox closed it first. A state
// metric's value is not dropped but filed under the next period still
// open (stageStateLater): it is the state from then on. A period is
// closed for a pool only by closing it, never because a later period was
// staged: a Record of a period earlier than one already staged (the clock
// went back) is staged for its own period if that period is not closed,
// which keeps the bound of one report per period.

// record takes one value of metric name, a category or a real x as the
// metric's kind says: it checks it and buffers it (buffer.go), or stages
// it before returning with Config.StageInterval < 0 (recordNow).
func (p *Provider) record(ctx context.Context, name string, want instrumentKind, category string, x float64) error {
	v := p.plan.Load()
	ms, err := v.resolve(name, want)
	if err != nil {
		return err
	}
	if err := ms.checkValue(category, x); err != nil {
		return err
	}
	period := v.plan.ReportPeriod(p.now())
	if p.buf == nil {
		return p.recordNow(ctx, v, ms, period, category, x)
	}
	return p.buf.add(bufKey{v: v, ms: ms, period: period}, category, x)
}

// recordNow stages one Record before it returns, closing first the
// periods that have ended.
func (p *Provider) recordNow(ctx context.Context, v *verifiedPlan, ms *metricState, period report.Period, category string, x float64) error {
	p.mu.RLock()
	defer p.mu.RUnlock()
	if p.shutdown.Load() {
		return ErrShutdown
	}
	if p.now().Unix() >= p.nextClose.Load() {
		if err := p.closePeriods(ctx); err != nil && ctx.Err() == nil {
			// The value is staged all the same; the ended periods close
			// at the next try, or expire after the grace.
			p.log.Warn("blanket closing periods", "error", err)
		}
	}
	return p.stageValue(ctx, v, ms, period, bufVal{category: category, sum: x, count: 1})
}

// stageValue stages bv, bv.count Records of metric ms of plan v in
// period, as the plan's travel mode says. Records that cannot be staged
// because their period is closed are late (nil error).
func (p *Provider) stageValue(ctx context.Context, v *verifiedPlan, ms *metricState, period report.Period, bv bufVal) error {
	if period.Valid() != nil {
		p.late(ms.name, period, bv.count, "the clock reads before 1970: no period holds it")
		return nil
	}
	if v.travel == declare.TravelParallel {
		chosen, err := p.draw(ctx, v, period)
		if errors.Is(err, ErrPeriodClosed) {
			p.late(ms.name, period, bv.count, "the period is closed for the plan's pool")
			return nil
		}
		if err != nil {
			return err
		}
		if chosen != ms {
			p.stats.skipped.Add(bv.count)
			return nil
		}
	}
	val := Value{Pool: ms.pool, Period: period, Metric: ms.name, Plan: v.digest, Kind: ms.kind, Count: bv.count}
	if ms.kind == sdk.InputReal {
		val.Sum = bv.sum
	} else {
		val.Category = bv.category
	}
	_, err := p.outbox.Stage(ctx, val)
	if errors.Is(err, ErrPeriodClosed) && ms.state != nil {
		_, err = p.stageStateLater(ctx, v, ms, val)
	}
	if err != nil {
		if errors.Is(err, ErrPeriodClosed) {
			p.late(ms.name, period, bv.count, "the period is closed for the metric or its pool")
			return nil
		}
		return err
	}
	p.stats.recorded.Add(bv.count)
	return nil
}

// stateLaterTries bounds the periods stageStateLater tries after the
// metric's last stepped one.
const stateLaterTries = 3

// stageStateLater stages a state metric's value whose period is closed
// for the next period still open: the period after the run's last step
// when that is later, then the periods after it. A state metric's value
// is the state from then on, not one period's report, and dropping it
// would leave the randomizer on the previous value in every later period,
// so that two histories differing only in the period it was recorded in
// would differ in every later tree (docs/time.md §5: a value is recorded
// in the period the SDK files it under).
func (p *Provider) stageStateLater(ctx context.Context, v *verifiedPlan, ms *metricState, val Value) (Value, error) {
	prev, err := p.metricState(ctx, ms, v.digest)
	if err != nil {
		return Value{}, err
	}
	next := val.Period.End()
	if prev != nil && prev.Last.Length == val.Period.Length {
		next = max(next, prev.Last.End())
	}
	err = ErrPeriodClosed
	for i := 0; i < stateLaterTries && errors.Is(err, ErrPeriodClosed); i++ {
		val.Period = report.Period{Start: next, Length: val.Period.Length}
		next = val.Period.End()
		var staged Value
		if staged, err = p.outbox.Stage(ctx, val); err == nil {
			return staged, nil
		}
	}
	return Value{}, err
}

// draw returns the metric period of plan v drew with parallel travel,
// drawing it if the period has none yet: with the plan's weights, from
// crypto randomness, staged once, so that neither a restart nor another
// process on the outbox draws again (which would let a user pick the
// metric). It fails with ErrPeriodClosed once the period is closed.
func (p *Provider) draw(ctx context.Context, v *verifiedPlan, period report.Period) (*metricState, error) {
	m := v.order[pickIndex(v.cumWeights, ldp.NewCryptoSource())]
	d, err := p.outbox.Draw(ctx, Draw{Pool: v.pool, Period: period, Plan: v.digest, Metric: m.name})
	if err != nil {
		return nil, err
	}
	chosen := v.metrics[d.Metric]
	if chosen == nil {
		return nil, fmt.Errorf("client: the staged draw names %q, not a metric of the plan", d.Metric)
	}
	p.drawn.Store(&drawnMetric{v: v, period: period, ms: chosen})
	return chosen, nil
}

// closeOutboxPeriod closes c in the outbox, after raising closedThrough
// to its period's end: Enabled's cached draw of that period is not used
// from then on (the clock may go back into it), whether the close
// succeeds or not.
func (p *Provider) closeOutboxPeriod(ctx context.Context, c PeriodClose) error {
	end := c.Period.End()
	for {
		cur := p.closedThrough.Load()
		if cur >= end || p.closedThrough.CompareAndSwap(cur, end) {
			break
		}
	}
	return p.outbox.ClosePeriod(ctx, c)
}

// drawnMetric is the metric plan v drew for period (parallel travel).
type drawnMetric struct {
	v      *verifiedPlan
	period report.Period
	ms     *metricState
}

// pickIndex returns i with probability cum[i] - cum[i-1], for cumulative
// probabilities cum ending in 1, from 53 uniform bits of src.
func pickIndex(cum []float64, src ldp.Source) int {
	u := float64(src.Uint64()>>11) / (1 << 53)
	for i, c := range cum {
		if u < c {
			return i
		}
	}
	return len(cum) - 1
}

// enabled reports whether a Record of metric name of kind want would
// stage its value: when the plan has it, always, except with parallel
// travel for a metric the current period did not draw, or whose period
// is closed.
func (p *Provider) enabled(ctx context.Context, name string, want instrumentKind) bool {
	if p.shutdown.Load() {
		return false
	}
	v := p.plan.Load()
	ms, err := v.resolve(name, want)
	if err != nil {
		return false
	}
	if v.travel != declare.TravelParallel {
		return true
	}
	period := v.plan.ReportPeriod(p.now())
	if period.Valid() != nil {
		return false
	}
	// The period's draw, once read or made, is in memory: no lock, no
	// disk. A draw never changes (draw), so the copy stays right.
	if d := p.drawn.Load(); d != nil && d.v == v && d.period == period && period.End() > p.closedThrough.Load() {
		return d.ms == ms
	}
	p.mu.RLock()
	defer p.mu.RUnlock()
	if p.shutdown.Load() {
		return false
	}
	chosen, err := p.draw(ctx, v, period)
	if errors.Is(err, ErrPeriodClosed) {
		return false
	}
	return err != nil || chosen == ms
}
