package ldptest

import (
	"context"
	"errors"
	"math"
	"testing"

	"github.com/blanket-dp/blanket/accountant"
	"github.com/blanket-dp/blanket/sdk"
)

// BlanketLaw returns the blanket distribution of matrix m, omega_y =
// r_y/gamma with r = Blanket(m) and gamma its sum.
func BlanketLaw(m *accountant.Matrix) []float64 {
	r := Blanket(m)
	gamma := 0.0
	for _, v := range r {
		gamma += v
	}
	for y := range r {
		r[y] /= gamma
	}
	return r
}

// PairBlanketLaw returns the law a blanket draw gives the atoms (and
// then the bins) of a declared pair: R_j over the sum of the pair's R.
func PairBlanketLaw(pair accountant.DeclaredSet) []float64 {
	var out []float64
	for _, a := range pair.Atoms {
		out = append(out, a.R)
	}
	for _, b := range pair.Bins {
		out = append(out, b.R)
	}
	gamma := 0.0
	for _, r := range out {
		gamma += r
	}
	for j := range out {
		out[j] /= gamma
	}
	return out
}

// SampleBlanket draws n reports of s's blanket at eps0, stopping the test
// on an error or a report count other than n.
func SampleBlanket(t testing.TB, s sdk.BlanketSampler, eps0 float64, n int) [][]byte {
	t.Helper()
	reps, err := s.SampleBlanket(context.Background(), eps0, n)
	if err != nil {
		t.Fatalf("SampleBlanket(%v, %d): %v", eps0, n, err)
	}
	if len(reps) != n {
		t.Fatalf("SampleBlanket(%v, %d): %d reports", eps0, n, len(reps))
	}
	return reps
}

// CheckBlanketMatrix draws n reports of s's blanket at eps0, maps each to
// its column of the declared matrix m with output, and checks the counts
// against BlanketLaw(m) by Pearson's chi-square at false-failure rate
// Alpha.
func CheckBlanketMatrix(t testing.TB, s sdk.BlanketSampler, eps0 float64, n int, m *accountant.Matrix, output func([]byte) (int, error)) {
	t.Helper()
	CheckOutputs(t, "blanket draws against the matrix's column minima", SampleBlanket(t, s, eps0, n), output, BlanketLaw(m))
}

// BlanketAtomMapper is a randomizer that draws from its blanket and maps
// reports to its declared atoms.
type BlanketAtomMapper interface {
	sdk.BlanketSampler
	sdk.AtomMapper
}

// CheckBlanketAtoms draws n reports of r's blanket at eps0, maps them to
// the atoms of declared pair set (index set of the declaration at eps0)
// at inputs with r's Atoms, and checks the counts against
// PairBlanketLaw(pair) by Pearson's chi-square at false-failure rate
// Alpha.
func CheckBlanketAtoms(t testing.TB, r BlanketAtomMapper, eps0 float64, n int, pair accountant.DeclaredSet, set int, inputs []float64) {
	t.Helper()
	reps := SampleBlanket(t, r, eps0, n)
	atoms, err := r.Atoms(context.Background(), eps0, set, inputs, reps)
	if err == nil && len(atoms) != n {
		err = errors.New("one atom per report expected")
	}
	if err != nil {
		t.Fatalf("Atoms of the blanket draws: %v", err)
	}
	probs := PairBlanketLaw(pair)
	obs := make([]int64, len(probs))
	for i, j := range atoms {
		if j < 0 || j >= len(probs) {
			t.Fatalf("draw %d maps to atom %d of %d", i, j, len(probs))
		}
		obs[j]++
	}
	CheckChiSquare(t, "blanket draws against the pair's atoms", obs, probs, Alpha)
}

// CheckBlanketContract checks what sdk.BlanketSampler promises besides
// the law: n draws at eps0 are reports of ReportBytes bytes that
// Accumulate counts as n valid reports of eps0, no draws for n = 0, and
// errors wrapping sdk.ErrBadEps0 for eps0 out of range and sdk.ErrBadInput
// for n = -1 and sdk.MaxBlanketDraws + 1.
func CheckBlanketContract(t testing.TB, r interface {
	sdk.Randomizer
	sdk.BlanketSampler
}, eps0 float64, n int) {
	t.Helper()
	ctx := context.Background()
	d, err := r.Describe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	reps := SampleBlanket(t, r, eps0, n)
	for i, rep := range reps {
		if len(rep) != d.ReportBytes {
			t.Fatalf("draw %d has %d bytes, ReportBytes is %d", i, len(rep), d.ReportBytes)
		}
	}
	st, err := r.Accumulate(ctx, eps0, reps)
	if err != nil || st.N != int64(n) || st.Malformed != 0 {
		t.Errorf("Accumulate of %d draws: %+v, %v; want N = %d, none malformed", n, st, err, n)
	}
	if reps, err := r.SampleBlanket(ctx, eps0, 0); err != nil || len(reps) != 0 {
		t.Errorf("SampleBlanket(0): %d draws, %v", len(reps), err)
	}
	for _, bad := range []float64{0, -1, 31, math.NaN()} {
		if _, err := r.SampleBlanket(ctx, bad, 1); !errors.Is(err, sdk.ErrBadEps0) {
			t.Errorf("SampleBlanket at eps0 = %v: %v, want sdk.ErrBadEps0", bad, err)
		}
	}
	for _, bad := range []int{-1, sdk.MaxBlanketDraws + 1} {
		if _, err := r.SampleBlanket(ctx, eps0, bad); !errors.Is(err, sdk.ErrBadInput) {
			t.Errorf("SampleBlanket(%d): %v, want sdk.ErrBadInput", bad, err)
		}
	}
}
