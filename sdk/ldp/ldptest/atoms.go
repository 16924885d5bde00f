package ldptest

import (
	"math"
	"testing"

	"github.com/blanket-dp/blanket/accountant"
)

// atomTol is the relative tolerance of CheckAtomSums.
const atomTol = 1e-12

// InputTuples returns every tuple of 2 (a pair) or 3 (a triple) bucket
// indices in [0, k), distinct or not, as sdk.AtomMapper takes inputs.
func InputTuples(k int, triple bool) [][]float64 {
	var out [][]float64
	for x := range k {
		for x2 := range k {
			if !triple {
				out = append(out, []float64{float64(x), float64(x2)})
				continue
			}
			for x3 := range k {
				out = append(out, []float64{float64(x), float64(x2), float64(x3)})
			}
		}
	}
	return out
}

// Blanket returns min_z R[z][y] for every output y of m.
func Blanket(m *accountant.Matrix) []float64 {
	out := make([]float64, m.NumOutputs())
	for y := range out {
		out[y] = math.Inf(1)
		for z := range m.NumInputs() {
			out[y] = min(out[y], m.At(z, y))
		}
	}
	return out
}

// CheckAtomSums checks an sdk.AtomMapper against a matrix declaration of
// the same randomizer: got[y] is the atom of declared set s that output y
// maps to at bucket inputs xs (x, x' and, for a triple, x3), and each
// atom's r, p and q must be, within a relative 1e-12, the sums over its
// outputs of blanket[y] = min_z R[z][y] (R[x3][y] for a triple), R[x][y]
// and R[x'][y]. blanket is Blanket(m), passed in so that callers checking
// many sets compute it once.
func CheckAtomSums(t testing.TB, name string, m *accountant.Matrix, blanket []float64, s accountant.DeclaredSet, triple bool, xs []float64, got []int) {
	t.Helper()
	if len(got) != m.NumOutputs() {
		t.Fatalf("%s: %d atoms for %d outputs", name, len(got), m.NumOutputs())
	}
	sums := make([]accountant.Atom, len(s.Atoms))
	for y, j := range got {
		if j < 0 || j >= len(s.Atoms) {
			t.Fatalf("%s: output %d maps to atom %d of %d", name, y, j, len(s.Atoms))
		}
		b := blanket[y]
		if triple {
			b = m.At(int(xs[2]), y)
		}
		sums[j].R += b
		sums[j].P += m.At(int(xs[0]), y)
		sums[j].Q += m.At(int(xs[1]), y)
	}
	rel := func(a, b float64) bool { return math.Abs(a-b) <= atomTol*math.Abs(b) }
	for j, want := range s.Atoms {
		if g := sums[j]; !rel(g.R, want.R) || !rel(g.P, want.P) || !rel(g.Q, want.Q) {
			t.Errorf("%s atom %d: the matrix sums to %+v over its outputs, declared %+v", name, j, g, want)
		}
	}
}
