//go:build audit

package accountant

import "testing"

// TestWorstOfComposedDominatesDeep is TestWorstOfComposedDominates over
// every case, the parallel mixes included, and more rounds.
func TestWorstOfComposedDominatesDeep(t *testing.T) {
	checkWorstComposed(t, []int{2, 4, 8}, func(string) bool { return true })
}

// TestWorstOfComposedDominates: over T rounds, the composition of WorstOf(a,
// b) is at least each one's composition, and at least the composition of
// any sequence of a's and b's (here T/2 of each), and at most basic
// composition of its single round. Each composed upper bound
// is certified within HorizonTolerance of the exact composition of its
// dominating pairs when Tight, and WorstOf's pair dominates every pair in
// the sequence, so WorstOf's bound can fall below another's by at most
// that factor.
func TestWorstOfComposedDominates(t *testing.T) {
	// The parallel mix case takes half a minute; make audit runs it
	// (TestWorstOfComposedDominatesDeep).
	checkWorstComposed(t, []int{4}, func(name string) bool { return name != "parallel mix" })
}
