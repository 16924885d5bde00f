package olh

import (
	"testing"

	"github.com/blanket-dp/blanket/sdk"
	"github.com/blanket-dp/blanket/sdk/ldp/ldptest"
)

// TestEstimateFloor checks EstimateFloor (floor.go) against the blanket
// law of the declared matrix, whose output seed·g + y is checked against
// the definition by TestDeclarationMatchesEnumeration, and the plugin's
// own Estimate of single reports (ldptest.CheckFloorEstimates): a report
// (seed, y) supports bucket v when H_seed(v) = y. Neither uses floor.go's
// 1/g, so a draw's support, its mean and variance in each bucket, is
// counted over the outputs. The blanket is uniform on the outputs, so at
// eps0 = ln 2 and ln 4 it has whole proportions and the variance is
// checked exactly too.
func TestEstimateFloor(t *testing.T) {
	for _, r := range []*Randomizer{
		mustNew(t, Options{Categories: labels(3), Other: "other", Rand: seeded(1)}),
		mustNew(t, Options{Categories: labels(5), Rand: seeded(2)}),
	} {
		ldptest.CheckFloorEstimates(t, r, sdk.Inputs{Categories: ldptest.Cycle(labels(3), 60)}, r.D(), func(c []int64, eps0 float64, y int) {
			f, err := r.Family(eps0)
			if err != nil {
				t.Fatal(err)
			}
			seed, h := uint64(y/f.G()), y%f.G()
			for v := range c {
				if f.Hash(seed, v) == h {
					c[v] = 1
				}
			}
		}, nil)
	}
}
