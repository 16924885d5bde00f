package accounting_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/blanket-dp/blanket/plugins/builtin"
	"github.com/blanket-dp/blanket/plugins/longitudinal"
	"github.com/blanket-dp/blanket/sdk"
	"github.com/blanket-dp/blanket/sdk/internal/counter"
	"github.com/blanket-dp/blanket/sdk/plan"
	"github.com/blanket-dp/blanket/sdk/plan/accounting"
)

// openWithCounter opens the built-ins and the stateful test randomizer
// "counter" (sdk/internal/counter), which, unlike the longitudinal
// protocol, the accountant would calibrate under any travel: only the
// plan's own check refuses it.
func openWithCounter(ctx context.Context, name string, cfg sdk.Config) (sdk.Randomizer, error) {
	if name == counter.Name {
		return counter.FromConfig(cfg)
	}
	return builtin.Open(ctx, name, cfg)
}

// TestCalibrateStatefulTravel calibrates a plan with a stateful randomizer
// (the longitudinal protocol, and the counter test randomizer) under joint
// and parallel travel: Calibrate refuses it with an error wrapping
// ErrInvalid that names the metric and the travel it needs. (Separate
// travel is left to the accountant's tests of longitudinal plans: a
// calibration takes seconds under the race detector.)
func TestCalibrateStatefulTravel(t *testing.T) {
	ctx := context.Background()
	stateful := []plan.Metric{
		{Name: "app/enabled", Plugin: longitudinal.Name, Params: map[string]string{"tree": "8"}},
		{Name: "app/count", Plugin: counter.Name, Categories: []string{"a", "b"}},
	}
	for _, m := range stateful {
		for _, travel := range []string{"joint", "parallel"} {
			t.Run(m.Plugin+"/"+travel, func(t *testing.T) {
				p := &plan.Plan{
					Target: plan.Target{Eps: 1, Delta: 1e-6},
					NMin:   1000,
					Travel: travel,
					Metrics: []plan.Metric{
						{Name: "ui/screen", Plugin: "krr", Categories: []string{"home", "search"}},
						m,
					},
				}
				err := accounting.Calibrate(ctx, p, openWithCounter)
				if !errors.Is(err, plan.ErrInvalid) || !strings.Contains(err.Error(), `"`+m.Name+`"`) || !strings.Contains(err.Error(), "only separate travel") {
					t.Fatalf("Calibrate under %s travel: %v; want ErrInvalid naming %q and separate travel", travel, err, m.Name)
				}
			})
		}
	}
}
