package accountant

import (
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// memoMatrices returns matrices of several shapes, with the eps0 each is
// declared at: k-RR (one pair set), a random dense matrix (many distinct
// pair sets), and a sparse one with a default.
func memoMatrices(t *testing.T) (mats []*Matrix, eps0s []float64) {
	t.Helper()
	krr := make([][]float64, 6)
	for x := range krr {
		krr[x] = make([]float64, 6)
		for y := range krr[x] {
			krr[x][y] = 1 / (math.E + 5)
		}
		krr[x][x] = math.E / (math.E + 5)
	}
	rng := rand.New(rand.NewPCG(3, 4))
	dense := make([][]float64, 7)
	for x := range dense {
		dense[x] = make([]float64, 9)
		var sum float64
		for y := range dense[x] {
			dense[x][y] = 1 + 3*rng.Float64()
			sum += dense[x][y]
		}
		for y := range dense[x] {
			dense[x][y] /= sum
		}
	}
	sparse := []SparseRow{
		{Default: 0.1, Entries: map[int]float64{0: 0.4, 3: 0.2}},
		{Default: 0.1, Entries: map[int]float64{1: 0.4, 3: 0.2}},
		{Default: 0.1, Entries: map[int]float64{2: 0.4, 4: 0.2}},
	}
	for _, rows := range [][][]float64{krr, dense} {
		m, err := NewMatrix(rows)
		if err != nil {
			t.Fatal(err)
		}
		mats = append(mats, m)
	}
	m, err := NewSparseMatrix(6, sparse)
	if err != nil {
		t.Fatal(err)
	}
	mats = append(mats, m)
	return mats, []float64{1, 0, 2.5} // 0: the matrix's own largest log ratio
}

// sameDecomposition fails unless got is want, bit for bit.
func sameDecomposition(t *testing.T, name string, got, want *Decomposition) {
	t.Helper()
	if got.LocalEps != want.LocalEps || got.KRR != want.KRR || got.Sampled != want.Sampled || got.ExactPairs != want.ExactPairs {
		t.Fatalf("%s: scalars %v/%d/%v/%v, want %v/%d/%v/%v", name, got.LocalEps, got.KRR, got.Sampled, got.ExactPairs, want.LocalEps, want.KRR, want.Sampled, want.ExactPairs)
	}
	for _, f := range []struct {
		field     string
		got, want []AtomSet
	}{{"Upper", got.Upper, want.Upper}, {"UpperSame", got.UpperSame, want.UpperSame}, {"Lower", got.Lower, want.Lower}, {"LowerSame", got.LowerSame, want.LowerSame}} {
		if !slices.EqualFunc(f.got, f.want, sameBits) {
			t.Fatalf("%s: %s differs from a fresh decomposition:\n got %v\nwant %v", name, f.field, f.got, f.want)
		}
	}
}

// TestDecomposeMemoGivesFreshBits: Decompose of a matrix declaration, on a
// miss and on a hit, is decomposeMatrix's result bit for bit; what a
// caller does to the decomposition it got does not reach the next caller;
// ForgetMemo empties the memo.
func TestDecomposeMemoGivesFreshBits(t *testing.T) {
	mats, eps0s := memoMatrices(t)
	ForgetMemo()
	for i, m := range mats {
		want, err := decomposeMatrix(m, eps0s[i])
		if err != nil {
			t.Fatal(err)
		}
		if len(want.Upper) == 0 || len(want.Lower) == 0 {
			t.Fatalf("matrix %d: a decomposition without upper or lower sets tests little", i)
		}
		decl := &Declaration{Form: FormMatrix, Eps0: eps0s[i], Matrix: m}
		miss, err := Decompose(decl)
		if err != nil {
			t.Fatal(err)
		}
		sameDecomposition(t, "miss", miss, want)
		// The caller owns its copy: scribble over it.
		miss.Upper[0][0].R = 0.123
		miss.Upper = append(miss.Upper, AtomSet{{R: 1, P: 1, Q: 1}})
		miss.LocalEps = 99
		hit, err := Decompose(decl)
		if err != nil {
			t.Fatal(err)
		}
		sameDecomposition(t, "hit after the miss's copy was changed", hit, want)
		hit.Lower[0][0].P = 0.5
		hit.UpperSame[0] = nil
		again, err := Decompose(decl)
		if err != nil {
			t.Fatal(err)
		}
		sameDecomposition(t, "hit after the hit's copy was changed", again, want)
	}
	decomps.Lock()
	held := len(decomps.m)
	decomps.Unlock()
	if held != len(mats) {
		t.Fatalf("the memo holds %d decompositions, want %d", held, len(mats))
	}
	ForgetMemo()
	decomps.Lock()
	held = len(decomps.m)
	decomps.Unlock()
	if held != 0 {
		t.Fatalf("ForgetMemo left %d decompositions", held)
	}
}

// TestMatrixKeyTellsInputsApart: a key changes with eps0, with any one
// entry (by one ulp), with a row's default, with where its exceptions
// sit, and with the number of outputs; a matrix that differs from another
// in what the decomposition reads never shares its key, so never its
// decomposition. Labels, which only error messages read, do not change it.
func TestMatrixKeyTellsInputsApart(t *testing.T) {
	base := func() []SparseRow {
		return []SparseRow{
			{Default: 0.1, Entries: map[int]float64{0: 0.4, 3: 0.2}},
			{Default: 0.1, Entries: map[int]float64{1: 0.4, 3: 0.2}},
		}
	}
	mk := func(outputs int, rows []SparseRow) *Matrix {
		m, err := NewSparseMatrix(outputs, rows)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	ref := string(matrixKey(mk(6, base()), 1))
	variants := map[string]func() []byte{
		"eps0":     func() []byte { return matrixKey(mk(6, base()), math.Nextafter(1, 2)) },
		"eps0 = 0": func() []byte { return matrixKey(mk(6, base()), 0) },
		"one ulp":  func() []byte { r := base(); r[1].Entries[3] = math.Nextafter(0.2, 1); return matrixKey(mk(6, r), 1) },
		"default":  func() []byte { r := base(); r[0].Default = math.Nextafter(0.1, 1); return matrixKey(mk(6, r), 1) },
		"moved entry": func() []byte {
			r := base()
			delete(r[0].Entries, 3)
			r[0].Entries[4] = 0.2
			return matrixKey(mk(6, r), 1)
		},
		"outputs":      func() []byte { return matrixKey(mk(7, base()), 1) },
		"another row":  func() []byte { r := append(base(), base()[0]); return matrixKey(mk(6, r), 1) },
		"rows swapped": func() []byte { r := base(); r[0], r[1] = r[1], r[0]; return matrixKey(mk(6, r), 1) },
	}
	for name, f := range variants {
		if string(f()) == ref {
			t.Errorf("%s: same key as the reference matrix", name)
		}
	}
	labelled := mk(6, base())
	labelled.InputLabels = []string{"a", "b"}
	if string(matrixKey(labelled, 1)) != ref {
		t.Errorf("labels changed the key")
	}
}

// TestDecomposeMemoKeepsNoErrors: an invalid matrix fails every time, with
// its own labels in the message, and leaves nothing in the memo.
func TestDecomposeMemoKeepsNoErrors(t *testing.T) {
	ForgetMemo()
	m, err := NewMatrix([][]float64{{0.5, 0.5}, {0.9, 0.3}}) // second row sums to 1.2
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, err := Decompose(&Declaration{Form: FormMatrix, Eps0: 2, Matrix: m}); !errors.Is(err, ErrInvalidDeclaration) {
			t.Fatalf("invalid matrix: %v", err)
		}
	}
	decomps.Lock()
	held := len(decomps.m)
	decomps.Unlock()
	if held != 0 {
		t.Fatalf("the memo kept %d entries from failed decompositions", held)
	}
}
