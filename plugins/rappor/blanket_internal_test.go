package rappor

import (
	"math"
	"math/bits"
	"testing"

	"github.com/blanket-dp/blanket/accountant/declare"
	"github.com/blanket-dp/blanket/sdk/ldp/ldptest"
)

// mixtureTol is the relative tolerance of TestBlanketMixtureExact: the
// mixture's probabilities and the matrix's column minima are the same
// products of a few closed forms, computed in different orders, a few
// ulps apart.
const mixtureTol = 1e-12

// TestBlanketMixtureExact: the law SampleBlanket draws from, the all-ones
// output with weight (alpha - beta) q^d/gamma plus d independent
// Bernoulli(q) bits with weight beta/gamma, is the column minima of the
// declared matrix over their sum, output by output, for d = 2..6 in both
// modes at eps0 from 0.01 to 30.
func TestBlanketMixtureExact(t *testing.T) {
	for _, mode := range []Mode{Symmetric, Optimized} {
		for d := 2; d <= MatrixMaxD; d++ {
			r, err := New(Options{Categories: ldptest.Labels(d), Mode: mode})
			if err != nil {
				t.Fatal(err)
			}
			for _, eps0 := range []float64{0.01, 0.5, 2, 8, 30} {
				m, err := r.Declaration(eps0, declare.FormMatrix)
				if err != nil {
					t.Fatal(err)
				}
				want := ldptest.BlanketLaw(m.Matrix)
				allOnes, product := r.blanketWeights(eps0)
				q := r.probs(eps0).q
				for y := range want {
					s := bits.OnesCount(uint(y))
					got := product * math.Pow(q, float64(s)) * math.Pow(1-q, float64(d-s))
					if y == 1<<d-1 {
						got += allOnes
					}
					if math.Abs(got-want[y]) > mixtureTol*want[y] {
						t.Errorf("%s d=%d eps0=%v output %0*b: the sampler's law %.17g, the matrix's blanket %.17g", mode, d, eps0, d, y, got, want[y])
					}
				}
			}
		}
	}
}
