package accountant

import (
	"math"
	"testing"
)

// TestTiltedSDMemoKeysEveryInput: the remembered scale is tiltedSDOf's for
// the set asked, first and again, for sets that differ only in their
// masses, only in one value, or only in maxZ.
func TestTiltedSDMemoKeysEveryInput(t *testing.T) {
	ForgetMemo()
	sets := []prepared{
		{z: []float64{-1, 0.5, 2}, w: []float64{0.5, 0.3, 0.2}, maxZ: 2},
		{z: []float64{-1, 0.5, 2}, w: []float64{0.6, 0.2, 0.2}, maxZ: 2},
		{z: []float64{-1, 0.5, 2.5}, w: []float64{0.5, 0.3, 0.2}, maxZ: 2.5},
		{z: []float64{-1, 0.5, 2}, w: []float64{0.5, 0.3, 0.2}, maxZ: 3},
	}
	for round := range 2 {
		for i, p := range sets {
			got, want := tiltedSD(p), tiltedSDOf(p)
			if math.Float64bits(got) != math.Float64bits(want) {
				t.Errorf("round %d set %d: tiltedSD %v, tiltedSDOf %v", round, i, got, want)
			}
		}
	}
	if tiltedSDOf(sets[0]) == tiltedSDOf(sets[1]) || tiltedSDOf(sets[0]) == tiltedSDOf(sets[2]) {
		t.Fatal("the sets do not tell their scales apart: the test cannot fail")
	}
}
