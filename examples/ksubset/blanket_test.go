package ksubset_test

import (
	"testing"

	"github.com/blanket-dp/blanket/accountant"
	"github.com/blanket-dp/blanket/examples/ksubset"
	"github.com/blanket-dp/blanket/sdk/ldp"
	"github.com/blanket-dp/blanket/sdk/ldp/ldptest"
)

// blanketDraws is the number of blanket draws per law tested: 15 outputs
// on the small configuration, and on the large one the pair's smallest
// atom (both buckets in the subset) has blanket share
// s(s-1)/(k(k-1)) = 0.013, 267 draws expected.
const blanketDraws = 20_000

// TestSampleBlanket: k-subset's blanket draws are uniform on the
// s-subsets, at eps0 from 0.5 to 8: against the column minima of the
// declared matrix over 6 buckets with s = 2 (outputs by colex rank), and
// over 100 buckets with s = 12 against the declared pair's atoms through
// Atoms; they are reports Accumulate counts, and bad arguments fail.
func TestSampleBlanket(t *testing.T) {
	small := mustNew(t, ksubset.Options{Categories: ldptest.Labels(6), S: 2, Rand: ldptest.Seeded(1)})
	large := mustNew(t, ksubset.Options{Categories: ldptest.Labels(100), S: 12, Rand: ldptest.Seeded(2)})
	for _, eps0 := range []float64{0.5, 2, 8} {
		d, err := small.Declaration(eps0, accountant.FormMatrix)
		if err != nil {
			t.Fatal(err)
		}
		ldptest.CheckBlanketMatrix(t, small, eps0, blanketDraws, d.Matrix, func(rep []byte) (int, error) { return ldp.ColexRank(rep, 6, 2) })
		a, err := large.Declaration(eps0, accountant.FormAtoms)
		if err != nil {
			t.Fatal(err)
		}
		ldptest.CheckBlanketAtoms(t, large, eps0, blanketDraws, a.Pairs[0], 0, []float64{4, 60})
	}
	ldptest.CheckBlanketContract(t, small, 1, 100)
}
