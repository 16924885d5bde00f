package summation_test

import (
	"testing"

	"github.com/blanket-dp/blanket/accountant"
	"github.com/blanket-dp/blanket/plugins/summation"
	"github.com/blanket-dp/blanket/sdk/ldp/ldptest"
)

// blanketDraws is the number of blanket draws per law tested: with 1,001
// levels the pair's two single-level atoms expect about 20 draws each.
const blanketDraws = 20_000

// TestSampleBlanket: the summation protocol's blanket draws are uniform on
// the levels, at eps0 from 0.5 to 8: against the column minima of the
// declared matrix over 4 levels, and over 1,001 levels against the
// declared pair's atoms through Atoms (at the pair's declared inputs,
// levels 0 and 1); they are reports Accumulate counts, and bad arguments
// fail.
func TestSampleBlanket(t *testing.T) {
	small := ldptest.Must(t, summation.New, summation.Options{Lo: -1, Hi: 3, K: 3, Rand: ldptest.Seeded(1)})
	large := ldptest.Must(t, summation.New, summation.Options{Lo: 0, Hi: 1000, K: 1000, Rand: ldptest.Seeded(2)})
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
		ldptest.CheckBlanketAtoms(t, large, eps0, blanketDraws, a.Pairs[0], 0, a.Pairs[0].Inputs)
	}
	ldptest.CheckBlanketContract(t, small, 1, 100)
}
