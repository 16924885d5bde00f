//go:build audit

package main

import "testing"

// TestEnginePlanRoundsDeep is TestEnginePlanRounds on the demo plan
// (examples/plan.yaml: three metrics at n_min = 10,000) over 12 periods.
func TestEnginePlanRoundsDeep(t *testing.T) {
	checkPlanRounds(t, "../../examples/plan.yaml", 12)
}

// TestEnginePlanRounds calibrates the collector's two-metric test plan
// over 3 periods; the demo plan over 12 periods (three metrics at n_min =
// 10,000, five times the CPU) is TestEnginePlanRoundsDeep (make audit).
func TestEnginePlanRounds(t *testing.T) {
	if testing.Short() {
		t.Skip("calibrates a plan over 3 periods; skipped with -short")
	}
	checkPlanRounds(t, testPlanFile, 3)
}
