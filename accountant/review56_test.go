package accountant

import (
	"math"
	"testing"
)

// The three compound reproducers below failed on 1c90785 (a leaf's mass
// underflowing while its m's did not, a subnormal leaf mass, pi rounded
// to 0); they pass since the fix that followed.

// 1c90785 bounds the m with log P(M = m) < -746 on the upper side, but a
// leaf of an m above that threshold whose P(M = m) P(c | m) underflows
// (lpm + lp < -745) still adds v = 0: two rare atoms, A = 40c with mass
// e^-300, B = 90c with mass e^-460, one common atom -c, n = 100. Only the
// leaf (1, 1) at m = 2 is positive among the likely ones (A + B - 98c =
// 32c); its mass is about 9900 e^-760 = e^-750.8 (lpm = -591.5, lp =
// -159.3), computed as 0. With c = 1e100 the exact D is about 1e-227,
// far above DeltaFloor, and hi = DeltaFloor. (Values far above e^60, as in
// the reviewer-55 case the commit mends.)
func TestReview56CompoundLeafUnderflowDropsUpperMass(t *testing.T) {
	c := 1e100
	z := []float64{-c, 40 * c, 90 * c}
	w := []float64{1, math.Exp(-300), math.Exp(-460)}
	n := 100
	p := r55Prepared(z, w)
	if rare := compoundSplit(p, n); len(rare) != 2 {
		t.Fatalf("split %v, want the two rare atoms", rare)
	}
	b, ok := compoundEval(p, n, 0.5, false)
	if !ok {
		t.Fatal("compound path declined")
	}
	ex := r55BigDelta(z, w, n)
	exf, _ := ex.Float64()
	if _, hiOK := r55Contains(b, ex); !hiOK {
		t.Errorf("compound hi %.4g below the exact %.4g (leaf mass underflowed with lpm > -746)", b.hi, exf)
	}
}

// A denormal leaf mass (lpm + lp in (-745, -708)) carries a relative
// rounding error far above the (1 + sparseRel) e^(1.01 e) slack: the same
// set with B's mass raised so that the (1, 1) leaf's mass is about e^-744
// (a handful of denormal ulps).
func TestReview56CompoundLeafDenormalMass(t *testing.T) {
	c := 1e100
	z := []float64{-c, 40 * c, 90 * c}
	n := 100
	worst := 0.0
	for _, lb := range []float64{-453.9, -453.6, -453.3, -452.7, -452.2} {
		w := []float64{1, math.Exp(-300), math.Exp(lb)}
		p := r55Prepared(z, w)
		b, ok := compoundEval(p, n, 0.5, false)
		if !ok {
			t.Fatal("compound path declined")
		}
		ex := r55BigDelta(z, w, n)
		exf, _ := ex.Float64()
		if _, hiOK := r55Contains(b, ex); !hiOK {
			t.Errorf("log wB %v: compound hi %.10g below the exact %.10g (rel %.3g)", lb, b.hi, exf, 1-b.hi/exf)
		}
		worst = math.Max(worst, 1-b.hi/exf)
	}
	t.Logf("largest relative shortfall %.3g", worst)
}

// pi rounding to 0 (rare mass in the subnormal range against a common
// total above 2): every m >= 1 then has lpm = -Inf, and the new underflow
// branch computes -Inf + 1e-9 * Inf = NaN (before 1c90785 it skipped).
func TestReview56CompoundPiZeroNaN(t *testing.T) {
	z := []float64{-1, 9}
	w := []float64{2.5, 5e-324}
	p := r55Prepared(z, w)
	b, ok := compoundEval(p, 10, 0.5, false)
	if ok && (math.IsNaN(b.hi) || math.IsNaN(b.lo)) {
		t.Errorf("compound bracket [%v, %v]", b.lo, b.hi)
	}
}

// e7160b1 against the loops as they were before it (KRR sets, eps0 6): the
// new upper figure is never below the old one, the new lower never above,
// and neither is certified where the old loop was not.
func TestReview56EarlyStopAgainstOldLoop(t *testing.T) {
	for _, k := range []int{2, 10} {
		d, err := KRR(k).Decompose(6)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range []int{30, 1000} {
			const delta = 1e-6
			for _, s := range d.Upper {
				e, ok := epsUpper(s, n, delta, d.LocalEps)
				eo, oko := r56OldEpsUpper(s, n, delta, d.LocalEps)
				if e < eo {
					t.Errorf("krr%d n %d: upper %v below the old loop's %v", k, n, e, eo)
				}
				if ok && !oko {
					t.Errorf("krr%d n %d: certified where the old loop was not", k, n)
				}
			}
			for _, s := range d.Lower {
				e, ok, _ := epsLower(s, n, delta, d.LocalEps, nil)
				eo, oko := r56OldEpsLower(s, n, delta, d.LocalEps)
				if e > eo {
					t.Errorf("krr%d n %d: lower %v above the old loop's %v", k, n, e, eo)
				}
				if ok && !oko {
					t.Errorf("krr%d n %d: lower certified where the old loop was not", k, n)
				}
			}
		}
	}
}

// The loops of epsUpper / epsLower as before e7160b1 (no dominance).
func r56OldEpsUpper(s AtomSet, n int, delta, cap float64) (float64, bool) {
	return r56OldEpsUpperSteered(s, n, delta, cap, false)
}

// r56OldEpsUpperSteered is r56OldEpsUpper, its search steered by the
// compound path's lower end when steer is set (as epsUpper steers since
// 2aba623).
func r56OldEpsUpperSteered(s AtomSet, n int, delta, cap float64, steer bool) (float64, bool) {
	sv := &setSolver{set: s, n: n, hRel: hRelStart}
	lo, hi := 0.0, cap
	for range maxRefine {
		f := func(e float64) float64 {
			if steer {
				if l := compoundLower(s, n, e, sv.hRel); l > delta {
					return l
				}
			}
			return sv.eval(e, false).hi
		}
		e, ok := solveDecreasing(f, delta, lo, hi)
		if !ok && hi < cap {
			return hi, false
		}
		if !ok {
			return cap, false
		}
		if e == 0 {
			return 0, true
		}
		c := sv.eval(e/(1+certTol), true)
		if c.lo > delta {
			return e, true
		}
		if c.capped {
			return e, false
		}
		hi = e
		sv.hRel /= 2
	}
	return hi, false
}

func r56OldEpsLower(s AtomSet, n int, delta, cap float64) (e float64, ok bool) {
	sv := &setSolver{set: s, n: n, hRel: hRelStart, twoPoint: true, compound: true}
	for range maxRefine {
		f := func(x float64) float64 { return sv.eval(x, true).lo }
		a := solveDecreasingLow(f, delta, 0, cap)
		e = math.Max(e, a)
		c := sv.eval(e*(1+certTol), false)
		if c.hi <= delta {
			return e, true
		}
		if c.capped {
			return e, false
		}
		sv.hRel /= 2
	}
	return e, false
}
