//go:build audit

package accountant

import "testing"

// TestCalibrationFiguresPinnedDeep: the other searches' figures
// (calibration_pinned_test.go): a horizon (searchRounds and stepDown), the
// tree protocol (bisection from eps/trees, doubling), and a plan: separate
// travel's common factor over ten rounds (growth by 1.25, 1.25, 1.25^2,
// ..., then regula falsi). Joint and parallel plans calibrate through
// Calibrate and searchRounds, pinned here and in
// calibration_pinned_test.go.
func TestCalibrationFiguresPinnedDeep(t *testing.T) {
	r, err := Calibrate(KRR(20), Target{Eps: 1, Delta: 1e-6, N: 10000, Rounds: 10})
	if err != nil {
		t.Fatal(err)
	}
	pinnedFigures(t, "krr:k=20 over 10 rounds", []float64{r.Eps0}, []float64{3.7460739688524516})

	l, err := CalibrateLongitudinal(LongitudinalMech{Tree: 8}, Target{Eps: 1, Delta: 1e-6, N: 10000, Rounds: 4})
	if err != nil {
		t.Fatal(err)
	}
	pinnedFigures(t, "longitudinal:tree=8 over 4 periods", []float64{l.Eps0, l.Achieved.Upper}, []float64{4.296875, 0.99781616283246888})

	for _, c := range []struct {
		name   string
		travel Travel
		rounds int
		want   []float64 // eps0 of a, eps0 of b, the plan's eps
	}{
		{"separate, 10 rounds", TravelSeparate, 10, []float64{2.4720537560898048, 3.3424986291981877, 0.99933818912586614}},
	} {
		p, err := AllocatePlan(PlanSpec{Eps: 1, Delta: 1e-6, NMin: 10000, Travel: c.travel, Rounds: c.rounds,
			Metrics: []PlanMetric{{Name: "a", Mech: KRR(4)}, {Name: "b", Mech: KRR(10), Weight: 2}}})
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		pinnedFigures(t, "plan "+c.name, []float64{p.Metrics[0].Eps0, p.Metrics[1].Eps0, p.Eps}, c.want)
	}
}
