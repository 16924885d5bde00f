package summation_test

import (
	"context"
	"testing"

	"github.com/blanket-dp/blanket/accountant"
	"github.com/blanket-dp/blanket/plugins/summation"
	"github.com/blanket-dp/blanket/sdk"
	"github.com/blanket-dp/blanket/sdk/ldp/ldptest"
)

// TestEstimateFloor checks EstimateFloor (floor.go) against the blanket
// law of the declared matrix and the plugin's own Estimate of single
// reports (ldptest.CheckFloorEstimate), on a statistic of real reports
// and real draws, at three eps0 (an output is a level; the sum, which is
// affine in the counts, where the mean is not).
func TestEstimateFloor(t *testing.T) {
	ctx := context.Background()
	for _, r := range []*summation.Randomizer{ldptest.Must(t, summation.New, summation.Options{Lo: -1, Hi: 3, K: 4, Rand: ldptest.Seeded(1)})} {
		desc, _ := r.Describe(ctx)
		for _, eps0 := range []float64{0.5, 2, 6} {
			d, err := r.Declaration(eps0, accountant.FormMatrix)
			if err != nil {
				t.Fatal(err)
			}
			single := func(y int) *sdk.Statistic {
				s := &sdk.Statistic{Plugin: desc.Name, Digest: desc.Digest, Eps0: eps0, N: 1, Counts: make([]int64, r.K()+1)}
				s.Counts[y] = 1
				return s
			}
			reports, err := r.Randomize(ctx, eps0, sdk.Inputs{Reals: []float64{0, 1.3, 2.9}})
			if err != nil {
				t.Fatal(err)
			}
			draws, err := r.SampleBlanket(ctx, eps0, 300)
			if err != nil {
				t.Fatal(err)
			}
			base, err := r.Accumulate(ctx, eps0, append(reports, draws...))
			if err != nil {
				t.Fatal(err)
			}
			ldptest.CheckFloorEstimate(t, r, eps0, d.Matrix, single, base, 300, []string{"sum"})
		}
	}
}
