package hadamard_test

import (
	"testing"

	"github.com/blanket-dp/blanket/plugins/hadamard"
	"github.com/blanket-dp/blanket/sdk"
	"github.com/blanket-dp/blanket/sdk/ldp/ldptest"
)

// TestEstimateFloor checks EstimateFloor (floor.go) against the blanket
// law of the declared matrix and the plugin's own Estimate of single
// reports (ldptest.CheckFloorEstimates), on a statistic of real reports
// and real draws, and exactly, variance included, with draws in exact
// proportion at eps0 = ln 2 and ln 4, where the blanket's are whole.
func TestEstimateFloor(t *testing.T) {
	for _, r := range []*hadamard.Randomizer{ldptest.Must(t, hadamard.New, hadamard.Options{Categories: ldptest.Labels(4), Other: "other", Rand: ldptest.Seeded(1)}), ldptest.Must(t, hadamard.New, hadamard.Options{Categories: ldptest.Labels(12), Rand: ldptest.Seeded(2)})} {
		ldptest.CheckFloorEstimates(t, r, sdk.Inputs{Categories: ldptest.Labels(4)[:3]}, r.Outputs(), func(c []int64, _ float64, y int) { c[y] = 1 }, nil)
	}
}
