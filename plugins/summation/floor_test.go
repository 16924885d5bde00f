package summation_test

import (
	"testing"

	"github.com/blanket-dp/blanket/plugins/summation"
	"github.com/blanket-dp/blanket/sdk"
	"github.com/blanket-dp/blanket/sdk/ldp/ldptest"
)

// TestEstimateFloor checks EstimateFloor (floor.go) against the blanket
// law of the declared matrix and the plugin's own Estimate of single
// reports (ldptest.CheckFloorEstimates), on a statistic of real reports
// and real draws, and exactly, variance included, with draws in exact
// proportion at eps0 = ln 2 and ln 4, where the blanket's are whole.
// An output is a level. The sum is checked, which is affine in the
// counts, where the mean is not (its value is checked with draws in
// exact proportion).
func TestEstimateFloor(t *testing.T) {
	for _, r := range []*summation.Randomizer{ldptest.Must(t, summation.New, summation.Options{Lo: -1, Hi: 3, K: 4, Rand: ldptest.Seeded(1)})} {
		ldptest.CheckFloorEstimates(t, r, sdk.Inputs{Reals: []float64{0, 1.3, 2.9}}, r.K()+1, func(c []int64, _ float64, y int) { c[y] = 1 }, []string{"sum"})
	}
}
