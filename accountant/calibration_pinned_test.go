package accountant

import (
	"math"
	"testing"
)

// The calibrated figures the project publishes come from each search's
// start, growth rule, floor and narrowing rule (largest.go). These tests
// pin a few of them to relative 1e-9, the figures of the calibrations as
// they were before the searches shared one implementation (checked against
// that code), so that a change to a schedule is a decision, not an
// accident. Calibration is not bit-for-bit reproducible (sums run in
// parallel), but these figures vary between runs by about 1e-13.
//
// They say nothing about soundness; largest_test.go and the soundness
// tests do.

// pinnedFigures fails unless got matches want to relative 1e-9.
func pinnedFigures(t *testing.T, name string, got, want []float64) {
	t.Helper()
	for i := range want {
		if r := math.Abs(got[i]-want[i]) / want[i]; !(r <= 1e-9) {
			t.Errorf("%s: figure %d = %.17g, pinned %.17g (relative %.2g)", name, i, got[i], want[i], r)
		}
	}
}

// TestCalibrationFiguresPinned: Calibrate of one report (start at the
// target eps, grow 2x+1 then 2x, the mirrored root finder, lattice
// refinement, stepDown), for k-RR and a joint mechanism.
func TestCalibrationFiguresPinned(t *testing.T) {
	for _, c := range []struct {
		name string
		m    Mechanism
		t    Target
		want float64
	}{
		{"krr:k=20", KRR(20), Target{Eps: 0.5, Delta: 1e-6, N: 10000}, 4.5129304380300548},
		{"joint(krr:k=4,krr:k=8)", Joint(KRR(4), KRR(8)), Target{Eps: 1, Delta: 1e-6, N: 10000}, 5.9859433699218254},
	} {
		r, err := Calibrate(c.m, c.t)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		pinnedFigures(t, c.name, []float64{r.Eps0}, []float64{c.want})
	}
}
