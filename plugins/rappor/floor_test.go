package rappor_test

import (
	"testing"

	"github.com/blanket-dp/blanket/plugins/rappor"
	"github.com/blanket-dp/blanket/sdk"
	"github.com/blanket-dp/blanket/sdk/ldp/ldptest"
)

// TestEstimateFloor checks EstimateFloor (floor.go) against the blanket
// law of the declared matrix and the plugin's own Estimate of single
// reports (ldptest.CheckFloorEstimates), on a statistic of real reports
// and real draws, and exactly, variance included, with draws in exact
// proportion at eps0 = ln 2 and ln 4, where the blanket's are whole (an
// output's index is its bits), in both modes.
func TestEstimateFloor(t *testing.T) {
	for _, r := range []*rappor.Randomizer{ldptest.Must(t, rappor.New, rappor.Options{Categories: ldptest.Labels(4), Mode: rappor.Symmetric, Rand: ldptest.Seeded(1)}), ldptest.Must(t, rappor.New, rappor.Options{Categories: ldptest.Labels(5), Mode: rappor.Optimized, Rand: ldptest.Seeded(2)})} {
		ldptest.CheckFloorEstimates(t, r, sdk.Inputs{Categories: ldptest.Labels(4)[:3]}, r.D(), func(c []int64, _ float64, y int) {
			for v := range c {
				c[v] = int64(y>>v) & 1
			}
		}, nil)
	}
}
