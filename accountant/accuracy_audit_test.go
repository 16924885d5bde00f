//go:build audit

package accountant_test

// The deep grids of accountant_test.go, run by `make audit` (go test -tags
// audit): the k-RR points at n = 1e5 whose exact references take seconds
// each, and the longer sweeps. accountant_test.go keeps a representative
// case of every property checked here.

import (
	"testing"

	"github.com/blanket-dp/blanket/accountant"
)

// largeNAuditCases are the points of largeNCases at n = 1e5 whose
// reference costs about a second each.
var largeNAuditCases = []largeNCase{
	{10, 1, 100000, 0.01},
	{100, 4, 100000, 0.03},
	{100, 4, 100000, 0.1},
	{2, 1, 100000, 0.01},
	{2, 1, 100000, 0.03},
}

// TestSetDeltaBracketsExactLargeNDeep is TestSetDeltaBracketsExactLargeN
// at largeNAuditCases.
func TestSetDeltaBracketsExactLargeNDeep(t *testing.T) {
	checkSetDeltaLargeN(t, largeNAuditCases)
}

// TestEpsilonTightLargeNDeep is TestEpsilonTightLargeN at n = 1e5 for
// small eps0, binary and 3-RR and the generic clone bound, delta down to
// 1e-12 (about a minute: each inversion of the reference takes seconds).
func TestEpsilonTightLargeNDeep(t *testing.T) {
	checkEpsilonTight(t, []tightCase{
		{10, 1, 100000, 1e-8},
		{100, 4, 100000, 1e-6},
		{2, 1, 100000, 1e-10},
		{1000, 6, 100000, 1e-6},
		{10, 2, 100000, 1e-12},
		{10, 0.1, 100000, 1e-6},
		{3, 1, 100000, 1e-6},
		{3, 4, 100000, 1e-10},
		{0, 1, 100000, 1e-6},
		{3, 0.5, 10000, 1e-12},
		{10, 1, 10000, 1e-6},
		{0, 4, 100000, 1e-8},
	})
}

// TestEpsilonOrderingDeep is TestEpsilonOrdering at binary RR with delta =
// 1e-8 and at k = 100 with n = 1e5.
func TestEpsilonOrderingDeep(t *testing.T) {
	checkEpsilonOrdering(t, []tightCase{
		{2, 2, 10000, 1e-8},
		{100, 4, 100000, 1e-6},
	})
}

// TestEpsilonMonotoneDeep continues TestEpsilonMonotone's sweep in n from
// 12800 to 102400, sweeps eps0 in steps of 0.5, and runs both sweeps for
// k-RR with k = 100 (n from 100).
func TestEpsilonMonotoneDeep(t *testing.T) {
	for _, m := range []accountant.Mechanism{accountant.KRR(10), accountant.KRR(100), accountant.Generic()} {
		n0 := 12800
		if m.String() == accountant.KRR(100).String() {
			n0 = 100
		}
		checkMonotoneInN(t, m.String(), m, n0, 102400)
		checkMonotoneInEps0(t, m.String(), m, 0.5)
	}
}

// TestCompositionSanityDeep is TestCompositionSanity at eps0 = 2.
func TestCompositionSanityDeep(t *testing.T) {
	checkCompositionSanity(t, []int{3, 10}, []float64{2})
}
