//go:build audit

package accounting_test

import "testing"

// TestCalibrateHorizonDeep is TestCalibrateHorizon on onePlan (k-RR over 3
// categories).
func TestCalibrateHorizonDeep(t *testing.T) {
	calibrateHorizon(t, onePlan)
}
