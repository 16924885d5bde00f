//go:build audit

package accountant

import (
	"errors"
	"math/rand/v2"
	"sync"
	"testing"
)

// TestLongitudinalMixedOrientationDeep is the larger grid of
// TestLongitudinalMixedOrientation: every eps0, mates and window of the
// grid, the per-period part against every multiset of its rounds'
// orientations and the reported bound against every leaking pattern over
// two and three trees.
func TestLongitudinalMixedOrientationDeep(t *testing.T) {
	rng := rand.New(rand.NewPCG(6, 9))
	for _, eps0 := range []float64{0.1, 0.3, 1, 2.5, 4, 6} {
		for _, mates := range []int{1, 2, 5, 12, 30} {
			for _, w := range []int{2, 5, 9} {
				if w == 9 && mates > 5 {
					continue
				}
				reviewCheckOrientation(t, reviewOrientationCase{eps0, mates, w}, rng)
			}
		}
	}
}

// longitudinalSpec is the plan of TestAllocatePlanLongitudinal and
// TestAllocatePlanLongitudinalRecomposed: a k-RR metric and a tree protocol
// over six periods.
func longitudinalSpec() PlanSpec {
	return PlanSpec{Eps: 1, Delta: 1e-6, NMin: 20000, Rounds: 6, Metrics: []PlanMetric{
		{Name: "page", Mech: KRR(4)},
		{Name: "dark", Mech: LongitudinalMech{Tree: 64}},
	}}
}

// longitudinalPlanResult calibrates longitudinalSpec once per test process
// (about 10 s), for both tests.
var longitudinalPlanResult = sync.OnceValues(func() (*PlanResult, error) { return AllocatePlan(longitudinalSpec()) })

// longitudinalPlan returns longitudinalSpec and its calibration.
func longitudinalPlan(t *testing.T) (PlanSpec, *PlanResult) {
	t.Helper()
	r, err := longitudinalPlanResult()
	if err != nil {
		t.Fatal(err)
	}
	return longitudinalSpec(), r
}

// TestAllocatePlanLongitudinalRecomposed re-derives a plan's guarantee
// with a longitudinal metric the way allocateSeparate's proof goes, apart
// from its search: the level-mates at 5% of the metric's delta share (a
// union over the horizon's periods), the node pairs at the calibrated eps0
// among them, composed with the other metric's reports over the horizon at
// delta minus the tail. The composition must meet the target (the existing
// TestAllocatePlanLongitudinal allows 1% above it, with another tail).
func TestAllocatePlanLongitudinalRecomposed(t *testing.T) {
	spec, res := longitudinalPlan(t)
	page, dark := res.Metrics[0], res.Metrics[1]
	l := Longitudinal{Tree: 64, Eps0: dark.Eps0, Periods: spec.Rounds, Batch: spec.NMin}
	mates, tail := l.inferMates(longitudinalTailShare * spec.Delta * dark.Weight)
	part, err := l.nodePart(mates, TreesInWindow(64, spec.Rounds))
	if err != nil {
		t.Fatal(err)
	}
	r, err := ComposeEpsilon([]Part{{Mech: KRR(4), Eps0: page.Eps0, N: spec.NMin, Rounds: spec.Rounds}, part}, spec.Delta-tail)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("plan eps %.5f; recomposed %.5f (mates %d, tail %.3g, node rounds %d)", res.Eps, r.Upper, mates, tail, part.Rounds)
	if r.Upper > spec.Eps {
		t.Errorf("recomposed eps %.6f above the target %g at the plan's budgets", r.Upper, spec.Eps)
	}
}

// TestAllocatePlanLongitudinal (make audit: 10 s; the plan path of a
// longitudinal metric runs in make test through examples/fleet's
// TestLongitudinalEndToEnd) calibrates a plan with a longitudinal metric
// next to a k-RR one and checks the result with an independent query: the
// longitudinal bound composed with the k-RR reports over the horizon, at
// the calibrated budgets, meets the target (and is not far below it: the
// calibration is not wasteful). Joint travel is refused.
func TestAllocatePlanLongitudinal(t *testing.T) {
	spec, res := longitudinalPlan(t)
	if res.Eps > spec.Eps {
		t.Fatalf("plan eps %g above the target", res.Eps)
	}
	page, dark := res.Metrics[0], res.Metrics[1]
	check, err := Longitudinal{Tree: 64, Eps0: dark.Eps0, Periods: 6, Batch: spec.NMin}.Epsilon(spec.Delta,
		Part{Mech: KRR(4), Eps0: page.Eps0, N: spec.NMin, Rounds: 6})
	if err != nil {
		t.Fatal(err)
	}
	// The plan spends 5% of the metric's delta share on the tail, the
	// check 5% of all of delta: the check is a little more pessimistic.
	if check.Upper > spec.Eps*1.01 {
		t.Errorf("independent check: eps %g at the plan's budgets (page %g, dark %g), target %g", check.Upper, page.Eps0, dark.Eps0, spec.Eps)
	}
	if check.Upper < 0.9*spec.Eps {
		t.Errorf("independent check: eps %g at the plan's budgets, far below the target %g", check.Upper, spec.Eps)
	}
	spec.Travel = TravelJoint
	if _, err := AllocatePlan(spec); !errors.Is(err, ErrLongitudinal) {
		t.Errorf("joint travel with a longitudinal metric: %v", err)
	}
}
