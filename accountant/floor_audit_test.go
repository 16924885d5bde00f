//go:build audit

package accountant

import "testing"

// TestFloorCoupledTightness: where the composition couples (200 honest
// reports, 300 draws, two rounds), its bound is sound against the strata's
// and within 25% of it (measured 15%: M = 416 of m/gamma = 682 draws
// counted, the price of eta = 1e-18 at this small m; the strata take 17 s
// here, which is why compositions couple).
func TestFloorCoupledTightness(t *testing.T) {
	coupled, strata := coupledAndStrata(t, Part{Mech: KRR(5), Eps0: 2, N: 200, Floor: 300, Rounds: 2}, 1e-4)
	if coupled.Upper < strata.Upper/(1+HorizonTolerance) || coupled.Upper > 1.25*strata.Upper {
		t.Errorf("coupled %.5f, strata %.5f", coupled.Upper, strata.Upper)
	}
}
