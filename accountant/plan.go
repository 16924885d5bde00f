package accountant

import (
	"fmt"
	"math"
)

// Travel says how one user's metrics travel to the shuffler.
type Travel string

// The travel modes of a plan.
const (
	// TravelJoint sends one message carrying every metric: the plan's
	// mechanism is the joint composition, and the total local budget is
	// split among the metrics in proportion to their weights.
	TravelJoint Travel = "joint"
	// TravelParallel has each user report one metric, chosen at random with
	// probability proportional to its weight: the plan's mechanism is the
	// parallel composition, every metric gets the whole local budget.
	TravelParallel Travel = "parallel"
	// TravelSeparate sends one message per metric, each shuffled in its own
	// batch. The per-user guarantee is the basic composition across metrics:
	// the target (eps, delta) is split among the metrics in proportion to
	// their weights, and each metric's eps0 is calibrated to its share.
	TravelSeparate Travel = "separate"
)

// PlanMetric is one metric of a privacy plan.
type PlanMetric struct {
	// Name identifies the metric. Required.
	Name string
	// Mech is the metric's randomizer family. Required; it must depend on
	// the budget (not a fixed declaration).
	Mech Mechanism
	// Weight is the metric's share (see Travel). Defaults to 1.
	Weight float64
}

// PlanSpec is a privacy plan to calibrate.
type PlanSpec struct {
	// Eps and Delta are the per-user central target. Required.
	Eps, Delta float64
	// NMin is the smallest batch the shuffler releases. Required, >= 1.
	NMin int
	// Travel is how a user's metrics travel. Defaults to TravelSeparate.
	Travel Travel
	// Metrics are the plan's metrics. Required, at least one.
	Metrics []PlanMetric
}

// MetricBudget is the calibrated budget of one metric.
type MetricBudget struct {
	// Name is the metric's name.
	Name string
	// Eps0 is the metric's local budget.
	Eps0 float64
	// Weight is the normalised weight (shares sum to 1).
	Weight float64
	// Eps and Delta are the metric's share of the target (separate travel)
	// or the whole target (joint and parallel).
	Eps, Delta float64
}

// PlanResult is a calibrated plan.
type PlanResult struct {
	// Travel is the travel mode used.
	Travel Travel
	// Metrics holds one budget per metric, in the order given.
	Metrics []MetricBudget
	// Eps and Delta are the per-user guarantee the plan proves at NMin
	// (no larger than the target).
	Eps, Delta float64
	// Rule describes the allocation rule in one sentence.
	Rule string
}

// AllocatePlan sets every metric's eps0 so that the plan meets its target at
// batches of NMin reports. The rule: joint travel splits one calibrated total
// budget by weight; parallel travel calibrates one budget shared by every
// metric with selection probabilities proportional to weight; separate travel
// splits the target (eps, delta) by weight (basic composition) and calibrates
// each metric alone.
func AllocatePlan(spec PlanSpec) (*PlanResult, error) {
	if err := checkEps("plan eps", spec.Eps); err != nil {
		return nil, err
	}
	if spec.Eps == 0 {
		return nil, argError("plan eps", spec.Eps, "> 0")
	}
	if err := checkDelta("plan delta", spec.Delta); err != nil {
		return nil, err
	}
	if err := checkN(spec.NMin); err != nil {
		return nil, fmt.Errorf("plan n_min: %w", err)
	}
	if len(spec.Metrics) == 0 {
		return nil, argError("plan metrics", 0, "at least 1")
	}
	weights := make([]float64, len(spec.Metrics))
	parts := make([]Mechanism, len(spec.Metrics))
	var wsum float64
	for i, m := range spec.Metrics {
		if m.Name == "" {
			return nil, argError(fmt.Sprintf("plan metric %d name", i+1), `""`, "non-empty")
		}
		if m.Mech == nil {
			return nil, argError(fmt.Sprintf("plan metric %q mechanism", m.Name), nil, "set")
		}
		if _, fixed := m.Mech.FixedEps0(); fixed {
			return nil, fmt.Errorf("%w: plan metric %q: %s fixes its own eps0", ErrNotCalibratable, m.Name, m.Mech)
		}
		w := m.Weight
		if w == 0 {
			w = 1
		}
		if math.IsNaN(w) || math.IsInf(w, 0) || w < 0 {
			return nil, argError(fmt.Sprintf("plan metric %q weight", m.Name), m.Weight, "finite and > 0")
		}
		weights[i], parts[i] = w, m.Mech
		wsum += w
	}
	for i := range weights {
		weights[i] /= wsum
	}
	travel := spec.Travel
	if travel == "" {
		travel = TravelSeparate
	}
	res := &PlanResult{Travel: travel}
	target := Target{Eps: spec.Eps, Delta: spec.Delta, N: spec.NMin}
	switch travel {
	case TravelJoint:
		c, err := Calibrate(JointMech{Parts: parts, Weights: weights}, target)
		if err != nil {
			return nil, fmt.Errorf("plan: %w", err)
		}
		for i, m := range spec.Metrics {
			res.Metrics = append(res.Metrics, MetricBudget{Name: m.Name, Eps0: c.Eps0 * weights[i], Weight: weights[i], Eps: spec.Eps, Delta: spec.Delta})
		}
		res.Eps, res.Delta = c.Achieved.Upper, spec.Delta
		res.Rule = "one message carries every metric; the calibrated total budget is split in proportion to the weights"
	case TravelParallel:
		c, err := Calibrate(ParallelMech{Weights: weights, Parts: parts}, target)
		if err != nil {
			return nil, fmt.Errorf("plan: %w", err)
		}
		for i, m := range spec.Metrics {
			res.Metrics = append(res.Metrics, MetricBudget{Name: m.Name, Eps0: c.Eps0, Weight: weights[i], Eps: spec.Eps, Delta: spec.Delta})
		}
		res.Eps, res.Delta = c.Achieved.Upper, spec.Delta
		res.Rule = "each user reports one metric chosen with probability proportional to its weight; every metric gets the calibrated budget"
	case TravelSeparate:
		res.Metrics = make([]MetricBudget, len(spec.Metrics))
		errs := make([]error, len(spec.Metrics))
		parallelMap(len(spec.Metrics), func(i int) {
			t := Target{Eps: spec.Eps * weights[i], Delta: spec.Delta * weights[i], N: spec.NMin}
			c, err := Calibrate(parts[i], t)
			if err != nil {
				errs[i] = fmt.Errorf("plan metric %q: %w", spec.Metrics[i].Name, err)
				return
			}
			res.Metrics[i] = MetricBudget{Name: spec.Metrics[i].Name, Eps0: c.Eps0, Weight: weights[i], Eps: c.Achieved.Upper, Delta: t.Delta}
		})
		for _, err := range errs {
			if err != nil {
				return nil, err
			}
		}
		for _, m := range res.Metrics {
			res.Eps += m.Eps
			res.Delta += m.Delta
		}
		res.Rule = "one message per metric; the target (eps, delta) is split in proportion to the weights (basic composition) and each metric is calibrated to its share"
	default:
		return nil, argError("plan travel", string(travel), `"joint", "parallel" or "separate"`)
	}
	return res, nil
}
