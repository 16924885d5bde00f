//go:build audit

package accountant

import "testing"

// TestAllocatePlanDeep is TestAllocatePlan at n_min = 20,000 under every
// travel.
func TestAllocatePlanDeep(t *testing.T) {
	checkAllocatePlan(t, 20_000, TravelJoint, TravelParallel, TravelSeparate)
}
