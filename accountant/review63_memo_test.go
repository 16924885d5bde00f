package accountant

import (
	"math"
	"sync"
	"testing"
)

// TestReview63MemoCopiesEveryField: scribbling over every slice field of
// a miss's and a hit's copy (LowerSame included) never reaches the memo.
func TestReview63MemoCopiesEveryField(t *testing.T) {
	mats, eps0s := memoMatrices(t)
	ForgetMemo()
	defer ForgetMemo()
	for i, m := range mats {
		want, err := decomposeMatrix(m, eps0s[i])
		if err != nil {
			t.Fatal(err)
		}
		decl := &Declaration{Form: FormMatrix, Eps0: eps0s[i], Matrix: m}
		for round := range 3 {
			got, err := Decompose(decl)
			if err != nil {
				t.Fatal(err)
			}
			sameDecomposition(t, "copy", got, want)
			for _, sets := range [][]AtomSet{got.Upper, got.UpperSame, got.Lower, got.LowerSame} {
				for _, s := range sets {
					for j := range s {
						s[j] = Atom{R: -1, P: -2, Q: float64(round)}
					}
				}
			}
		}
	}
}

// TestReview63MatrixKeyRowSplits: two matrices whose entries, read as one
// stream of words, are the same but split differently between rows (row 0
// of a ends with (2, 0), row 1 of b begins with a default whose bits are
// 2) have different keys; the first is valid, the second is not, so a
// shared key would hand the invalid one the valid one's decomposition.
func TestReview63MatrixKeyRowSplits(t *testing.T) {
	a, err := NewSparseMatrix(3, []SparseRow{
		{Default: 0.6, Entries: map[int]float64{1: 0.4, 2: 0}},
		{Default: 0.5, Entries: map[int]float64{2: 0}},
	})
	if err != nil {
		t.Fatal(err)
	}
	b, err := NewSparseMatrix(3, []SparseRow{
		{Default: 0.6, Entries: map[int]float64{1: 0.4}},
		{Default: math.Float64frombits(2), Entries: map[int]float64{0: 0.5, 2: 0}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if string(matrixKey(a, 1)) == string(matrixKey(b, 1)) {
		t.Errorf("matrices with differently split rows share a key")
	}
	ForgetMemo()
	defer ForgetMemo()
	if _, err := Decompose(&Declaration{Form: FormMatrix, Eps0: 1, Matrix: a}); err != nil {
		t.Fatalf("valid matrix: %v", err)
	}
	if _, err := Decompose(&Declaration{Form: FormMatrix, Eps0: 1, Matrix: b}); err == nil {
		t.Fatalf("invalid matrix decomposed (the memo answered for another matrix)")
	}
}

// TestReview63MemoBound: more than decompMemoBytes of entries (keys and
// decompositions) never sit in the memo at once, and its byte count is
// that of the entries it holds.
func TestReview63MemoBound(t *testing.T) {
	const k = 2048
	rows := make([]SparseRow, k)
	for x := range rows {
		rows[x] = SparseRow{Default: 1 / (math.E + k - 1), Entries: map[int]float64{x: math.E / (math.E + k - 1)}}
	}
	m, err := NewSparseMatrix(k, rows)
	if err != nil {
		t.Fatal(err)
	}
	keyLen := len(matrixKey(m, 1))
	d1, err := decomposeMatrix(m, 1)
	if err != nil {
		t.Fatal(err)
	}
	entry := entryBytes(matrixKey(m, 1), d1) // the same size at every eps0 below
	if entry < keyLen+24*len(d1.Upper[0]) {
		t.Fatalf("an entry of %d bytes counts less than its key (%d) and one set's atoms", entry, keyLen)
	}
	n := decompMemoBytes/entry + 5
	ForgetMemo()
	defer ForgetMemo()
	for i := range n {
		eps0 := 1 + float64(i)/1024
		if _, err := Decompose(&Declaration{Form: FormMatrix, Eps0: eps0, Matrix: m}); err != nil {
			t.Fatal(err)
		}
		decomps.Lock()
		held, bytes := len(decomps.m), decomps.bytes
		decomps.Unlock()
		if bytes > decompMemoBytes || bytes != held*entry || held == 0 {
			t.Fatalf("after %d decompositions: %d held, %d bytes counted (entry %d B, bound %d)", i+1, held, bytes, entry, decompMemoBytes)
		}
	}
}

// TestReview63MemoConcurrent: callers on several goroutines, missing and
// hitting the same keys at once and scribbling over their copies, each get
// a fresh decomposition (run with -race to check the locking).
func TestReview63MemoConcurrent(t *testing.T) {
	mats, eps0s := memoMatrices(t)
	wants := make([]*Decomposition, len(mats))
	for i, m := range mats {
		var err error
		if wants[i], err = decomposeMatrix(m, eps0s[i]); err != nil {
			t.Fatal(err)
		}
	}
	ForgetMemo()
	defer ForgetMemo()
	var wg sync.WaitGroup
	errs := make(chan string, 64)
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := range 20 {
				i := (g + r) % len(mats)
				got, err := Decompose(&Declaration{Form: FormMatrix, Eps0: eps0s[i], Matrix: mats[i]})
				if err != nil {
					errs <- err.Error()
					return
				}
				for j, f := range [][2][]AtomSet{{got.Upper, wants[i].Upper}, {got.UpperSame, wants[i].UpperSame}, {got.Lower, wants[i].Lower}, {got.LowerSame, wants[i].LowerSame}} {
					if len(f[0]) != len(f[1]) {
						errs <- "length differs"
						return
					}
					for s := range f[0] {
						if !sameBits(f[0][s], f[1][s]) {
							errs <- "sets differ"
							return
						}
						f[0][s][0].R = float64(j)
					}
				}
				if r%7 == 0 {
					ForgetMemo()
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Fatal(e)
	}
}
