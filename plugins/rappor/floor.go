package rappor

// Estimates without the shuffler's blanket draws (sdk.FloorEstimator).
//
// The blanket is a mixture (blanket.go): with weight w1 = (alpha - beta)
// q^d/gamma the all-ones output, else (weight w0 = beta/gamma) d
// independent Bernoulli(q) bits. A report supports bucket v when bit v is
// set, so a draw supports every bucket with probability
//
//	s = w1 + w0 q,
//
// and ldp.Pure.FloorItems takes D s out of each bit's count, adding
// D s (1 - s) to its variance (the draws are independent of each other;
// within one draw the bits are not, but each item's variance needs only
// its own bit). TestEstimateFloor checks it against the blanket of the
// declared matrix and Estimate of single reports
// (ldptest.CheckFloorEstimate); the conformance kit's floor check, the
// means and variances against known inputs mixed with real draws.

import (
	"context"

	"github.com/blanket-dp/blanket/sdk"
	"github.com/blanket-dp/blanket/sdk/ldp"
)

var _ sdk.FloorEstimator = (*Randomizer)(nil)

// drawSupport returns the probability at eps0 that a blanket draw has a
// given bit set (the same for every bit).
func (r *Randomizer) drawSupport(eps0 float64) float64 {
	allOnes, product := r.blanketWeights(eps0)
	return allOnes + product*r.probs(eps0).q
}

// EstimateFloor implements sdk.FloorEstimator: Estimate's items for the
// apps' reports, the draws' expected bits taken out and their variance
// added.
func (r *Randomizer) EstimateFloor(ctx context.Context, stat *sdk.Statistic) (*sdk.Estimate, error) {
	check := func(s *sdk.Statistic) error { return ldp.CheckStatistic(s, &r.desc, r.d, false) }
	return ldp.EstimateFloor(Name, stat, r.conf, check, func(s *sdk.Statistic, draws int64) ([]sdk.Item, error) {
		sd := r.drawSupport(s.Eps0)
		return r.Pure(s.Eps0).FloorItems(r.desc.Categories, s.Counts, s.N, draws, func(int) float64 { return sd }, r.conf), nil
	})
}
