package sdk

import (
	"fmt"
	"math"
)

// Statistic is the mergeable sufficient statistic of a set of reports: what
// the collector stores per metric and batch. Its meaning is plugin-specific
// (counts per output bucket, per bit, per level); its identity fields say
// which configuration and budget produced it.
type Statistic struct {
	// Plugin is the producing randomizer's Description.Name.
	Plugin string
	// Digest is the producing randomizer's Description.Digest.
	Digest string
	// Eps0 is the local budget the reports were produced at.
	Eps0 float64
	// N is the number of valid reports.
	N int64
	// Malformed is the number of reports that could not be decoded.
	Malformed int64
	// Counts are the plugin's counters; their length is fixed by the
	// configuration.
	Counts []int64
	// Draws is how many of the N valid reports are the shuffler's draws
	// of the randomizer's blanket at Eps0 (a plan's floor,
	// docs/accounting.md §13), not reports of apps. Accumulate leaves it
	// 0; the collector sets it from the batch. A statistic with draws is
	// estimated by FloorEstimator.EstimateFloor; Estimate refuses it.
	Draws int64
}

// Clone returns a deep copy of s.
func (s *Statistic) Clone() *Statistic {
	c := *s
	c.Counts = append([]int64(nil), s.Counts...)
	return &c
}

// Compatible returns nil when o was produced by the same plugin,
// configuration and eps0 as s, and an error wrapping ErrBadStatistic naming
// the first difference otherwise.
func (s *Statistic) Compatible(o *Statistic) error {
	switch {
	case o == nil:
		return fmt.Errorf("%w: nil statistic", ErrBadStatistic)
	case s.Plugin != o.Plugin:
		return fmt.Errorf("%w: plugin %q, want %q", ErrBadStatistic, o.Plugin, s.Plugin)
	case s.Digest != o.Digest:
		return fmt.Errorf("%w: configuration digest %q, want %q", ErrBadStatistic, o.Digest, s.Digest)
	case s.Eps0 != o.Eps0:
		return fmt.Errorf("%w: eps0 = %v, want %v", ErrBadStatistic, o.Eps0, s.Eps0)
	case len(s.Counts) != len(o.Counts):
		return fmt.Errorf("%w: %d counts, want %d", ErrBadStatistic, len(o.Counts), len(s.Counts))
	}
	return nil
}

// Merge adds the reports counted in o to s. It fails, leaving s unchanged,
// when o is not Compatible with s or when a counter would overflow.
func (s *Statistic) Merge(o *Statistic) error {
	if err := s.Compatible(o); err != nil {
		return err
	}
	add := func(a, b int64, what string) (int64, error) {
		if (b > 0 && a > math.MaxInt64-b) || (b < 0 && a < math.MinInt64-b) {
			return 0, fmt.Errorf("%w: %s overflows when merging", ErrBadStatistic, what)
		}
		return a + b, nil
	}
	n, err := add(s.N, o.N, "N")
	if err != nil {
		return err
	}
	bad, err := add(s.Malformed, o.Malformed, "Malformed")
	if err != nil {
		return err
	}
	counts := make([]int64, len(s.Counts))
	for i := range counts {
		if counts[i], err = add(s.Counts[i], o.Counts[i], fmt.Sprintf("count %d", i)); err != nil {
			return err
		}
	}
	draws, err := add(s.Draws, o.Draws, "Draws")
	if err != nil {
		return err
	}
	s.N, s.Malformed, s.Counts, s.Draws = n, bad, counts, draws
	return nil
}

// Estimate is the result of Randomizer.Estimate.
type Estimate struct {
	// Plugin is the estimating randomizer's name.
	Plugin string
	// Eps0 is the local budget of the reports.
	Eps0 float64
	// N is the number of valid reports the estimate is based on.
	N int64
	// Malformed is the number of reports dropped as malformed.
	Malformed int64
	// Confidence is the nominal coverage of the intervals, e.g. 0.95.
	Confidence float64
	// Items are the estimated quantities: one per category (the number of
	// reports whose input fell in it) for categorical randomizers, "sum" and
	// "mean" for real ones.
	Items []Item
}

// Item is one estimated quantity.
type Item struct {
	// Label names the quantity: a category, "sum" or "mean".
	Label string
	// Value is the unbiased estimate.
	Value float64
	// Variance is the estimated variance of Value.
	Variance float64
	// Lo and Hi are the normal-approximation confidence interval
	// Value ± z·sqrt(Variance) at the Estimate's Confidence.
	Lo, Hi float64
	// Post is the post-processed estimate: projected onto the feasible set
	// (counts: non-negative and summing to N; sums and means: clipped to the
	// range). Biased, but never infeasible.
	Post float64
	// PostLo and PostHi are an interval around Post within the feasible set;
	// see each plugin for how it is formed. Use Lo and Hi for inference.
	PostLo, PostHi float64
}
