//go:build audit

package main

import "testing"

// TestFleetDeep is TestFleet on the demo plan's own horizon (30 periods)
// at n_min = 300: 1200 instances over 4 days, so that the collector
// calibrates the composition of the three metrics over 30 periods at a
// small n_min and the guarantee over the horizon is checked against it.
func TestFleetDeep(t *testing.T) {
	runFleet(t, fleetCase{n: 1200, nMin: 300, days: 4})
}

// TestFleetPooledDeep is TestFleetPooled over 2 days.
func TestFleetPooledDeep(t *testing.T) {
	fleetPooled(t, 2)
}
