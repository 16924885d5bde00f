package accountant

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// review63OverlapMatrix: a sparse matrix whose rows share exception
// columns, so decomposeMatrix takes its overlap path (for pr := range
// overlap: a map).
func review63OverlapMatrix(t *testing.T, k, outputs int) *Matrix {
	t.Helper()
	rng := rand.New(rand.NewPCG(11, 12))
	rows := make([]SparseRow, k)
	for x := range rows {
		a, b := 1+2*rng.Float64(), 1+2*rng.Float64()
		d := 1 / (float64(outputs-2) + a + b)
		y1 := rng.IntN(outputs)
		y2 := (y1 + 1 + rng.IntN(outputs-1)) % outputs
		rows[x] = SparseRow{Default: d, Entries: map[int]float64{y1: a * d, y2: b * d}}
	}
	m, err := NewSparseMatrix(outputs, rows)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestReview63DecomposeMatrixDeterministic: decomposeMatrix is the pure
// function the memo assumes: two calls on the same matrix and eps0 give
// the same decomposition, bit for bit and in the same order.
func TestReview63DecomposeMatrixDeterministic(t *testing.T) {
	m := review63OverlapMatrix(t, 40, 80)
	first, err := decomposeMatrix(m, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("upper %d lower %d", len(first.Upper), len(first.Lower))
	for i := range 20 {
		again, err := decomposeMatrix(m, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range []struct {
			name string
			a, b []AtomSet
		}{{"Upper", first.Upper, again.Upper}, {"Lower", first.Lower, again.Lower}, {"LowerSame", first.LowerSame, again.LowerSame}, {"UpperSame", first.UpperSame, again.UpperSame}} {
			if !slices.EqualFunc(f.a, f.b, sameBits) {
				same := 0
				for _, s := range f.b {
					if slices.ContainsFunc(f.a, func(u AtomSet) bool { return sameBits(u, s) }) {
						same++
					}
				}
				t.Errorf("call %d: %s differs from the first call's (%d of %d sets found in the first)", i, f.name, same, len(f.b))
			}
		}
		if t.Failed() {
			return
		}
	}
}
