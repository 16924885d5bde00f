package ksubset

// Estimates without the shuffler's blanket draws (sdk.FloorEstimator).
//
// The blanket is uniform on the s-subsets of the k buckets (blanket.go),
// so a draw holds each bucket with probability s/k. ldp.Pure.FloorItems
// takes D s/k out of each bucket's count and adds D (s/k)(1 - s/k) to its
// variance. TestEstimateFloor checks it against the blanket of the
// declared matrix and Estimate of single reports (exactly, variance
// included, with C(k, s) draws, one of each subset); the conformance
// kit's floor check, against known inputs mixed with real draws.

import (
	"context"

	"github.com/blanket-dp/blanket/sdk"
	"github.com/blanket-dp/blanket/sdk/ldp"
)

var _ sdk.FloorEstimator = (*Randomizer)(nil)

// EstimateFloor implements sdk.FloorEstimator: Estimate's items for the
// apps' reports, the draws' expected s/k per bucket taken out and their
// variance added.
func (r *Randomizer) EstimateFloor(ctx context.Context, stat *sdk.Statistic) (*sdk.Estimate, error) {
	support := float64(r.s) / float64(r.k)
	return ldp.EstimateFloor(Name, stat, r.conf, r.checkStatistic, func(s *sdk.Statistic, draws int64) ([]sdk.Item, error) {
		return r.Pure(s.Eps0).FloorItems(r.desc.Categories, s.Counts, s.N, draws, func(int) float64 { return support }, r.conf), nil
	})
}
