//go:build audit

package accountant

import "testing"

// TestNodeExactTighterTable is TestNodeExactTighter's before/after table
// over mates 101 and 1001 and eps0 0.5, 1 and 2 (the closing note's).
func TestNodeExactTighterTable(t *testing.T) {
	checkNodeExactTighter(t, []int{101, 1001}, []float64{0.5, 1, 2})
}
