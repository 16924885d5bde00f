//go:build audit

package main

import "testing"

// TestEnginePlanRoundsDeep is TestEnginePlanRounds on the demo plan
// (examples/plan.yaml: three metrics at n_min = 10,000) over 12 periods.
func TestEnginePlanRoundsDeep(t *testing.T) {
	checkPlanRounds(t, "../../examples/plan.yaml", 12)
}
