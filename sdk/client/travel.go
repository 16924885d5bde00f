package client

import (
	"context"
	"errors"
	"fmt"

	"github.com/blanket-dp/blanket/accountant/declare"
	"github.com/blanket-dp/blanket/sdk"
	"github.com/blanket-dp/blanket/sdk/plan"
	"github.com/blanket-dp/blanket/sdk/report"
)

// What each travel mode makes of a closed period's values (see the package
// doc), all randomized at the plan's eps0 and sealed under the period's
// binding:
//
//   - separate: each metric with a value in the period sends one report
//     of it, pooled by the shuffler with that metric's reports of the
//     period (report.PeriodPoolKey). A metric without a value sends
//     nothing.
//   - joint: one message carries every metric of the plan in plan order
//     (report.EncodeMessage), sealed under the pool's binding over every
//     metric's binding with the period set (report.PoolBinding). A sum
//     without a value in the period contributes 0 (clamped to its range);
//     a categorical metric or a mean without one leaves the period without
//     a message (Stats.Incomplete), since no value stands for "nothing"
//     (the mean of no values is not 0).
//   - parallel: the period drew one metric (record.go); its value is sent
//     as a one-part message, sealed like a joint one. Without a value of
//     it the period sends nothing.
//
// A categorical value is the period's last; a sum is the period's total
// and a mean the period's total over its number of values (plan aggregate
// "mean"), clamped to the metric's range here, at closing.

// makeReport returns what plan v's values cur of period k (and, with
// parallel travel, its draw) make.
func (p *Provider) makeReport(ctx context.Context, v *verifiedPlan, k periodKey, cur []Value, draw *Draw) (sealed, error) {
	if len(cur) == 0 {
		return sealed{}, nil
	}
	switch v.travel {
	case declare.TravelJoint:
		return p.sealJoint(ctx, v, k.period, cur)
	case declare.TravelParallel:
		return p.sealParallel(ctx, v, k.period, cur, draw)
	default:
		return p.sealSeparate(ctx, v, k.period, cur)
	}
}

// sealSeparate seals the period's value of one metric as its report.
func (p *Provider) sealSeparate(ctx context.Context, v *verifiedPlan, period report.Period, cur []Value) (sealed, error) {
	if len(cur) != 1 {
		return sealed{}, fmt.Errorf("client: %d values of metric %q staged for period %s, want 1", len(cur), cur[0].Metric, period)
	}
	ms := v.metrics[cur[0].Metric]
	if ms == nil {
		return sealed{}, fmt.Errorf("client: a value of %q is staged under the plan, which has no such metric", cur[0].Metric)
	}
	rep, err := randomizeValue(ctx, ms, cur[0])
	if err != nil {
		return sealed{}, err
	}
	env, err := seal(v, ms.pool, period, ms.binding, rep)
	if err != nil {
		return sealed{}, err
	}
	return sealed{envelope: env, charges: []Charge{{Metric: ms.name, Eps0: ms.eps0}}}, nil
}

// sealJoint seals one message carrying every metric's value of the period.
func (p *Provider) sealJoint(ctx context.Context, v *verifiedPlan, period report.Period, cur []Value) (sealed, error) {
	byMetric := make(map[string]Value, len(cur))
	for _, val := range cur {
		byMetric[val.Metric] = val
	}
	parts := make([]report.Part, len(v.order))
	charges := make([]Charge, len(v.order))
	for i, ms := range v.order {
		val, ok := byMetric[ms.name]
		if !ok {
			if ms.kind != sdk.InputReal || ms.agg != plan.AggregateSum {
				return sealed{incomplete: true}, nil
			}
			val = Value{Metric: ms.name, Kind: sdk.InputReal} // a sum of nothing
		}
		rep, err := randomizeValue(ctx, ms, val)
		if err != nil {
			return sealed{}, err
		}
		parts[i] = report.Part{Metric: i, Report: rep}
		charges[i] = Charge{Metric: ms.name, Eps0: ms.eps0}
	}
	env, err := seal(v, v.pool, period, v.poolBinding(period), report.EncodeMessage(parts))
	if err != nil {
		return sealed{}, err
	}
	return sealed{envelope: env, charges: charges}, nil
}

// sealParallel seals the drawn metric's value of the period as a one-part
// message.
func (p *Provider) sealParallel(ctx context.Context, v *verifiedPlan, period report.Period, cur []Value, draw *Draw) (sealed, error) {
	if draw == nil {
		return sealed{}, nil
	}
	ms := v.metrics[draw.Metric]
	if ms == nil {
		return sealed{}, fmt.Errorf("client: the staged draw names %q, not a metric of the plan", draw.Metric)
	}
	for _, val := range cur {
		if val.Metric != ms.name {
			continue
		}
		rep, err := randomizeValue(ctx, ms, val)
		if err != nil {
			return sealed{}, err
		}
		msg := report.EncodeMessage([]report.Part{{Metric: ms.index, Report: rep}})
		env, err := seal(v, v.pool, period, v.poolBinding(period), msg)
		if err != nil {
			return sealed{}, err
		}
		return sealed{envelope: env, charges: []Charge{{Metric: ms.name, Eps0: ms.eps0}}}, nil
	}
	return sealed{}, nil
}

// poolBinding returns the binding of the pooled messages of period: the
// pool's binding over every metric's binding with the period set.
func (v *verifiedPlan) poolBinding(period report.Period) report.Binding {
	bs := make([]report.Binding, len(v.bindings))
	for i, b := range v.bindings {
		b.Period = period
		bs[i] = b
	}
	return report.PoolBinding(v.pool, v.plan.Travel, bs)
}

// randomizeValue randomizes a period's value of ms at the plan's eps0: a
// category as it is, a sum or a mean clamped to the metric's range.
func randomizeValue(ctx context.Context, ms *metricState, val Value) ([]byte, error) {
	in := sdk.Inputs{Categories: []string{val.Category}}
	if ms.kind == sdk.InputReal {
		x := val.Sum
		if ms.agg == plan.AggregateMean {
			if val.Count < 1 {
				return nil, fmt.Errorf("client: metric %q: a mean of %d values staged", ms.name, val.Count)
			}
			x /= float64(val.Count)
		}
		in = sdk.Inputs{Reals: []float64{ms.clamp(x)}}
	}
	reps, err := ms.r.Randomize(ctx, ms.eps0, in)
	if err != nil {
		if errors.Is(err, sdk.ErrBadInput) {
			return nil, fmt.Errorf("%w: metric %q: %w", ErrBadValue, ms.name, err)
		}
		return nil, fmt.Errorf("client: metric %q: %w", ms.name, err)
	}
	if len(reps) != 1 {
		return nil, fmt.Errorf("client: metric %q: randomizer returned %d reports for one value", ms.name, len(reps))
	}
	return reps[0], nil
}
