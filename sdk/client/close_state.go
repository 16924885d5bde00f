package client

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/blanket-dp/blanket/sdk"
	"github.com/blanket-dp/blanket/sdk/report"
)

// Closing the periods of a state metric: a metric whose randomizer keeps
// per-user state across periods (sdk.Stateful; its Description says
// Stateful), such as the longitudinal protocol, whose transcript over
// many periods is private only because its random choices are drawn once
// and kept. Only separate travel has them (verifyPlan, plan.Calibrate).
//
// A state metric's value in a period is the last value recorded, carried
// forward over periods without a Record: the value staged for the period
// when there is one, else the metric's carried value (Outbox.Carried),
// which every closing of a period with a value replaces. So a state
// metric's periods close even without a Record: once the metric has a
// carried value, each period of the current plan that has ended within
// the grace and comes after the carried value's period is closed
// (stateGroups), in increasing order, by one step of the randomizer
// (Stateful.Step) with that value and the run's stored state (nil at the
// run's first step). A period that ended more than the grace ago is
// stepped only when a value was recorded in it, and its report is dropped
// unsent (Stats.Expired); the others are not stepped, and hold the
// carried value, which the randomizer carries over the periods it is not
// stepped in. So the state a run's steps follow is, in every period, the
// last value recorded at or before it, the history whose neighbours the
// guarantee is stated for (docs/time.md §5): a value recorded in a period that
// was too late to send steps in that period, not in the next one sent,
// where it would change reports after the window it was recorded in, or
// the next tree's.
//
// The step's new state is committed in the transaction that commits the
// period's envelope (none when the step sent no report), closes the period
// for the metric and stores the value carried forward
// (Outbox.ClosePeriod with PeriodClose.Step), so that:
//
//   - a crash before the commit loses nothing and sent nothing: the next
//     closing steps the period again from the same state;
//   - a step, once committed, is never redone: the commit closes the
//     period for the metric, and a period not after the stored state's
//     last is not stepped (it closes without a report, its values counted
//     in Stats.Late), as the randomizer would refuse it (sdk.ErrBadState);
//   - another process on the outbox that stepped meanwhile makes the
//     commit fail with ErrStalePeriod, and the closing reads again.
//
// States are per metric, plan and randomizer configuration: a new plan is
// a new protocol run, and a run's first step draws new random choices.
// The accountant bounds each plan epoch on its own and composes epochs,
// and the collector never merges statistics of two epochs, so a run never
// spans two plans: were a state to go on under a new eps0 or
// configuration, its reports would follow choices drawn for another
// mechanism. The states of earlier plans are kept, so that a plan coming
// back resumes its run rather than drawing a second time in it. A state
// the randomizer refuses (sdk.ErrBadState) is never replaced by a fresh
// one within its run, which would redraw its choices: the closing fails,
// and the metric sends nothing until its periods expire or a new plan
// starts a new run.
//
// The carried value is the user's data, not a report: it goes on across
// plans (a plan change does not unset "feature enabled"), and a value
// staged under an earlier plan for a period still open at the change is
// stepped under the current plan rather than dropped (it is not
// Superseded) when the current plan's metric takes it. It stays on the
// device, in clear like the values of an open period, as long as the
// outbox.

// stateGroups adds, through group, the periods of plan v's state metrics
// that closing steps although nothing is staged for them: for each such
// metric with a carried value the current plan's metric takes, or with a
// value staged (staged) for an ended period, the periods of plan v that
// have ended by now, within the grace, and start after the earliest such
// value's period. The staged values count too because Records reach the
// outbox in batches (buffer.go): a closing may find several periods'
// values staged before the metric was ever stepped, and the periods
// between them are stepped with the state carried from the one before,
// as when each Record closed the periods before it.
func (p *Provider) stateGroups(ctx context.Context, v *verifiedPlan, now time.Time, grace time.Duration, staged []Value, group func(periodKey) *periodGroup) error {
	if !v.hasState() {
		return nil
	}
	carried, err := p.outbox.Carried(ctx)
	if err != nil {
		return err
	}
	cur := v.plan.ReportPeriod(now)
	// from is, per state metric, the end of the earliest period its
	// stepping resumes after.
	from := map[*metricState]int64{}
	note := func(val Value) {
		ms := v.metrics[val.Metric]
		if ms == nil || ms.state == nil || !ms.takes(val) || val.Period.End() > now.Unix() {
			return
		}
		if f, ok := from[ms]; !ok || val.Period.End() < f {
			from[ms] = val.Period.End()
		}
	}
	for _, c := range carried {
		note(c)
	}
	for _, val := range staged {
		note(val)
	}
	for ms, end := range from {
		for start := cur.Start - cur.Length; start >= 0; start -= cur.Length {
			per := report.Period{Start: start, Length: cur.Length}
			if now.Sub(time.Unix(per.End(), 0)) > grace || per.Start < end {
				break
			}
			group(periodKey{ms.pool, per})
		}
	}
	return nil
}

// hasState reports whether the plan has a state metric.
func (v *verifiedPlan) hasState() bool {
	for _, ms := range v.order {
		if ms.state != nil {
			return true
		}
	}
	return false
}

// takes reports whether the state metric would take val as its value: of
// its kind, and a category it has (or it has an other bucket).
func (ms *metricState) takes(val Value) bool {
	return val.Kind == ms.kind && ms.checkValue(val.Category, val.Sum) == nil
}

// closeStateGroup closes one ended period of state metric ms of plan v: it
// steps the metric's state with the period's value and commits the new
// state with the period's envelope, if the step sent a report. It reports
// whether it committed an envelope.
func (p *Provider) closeStateGroup(ctx context.Context, v *verifiedPlan, ms *metricState, g *periodGroup, now time.Time, grace time.Duration) (bool, error) {
	c := PeriodClose{Pool: g.key.pool, Period: g.key.period, Unstage: g.values, Undraw: g.draws}
	// The value recorded in the period: under plan v, else under an
	// earlier plan when plan v's metric takes it.
	var rec *Value
	for i := range g.values {
		if val := &g.values[i]; val.Plan == v.digest {
			rec = val
		}
	}
	for i := range g.values {
		if val := &g.values[i]; rec == nil && ms.takes(*val) {
			rec = val
		}
	}
	dropped := int64(len(g.values))
	if rec != nil {
		dropped--
		c.Carry = carry(ms, g.key.period, *rec)
	}
	end := time.Unix(g.key.period.End(), 0)
	late := now.Sub(end) > grace
	val := rec
	if val == nil && late {
		// Too late to send and nothing recorded in it that the metric
		// takes: the period holds the carried value, which the randomizer
		// carries over periods it is not stepped in.
		if err := p.closeOutboxPeriod(ctx, c); err != nil {
			return false, err
		}
		if len(g.values) > 0 {
			p.expired(g.key.pool, g.key.period)
		}
		return false, nil
	}
	if val == nil {
		cv, err := p.carriedValue(ctx, ms.name)
		if err != nil {
			return false, err
		}
		if cv != nil && cv.Period.End() <= g.key.period.Start && ms.takes(*cv) {
			val = cv
			c.Carry = carry(ms, g.key.period, *cv)
		}
	}
	if val == nil {
		// Nothing recorded that the metric takes: nothing to step.
		if err := p.closeOutboxPeriod(ctx, c); err != nil {
			return false, err
		}
		p.stats.superseded.Add(dropped)
		return false, nil
	}
	prev, err := p.metricState(ctx, ms, v.digest)
	if err != nil {
		return false, err
	}
	if prev != nil && g.key.period.Start < prev.Last.End() {
		// Stepped already: never again (a second draw for the period).
		c.Carry = nil
		if err := p.closeOutboxPeriod(ctx, c); err != nil {
			return false, err
		}
		p.lateValues(g.values, "the metric was stepped in the period already")
		return false, nil
	}
	var state []byte
	if prev != nil {
		if state, err = p.resumeState(ctx, ms, prev, g.key.period); err != nil {
			return false, err
		}
	}
	reports, next, err := ms.state.Step(ctx, ms.eps0, g.key.period.Start/g.key.period.Length, [][]byte{state}, sdk.Inputs{Categories: []string{val.Category}})
	if err != nil {
		if errors.Is(err, sdk.ErrBadInput) {
			return false, fmt.Errorf("%w: metric %q: %w", ErrBadValue, ms.name, err)
		}
		return false, fmt.Errorf("client: metric %q: step to period %s: %w", ms.name, g.key.period, err)
	}
	if len(reports) != 1 || len(next) != 1 || len(next[0]) == 0 {
		return false, fmt.Errorf("client: metric %q: step to period %s answered %d reports and %d states for one value, or an empty state", ms.name, g.key.period, len(reports), len(next))
	}
	c.Step = &StateStep{Metric: ms.name, Plan: v.digest, Digest: ms.digest, Prev: prev, Next: next[0]}
	if late {
		// Too late to send: the step's report, if any, is dropped, but the
		// state steps with the period's value, so that the randomizer sees
		// the change in the period it was recorded in rather than in the
		// next one stepped (a change carried into a later period, or into
		// the next tree, would change reports outside the window the
		// guarantee is stated for: docs/time.md §5, "What the guarantee protects").
		if err := p.closeOutboxPeriod(ctx, c); err != nil {
			if errors.Is(err, ErrPeriodClosed) {
				return p.closeStateLate(ctx, c, g)
			}
			return false, err
		}
		p.stats.steps.Add(1)
		p.expired(g.key.pool, g.key.period)
		return false, nil
	}
	if len(reports[0]) > 0 {
		env, err := seal(v, ms.pool, g.key.period, ms.binding, reports[0])
		if err != nil {
			return false, err
		}
		c.Envelope, c.Local, c.Epoch, c.Charges = env, p.mode == ModeLocal, v.epoch, []Charge{{Metric: ms.name, Eps0: ms.eps0}}
	}
	err = p.closeOutboxPeriod(ctx, c)
	if errors.Is(err, ErrPeriodClosed) {
		return p.closeStateLate(ctx, c, g)
	}
	if err != nil {
		return false, err
	}
	p.stats.steps.Add(1)
	p.stats.superseded.Add(dropped)
	if c.Envelope != nil {
		p.stats.messages.Add(1)
	}
	return c.Envelope != nil, nil
}

// resumeState returns the state a run's step of period per starts from:
// prev's, or, when the metric's carried value was set after prev's last
// period (by the steps of another plan while this run's plan was not in
// force, or by a period closed without a step), prev's stepped once more,
// silently (its report dropped), at the period after prev's last, with
// that carried value. Without it the run would still hold the value of its
// last step: the change would step in this period, or, across a tree,
// enter the next tree as a value carried from the run's last step,
// changing reports that no window around that step's period meets. With
// it the run's history is the recorded one from the carried value's
// period on, and before it the carried value, which differs between two
// neighbouring histories only if the window holds that period (the
// argument is in docs/time.md §5, "What the guarantee protects").
func (p *Provider) resumeState(ctx context.Context, ms *metricState, prev *MetricState, per report.Period) ([]byte, error) {
	gap := report.Period{Start: prev.Last.End(), Length: per.Length}
	if per.Start <= gap.Start || gap.Start%gap.Length != 0 {
		return prev.State, nil // no period between (or not of this length): nothing to catch up
	}
	cv, err := p.carriedValue(ctx, ms.name)
	if err != nil {
		return nil, err
	}
	if cv == nil || cv.Period.Start < prev.Last.End() || !ms.takes(*cv) {
		return prev.State, nil // the run's own last value, or nothing it takes
	}
	_, next, err := ms.state.Step(ctx, ms.eps0, gap.Start/gap.Length, [][]byte{prev.State}, sdk.Inputs{Categories: []string{cv.Category}})
	if err != nil {
		return nil, fmt.Errorf("client: metric %q: step to period %s with the value carried from %s: %w", ms.name, gap, cv.Period, err)
	}
	if len(next) != 1 || len(next[0]) == 0 {
		return nil, fmt.Errorf("client: metric %q: step to period %s answered %d states for one value, or an empty one", ms.name, gap, len(next))
	}
	return next[0], nil
}

// closeStateLate closes a period that is closed for the metric already (a
// report of it under another plan, or another process's step): the step
// is dropped unsent, and the value carries forward from the period.
func (p *Provider) closeStateLate(ctx context.Context, c PeriodClose, g *periodGroup) (bool, error) {
	c.Step, c.Envelope, c.Charges = nil, nil, nil
	if err := p.closeOutboxPeriod(ctx, c); err != nil {
		return false, err
	}
	p.lateValues(g.values, "the period was closed for the metric already")
	return false, nil
}

// carry returns the value of state metric ms carried forward from period:
// val's.
func carry(ms *metricState, period report.Period, val Value) *Value {
	return &Value{Metric: ms.name, Period: period, Kind: val.Kind, Category: val.Category, Sum: val.Sum}
}

// carriedValue returns the value metric carries forward, or nil.
func (p *Provider) carriedValue(ctx context.Context, metric string) (*Value, error) {
	carried, err := p.outbox.Carried(ctx)
	if err != nil {
		return nil, err
	}
	for i := range carried {
		if carried[i].Metric == metric {
			return &carried[i], nil
		}
	}
	return nil, nil
}

// metricState returns the stored state of state metric ms's run under the
// plan of digest, or nil.
func (p *Provider) metricState(ctx context.Context, ms *metricState, plan string) (*MetricState, error) {
	states, err := p.outbox.States(ctx)
	if err != nil {
		return nil, err
	}
	for i := range states {
		if s := &states[i]; s.Metric == ms.name && s.Plan == plan && s.Digest == ms.digest {
			return s, nil
		}
	}
	return nil, nil
}
