package accountant

import (
	"errors"
	"fmt"
	"math"
	"slices"
)

// Calibration of one report: the largest total local budget eps0 whose
// certified upper bound meets a target (docs/accounting.md §7,
// "Calibration"). Horizons of several reports are calibrated in rounds.go.

// Calibrate returns the largest total local budget eps0 whose certified
// upper bound meets the target (eps, delta) at n users. The mechanism must
// depend on the budget (not a fixed declaration). With t.Rounds > 1 the
// target covers that many reports of one user, each shuffled in its own
// batch of t.N, composed through privacy loss distributions (Composition):
// eps0 is then the largest (to relative 2e-4) whose composition meets it.
func Calibrate(m Mechanism, t Target) (CalibrationResult, error) {
	if err := checkTarget(m, t); err != nil {
		return CalibrationResult{}, err
	}
	if t.Rounds > 1 {
		return calibrateRounds(m, t)
	}
	r, _, err := calibrateOne(m, t, true)
	return r, err
}

// checkTarget checks a calibration's mechanism and target.
func checkTarget(m Mechanism, t Target) error {
	if err := checkEps("target eps", t.Eps); err != nil {
		return err
	}
	if t.Eps == 0 {
		return argError("target eps", t.Eps, "> 0")
	}
	if err := checkDelta("target delta", t.Delta); err != nil {
		return err
	}
	if err := checkN(t.N); err != nil {
		return err
	}
	if e, ok := m.FixedEps0(); ok {
		return fmt.Errorf("%w: %s fixes eps0 = %g", ErrNotCalibratable, m, e)
	}
	if t.Rounds < 0 || t.Rounds > MaxRounds {
		return argError("rounds", t.Rounds, fmt.Sprintf("in [1, %d]", MaxRounds))
	}
	if err := checkFloor(t.N, t.Floor); err != nil {
		return err
	}
	if t.Floor > 0 {
		// Refuse up front a floor the mechanism has no sampled blanket
		// for: inside the search a refused budget only counts as not
		// proven.
		if d, err := m.Decompose(math.Max(t.Eps, 1)); err == nil {
			if err := checkFloorDecomposition(d, t.Floor, m.String()); err != nil {
				return err
			}
		}
	}
	return nil
}

// calibrateEps0 is Calibrate's eps0 alone. One report's stepDown then
// checks each eps0 by its upper bound only (epsilonBounds without the
// lower sets): the same eps0, bit for bit, without computing a lower
// bound nobody reads. The baselines and a horizon search's start use it.
func calibrateEps0(m Mechanism, t Target) (float64, error) {
	if t.Rounds > 1 {
		c, err := Calibrate(m, t)
		return c.Eps0, err
	}
	if err := checkTarget(m, t); err != nil {
		return 0, err
	}
	c, _, err := calibrateOneWith(m, t, true, false)
	return c.Eps0, err
}

// calibrateOne is Calibrate for one report (t checked), with the
// certificate in eps0 below when certEps0 is set (tests compare the two),
// and the number of lattice steps its refinement used.
func calibrateOne(m Mechanism, t Target, certEps0 bool) (CalibrationResult, int, error) {
	return calibrateOneWith(m, t, certEps0, true)
}

// calibrateOneWith is calibrateOne, whose result has the lower bound (and
// the certificate that ties it to the upper) only when withLower: the eps0
// and the upper bound are the same either way.
func calibrateOneWith(m Mechanism, t Target, certEps0, withLower bool) (CalibrationResult, int, error) {
	// evalAt returns the certified upper delta at the target eps for eps0,
	// whether some pair's lower estimate already exceeds the target at
	// eps/(1+certTol) (the tightness certificate), and whether a lattice
	// reached its cap.
	hRel := hRelStart
	evalAt := func(eps0 float64, wantLo bool) (hi float64, cert bool, capped bool, err error) {
		d, err := m.Decompose(eps0)
		if err != nil {
			return 0, false, false, err
		}
		if err := checkFloorDecomposition(d, t.Floor, m.String()); err != nil {
			return 0, false, false, err
		}
		his := make([]float64, len(d.Upper))
		certs := make([]bool, len(d.Upper))
		caps := make([]bool, len(d.Upper))
		parallelMap(len(d.Upper), func(i int) {
			if t.Floor > 0 {
				// The floor's strata (floor.go), to a relative accuracy
				// that narrows as the lattice would.
				f, rel := newFloorSolver(d.Upper[i], t.Floor, t.N), 0.05*hRel/hRelStart
				his[i] = f.bracket(t.Eps, rel, rel/2, 0).hi
				if wantLo {
					certs[i] = f.bracket(t.Eps/(1+certTol), rel, 0, 0).lo > t.Delta
				}
				return
			}
			b := evaluate(d.Upper[i], t.N, t.Eps, hRel, false)
			his[i], caps[i] = b.hi, b.capped
			if wantLo {
				c := evaluate(d.Upper[i], t.N, t.Eps/(1+certTol), hRel, true)
				certs[i] = c.lo > t.Delta
			}
		})
		for i := range his {
			hi = math.Max(hi, his[i])
			cert = cert || certs[i]
			capped = capped || caps[i]
		}
		return hi, cert, capped, nil
	}
	// The largest proven eps0 (largest.go): the probe is the certified
	// upper delta at the lattice step in force, g = log(delta_up/delta).
	// At eps0 <= target eps the local guarantee alone meets the target
	// (delta_up = 0), so the search starts there and doubles (2x+1, then
	// 2x) until the target fails; a budget the mechanism refuses is not
	// proven. The search's own proofs only steer: the eps0 returned is
	// proven by Epsilon in stepDown below.
	s := largest[struct{}]{
		probe: func(eps0 float64) (float64, struct{}, error) {
			var err error
			g := logDistance(func(eps0 float64) float64 {
				var hi float64
				hi, _, _, err = evalAt(eps0, false)
				return hi
			}, t.Delta)(eps0)
			return g, struct{}{}, err
		},
		outside: isOutsideDomain,
		floor:   1e-6,
		ceil:    MaxEps0,
		grow: func(x float64, step int) float64 {
			if step == 0 {
				return 2*x + 1
			}
			return 2 * x
		},
	}
	// A composition whose parts fix their own budgets cannot be evaluated
	// below the sum of those budgets: start at the smallest budget the
	// mechanism accepts when that is above the target eps. Composite
	// mechanisms whose local eps exceeds their budget start unproven and
	// the search halves.
	start, err := smallestAccepted(m, t.Eps)
	if err != nil {
		return CalibrationResult{}, 0, err
	}
	a, b, err := s.bracket(start)
	if errors.Is(err, errBelowFloor) {
		return CalibrationResult{}, 0, fmt.Errorf("%w: no eps0 meets eps = %g, delta = %g at n = %d", ErrUnreachable, t.Eps, t.Delta, t.N)
	} else if err != nil {
		return CalibrationResult{}, 0, err
	}
	// When b is a, everything up to MaxEps0 is proven: nothing to narrow,
	// and stepDown checks MaxEps0 against Epsilon like any other answer.
	eps0 := a.x
	lo, hi := a.x, b.x
	steps := 0
	for i := 0; i < maxRefine && lo < hi; i++ {
		steps++
		var fail float64
		if eps0, fail, err = s.narrowMirrored(lo, hi); err != nil {
			return CalibrationResult{}, 0, err
		}
		_, cert, capped, err := evalAt(eps0, true)
		if err != nil {
			return CalibrationResult{}, 0, err
		}
		if cert || capped {
			break
		}
		if certEps0 && t.Floor == 0 && fail > eps0 && fail-eps0 <= 2*rootTol*fail {
			// The certificate in eps0: where the pair's delta is flat in
			// eps (a point mass of the loss), no lower end at
			// eps/(1+certTol) exceeds delta, and the loop used to refine
			// to maxRefine or the cap, doubling the lattice each time
			// (krr:k=100, eps 4, delta 1e-10, n 1e7: 23 s), for the same
			// eps0. If the exact delta at the target eps already exceeds
			// it at the failed point just above eps0 (a pair's lower
			// end does), no lattice proves that point: finer lattices
			// could only prove budgets between the two, within twice the
			// search's tolerance. Only the search's steering changes;
			// stepDown below proves whatever it returns.
			above, err := deltaExceeds(m, fail, t, hRel)
			if err != nil {
				return CalibrationResult{}, 0, err
			}
			if above {
				break
			}
		}
		// A finer lattice lowers every upper bound: the answer can only
		// grow.
		hRel /= 2
		lo = eps0
	}
	// Epsilon's root finder reports the right end of an interval of
	// relative width rootTol, possibly on a coarser lattice: make sure that
	// what a user gets from Epsilon at the returned eps0 meets the target,
	// stepping eps0 down slightly when it does not.
	eps0, ach, ok, err := stepDown(eps0, 2*rootTol, func(eps0 float64) (EpsilonResult, bool, error) {
		d, err := m.Decompose(eps0)
		if err != nil {
			return EpsilonResult{}, false, err
		}
		var ach EpsilonResult
		if t.Floor > 0 {
			ach = floorEpsilonOf(d, t.N, t.Floor, t.Delta)
		} else {
			ach = epsilonBounds(d, t.N, t.Delta, withLower)
		}
		return ach, ach.Upper <= t.Eps, nil
	})
	if err != nil {
		return CalibrationResult{}, 0, err
	}
	if ok {
		return CalibrationResult{Eps0: eps0, Achieved: ach}, steps, nil
	}
	return CalibrationResult{}, 0, fmt.Errorf("%w: calibration did not settle for eps = %g, delta = %g at n = %d", ErrUnreachable, t.Eps, t.Delta, t.N)
}

// deltaExceeds reports whether at budget eps0 some candidate pair's lower
// end of delta at t.Eps (lattice step hRel) exceeds t.Delta: then the
// exact upper-bound quantity exceeds the target there, and no lattice
// proves eps0. A budget the mechanism refuses is reported as not exceeding.
func deltaExceeds(m Mechanism, eps0 float64, t Target, hRel float64) (bool, error) {
	d, err := m.Decompose(eps0)
	if isOutsideDomain(err) {
		return false, nil
	} else if err != nil {
		return false, err
	}
	return anyLowerAbove(d.Upper, t, hRel, t.Delta), nil
}

// anyLowerAbove reports whether some set's certified lower end of delta
// at t.Eps for t.N users (lattice step hRel) exceeds limit.
func anyLowerAbove(sets []AtomSet, t Target, hRel, limit float64) bool {
	above := make([]bool, len(sets))
	parallelMap(len(sets), func(i int) {
		above[i] = evaluate(sets[i], t.N, t.Eps, hRel, true).lo > limit
	})
	return slices.Contains(above, true)
}

// smallestAccepted returns x when m accepts the budget x, and otherwise
// (to 60 halvings) the smallest budget above it that m accepts, found by
// doubling to MaxEps0 and bisecting on Decompose alone.
func smallestAccepted(m Mechanism, x float64) (float64, error) {
	_, err := m.Decompose(x)
	if err == nil || !errors.Is(err, ErrInvalidArgument) {
		return x, err
	}
	refused := x
	for err != nil && errors.Is(err, ErrInvalidArgument) && x < MaxEps0 {
		refused = x
		x = math.Min(2*x, MaxEps0)
		_, err = m.Decompose(x)
	}
	if err != nil {
		return 0, err
	}
	a, b := refused, x
	for range 60 {
		mid := 0.5 * (a + b)
		if _, err := m.Decompose(mid); err != nil {
			a = mid
		} else {
			b = mid
		}
	}
	return b, nil
}
