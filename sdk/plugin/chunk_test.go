package plugin

import (
	"slices"
	"testing"
)

// TestSplit checks the ranges of split against hand-worked cases: each
// range holds one element at least, stays within the limit beyond its
// first element, and the ranges cover the batch in order; an empty batch
// is one empty range.
func TestSplit(t *testing.T) {
	unit := func(int) int { return 1 }
	sizes := []int{3, 3, 10, 1, 1, 1}
	for _, tc := range []struct {
		name  string
		n     int
		limit int
		cost  func(int) int
		want  [][2]int
	}{
		{"empty", 0, 4, unit, [][2]int{{0, 0}}},
		{"fits", 5, 5, unit, [][2]int{{0, 5}}},
		{"two", 5, 3, unit, [][2]int{{0, 3}, {3, 5}}},
		{"oversized element alone", len(sizes), 6, func(i int) int { return sizes[i] }, [][2]int{{0, 2}, {2, 3}, {3, 6}}},
	} {
		if got := split(tc.n, tc.limit, tc.cost); !slices.Equal(got, tc.want) {
			t.Errorf("%s: split = %v, want %v", tc.name, got, tc.want)
		}
	}
}
