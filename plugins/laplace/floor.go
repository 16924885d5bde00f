package laplace

// Estimates without the shuffler's blanket draws (sdk.FloorEstimator).
//
// The blanket is exactly the library's output law at the middle of the
// range, s = 1/2 (blanket.go): a draw is a report of the input (Lo +
// Hi)/2. Its grid index has mean m/2, so g·K over the n reports counts
// D/2 for the D draws on average, and g·K - D/2 is unbiased for the sum
// of the n - D apps' s_i; the sum of the apps' inputs is (n - D)·Lo +
// (Hi - Lo)·(g·K - D/2). Every report's noise, a draw's included, has the
// same variance g²·2u/(1-u)² (a draw is a report of a fixed input), so
// Var(sum) = n·(Hi-Lo)²·g²·2u/(1-u)², over all n reports. TestEstimateFloor
// checks it against Estimate: draws in symmetric pairs about the middle
// (exactly their expected contribution) must give the apps' estimate with
// one report's variance per draw added, and fresh draws vary as much
// (Monte Carlo); the conformance kit's floor check tests the means and
// variances against known inputs mixed with real draws (TestBuiltins).

import (
	"context"

	"github.com/blanket-dp/blanket/sdk"
	"github.com/blanket-dp/blanket/sdk/ldp"
)

var _ sdk.FloorEstimator = (*Randomizer)(nil)

// EstimateFloor implements sdk.FloorEstimator: Estimate's sum and mean of
// the apps' reports, the draws' expected middle of the range taken out.
func (r *Randomizer) EstimateFloor(ctx context.Context, stat *sdk.Statistic) (*sdk.Estimate, error) {
	return ldp.EstimateFloor(Name, stat, r.conf, r.checkStatistic, func(s *sdk.Statistic, draws int64) ([]sdk.Item, error) {
		return r.items(s, draws), nil
	})
}
