package accountant

import (
	"math"
	"testing"
)

// TestFloorCoupledN: n_c = n_h + M with M the largest batch whose
// Binomial(M, gamma) exceeds m with probability at most eta, checked
// against the binomial tail summed term by term (logBinomPMF) at M and
// M + 1: the tail at M is at most eta and, the Chernoff bound being
// within a polynomial factor, M is within a few standard deviations of
// m / gamma.
func TestFloorCoupledN(t *testing.T) {
	tail := func(M, m int, g float64) float64 { // P(Binomial(M, g) > m)
		var s float64
		for x := m + 1; x <= M; x++ {
			s += math.Exp(logBinomPMF(x, M, g))
		}
		return s
	}
	for _, c := range []struct {
		nh, m int
		g     float64
	}{{10, 30, 0.44}, {10000, 1000, 0.27}, {10000, 10000, 0.27}, {5, 200, 0.9}, {1, 50, 0.05}} {
		n := floorCoupledN(c.nh, c.m, c.g, floorEta)
		M := n - c.nh
		if M < c.m {
			t.Errorf("%+v: M = %d < m", c, M)
			continue
		}
		if p := tail(M, c.m, c.g); p > floorEta {
			t.Errorf("%+v: M = %d, P(B > m) = %g > eta", c, M, p)
		}
		ideal := float64(c.m) / c.g
		sd := math.Sqrt(ideal * c.g * (1 - c.g))
		if float64(M) < ideal-12*sd/c.g {
			t.Errorf("%+v: M = %d, more than 12 sd below m/gamma = %.0f", c, M, ideal)
		}
		t.Logf("%+v: M = %d (m/gamma %.0f)", c, M, ideal)
	}
	if n := floorCoupledN(7, 0, 0.3, floorEta); n != 7 {
		t.Errorf("no draws: n_c = %d, want 7", n)
	}
	if n := floorCoupledN(7, 10, 1, floorEta); n != 17 {
		t.Errorf("gamma = 1: n_c = %d, want 17", n)
	}
}

// TestFloorCoupledComposition: over two rounds with honest others the
// composition's coupled bound (section 3 at n_c, plus T eta, or the draws
// alone) is sound against the strata's (each round's exact floor mixture,
// composed): never below it. Coupling is forced at a size where the
// strata are cheap (40 honest reports, 30 draws).
func TestFloorCoupledComposition(t *testing.T) {
	floorStrataMax = 0
	defer func() { floorStrataMax = 64 }()
	coupled, strata := coupledAndStrata(t, Part{Mech: KRR(5), Eps0: 2, N: 40, Floor: 30, Rounds: 2}, 1e-4)
	if coupled.Upper < strata.Upper/(1+HorizonTolerance) || coupled.Lower != 0 {
		t.Errorf("coupled %+v below strata %+v", coupled, strata)
	}
}

// coupledAndStrata returns a composition's eps at delta with the coupled
// floor and with the strata.
func coupledAndStrata(t *testing.T, p Part, delta float64) (coupled, strata EpsilonResult) {
	t.Helper()
	c, err := NewComposition(p)
	if err != nil {
		t.Fatal(err)
	}
	if coupled, err = c.Epsilon(delta); err != nil {
		t.Fatal(err)
	}
	floorCoupling = false
	defer func() { floorCoupling = true }()
	s, err := NewComposition(p)
	if err != nil {
		t.Fatal(err)
	}
	if strata, err = s.Epsilon(delta); err != nil {
		t.Fatal(err)
	}
	t.Logf("%+v at delta %g: coupled %+v, strata %+v", p, delta, coupled, strata)
	return coupled, strata
}

// TestFloorCoupledDominates: the coupling's claim for one round, the
// §3 bound at n_c plus eta at least the exact floor mixture, checked at
// several eps against the strata's lower end (FloorDelta), where a
// composition couples.
func TestFloorCoupledDominates(t *testing.T) {
	for _, c := range []struct {
		k        int
		eps0     float64
		nh, m    int
		epsilons []float64
	}{{5, 2, 200, 300, []float64{0.2, 0.5, 1}}, {20, 4, 10000, 10000, []float64{0.15}}} {
		m := KRR(c.k)
		d, err := m.Decompose(c.eps0)
		if err != nil {
			t.Fatal(err)
		}
		if floorStrataCheap(d, c.nh) {
			t.Fatalf("%+v: the strata are cheap here, no coupling", c)
		}
		nn, _ := floorCoupledPart(d, c.nh, c.m)
		for _, eps := range c.epsilons {
			std, err := Delta(m, c.eps0, nn, eps)
			if err != nil {
				t.Fatal(err)
			}
			// k-RR has one candidate pair (and its swap, alike).
			fl := newFloorSolver(d.Upper[0], c.m, c.nh).bracket(eps, 1e-3, 0, 0)
			if std.Upper+floorEta < fl.lo {
				t.Errorf("%+v eps=%g: coupled %.6g + eta below the floor's lower end %.6g", c, eps, std.Upper, fl.lo)
			}
			t.Logf("k=%d nh=%d m=%d eps=%g: n_c = %d, coupled %.4g, floor [%.4g, %.4g]", c.k, c.nh, c.m, eps, nn, std.Upper, fl.lo, fl.hi)
		}
	}
}
