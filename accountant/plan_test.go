package accountant

import (
	"errors"
	"fmt"
	"math"
	"testing"
)

// TestAllocatePlan allocates a three-metric plan under each travel mode:
// joint and parallel at n_min = 5000, separate at n_min = 1000 (at 20,000
// it takes 25 s of CPU, a composition of three reports per evaluation;
// TestAllocatePlanDeep, make audit, runs all three at 20,000).
func TestAllocatePlan(t *testing.T) {
	// Joint travel, and all three at n = 20,000, in TestAllocatePlanDeep.
	checkAllocatePlan(t, 5000, TravelParallel)
	checkAllocatePlan(t, 1000, TravelSeparate)
}

// checkAllocatePlan allocates (eps, delta) = (1, 1e-6) at n_min = n over
// three metrics (weights 2:1:1) under each of travels, and re-checks the
// guarantee through the public query API at the allocated budgets.
func checkAllocatePlan(t *testing.T, n int, travels ...Travel) {
	t.Helper()
	metrics := []PlanMetric{
		{Name: "ui/screen", Mech: KRR(20), Weight: 2},
		{Name: "net/kind", Mech: KRR(4), Weight: 1},
		{Name: "any", Mech: Generic(), Weight: 1},
	}
	const eps, delta = 1.0, 1e-6
	for _, travel := range travels {
		t.Run(fmt.Sprintf("%s/n=%d", travel, n), func(t *testing.T) {
			res, err := AllocatePlan(PlanSpec{Eps: eps, Delta: delta, NMin: n, Travel: travel, Metrics: metrics})
			if err != nil {
				t.Fatal(err)
			}
			if res.Eps > eps || res.Delta > delta*(1+1e-12) {
				t.Fatalf("plan guarantee (%g, %g) exceeds target (%g, %g)", res.Eps, res.Delta, eps, delta)
			}
			if len(res.Metrics) != len(metrics) {
				t.Fatalf("got %d budgets, want %d", len(res.Metrics), len(metrics))
			}
			// Re-check the guarantee independently of the allocator, through
			// the public query API at the allocated budgets.
			switch travel {
			case TravelJoint:
				var total float64
				var parts []Mechanism
				var ws []float64
				for i, m := range res.Metrics {
					total += m.Eps0
					parts = append(parts, metrics[i].Mech)
					ws = append(ws, m.Eps0)
				}
				// The budget is split by weight: 2:1:1.
				if r := res.Metrics[0].Eps0 / res.Metrics[1].Eps0; math.Abs(r-2) > 1e-9 {
					t.Errorf("joint split ratio = %g, want 2", r)
				}
				r, err := Epsilon(JointMech{Parts: parts, Weights: ws}, total, n, delta)
				if err != nil {
					t.Fatal(err)
				}
				if r.Upper > eps {
					t.Errorf("joint at allocated budgets: eps = %g > %g", r.Upper, eps)
				}
			case TravelParallel:
				r, err := Epsilon(Parallel([]float64{0.5, 0.25, 0.25}, KRR(20), KRR(4), Generic()), res.Metrics[0].Eps0, n, delta)
				if err != nil {
					t.Fatal(err)
				}
				if r.Upper > eps {
					t.Errorf("parallel at allocated budget: eps = %g > %g", r.Upper, eps)
				}
			case TravelSeparate:
				// The composition of every metric's report meets the target,
				// and no metric gets less than the linear split of (eps,
				// delta) by weight would give it (docs/time.md §4).
				var parts []Part
				for i, m := range res.Metrics {
					parts = append(parts, Part{Mech: metrics[i].Mech, Eps0: m.Eps0, N: n})
					lin, err := Calibrate(metrics[i].Mech, Target{Eps: eps * m.Weight, Delta: delta * m.Weight, N: n})
					if err != nil {
						t.Fatal(err)
					}
					if m.Eps0 <= lin.Eps0 {
						t.Errorf("separate: %s eps0 = %g, not above the linear split's %g", m.Name, m.Eps0, lin.Eps0)
					}
				}
				r, err := ComposeEpsilon(parts, delta)
				if err != nil {
					t.Fatal(err)
				}
				if r.Upper > eps {
					t.Errorf("separate: composed eps = %g > %g", r.Upper, eps)
				}
				// The weight-2 metric gets half of eps and so a larger eps0
				// than the same mechanism would at a quarter.
				if res.Metrics[0].Eps < res.Metrics[1].Eps {
					t.Errorf("separate: weight-2 metric got eps %g < weight-1 metric's %g", res.Metrics[0].Eps, res.Metrics[1].Eps)
				}
			}
		})
	}
}

func TestAllocatePlanErrors(t *testing.T) {
	good := []PlanMetric{{Name: "a", Mech: KRR(4)}}
	cases := []struct {
		name string
		spec PlanSpec
		want error
	}{
		{"no metrics", PlanSpec{Eps: 1, Delta: 1e-6, NMin: 100}, ErrInvalidArgument},
		{"bad delta", PlanSpec{Eps: 1, Delta: 2, NMin: 100, Metrics: good}, ErrInvalidArgument},
		{"zero eps", PlanSpec{Eps: 0, Delta: 1e-6, NMin: 100, Metrics: good}, ErrInvalidArgument},
		{"bad n", PlanSpec{Eps: 1, Delta: 1e-6, NMin: 0, Metrics: good}, ErrInvalidArgument},
		{"fixed eps0", PlanSpec{Eps: 1, Delta: 1e-6, NMin: 100, Metrics: []PlanMetric{{Name: "a", Mech: KRRMech{K: 4, Eps0: 1}}}}, ErrNotCalibratable},
		{"negative weight", PlanSpec{Eps: 1, Delta: 1e-6, NMin: 100, Metrics: []PlanMetric{{Name: "a", Mech: KRR(4), Weight: -1}}}, ErrInvalidArgument},
		{"bad travel", PlanSpec{Eps: 1, Delta: 1e-6, NMin: 100, Travel: "carrier-pigeon", Metrics: good}, ErrInvalidArgument},
	}
	for _, c := range cases {
		if _, err := AllocatePlan(c.spec); !errors.Is(err, c.want) {
			t.Errorf("%s: err = %v, want %v", c.name, err, c.want)
		}
	}
}
