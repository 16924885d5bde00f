package ksubset_test

import (
	"testing"

	"github.com/blanket-dp/blanket/examples/ksubset"
	"github.com/blanket-dp/blanket/sdk"
	"github.com/blanket-dp/blanket/sdk/ldp"
	"github.com/blanket-dp/blanket/sdk/ldp/ldptest"
)

// TestEstimateFloor checks EstimateFloor (floor.go) against the blanket
// law of the declared matrix, whose outputs are the s-subsets by colex
// rank, and the plugin's own Estimate of single reports
// (ldptest.CheckFloorEstimates): neither uses floor.go's s/k, so a
// draw's support of each bucket, its mean and variance, is counted over
// the subsets. The blanket is uniform on the subsets, so it has whole
// proportions (C(k, s) draws) and the variance is checked exactly too.
func TestEstimateFloor(t *testing.T) {
	for _, r := range []*ksubset.Randomizer{
		mustNew(t, ksubset.Options{Categories: ldptest.Labels(5), Other: "other", S: 2, Rand: ldptest.Seeded(1)}),
		mustNew(t, ksubset.Options{Categories: ldptest.Labels(7), S: 3, Rand: ldptest.Seeded(2)}),
	} {
		k, s := r.K(), r.S()
		ldptest.CheckFloorEstimates(t, r, sdk.Inputs{Categories: ldptest.Cycle(ldptest.Labels(5)[:4], 60)}, k, func(c []int64, _ float64, y int) {
			bitmap := make([]byte, ldp.BitmapBytes(k))
			ldp.ColexSubset(bitmap, y, k, s)
			for v := range c {
				if ldp.HasBit(bitmap, v) {
					c[v] = 1
				}
			}
		}, nil)
	}
}
