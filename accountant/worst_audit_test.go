//go:build audit

package accountant

import "testing"

// TestWorstOfComposedDominatesDeep is TestWorstOfComposedDominates over
// every case, the parallel mixes included, and more rounds.
func TestWorstOfComposedDominatesDeep(t *testing.T) {
	checkWorstComposed(t, []int{2, 4, 8}, func(string) bool { return true })
}
