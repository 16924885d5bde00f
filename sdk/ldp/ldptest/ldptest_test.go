package ldptest

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/blanket-dp/blanket/accountant"
	"github.com/blanket-dp/blanket/sdk"
)

// recorder is a testing.TB that records failures instead of failing.
type recorder struct {
	testing.TB
	failed bool
}

func (r *recorder) Helper()                   {}
func (r *recorder) Errorf(string, ...any)     { r.failed = true }
func (r *recorder) Fatalf(f string, a ...any) { r.failed = true; panic(fmt.Sprintf(f, a...)) }

func fails(t *testing.T, f func(tb testing.TB)) (failed bool) {
	r := &recorder{TB: t}
	defer func() {
		if recover() != nil {
			failed = true
		}
		failed = failed || r.failed
	}()
	f(r)
	return r.failed
}

func TestChiSquare(t *testing.T) {
	// Hand computation: E = (50, 30, 20), O = (60, 25, 15):
	// 100/50 + 25/30 + 25/20 = 4.0833.
	const tol = 1e-9 // a sum of three exact ratios
	x2, df := ChiSquare([]int64{60, 25, 15}, []float64{0.5, 0.3, 0.2})
	if math.Abs(x2-(2+25.0/30+1.25)) > tol || df != 2 {
		t.Errorf("ChiSquare = %v, %d", x2, df)
	}
	// Cells with E < 5 are pooled: E = (90, 6, 2, 2) pools the last two into
	// one cell with E = 4, still below 5, which joins the 6 cell.
	_, df = ChiSquare([]int64{90, 6, 2, 2}, []float64{0.9, 0.06, 0.02, 0.02})
	if df != 1 {
		t.Errorf("pooled df = %d, want 1", df)
	}
	// Reference quantile: chi-square(1) at 1 - 0.05 is 3.841459.
	if c := ChiSquareCritical(1, 0.05); math.Abs(c-3.841459) > 1e-6 {
		t.Errorf("ChiSquareCritical(1, 0.05) = %v", c)
	}
	if z := ZCritical(0.05); math.Abs(z-1.959964) > 1e-6 {
		t.Errorf("ZCritical(0.05) = %v", z)
	}
	if !fails(t, func(tb testing.TB) { CheckChiSquare(tb, "skewed", []int64{900, 100}, []float64{0.5, 0.5}, 1e-6) }) {
		t.Error("CheckChiSquare accepted 900/100 against 1/2")
	}
}

func TestCheckSameDecomposition(t *testing.T) {
	decl := func(k int, form accountant.Form) *accountant.Declaration {
		e := math.Exp(1.0)
		c := 1 / (e + float64(k-1))
		rows := make([][]float64, k)
		for x := range rows {
			rows[x] = make([]float64, k)
			for y := range rows[x] {
				rows[x][y] = c
			}
			rows[x][x] = e * c
		}
		m, err := accountant.NewMatrix(rows)
		if err != nil {
			t.Fatal(err)
		}
		return &accountant.Declaration{Eps0: 1, Form: form, Matrix: m}
	}
	if fails(t, func(tb testing.TB) {
		CheckSameDecomposition(tb, decl(4, accountant.FormMatrix), decl(4, accountant.FormMatrix))
	}) {
		t.Error("a declaration differs from itself")
	}
	if !fails(t, func(tb testing.TB) {
		CheckSameDecomposition(tb, decl(4, accountant.FormMatrix), decl(5, accountant.FormMatrix))
	}) {
		t.Error("4-RR and 5-RR compared equal")
	}
}

func TestCheckMeanAndVariance(t *testing.T) {
	samples := []float64{-1, 1, -1, 1, -1, 1, -1, 1}
	if fails(t, func(tb testing.TB) { CheckMean(tb, "m", samples, 0, 1, 1e-6) }) {
		t.Error("CheckMean rejected mean 0")
	}
	if !fails(t, func(tb testing.TB) { CheckMean(tb, "m", samples, 5, 1, 1e-6) }) {
		t.Error("CheckMean accepted mean 5")
	}
	if !fails(t, func(tb testing.TB) { CheckVariance(tb, "v", samples, 1e-4, 1e-6) }) {
		t.Error("CheckVariance accepted variance 1e-4 for unit spread")
	}
}

func TestScaffolding(t *testing.T) {
	if got := Labels(3); !slices.Equal(got, []string{"c0", "c1", "c2"}) {
		t.Errorf("Labels(3) = %q", got)
	}
	if got := Cycle([]int{1, 2, 3}, 7); !slices.Equal(got, []int{1, 2, 3, 1, 2, 3, 1}) {
		t.Errorf("Cycle = %v", got)
	}
	a, b := Seeded(300), Seeded(300)
	for range 4 {
		if a.Uint64() != b.Uint64() {
			t.Fatal("Seeded(300) is not reproducible")
		}
	}
	if Seeded(1).Uint64() == Seeded(2).Uint64() {
		t.Error("Seeded(1) and Seeded(2) start alike")
	}
	type nilRandomizer struct{ sdk.Randomizer }
	if r, err := Randomizer[*nilRandomizer](nil, errors.New("x")); r != nil || err == nil {
		t.Errorf("Randomizer of an error = %v, %v; want a nil interface", r, err)
	}
	m, err := accountant.NewMatrix([][]float64{{0.75, 0.25}, {0.25, 0.75}})
	if err != nil {
		t.Fatal(err)
	}
	if row := MatrixRow(m, 1); !slices.Equal(row, []float64{0.25, 0.75}) {
		t.Errorf("MatrixRow = %v", row)
	}
}

func TestCheckOutputs(t *testing.T) {
	decode := func(r []byte) (int, error) { return int(r[0]), nil }
	reports := make([][]byte, 1000)
	for i := range reports {
		reports[i] = []byte{byte(i % 4 / 3)} // outputs 0, 0, 0, 1
	}
	if fails(t, func(tb testing.TB) { CheckOutputs(tb, "fit", reports, decode, []float64{0.75, 0.25}) }) {
		t.Error("CheckOutputs rejected exact frequencies")
	}
	if !fails(t, func(tb testing.TB) { CheckOutputs(tb, "misfit", reports, decode, []float64{0.5, 0.5}) }) {
		t.Error("CheckOutputs accepted 750/250 against 1/2")
	}
}
