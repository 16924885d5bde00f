package ldp

// Estimates of a statistic that holds the shuffler's blanket draws
// (sdk.FloorEstimator, docs/accounting.md §13).
//
// A pure frequency protocol (Pure) estimates a value's count from its
// support count C, (C - n Q)/(P - Q). Of the n reports, D are draws of
// the blanket omega, independent of each other and of the apps' reports;
// a draw supports value i with probability s_i = omega(supports i). So
// the draws' support count is Binomial(D, s_i), with mean D s_i and
// variance D s_i (1 - s_i), and
//
//	(C - D s_i - (n - D) Q)/(P - Q)
//
// is unbiased for the count among the n - D apps' reports, with variance
// the apps' part (Pure.Variance at n - D) plus D s_i (1 - s_i)/(P - Q)^2.
// Norm-Sub projects onto the simplex of total n - D. With D = 0 this is
// Pure.Items exactly.

import (
	"fmt"

	"github.com/blanket-dp/blanket/sdk"
)

// CheckNoDraws returns nil for a statistic without draws, and for one
// with draws (Draws != 0) an error wrapping sdk.ErrBadStatistic that
// names EstimateFloor: Estimate refuses such a statistic
// (sdk.Statistic.Draws). CheckStatistic calls it; a randomizer that
// validates its statistics otherwise calls it from its Estimate.
func CheckNoDraws(s *sdk.Statistic) error {
	if s.Draws == 0 {
		return nil
	}
	return fmt.Errorf("%w: Draws = %d: that many of the statistic's reports are the shuffler's blanket draws; estimate it with EstimateFloor (sdk.FloorEstimator), which takes them out", sdk.ErrBadStatistic, s.Draws)
}

// EstimateFloor is sdk.FloorEstimator.EstimateFloor for the randomizer
// named plugin: it validates stat's Draws, 0 <= Draws <= N - 1 (at least
// one report of an app to estimate), checks the statistic without them
// with check (what its Estimate checks), and returns the estimate of the
// N - Draws apps' reports whose items are items(s, draws): s the
// statistic without its draws (its N counts them), draws their number.
// Errors wrap sdk.ErrBadStatistic, or are items'.
func EstimateFloor(plugin string, stat *sdk.Statistic, confidence float64, check func(*sdk.Statistic) error, items func(s *sdk.Statistic, draws int64) ([]sdk.Item, error)) (*sdk.Estimate, error) {
	if stat == nil {
		return nil, fmt.Errorf("%w: nil statistic", sdk.ErrBadStatistic)
	}
	draws := stat.Draws
	if draws < 0 || (draws > 0 && draws >= stat.N) {
		return nil, fmt.Errorf("%w: Draws = %d of N = %d reports, must be in [0, N-1]: at least one report of an app", sdk.ErrBadStatistic, draws, stat.N)
	}
	s := *stat
	s.Draws = 0
	if err := check(&s); err != nil {
		return nil, err
	}
	it, err := items(&s, draws)
	if err != nil {
		return nil, err
	}
	est := NewEstimate(plugin, &s, confidence, it)
	est.N -= draws
	return est, nil
}

// FloorItems is Items for n reports of which draws are draws of the
// blanket, a draw supporting label i with probability support[i] (see the
// top of the file): Value unbiased for the other n - draws reports,
// Variance with the draws' own, Post projected for n - draws reports.
func (p Pure) FloorItems(labels []string, counts []int64, n, draws int64, support func(i int) float64, confidence float64) []sdk.Item {
	return p.items(labels, counts, n, draws, support, confidence)
}
