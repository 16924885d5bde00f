package hadamard_test

import (
	"testing"

	"github.com/blanket-dp/blanket/accountant"
	"github.com/blanket-dp/blanket/plugins/hadamard"
	"github.com/blanket-dp/blanket/sdk/ldp/ldptest"
)

// blanketDraws is the number of blanket draws per law tested: enough for
// every pooled cell of Pearson's test to expect at least 5 draws.
const blanketDraws = 20_000

// TestSampleBlanket: Hadamard response's blanket draws are K-ary
// randomized response around output 0, at eps0 from 0.5 to 8: against the
// column minima of the declared matrix over 4 buckets and an other bucket
// (K = 8), and over 1,000 buckets (K = 1024) against the declared pair's
// atoms through Atoms; they are reports Accumulate counts, and bad
// arguments fail.
func TestSampleBlanket(t *testing.T) {
	small := ldptest.Must(t, hadamard.New, hadamard.Options{Categories: ldptest.Labels(4), Other: "other", Rand: ldptest.Seeded(1)})
	large := ldptest.Must(t, hadamard.New, hadamard.Options{Categories: ldptest.Labels(1000), Rand: ldptest.Seeded(2)})
	for _, eps0 := range []float64{0.5, 2, 8} {
		d, err := small.Declaration(eps0, accountant.FormMatrix)
		if err != nil {
			t.Fatal(err)
		}
		ldptest.CheckBlanketMatrix(t, small, eps0, blanketDraws, d.Matrix, small.Decode)
		a, err := large.Declaration(eps0, accountant.FormAtoms)
		if err != nil {
			t.Fatal(err)
		}
		ldptest.CheckBlanketAtoms(t, large, eps0, blanketDraws, a.Pairs[0], 0, []float64{5, 900})
	}
	ldptest.CheckBlanketContract(t, small, 1, 100)
}
