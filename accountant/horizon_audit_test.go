//go:build audit

package accountant

import (
	"fmt"
	"testing"
)

// The deep grids of the composition tests (make audit). Tolerances are
// those of horizon_test.go.

// TestHorizonTinyExactDeep extends TestHorizonTinyExact over k, eps0, n
// and T: the upper bound is above the exact composed blanket pair and the
// exact composed lower-bound datasets; both lower sides are below their
// exact values.
func TestHorizonTinyExactDeep(t *testing.T) {
	for _, k := range []int{2, 3, 4} {
		for _, eps0 := range []float64{0.5, 1.5, 3} {
			R := oracleKRRRows(k, eps0)
			d, err := KRR(k).Decompose(eps0)
			if err != nil {
				t.Fatal(err)
			}
			for n := 1; n <= 6; n++ {
				blanket := oracleBlanketPLD(d.Upper[0], n)
				x3 := min(2, k-1)
				data0, data1 := make([]int, n), make([]int, n)
				for i := range data0 {
					data0[i], data1[i] = x3, x3
				}
				data0[0], data1[0] = 0, 1
				law := [2]map[string]float64{oracleShuffledLaw(R, data0), oracleShuffledLaw(R, data1)}
				for _, T := range []int{2, 3} {
					name := fmt.Sprintf("k=%d eps0=%g n=%d T=%d", k, eps0, n, T)
					c := mustCompose(t, Part{Mech: KRR(k), Eps0: eps0, N: n, Rounds: T})
					h := c.plds(1e-9, 0)
					plds := make([][]oracleAtom, T)
					pairs := make([][2]map[string]float64, T)
					for i := range plds {
						plds[i], pairs[i] = blanket, law
					}
					for _, eps := range []float64{0, 0.2, 0.5, 1, 2, 4, 8} {
						exB := oracleComposedDeltaPLD(plds, eps)
						exL := oracleComposedDelta(pairs, eps)
						u := composedDelta(h.upper, eps, true)
						pl := composedDelta(h.pairLower, eps, false)
						if u < exB*(1-soundSlack)-soundAbs || u < exL*(1-soundSlack)-soundAbs {
							t.Errorf("%s eps=%g: upper %.10g below exact blanket %.10g or datasets %.10g", name, eps, u, exB, exL)
						}
						if pl > exB*(1+soundSlack)+soundAbs {
							t.Errorf("%s eps=%g: blanket lower side %.10g > exact %.10g", name, eps, pl, exB)
						}
						if h.hasLower && k >= 3 {
							if l := composedDelta(h.lower, eps, false); l > exL*(1+soundSlack)+soundAbs {
								t.Errorf("%s eps=%g: lower %.10g > exact datasets %.10g", name, eps, l, exL)
							}
						}
					}
				}
			}
		}
	}
}

// TestHorizonSingleRoundMechanismsDeep extends TestHorizonSingleRound over
// mechanisms, n and delta.
func TestHorizonSingleRoundMechanismsDeep(t *testing.T) {
	mechs := []struct {
		m    Mechanism
		eps0 float64
	}{
		{KRR(2), 1}, {KRR(20), 3}, {KRR(1000), 6}, {Generic(), 1}, {Generic(), 4},
		{Subsample(0.3, KRR(10)), 3}, {Joint(KRR(3), Generic()), 2},
		{Parallel([]float64{0.9, 0.1}, KRR(5), KRR(50)), 4},
	}
	for _, mc := range mechs {
		for _, n := range []int{100, 10_000, 100_000} {
			for _, delta := range []float64{1e-3, 1e-6, 1e-10} {
				want, err := Epsilon(mc.m, mc.eps0, n, delta)
				if err != nil {
					t.Fatal(err)
				}
				if !want.Amplified {
					continue
				}
				c := mustCompose(t, Part{Mech: mc.m, Eps0: mc.eps0, N: n})
				// The PLD path as Composition.Epsilon runs it: refined
				// until certified within HorizonTolerance.
				var h horizonPLDs
				var up float64
				for refine := 0; refine <= maxHorizonRefine; refine++ {
					h = c.plds(delta, refine)
					up = epsUpperOf(h.upper, delta, c.LocalEps())
					if up <= epsLowerOf(h.pairLower, delta, c.LocalEps())*(1+HorizonTolerance) {
						break
					}
				}
				if up < want.Upper/(1+Tolerance) || up > want.Upper*(1+HorizonTolerance) {
					t.Errorf("%s n=%d delta=%g: PLD upper %.6g, engine %.6g", mc.m, n, delta, up, want.Upper)
				}
				if h.hasLower {
					if lo := epsLowerOf(h.lower, delta, c.LocalEps()); lo > want.Lower*(1+Tolerance) {
						t.Errorf("%s n=%d delta=%g: PLD lower %.6g above exact (<= %.6g)", mc.m, n, delta, lo, want.Lower*(1+Tolerance))
					}
				}
			}
		}
	}
}

// TestHorizonSingleRoundDeep is TestHorizonSingleRound for the generic
// clone bound at eps0 = 2.
func TestHorizonSingleRoundDeep(t *testing.T) {
	checkHorizonSingleRound(t, []singleRoundCase{{Generic(), 2, 10_000}})
}

// TestHorizonCalibrateDeep is TestHorizonCalibrate for k-RR with k = 10.
func TestHorizonCalibrateDeep(t *testing.T) {
	checkHorizonCalibrate(t, KRR(10))
}

// TestHorizonMonotoneDeep is TestHorizonMonotone over n = 5000, 20,000
// and 80,000 and eps0 = 2, 2.5 and 3.
func TestHorizonMonotoneDeep(t *testing.T) {
	checkHorizonMonotone(t, []int{5000, 20_000, 80_000}, []float64{2, 2.5, 3})
}

// TestHorizonHeterogeneousIdenticalDeep is TestHorizonHeterogeneousIdentical
// at n = 20,000.
func TestHorizonHeterogeneousIdenticalDeep(t *testing.T) {
	checkHorizonHeterogeneousIdentical(t, 20_000)
}

// TestHorizonLongTight: long horizons stay tight, ordered and below basic
// composition.
func TestHorizonLongTight(t *testing.T) {
	for _, n := range []int{10_000, 1_000_000} {
		c := mustCompose(t, Part{Mech: KRR(100), Eps0: 4, N: n})
		for _, T := range []int{30, 365, 3650} {
			ct, err := c.WithRounds(T)
			if err != nil {
				t.Fatal(err)
			}
			for _, delta := range []float64{1e-5, 1e-9} {
				r, err := ct.Epsilon(delta)
				if err != nil {
					t.Fatal(err)
				}
				basic, err := ct.basicEpsilon(delta)
				if err != nil {
					t.Fatal(err)
				}
				if !r.Tight || !(0 < r.Lower && r.Lower <= r.Upper) || r.Upper > basic {
					t.Errorf("n=%d T=%d delta=%g: %+v (basic %g)", n, T, delta, r, basic)
				}
			}
		}
	}
}

// TestLowerPLDFuzzDeep is TestLowerPLDFuzz with 4000 trials (make
// test runs the first 250 of the same stream).
func TestLowerPLDFuzzDeep(t *testing.T) {
	reviewPLDFuzz(t, 4000, false, true)
}
