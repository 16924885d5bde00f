package accounting

import (
	"context"
	"errors"
	"fmt"

	"github.com/blanket-dp/blanket/accountant"
	"github.com/blanket-dp/blanket/sdk"
	"github.com/blanket-dp/blanket/sdk/plan"
)

// Mechanism returns the accountant's view of metric m's randomizer: a
// family in eps0 whose declaration comes from the plugin's Declare.
func Mechanism(ctx context.Context, r sdk.Randomizer, name string) accountant.FuncMech {
	return accountant.FuncMech{
		Name: name,
		Declare: func(eps0 float64) (*accountant.Declaration, error) {
			d, err := r.Declare(ctx, eps0)
			if errors.Is(err, sdk.ErrBadEps0) {
				// A budget the plugin does not take is an argument outside
				// the mechanism's domain: calibration searches above it.
				return nil, fmt.Errorf("%w: %w", accountant.ErrInvalidArgument, err)
			}
			return d, err
		},
	}
}

// Calibrate opens every metric's randomizer, sets every metric's eps0 so
// that the plan meets its target per user over its horizon, every report
// in a batch of NMin (accountant.AllocatePlan: every metric's reports in
// all the horizon's periods composed), and records the guarantee. With a
// MaxFakeFraction the batch of NMin counts its honest floor only
// (plan.Plan.HonestReports; at least that many of any batch of NMin or
// more are honest, and the fakes contribute no blanket:
// accountant/declare/fakes.go). A
// stateful randomizer (sdk.Description.Stateful) needs separate travel:
// under joint or parallel travel the plan is refused with an error
// wrapping plan.ErrInvalid that names the metric.
func Calibrate(ctx context.Context, p *plan.Plan, open plan.Opener) error {
	return CalibrateRounds(ctx, p, open, p.HorizonPeriods())
}

// CalibrateRounds sets the plan p's horizon to rounds periods and
// calibrates it (Calibrate).
func CalibrateRounds(ctx context.Context, p *plan.Plan, open plan.Opener, rounds int) error {
	if err := p.Validate(); err != nil {
		return err
	}
	if rounds < 1 || rounds > accountant.MaxRounds {
		return invalid("rounds = %d, must be in [1, %d]", rounds, accountant.MaxRounds)
	}
	if rounds != p.HorizonPeriods() {
		p.Horizon = rounds
	}
	spec := accountant.PlanSpec{Eps: p.Target.Eps, Delta: p.Target.Delta, NMin: p.HonestReports(p.NMin), Travel: accountant.Travel(p.Travel), Rounds: rounds}
	for i := range p.Metrics {
		m := &p.Metrics[i]
		r, err := open(ctx, m.Plugin, m.Config())
		if err != nil {
			return fmt.Errorf("plan: metric %q: %w", m.Name, err)
		}
		d, err := r.Describe(ctx)
		if err != nil {
			return fmt.Errorf("plan: metric %q: %w", m.Name, err)
		}
		if m.Aggregate != "" && d.Input != sdk.InputReal {
			return invalid("metric %q: aggregate = %q, but plugin %q takes %v inputs; only a real-valued metric has an aggregate", m.Name, m.Aggregate, m.Plugin, d.Input)
		}
		if d.Stateful && p.Pooled() {
			return invalid("metric %q: plugin %q is stateful (it keeps per-user state across periods and reports through Step), which only separate travel supports; the plan's travel is %q", m.Name, m.Plugin, p.Travel)
		}
		m.Version = d.Version
		spec.Metrics = append(spec.Metrics, accountant.PlanMetric{Name: m.Name, Mech: Mechanism(ctx, r, m.Plugin), Weight: m.Weight})
	}
	res, err := accountant.AllocatePlan(spec)
	if err != nil {
		return fmt.Errorf("plan: %w", err)
	}
	for i, b := range res.Metrics {
		p.Metrics[i].Eps0 = b.Eps0
		p.Metrics[i].Delta = b.Delta
	}
	if p.Travel == "" {
		p.Travel = string(res.Travel)
	}
	p.Guarantee = &plan.Guarantee{Eps: res.Eps, Delta: res.Delta, Rule: res.Rule}
	if p.MaxFakeFraction != 0 {
		p.Guarantee.Honest = p.HonestReports(p.NMin)
	}
	if rounds > 1 {
		p.Guarantee.Rounds = rounds
	}
	return nil
}

// invalid returns an error wrapping plan.ErrInvalid, as the plan's own
// checks do.
func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", plan.ErrInvalid, fmt.Sprintf(format, args...))
}
