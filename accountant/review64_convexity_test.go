package accountant

import (
	"math"
	"testing"
)

// TestReview64ConvexityDedupWindows: the convexity correction's reuse of
// the probability of the atom before at the same lattice index (window.go)
// against r51Window's atom by atom loop, window by window, on narrow windows placed so that atoms
// sharing an index fall inside the window (pmAt), above it
// (chernoffUpper) and below it (chernoffLower), at small n where the
// correction is a large part of lo. latticeEval's own windows put almost
// no shared index outside the window, and its lo hides ulp-level changes
// of the correction; this compares lo and hi bits of each window.
func TestReview64ConvexityDedupWindows(t *testing.T) {
	var in, above, below, evals, pos int
	for _, c := range []struct {
		m, tail int
		eps0    float64
	}{{40, 30, 8}, {16, 40, 4}} {
		set := dedupLaplaceSet(c.m, c.tail, c.eps0/float64(c.m))
		for _, f := range []float64{0, 0.3, 0.6} {
			p := prepare(set, f*c.eps0)
			if p.maxZ <= 0 {
				continue
			}
			for _, hRel := range []float64{0.25, 0.125} {
				l := newLattice(p, r51H(p, hRel))
				if l.imax <= 0 || len(l.atoms) == 0 {
					continue
				}
				theta := l.tilt()
				k0, _, _ := l.logMGF(theta)
				sMin, sMax := int64(math.MaxInt64), int64(math.MinInt64)
				for _, at := range l.atoms {
					sMin, sMax = min(sMin, -at.a), max(sMax, -at.a)
				}
				for _, n := range []int{2, 3, 10, 100} {
					nf := float64(n)
					for _, L := range []int{8, 16, 32, 60} {
						span := sMax - sMin + 1
						for _, A := range []int64{sMin, sMin + span/4, sMin + span/2 - int64(L)/2, sMax - int64(L) + 1, sMax} {
							for _, full := range []bool{false, true} {
								got := l.windowWith(nf, theta, k0, A, L, full, true, tails{}, false)
								want := r51Window(l, nf, theta, k0, A, L, full, true, false)
								evals++
								if got.lo > 0 {
									pos++
								}
								if math.Float64bits(got.lo) != math.Float64bits(want.lo) || math.Float64bits(got.hi) != math.Float64bits(want.hi) {
									t.Errorf("m %d eps %v h %v n %d A %d L %d: lo %v hi %v, atom by atom lo %v hi %v",
										c.m, f*c.eps0, hRel, n, A, L, got.lo, got.hi, want.lo, want.hi)
								}
								// The reuse: an atom at the index of the
								// atom before it.
								for j, at := range l.atoms {
									s := -at.a
									if j > 0 && l.atoms[j-1].a == at.a && got.lo > 0 {
										switch {
										case s < A:
											below++
										case s >= A+int64(L):
											above++
										default:
											in++
										}
									}
								}
							}
						}
					}
				}
			}
		}
	}
	t.Logf("%d windows (%d with lo > 0); repeated indices where lo > 0: %d inside, %d above, %d below", evals, pos, in, above, below)
	if in < 50 || above < 50 || below < 50 {
		t.Fatalf("too few repeated indices in some region: %d inside, %d above, %d below", in, above, below)
	}
}
