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
	"fmt"

	"github.com/blanket-dp/blanket/sdk"
	"github.com/blanket-dp/blanket/sdk/ldp"
)

var _ sdk.FloorEstimator = (*Randomizer)(nil)

// EstimateFloor implements sdk.FloorEstimator: Estimate's items for the
// apps' reports, the draws' expected s/k per bucket taken out and their
// variance added.
func (r *Randomizer) EstimateFloor(ctx context.Context, stat *sdk.Statistic) (*sdk.Estimate, error) {
	st, draws, err := ldp.SplitDraws(stat)
	if err != nil {
		return nil, err
	}
	if err := ldp.CheckStatistic(st, &r.desc, r.k, false); err != nil {
		return nil, err
	}
	var sum int64
	for _, c := range st.Counts {
		sum += c
	}
	if sum != int64(r.s)*st.N {
		return nil, fmt.Errorf("%w: counts sum to %d, want s·N = %d·%d (every report holds s buckets)", sdk.ErrBadStatistic, sum, r.s, st.N)
	}
	support := float64(r.s) / float64(r.k)
	items := r.Pure(st.Eps0).FloorItems(r.desc.Categories, st.Counts, st.N, draws, func(int) float64 { return support }, r.conf)
	return ldp.FloorEstimate(ldp.NewEstimate(Name, st, r.conf, items), draws), nil
}
