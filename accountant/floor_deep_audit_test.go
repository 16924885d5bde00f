//go:build audit

package accountant_test

import "testing"

// TestFloorDeep runs the floor checks too slow for make test: the
// section 3 reduction at larger n, honest others and draws together, and
// calibration over one and two rounds.
func TestFloorDeep(t *testing.T) {
	floorZeroCases(t, []floorZeroCase{{10, 3, 20000, 0.15}, {100, 5, 5000, 0.6}})
	floorBoth(t)
	floorCalibrate(t, 1, 2)
}
