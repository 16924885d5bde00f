//go:build audit

package accounting_test

import "testing"

// TestCalibrateDeep is TestCalibrate on the example plan at its n_min =
// 10,000.
func TestCalibrateDeep(t *testing.T) {
	calibrateTravels(t, example)
}
