//go:build audit

package main

import "testing"

// TestServeCalibratesAtStart is TestServe on the uncalibrated test plan,
// which serve calibrates when it starts (and finds calibrated in its data
// directory when it restarts), with 3000 reports.
func TestServeCalibratesAtStart(t *testing.T) {
	checkServe(t, testPlanFile, 3000)
}
