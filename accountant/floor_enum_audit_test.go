//go:build audit

package accountant

import "testing"

// TestFloorMixtureEnumDeep is TestFloorMixtureEnum at larger n_h and m.
func TestFloorMixtureEnumDeep(t *testing.T) {
	floorMixtureEnum(t, []struct{ nh, m int }{{30, 10}, {60, 0}, {80, 25}}, []float64{0, 0.1, 0.3, 0.6})
}
