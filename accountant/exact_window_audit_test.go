//go:build audit

package accountant

import "testing"

// The deeper grids of exact_window_test.go: windows meeting three trees
// (six differing reports), more eps0 and eps, more level-mates where the
// patterns are small enough to enumerate every joint configuration, and
// whole span histories of two trees of 8.

// TestExactWindowBoundCoversExactDeep is TestExactWindowBoundCoversExact
// on windows of 1 to 2H+1 periods (4 for H = 1) with 1 or 2 level-mates,
// on windows of 1 or 2 periods with 7, and on windows of one period with
// 11 and 19.
func TestExactWindowBoundCoversExactDeep(t *testing.T) {
	eps0s := []float64{0.25, 0.5, 1, 2, 3, 5}
	epss := []float64{0.05, 0.1, 0.25, 0.5, 1, 1.5, 2, 3, 4, 6}
	var ts []ewTightness
	for _, g := range []ewGrid{
		{trees: []int{1, 2, 4, 8}, maxW: func(H int) int { return max(2*H+1, 4) }, mates: []int{2, 3}},
		{trees: []int{1, 2, 4, 8}, maxW: func(int) int { return 2 }, mates: []int{8}},
		{trees: []int{2, 4, 8}, maxW: func(int) int { return 1 }, mates: []int{12, 20}},
	} {
		g.eps0s, g.epss = eps0s, epss
		ts = append(ts, ewCheckGrid(t, g)...)
	}
	ewLogTightness(t, ts)
}

// TestExactWindowHistoriesMatchTreesDeep is
// TestExactWindowHistoriesMatchTrees on windows of 1 to 2H+1 periods with
// up to 2^20 pairs of span histories per alignment (two trees of 8 for
// windows of up to 4 periods).
func TestExactWindowHistoriesMatchTreesDeep(t *testing.T) {
	ewCheckSpans(t, func(H int) int { return 2*H + 1 }, 1<<20)
}
