package olh

// Estimates without the shuffler's blanket draws (sdk.FloorEstimator).
//
// The blanket is uniform on the outputs (seed, y) (blanket.go): y is
// uniform on [0, g) and independent of the seed, so a draw supports bucket
// v (y = H_seed(v)) with probability exactly 1/g, whatever v and the
// family's collisions. ldp.Pure.FloorItems takes D/g out of each support
// count and adds D (1/g)(1 - 1/g) to its variance. TestEstimateFloor
// checks it against the blanket of the declared matrix and Estimate of
// single reports (exactly, variance included, with one draw of each
// output); the conformance kit's floor check, against known inputs mixed
// with real draws.

import (
	"context"
	"fmt"

	"github.com/blanket-dp/blanket/sdk"
	"github.com/blanket-dp/blanket/sdk/ldp"
)

var _ sdk.FloorEstimator = (*Randomizer)(nil)

// EstimateFloor implements sdk.FloorEstimator: Estimate's items for the
// apps' reports, the draws' expected 1/g per bucket taken out and their
// variance added.
func (r *Randomizer) EstimateFloor(ctx context.Context, stat *sdk.Statistic) (*sdk.Estimate, error) {
	check := func(s *sdk.Statistic) error { return ldp.CheckStatistic(s, &r.desc, r.d, false) }
	return ldp.EstimateFloor(Name, stat, r.conf, check, func(s *sdk.Statistic, draws int64) ([]sdk.Item, error) {
		f, err := r.Family(s.Eps0)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", sdk.ErrBadStatistic, err)
		}
		support := 1 / float64(f.G())
		return pure(s.Eps0, f).FloorItems(r.desc.Categories, s.Counts, s.N, draws, func(int) float64 { return support }, r.conf), nil
	})
}
