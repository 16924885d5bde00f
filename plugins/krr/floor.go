package krr

// Estimates without the shuffler's blanket draws (sdk.FloorEstimator).
//
// The k-RR blanket is uniform on the k buckets (blanket.go), so a draw
// supports each bucket with probability s = 1/k, and D draws add D/k to
// each support count on average, with variance D (1/k)(1 - 1/k)
// (ldp.Pure.FloorItems). In the estimate's units that is exactly 1/k of a
// report per bucket: (1/k - q*)/(p* - q*) = 1/k, since 1/k - q* =
// (e^eps0 - 1)/(k (e^eps0 + k - 1)). TestEstimateFloor checks it against
// the blanket of the declared matrix and Estimate of single reports
// (ldptest.CheckFloorEstimate); the conformance kit's floor check, the
// means and variances against known inputs mixed with real draws.

import (
	"context"

	"github.com/blanket-dp/blanket/sdk"
	"github.com/blanket-dp/blanket/sdk/ldp"
)

var _ sdk.FloorEstimator = (*Randomizer)(nil)

// drawSupport is the probability that a blanket draw supports a bucket.
func (r *Randomizer) drawSupport(int) float64 { return 1 / float64(r.k) }

// EstimateFloor implements sdk.FloorEstimator: Estimate's items for the
// apps' reports, the draws' expected 1/k per bucket taken out and their
// variance added.
func (r *Randomizer) EstimateFloor(ctx context.Context, stat *sdk.Statistic) (*sdk.Estimate, error) {
	check := func(s *sdk.Statistic) error { return ldp.CheckStatistic(s, &r.desc, r.k, true) }
	return ldp.EstimateFloor(Name, stat, r.conf, check, func(s *sdk.Statistic, draws int64) ([]sdk.Item, error) {
		return r.Pure(s.Eps0).FloorItems(r.desc.Categories, s.Counts, s.N, draws, r.drawSupport, r.conf), nil
	})
}
