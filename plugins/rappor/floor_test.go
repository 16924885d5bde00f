package rappor_test

import (
	"context"
	"testing"

	"github.com/blanket-dp/blanket/accountant"
	"github.com/blanket-dp/blanket/plugins/rappor"
	"github.com/blanket-dp/blanket/sdk"
	"github.com/blanket-dp/blanket/sdk/ldp/ldptest"
)

// TestEstimateFloor checks EstimateFloor (floor.go) against the blanket
// law of the declared matrix and the plugin's own Estimate of single
// reports (ldptest.CheckFloorEstimate), on a statistic of real reports
// and real draws, at three eps0 (an output's index is its bits).
func TestEstimateFloor(t *testing.T) {
	ctx := context.Background()
	for _, r := range []*rappor.Randomizer{ldptest.Must(t, rappor.New, rappor.Options{Categories: ldptest.Labels(4), Rand: ldptest.Seeded(1)}), ldptest.Must(t, rappor.New, rappor.Options{Categories: ldptest.Labels(5), Mode: rappor.Optimized, Rand: ldptest.Seeded(2)})} {
		desc, _ := r.Describe(ctx)
		for _, eps0 := range []float64{0.5, 2, 6} {
			d, err := r.Declaration(eps0, accountant.FormMatrix)
			if err != nil {
				t.Fatal(err)
			}
			single := func(y int) *sdk.Statistic {
				s := &sdk.Statistic{Plugin: desc.Name, Digest: desc.Digest, Eps0: eps0, N: 1, Counts: make([]int64, len(desc.Categories))}
				for v := range s.Counts {
					s.Counts[v] = int64(y>>v) & 1
				}
				return s
			}
			reports, err := r.Randomize(ctx, eps0, sdk.Inputs{Categories: ldptest.Labels(4)[:3]})
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
			ldptest.CheckFloorEstimate(t, r, eps0, d.Matrix, single, base, 300, nil)
		}
	}
}
