package accountant

import (
	"errors"
	"fmt"
	"math"
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
	// Rounds is the horizon: the number of periods the target covers, in
	// each of which a user sends one report per metric (separate travel) or
	// one message (joint, parallel), each in its own batch of at least
	// NMin. Defaults to 1.
	Rounds int
}

// MetricBudget is the calibrated budget of one metric.
type MetricBudget struct {
	// Name is the metric's name.
	Name string
	// Eps0 is the metric's local budget.
	Eps0 float64
	// Weight is the normalised weight (shares sum to 1).
	Weight float64
	// Eps and Delta are the single-report guarantee of one batch of this
	// metric at NMin, labelled as the metric's own: with separate travel
	// Delta is the metric's weight share of the target delta and Eps the
	// single-report eps there; with joint and parallel travel they are the
	// whole target. The per-user guarantee is PlanResult's.
	Eps, Delta float64
}

// PlanResult is a calibrated plan.
type PlanResult struct {
	// Travel is the travel mode used.
	Travel Travel
	// Metrics holds one budget per metric, in the order given.
	Metrics []MetricBudget
	// Eps and Delta are the per-user guarantee the plan proves at NMin
	// over Rounds periods, across all metrics (no larger than the target).
	Eps, Delta float64
	// Rounds is the horizon the guarantee covers.
	Rounds int
	// Rule describes the allocation rule in one sentence.
	Rule string
}

// AllocatePlan sets every metric's eps0 so that the plan meets its target,
// per user over Rounds periods, at batches of NMin reports. The rule: joint
// travel splits one calibrated total budget by weight; parallel travel
// calibrates one budget shared by every metric with selection
// probabilities proportional to weight; in both, the calibration composes
// the Rounds messages of a user (Calibrate with Target.Rounds).
//
// Separate travel starts from the linear split of one period: metric i
// alone calibrated to (w_i eps, w_i delta), which with one round meets the
// target by basic composition. Every metric's eps0 is then that base budget
// times one common factor s (capped at MaxEps0), s the largest (to relative
// 1e-3) for which the composition of all reports of all metrics over Rounds
// periods meets the target. The rule is monotone: a larger target, a larger
// NMin or fewer rounds never lower any metric's eps0 (each base budget
// grows, and so does the feasible set of s). With one round s >= 1, so no
// metric gets less than the linear split gives it; over a longer horizon
// s < 1 shares the reduction in proportion.
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
	long := make([]bool, len(parts))
	for i, m := range parts {
		ok, err := IsLongitudinal(m)
		if err != nil {
			return nil, fmt.Errorf("plan metric %q: %w", spec.Metrics[i].Name, err)
		}
		if ok && travel != TravelSeparate {
			return nil, fmt.Errorf("%w: plan metric %q is a longitudinal tree protocol, which reports only at its nodes' ends: it needs separate travel, not %s", ErrLongitudinal, spec.Metrics[i].Name, travel)
		}
		long[i] = ok
	}
	rounds := spec.Rounds
	if rounds == 0 {
		rounds = 1
	}
	if rounds < 1 || rounds > MaxRounds {
		return nil, argError("plan rounds", spec.Rounds, fmt.Sprintf("in [1, %d]", MaxRounds))
	}
	res := &PlanResult{Travel: travel, Rounds: rounds}
	target := Target{Eps: spec.Eps, Delta: spec.Delta, N: spec.NMin, Rounds: rounds}
	// One report: the single-report engine. Several: the horizon search,
	// whose own PLDs prove the guarantee (no second, full query).
	calibrate := Calibrate
	if rounds > 1 {
		calibrate = calibrateUpperRounds // the arguments are checked above
	}
	switch travel {
	case TravelJoint:
		c, err := calibrate(JointMech{Parts: parts, Weights: weights}, target)
		if err != nil {
			return nil, fmt.Errorf("plan: %w", err)
		}
		for i, m := range spec.Metrics {
			res.Metrics = append(res.Metrics, MetricBudget{Name: m.Name, Eps0: c.Eps0 * weights[i], Weight: weights[i], Eps: spec.Eps, Delta: spec.Delta})
		}
		res.Eps, res.Delta = c.Achieved.Upper, spec.Delta
		res.Rule = "one message carries every metric; the calibrated total budget is split in proportion to the weights"
	case TravelParallel:
		c, err := calibrate(ParallelMech{Weights: weights, Parts: parts}, target)
		if err != nil {
			return nil, fmt.Errorf("plan: %w", err)
		}
		for i, m := range spec.Metrics {
			res.Metrics = append(res.Metrics, MetricBudget{Name: m.Name, Eps0: c.Eps0, Weight: weights[i], Eps: spec.Eps, Delta: spec.Delta})
		}
		res.Eps, res.Delta = c.Achieved.Upper, spec.Delta
		res.Rule = "each user reports one metric chosen with probability proportional to its weight; every metric gets the calibrated budget"
	case TravelSeparate:
		if err := allocateSeparate(spec, weights, parts, long, rounds, res); err != nil {
			return nil, err
		}
	default:
		return nil, argError("plan travel", string(travel), `"joint", "parallel" or "separate"`)
	}
	return res, nil
}

// allocateSeparate is the separate-travel rule of AllocatePlan.
//
// A longitudinal metric (IsLongitudinal) enters with the part of its
// per-period bound (Longitudinal: its node pairs among the level-mates a
// batch of NMin holds but for a tail of probability at most 5% of its
// delta share, which the composition's delta pays) instead of one
// independent report per period, and its base budget is calibrated with
// CalibrateLongitudinal.
func allocateSeparate(spec PlanSpec, weights []float64, parts []Mechanism, long []bool, rounds int, res *PlanResult) error {
	base := make([]float64, len(parts))
	errs := make([]error, len(parts))
	parallelMap(len(parts), func(i int) {
		t := Target{Eps: spec.Eps * weights[i], Delta: spec.Delta * weights[i], N: spec.NMin}
		cal := Calibrate
		if long[i] {
			cal = CalibrateLongitudinal
		}
		c, err := cal(parts[i], t)
		if err != nil {
			errs[i] = fmt.Errorf("plan metric %q: %w", spec.Metrics[i].Name, err)
			return
		}
		base[i] = c.Eps0
	})
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	// The level-mates of each longitudinal metric, and the delta their
	// tails take: the composition is checked at the rest.
	mates := make([]int, len(parts))
	var tails float64
	for i := range parts {
		if !long[i] {
			continue
		}
		l, _, err := longitudinalOf(parts[i], base[i])
		if err != nil {
			return fmt.Errorf("plan metric %q: %w", spec.Metrics[i].Name, err)
		}
		l.Batch, l.Periods = spec.NMin, rounds
		var tail float64
		mates[i], tail = l.inferMates(longitudinalTailShare * spec.Delta * weights[i])
		tails += tail
	}
	delta := spec.Delta - tails
	compose := func(s float64) (*Composition, error) {
		ps := make([]Part, len(parts))
		for i := range parts {
			eps0 := math.Min(s*base[i], MaxEps0)
			if !long[i] {
				ps[i] = Part{Mech: parts[i], Eps0: eps0, N: spec.NMin, Rounds: rounds}
				continue
			}
			l, _, err := longitudinalOf(parts[i], eps0)
			if err != nil {
				return nil, fmt.Errorf("plan metric %q: %w", spec.Metrics[i].Name, err)
			}
			l.Periods = rounds
			if ps[i], err = l.nodePart(mates[i], l.windowRounds()); err != nil {
				return nil, fmt.Errorf("plan metric %q: %w", spec.Metrics[i].Name, err)
			}
		}
		return NewComposition(ps...)
	}
	// The largest proven factor (largest.go): g(s) = log(delta_up(eps)/delta)
	// of the composition at factor s, from its pessimistic PLDs at
	// refinement 0. g(s) <= 0 proves the target at s (the PLDs dominate the
	// composition: pld.go); the eps of the factor returned is read off the
	// same PLDs.
	maxS := 1.0
	for _, b := range base {
		maxS = math.Max(maxS, MaxEps0/b)
	}
	search := largest[func() float64]{
		probe: func(s float64) (float64, func() float64, error) {
			c, err := compose(s)
			if err != nil {
				return 0, nil, err
			}
			if le := c.LocalEps(); le <= spec.Eps {
				return math.Inf(-1), func() float64 { return le }, nil
			}
			up := c.plds(delta, 0, true).upper
			d := composedDelta(up, spec.Eps, true)
			proof := func() float64 { return math.Min(epsUpperOf(up, delta, spec.Eps), spec.Eps) }
			if d <= 0 {
				return math.Inf(-1), proof, nil
			}
			return math.Log(d / delta), proof, nil
		},
		// Shrink (halving) down to 1e-9. With one round never below the
		// linear split s = 1: it is proven by basic composition of the
		// metrics' single-report guarantees, and any smaller factor is not
		// needed (when the PLD bound misses the target at s = 1, every
		// larger factor misses it too: the bound grows with s).
		floor: 1e-9,
		ceil:  maxS,
		// Grow by factors 1.25, 1.25, 1.25^2, 1.25^4, ...: the answer is
		// usually close to s = 1, and a large eps0 is the costliest to
		// account.
		grow: func(s float64, step int) float64 {
			f := 1.25
			for i := 1; i < step; i++ {
				f *= f
			}
			return f * s
		},
		tol: calTol,
	}
	if rounds == 1 {
		search.floor = 1
	}
	s, proof, err := search.run(1)
	var ach float64
	switch {
	case err == nil:
		ach = proof()
	case errors.Is(err, errBelowFloor) && rounds == 1:
		// The PLD bound at s = 1 missed the target: the full query (finer
		// grids) may still prove it, and otherwise basic composition of
		// the linear split does.
		s = 1
		c, err := compose(s)
		if err != nil {
			return fmt.Errorf("plan: %w", err)
		}
		r, err := c.Epsilon(delta)
		if err != nil {
			return fmt.Errorf("plan: %w", err)
		}
		ach = r.Upper
	case errors.Is(err, errBelowFloor):
		return fmt.Errorf("%w: plan: no common budget factor meets eps = %g, delta = %g over %d rounds", ErrUnreachable, spec.Eps, spec.Delta, rounds)
	default:
		return fmt.Errorf("plan: %w", err)
	}
	res.Metrics = make([]MetricBudget, len(parts))
	var linEps, linDelta float64
	parallelMap(len(parts), func(i int) {
		eps0 := math.Min(s*base[i], MaxEps0)
		share := spec.Delta * weights[i]
		var e float64
		if long[i] {
			r, err := LongitudinalEpsilon(parts[i], eps0, spec.NMin, 1, share)
			if err != nil {
				errs[i] = fmt.Errorf("plan metric %q: %w", spec.Metrics[i].Name, err)
			}
			e = r.Upper
		} else if d, err := parts[i].Decompose(eps0); err == nil {
			e = epsilonOf(d, spec.NMin, share).Upper
		} else {
			errs[i] = fmt.Errorf("plan metric %q: %w", spec.Metrics[i].Name, err)
		}
		res.Metrics[i] = MetricBudget{Name: spec.Metrics[i].Name, Eps0: eps0, Weight: weights[i], Eps: e, Delta: share}
	})
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	// Basic composition of the metrics' single-report guarantees, summed
	// rounding upward.
	for _, m := range res.Metrics {
		linEps = math.Nextafter(linEps+m.Eps, math.Inf(1))
		linDelta = math.Nextafter(linDelta+m.Delta, math.Inf(1))
	}
	res.Rule = fmt.Sprintf("one message per metric per period; each metric's eps0 is its one-period linear-split budget (calibrated alone to weight*(eps, delta)) times one common factor %.4g, the largest for which the composition of all metrics' reports over %d period(s) meets the target", s, rounds)
	switch {
	case ach <= spec.Eps:
		res.Eps, res.Delta = ach, spec.Delta
	case rounds == 1:
		// s = 1 and the composition's bound misses the target: the linear
		// split's basic composition is the proof.
		res.Eps, res.Delta = linEps, linDelta
		res.Rule = "one message per metric per period; each metric's eps0 is its linear-split budget (calibrated alone to weight*(eps, delta)); the guarantee is their basic composition"
	default:
		return fmt.Errorf("%w: plan: the composition over %d rounds did not settle below eps = %g", ErrUnreachable, rounds, spec.Eps)
	}
	return nil
}
