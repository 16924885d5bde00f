package accountant

import (
	"fmt"
	"math"
	"testing"

	"github.com/blanket-dp/blanket/plugins/laplace"
)

// Review of 2aba623, item 4: compoundEval's per-m pre-check
// (lgamma(m + r) - log m! - log (r - 1)! > log(compoundMaxLeaves - leaves))
// declines exactly where the recursion would have, so the committed
// compoundEval returns the same bits (bracket and ok) as the parent's
// (r59OldCompoundEval, a verbatim copy).

func r59SameEval(t *testing.T, name string, p prepared, n int, hRel float64, wantLo bool) (declined bool) {
	t.Helper()
	nb, nok := compoundEval(p, n, hRel, wantLo)
	ob, ook := r59OldCompoundEval(p, n, hRel, wantLo)
	if nok != ook || math.Float64bits(nb.lo) != math.Float64bits(ob.lo) ||
		math.Float64bits(nb.hi) != math.Float64bits(ob.hi) || nb.capped != ob.capped {
		t.Errorf("%s n %d hRel %g wantLo %v: new %+v %v, parent %+v %v", name, n, hRel, wantLo, nb, nok, ob, ook)
	}
	return !ook
}

func TestReview59LeafCheckSameAsParentRandom(t *testing.T) {
	for _, c := range r55Cases(59, 300) {
		for _, wantLo := range []bool{true, false} {
			r59SameEval(t, c.name, c.p, c.n, hRelStart, wantLo)
		}
	}
}

// Laplace upper sets: many rare atoms, where the pre-check fires (the
// parent visited up to compoundMaxLeaves leaves before declining), and
// small n where it must not.
func TestReview59LeafCheckSameAsParentLaplace(t *testing.T) {
	declined, took := 0, 0
	for _, eps0 := range []float64{8, 14, 20} {
		d, err := Decompose(laplace.Declaration(eps0, laplace.Bins))
		if err != nil {
			t.Fatal(err)
		}
		for si, s := range d.Upper {
			for _, f := range []float64{0.3, 0.6, 0.9, 0.97} {
				eps := f * eps0
				p := prepare(s, eps)
				if p.maxZ <= 0 {
					continue
				}
				for _, n := range []int{2, 3, 10, 100, 1000} {
					if compoundSplit(p, n) == nil {
						continue
					}
					name := fmt.Sprintf("laplace eps0 %g set %d eps %g", eps0, si, eps)
					if r59SameEval(t, name, p, n, hRelStart, true) {
						declined++
					} else {
						took++
					}
				}
			}
		}
	}
	t.Logf("%d declined, %d took the path", declined, took)
	if declined == 0 || took == 0 {
		t.Errorf("want both outcomes: %d declined, %d took", declined, took)
	}
}

// The bound's edge: r = 361 rare atoms at n = 2 visit 1 + 361 + C(362, 2)
// = 65703 leaves (declined), r = 360 1 + 360 + 64980 = 65341 (allowed).
// (The exact edge, r = 65535 at n = 1, is in review59_audit_test.go.)
func TestReview59LeafCheckBoundary(t *testing.T) {
	r59LeafCheckBoundary(t, []r59EdgeCase{{360, 2, true}, {361, 2, false}})
}

type r59EdgeCase struct {
	r, n   int
	wantOK bool
}

func r59LeafCheckBoundary(t *testing.T, cases []r59EdgeCase) {
	for _, c := range cases {
		z := []float64{-1}
		w := []float64{0.7}
		for j := range c.r {
			z = append(z, 100+float64(j%7))
			w = append(w, 0.3/float64(c.r)/float64(c.n))
		}
		w[0] = 1 - 0.3/float64(c.n)
		p := r55Prepared(z, w)
		if got := len(compoundSplit(p, c.n)); got != c.r {
			t.Fatalf("r %d n %d: split of %d", c.r, c.n, got)
		}
		declined := r59SameEval(t, fmt.Sprintf("edge r %d", c.r), p, c.n, hRelStart, true)
		if declined == c.wantOK {
			t.Errorf("r %d n %d: declined %v, want ok %v", c.r, c.n, declined, c.wantOK)
		}
	}
}
