//go:build audit

package accountant

// The deep grids of soundness_test.go, run by `make audit` (go test -tags
// audit): the larger n, the longer random streams and the evaluations
// that take tens of seconds each. soundness_test.go keeps a representative
// case of every property checked here.

import "testing"

// TestLatticeBracketsEnumerationDeep is TestLatticeBracketsEnumeration at
// n = 7 and 41.
func TestLatticeBracketsEnumerationDeep(t *testing.T) {
	audLatticeBracketsEnumeration(t, []int{7, 41})
}

// TestMatrixPairReductionDeep is TestMatrixPairReduction on
// matrices 8 to 99 of its stream.
func TestMatrixPairReductionDeep(t *testing.T) {
	audMatrixPairReduction(t, 8, 100)
}

// TestLatticeVsSparseLargeNDeep is TestLatticeVsSparseLargeN at
// n = 1e6 and 1e8.
func TestLatticeVsSparseLargeNDeep(t *testing.T) {
	audLatticeVsSparse(t, []audLatticeVsSparseCase{
		{2, 10, 1_000_000},
		{2, 12, 100_000_000},
	})
}

// TestLatticeCappedWindowVsSparse forces the capped path (window longer
// than maxLattice, tail and alias terms at their largest) and checks the
// bracket against the sparse exact path (FFTs of 2^24 points, about 40 s).
func TestLatticeCappedWindowVsSparse(t *testing.T) {
	set := audKRRUpper(2, 10).Merge()
	const n = 1_000_000
	for _, tc := range []struct{ eps, hRel float64 }{{0.2, 2e-4}, {1.5, 1e-4}} {
		p := prepare(set, tc.eps)
		sp, _ := sparseExact(p, n)
		b := latticeEval(p, n, tc.hRel, true)
		t.Logf("eps=%g hRel=%g: capped %v [%.10g, %.10g], sparse [%.10g, %.10g]", tc.eps, tc.hRel, b.capped, b.lo, b.hi, sp.lo, sp.hi)
		if !b.capped {
			t.Errorf("eps=%g hRel=%g: expected the capped path", tc.eps, tc.hRel)
		}
		if b.hi < sp.lo*(1-1e-6) || b.lo > sp.hi*(1+1e-6) {
			t.Errorf("eps=%g hRel=%g: capped bracket [%.10g, %.10g] misses sparse [%.10g, %.10g]", tc.eps, tc.hRel, b.lo, b.hi, sp.lo, sp.hi)
		}
	}
}
