package hadamard

// Estimates without the shuffler's blanket draws (sdk.FloorEstimator).
//
// The blanket is K-ary randomized response around output 0
// (blanket.go): omega(0) = e^eps0/(e^eps0 + K - 1), omega(y) =
// 1/(e^eps0 + K - 1) otherwise. A report supports bucket x when it lies
// in C_x, which holds output 0 and K/2 - 1 of the others (a row of a
// Hadamard matrix has K/2 entries +1, the first among them). So a draw
// supports every bucket with the same probability
//
//	s = (e^eps0 + K/2 - 1)/(e^eps0 + K - 1),
//
// and ldp.Pure.FloorItems takes D s out of each support count, adding
// D s (1 - s) to its variance. TestEstimateFloor checks it against the
// blanket of the declared matrix and Estimate of single reports
// (ldptest.CheckFloorEstimate); the conformance kit's floor check, the
// means and variances against known inputs mixed with real draws.

import (
	"context"
	"math"

	"github.com/blanket-dp/blanket/sdk"
	"github.com/blanket-dp/blanket/sdk/ldp"
)

var _ sdk.FloorEstimator = (*Randomizer)(nil)

// drawSupport returns the probability at eps0 that a blanket draw
// supports a bucket (the same for every bucket).
func (r *Randomizer) drawSupport(eps0 float64) float64 {
	e, kf := math.Exp(eps0), float64(r.kk)
	return (e + kf/2 - 1) / (e + kf - 1)
}

// EstimateFloor implements sdk.FloorEstimator: Estimate's items for the
// apps' reports, the draws' expected support taken out and their variance
// added.
func (r *Randomizer) EstimateFloor(ctx context.Context, stat *sdk.Statistic) (*sdk.Estimate, error) {
	check := func(s *sdk.Statistic) error { return ldp.CheckStatistic(s, &r.desc, r.kk, true) }
	return ldp.EstimateFloor(Name, stat, r.conf, check, func(s *sdk.Statistic, draws int64) ([]sdk.Item, error) {
		sd := r.drawSupport(s.Eps0)
		return r.Pure(s.Eps0).FloorItems(r.desc.Categories, r.support(s), s.N, draws, func(int) float64 { return sd }, r.conf), nil
	})
}
