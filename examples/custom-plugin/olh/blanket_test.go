package olh

import (
	"testing"

	"github.com/blanket-dp/blanket/accountant"
	"github.com/blanket-dp/blanket/sdk/ldp/ldptest"
)

// blanketDraws is the number of blanket draws per law tested: the
// matrices below have at most 100 outputs, 200 draws each expected.
const blanketDraws = 20_000

// TestSampleBlanket: OLH's blanket draws are uniform on (seed, y), at eps0
// from 0.5 to 8 (g = 3, 5 and 5, and 72 to 100 outputs): against the
// column minima of the declared matrix over 3 buckets and an other
// bucket, and over 1,000 buckets against the declared pair's atoms
// through Atoms; they are reports Accumulate counts, and bad arguments
// fail.
func TestSampleBlanket(t *testing.T) {
	small := mustNew(t, Options{Categories: labels(3), Other: "other", Rand: seeded(1)})
	large := mustNew(t, Options{Categories: labels(1000), Rand: seeded(2)})
	for _, eps0 := range []float64{0.5, 2, 8} {
		d, err := small.Declaration(eps0, accountant.FormMatrix)
		if err != nil {
			t.Fatal(err)
		}
		ldptest.CheckBlanketMatrix(t, small, eps0, blanketDraws, d.Matrix, func(rep []byte) (int, error) { return small.Output(eps0, rep) })
		a, err := large.Declaration(eps0, accountant.FormAtoms)
		if err != nil {
			t.Fatal(err)
		}
		ldptest.CheckBlanketAtoms(t, large, eps0, blanketDraws, a.Pairs[0], 0, []float64{0, 1})
	}
	ldptest.CheckBlanketContract(t, small, 1, 100)
}
