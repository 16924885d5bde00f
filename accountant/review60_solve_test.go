package accountant

import (
	"fmt"
	"math"
	"testing"
)

// Review 60 of 826bb1e (epsUpper's shortcut at a root within rootTol of
// the cap, and the early stop's 10% rule).

// r60Trace records what r60EpsUpper did.
type r60Trace struct {
	shortcuts int // refinements that took prevE without a search
	// unproven counts shortcuts whose prevE the coarser lattice (the one
	// that found it) does not bound: hi(prevE) > delta there.
	unproven  int
	earlyStop bool
}

// r60EpsUpper is epsUpper of 826bb1e, statement for statement, with the
// shortcut and early stop recorded. TestReview60EpsUpperCopyIsFaithful
// checks that it returns the same bits as epsUpper.
func r60EpsUpper(s AtomSet, n int, delta, cap float64, tr *r60Trace) (float64, bool) {
	sv := &setSolver{set: s, n: n, hRel: hRelStart}
	lo, hi := 0.0, cap
	var prev bracket
	prevE := math.NaN()
	for range maxRefine {
		f := func(e float64) float64 {
			if steerUpper {
				if l := compoundLower(s, n, e, sv.hRel); l > delta {
					return l
				}
			}
			return sv.eval(e, false).hi
		}
		var e float64
		var ok bool
		if x := cap * (1 - rootTol); prevE >= x && f(x) > delta {
			tr.shortcuts++
			// The claim: the previous (coarser) lattice's upper end at
			// prevE is at most delta.
			coarse := &setSolver{set: s, n: n, hRel: 2 * sv.hRel}
			if !(coarse.eval(prevE, false).hi <= delta) {
				tr.unproven++
			}
			e, ok = prevE, true
		} else {
			e, ok = solveDecreasing(f, delta, lo, hi)
		}
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
		if e == prevE && c.hi >= 0.9*prev.hi && c.lo <= prev.lo {
			tr.earlyStop = true
			return e, false
		}
		prev, prevE = c, e
		hi = e
		sv.hRel /= 2
	}
	return hi, false
}

// r60Exhaustive is epsUpper without the early stop and without the
// shortcut (the search runs at every refinement), refined to maxRefine:
// what continuing would have given. Its root is always proven (the search
// only returns points whose lattice upper end is <= delta).
func r60Exhaustive(s AtomSet, n int, delta, cap float64) (float64, bool) {
	return r56OldEpsUpperSteered(s, n, delta, cap, steerUpper)
}

type r60Case struct {
	name  string
	set   AtomSet
	n     int
	delta float64
	cap   float64
}

// r60SmallCases: k-RR upper sets and made-up sets at small n, where exact
// enumeration is cheap, with deltas that put roots at the cap and below.
func r60SmallCases(t *testing.T) []r60Case {
	var cs []r60Case
	for _, k := range []int{2, 4, 10} {
		for _, eps0 := range []float64{1, 3, 6} {
			d, err := KRR(k).Decompose(eps0)
			if err != nil {
				t.Fatal(err)
			}
			for i, s := range d.Upper {
				for _, n := range []int{2, 5, 20, 60} {
					for _, delta := range []float64{1e-2, 1e-4, 1e-6, 1e-9} {
						cs = append(cs, r60Case{fmt.Sprintf("krr:k=%d eps0 %g set %d", k, eps0, i), s, n, delta, eps0})
					}
				}
			}
		}
	}
	for i, s := range r58Sets() {
		for _, n := range []int{2, 5, 20} {
			for _, delta := range []float64{1e-3, 1e-6} {
				for _, cap := range []float64{0.5, 2, 6} {
					cs = append(cs, r60Case{fmt.Sprintf("r58 set %d", i), s, n, delta, cap})
				}
			}
		}
	}
	return cs
}

// TestReview60EpsUpperCopyIsFaithful: the instrumented copy returns
// epsUpper's bits on every small case (so what the other tests learn from
// the copy holds for epsUpper).
func TestReview60EpsUpperCopyIsFaithful(t *testing.T) {
	for _, c := range r60SmallCases(t) {
		e, ok := epsUpper(c.set, c.n, c.delta, c.cap)
		var tr r60Trace
		e2, ok2 := r60EpsUpper(c.set, c.n, c.delta, c.cap, &tr)
		if math.Float64bits(e) != math.Float64bits(e2) || ok != ok2 {
			t.Fatalf("%s n %d delta %g cap %g: epsUpper (%v, %v), copy (%v, %v)", c.name, c.n, c.delta, c.cap, e, ok, e2, ok2)
		}
	}
}

// TestReview60EpsUpperAgainstExact: on every small case, against exact
// enumeration (r58ExactEps: bisection on enumerateDelta to 1e-10):
//   - the upper root is at least the exact root (never smaller than
//     proven);
//   - where certified, it is at most (1 + certTol) times the exact root;
//   - the figure epsilonOf would make of it (cap when within rootTol of
//     cap) is within Tolerance of the exact root when certified;
//   - every shortcut takes a root its coarser lattice bounds;
//   - it is never below what the search without shortcut or early stop
//     gives (stopping early only costs Tight).
//
// (The shortcut does not fire on these few-atom sets: their first lattice
// or the sparse path certifies; TestReview60LaplaceShortcut covers it.)
func TestReview60EpsUpperAgainstExact(t *testing.T) {
	shortcuts, stops, certAtCap := 0, 0, 0
	for _, c := range r60SmallCases(t) {
		var tr r60Trace
		e, ok := r60EpsUpper(c.set, c.n, c.delta, c.cap, &tr)
		shortcuts += tr.shortcuts
		if tr.earlyStop {
			stops++
		}
		if tr.unproven > 0 {
			t.Errorf("%s n %d delta %g cap %g: %d shortcuts took a root its lattice does not bound", c.name, c.n, c.delta, c.cap, tr.unproven)
		}
		ex := r58ExactEps(c.set, c.n, c.delta, c.cap)
		if e < ex*(1-1e-9) {
			t.Errorf("%s n %d delta %g cap %g: upper %v below the exact root %v", c.name, c.n, c.delta, c.cap, e, ex)
		}
		fig := e
		if fig >= c.cap*(1-rootTol) {
			fig = c.cap
		}
		if ok {
			if e > ex*(1+certTol)*(1+1e-9) {
				t.Errorf("%s n %d delta %g cap %g: certified upper %v above (1+certTol) times the exact root %v", c.name, c.n, c.delta, c.cap, e, ex)
			}
			if fig > ex*(1+Tolerance) {
				t.Errorf("%s n %d delta %g cap %g: certified figure %v above (1+Tolerance) times the exact root %v", c.name, c.n, c.delta, c.cap, fig, ex)
			}
			if fig == c.cap {
				certAtCap++
			}
		}
		eo, _ := r60Exhaustive(c.set, c.n, c.delta, c.cap)
		if e < eo {
			t.Errorf("%s n %d delta %g cap %g: upper %v below the exhaustive search's %v", c.name, c.n, c.delta, c.cap, e, eo)
		}
	}
	t.Logf("%d shortcuts, %d early stops, %d certified at the cap", shortcuts, stops, certAtCap)
}

// TestReview60EpsilonOfSmallExact: epsilonOf on k-RR decompositions at
// small n against exact enumeration of every set: Upper at least the
// largest exact upper root (or the cap), Lower at most the largest exact
// lower root; where Tight, both within Tolerance.
func TestReview60EpsilonOfSmallExact(t *testing.T) {
	tight := 0
	for _, k := range []int{2, 4, 10} {
		for _, eps0 := range []float64{1, 3, 6} {
			d, err := KRR(k).Decompose(eps0)
			if err != nil {
				t.Fatal(err)
			}
			for _, n := range []int{2, 5, 20, 60} {
				for _, delta := range []float64{1e-2, 1e-4, 1e-6, 1e-9} {
					r := epsilonOf(d, n, delta)
					exU := 0.0
					for _, s := range d.Upper {
						exU = math.Max(exU, r58ExactEps(s, n, delta, d.LocalEps))
					}
					exL := 0.0
					for _, s := range d.Lower {
						exL = math.Max(exL, r58ExactEps(s, n, delta, d.LocalEps))
					}
					name := fmt.Sprintf("krr:k=%d eps0 %g n %d delta %g", k, eps0, n, delta)
					if r.Upper < exU*(1-1e-9) {
						t.Errorf("%s: Upper %v below the exact %v", name, r.Upper, exU)
					}
					if r.Lower > exL*(1+1e-9) {
						t.Errorf("%s: Lower %v above the exact %v", name, r.Lower, exL)
					}
					if r.Tight {
						tight++
						if r.Upper > exU*(1+Tolerance) {
							t.Errorf("%s: Tight, Upper %v above (1+Tolerance) x exact %v", name, r.Upper, exU)
						}
						if r.Lower*(1+Tolerance) < exL*(1-1e-9) {
							t.Errorf("%s: Tight, Lower %v below exact %v / (1+Tolerance)", name, r.Lower, exL)
						}
					}
				}
			}
		}
	}
	t.Logf("%d tight", tight)
}
