package accountant

import (
	"math"
	"testing"
)

// dedupLaplaceSet is the pair (0, m) of a discrete Laplace mechanism on the
// centres {0..m} at rate lam, outputs k in [-tail, m + tail], each atom
// (min_c P(k|c), P(k|0), P(k|m)): many atoms whose losses lie close
// together, so that a lattice puts several of them at one index.
func dedupLaplaceSet(m, tail int, lam float64) AtomSet {
	row := func(k, c int) float64 { return math.Tanh(lam/2) * math.Exp(-lam*math.Abs(float64(k-c))) }
	var s AtomSet
	for k := -tail; k <= m+tail; k++ {
		r := math.Inf(1)
		for c := 0; c <= m; c++ {
			r = math.Min(r, row(k, c))
		}
		s = append(s, Atom{R: r, P: row(k, 0), Q: row(k, m)})
	}
	return s.Merge()
}

// TestConvexityDedupKeepsBits: the window's convexity correction reuses
// the probability of the atom before when an atom sits at the same lattice
// index (window.go). Against the copy of the engine that computes it
// atom by atom (r51LatticeEval without skipRun, whose bits
// TestWindowSkipsKeepBits ties to latticeEval's), the brackets are the
// same bits, on Laplace pairs where neighbouring atoms do share indices (counted, so
// that the test cannot pass without exercising the reuse), at n up to 1e6
// and eps up to the local eps.
func TestConvexityDedupKeepsBits(t *testing.T) {
	shared, evals := 0, 0
	for _, c := range []struct {
		m, tail int
		eps0    float64
	}{{40, 30, 8}, {60, 20, 12}, {16, 40, 4}} {
		set := dedupLaplaceSet(c.m, c.tail, c.eps0/float64(c.m))
		for _, n := range []int{30, 1000, 100_000, 1_000_000} {
			for _, hRel := range []float64{0.25, 0.125} {
				for _, f := range []float64{0, 0.1, 0.3, 0.6, 0.9} {
					p := prepare(set, f*c.eps0)
					if p.maxZ <= 0 {
						continue
					}
					l := newLattice(p, r51H(p, hRel))
					for j := 1; j < len(l.atoms); j++ {
						if l.atoms[j].a == l.atoms[j-1].a {
							shared++ // reuses the probability of the atom before
						}
					}
					evals++
					got := latticeEval(p, n, hRel, true)
					want := r51LatticeEval(p, n, hRel, true, true, false)
					if got != want {
						t.Errorf("m %d eps0 %v eps %v n %d h %v: %+v, atom by atom %+v", c.m, c.eps0, f*c.eps0, n, hRel, got, want)
					}
				}
			}
		}
	}
	if shared < 100 {
		t.Fatalf("only %d atoms shared a lattice index in %d evaluations: the test does not exercise the reuse", shared, evals)
	}
	t.Logf("%d evaluations, %d atoms at shared indices", evals, shared)
}
