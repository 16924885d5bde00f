package rappor_test

import (
	"testing"

	"github.com/blanket-dp/blanket/accountant"
	"github.com/blanket-dp/blanket/plugins/rappor"
	"github.com/blanket-dp/blanket/sdk/ldp/ldptest"
)

// blanketDraws is the number of blanket draws per law tested: enough for
// every pooled cell of Pearson's test to expect at least 5 draws.
const blanketDraws = 20_000

// TestSampleBlanket: unary encoding's blanket draws follow the mixture of
// the all-ones output and d Bernoulli(q) bits, in both modes at eps0 from
// 0.5 to 8: against the column minima of the declared matrix over 6 bits
// (symmetric, with an other bucket) and 4 (optimized), and over 300 bits
// (atoms; the kit's TestBuiltins tests 100 the same way) against the
// declared pair's atoms through Atoms; they are reports
// Accumulate counts, and bad arguments fail. TestBlanketMixtureExact
// checks the mixture's law itself.
func TestSampleBlanket(t *testing.T) {
	// A report of at most 8 bits is one byte whose value is the matrix's
	// output index (bit v of the output is bit v of the report).
	output := func(rep []byte) (int, error) { return int(rep[0]), nil }
	for i, mode := range []rappor.Mode{rappor.Symmetric, rappor.Optimized} {
		seed := uint64(10 * i)
		small := ldptest.Must(t, rappor.New, rappor.Options{Categories: ldptest.Labels(5 - i), Other: []string{"other", ""}[i], Mode: mode, Rand: ldptest.Seeded(seed + 1)})
		large := ldptest.Must(t, rappor.New, rappor.Options{Categories: ldptest.Labels(300), Mode: mode, Rand: ldptest.Seeded(seed + 2)})
		for _, eps0 := range []float64{0.5, 2, 8} {
			d, err := small.Declaration(eps0, accountant.FormMatrix)
			if err != nil {
				t.Fatal(err)
			}
			ldptest.CheckBlanketMatrix(t, small, eps0, blanketDraws, d.Matrix, output)
			a, err := large.Declaration(eps0, accountant.FormAtoms)
			if err != nil {
				t.Fatal(err)
			}
			ldptest.CheckBlanketAtoms(t, large, eps0, blanketDraws, a.Pairs[0], 0, []float64{7, 250})
		}
		ldptest.CheckBlanketContract(t, small, 1, 100)
		ldptest.CheckBlanketContract(t, large, 1, 100)
	}
}
