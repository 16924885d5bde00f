//go:build audit

package accountant

import "testing"

// TestAllocatePlanDeep is TestAllocatePlan's separate travel at n_min =
// 20,000.
func TestAllocatePlanDeep(t *testing.T) {
	checkAllocatePlan(t, 20_000, TravelSeparate)
}
