package accountant

// The largest proven x: the one search behind every calibration. Calibrate
// (one report), searchRounds (a horizon of reports), CalibrateLongitudinal
// (the tree protocol over a window) and allocateSeparate (the plan's
// common budget factor) each look for the largest x, a local budget eps0 or
// a factor on every metric's budget, at which a target (eps, delta) is
// proven, and each uses this search (docs/accounting.md §7).
//
// Proof sketch.
//
//  1. The probe. At x a caller's probe runs one of the accountant's upper
//     bounds and answers g(x): g <= 0 when that bound meets the target, a
//     proof at x, and then what the proof states (the eps it gives); g > 0
//     (or NaN, read as +Inf) when it does not. g is a signed distance
//     (log(delta_up/delta) for a delta bound) that only guides
//     interpolation: -Inf is a proof with no distance to offer.
//  2. Soundness of run. run returns x only when the probe answered
//     g(x) <= 0 at that very float64 x during this search, together with
//     the statement the probe made then (proven; a later failure at the
//     same x does not erase a proof made). Nothing in bracketing,
//     interpolation or tolerances enters the guarantee: a poor step can
//     only return a smaller x, never an unproven one, and run checks the
//     table before it returns. This needs nothing of g (not monotonicity,
//     not determinism: parallel sums vary in their last digits, and the
//     proof kept is the one made).
//  3. Calibrate does not use run's table: it narrows with narrowMirrored
//     at ever finer lattices, whose answer may be the bracket's lower end
//     unproven at the lattice then in force, and its guarantee comes from
//     stepDown, which returns only a budget at which Epsilon itself meets
//     the target, with Epsilon's result. Its search only steers.
//  4. Errors. Where a caller says so (outside: Calibrate and
//     CalibrateLongitudinal), a probe error that says x is outside the
//     mechanism's domain (ErrInvalidArgument, e.g. a plugin refusing a
//     budget) counts as "not proven at x"; any other error, and every
//     error for the other callers, makes the search return it (run and
//     bracket at once; narrowMirrored once its root finder has finished).
//     No x is proven by an error.
//  5. Optimality, not soundness. Where the bound grows with x (a larger
//     budget means less noise), the proven x form an interval. bracket
//     finds a proven a and an unproven b > a (or proves up to the
//     ceiling); narrowing keeps a proven and b unproven while it shrinks
//     b - a below tol·b, so the x returned is within relative tol of the
//     largest proven one.
//  6. Skipped probes (fails). Where the search halves from an unproven
//     start, only the sign of g matters at every point but the last
//     unproven one, b, whose g steers the narrowing. A caller may give a
//     cheap certificate that the probe fails at x (a lower bound on the
//     quantity the probe bounds from above exceeds the target: the probe
//     of a sound bound cannot prove x). bracket then skips the probe at
//     such x and probes only the point that turns out to be b, once a
//     proof below it is found, so a and b (x and g) are those the search
//     finds without the certificate, and so is everything after, given a
//     deterministic probe (the horizon probe is: its memos key on every
//     argument's bits, review 65): a horizon calibration's first probe,
//     far above its answer, was most of its time. A certificate enters no
//     guarantee (point 2): a wrong "fails" would only skip a provable x,
//     and an error the skipped probe would have raised is not seen. When
//     the skipped b proves after all, the certificate is wrong (a
//     plugin's lower-bound triple above its own pairs, which validation
//     cannot see): bracket drops it and searches again from x0 as
//     without it, keeping the proofs made.
//
// Two narrowing rules exist: regula falsi on g with the Illinois
// modification (illinoisFeasible, for the PLD searches and, with g = -Inf
// at every proof, plain bisection for the tree protocol), and Calibrate's,
// the bracketing root finder Epsilon uses (rootBracketLog) run in the
// mirrored coordinate lo + hi - x. They are kept apart because they land on
// different proven points within their tolerances, and every calibrated
// figure the project publishes comes from one of them; so are each
// caller's start, growth rule and floor (TestCalibrationFiguresPinned).

import (
	"errors"
	"fmt"
	"math"
)

// largest is one search for the largest proven x.
type largest[P any] struct {
	// probe evaluates x (point 1): g <= 0 proves the target at x, and
	// proof is what the proof states.
	probe func(x float64) (g float64, proof P, err error)
	// outside reports whether a probe error means only that x is outside
	// the mechanism's domain (point 4); nil: every error ends the search.
	outside func(error) bool
	// floor is the smallest x tried when shrinking: a halving that would
	// go below it ends the search with errBelowFloor.
	floor float64
	// ceil is the largest x tried when growing.
	ceil float64
	// grow returns the x to try after a proven x at the step-th growth
	// (0, 1, ...); nil means none (the start is the largest x tried).
	grow func(x float64, step int) float64
	// tol is the relative width at which narrowing stops.
	tol float64
	// fails, when set, certifies cheaply that the probe does not prove x
	// (point 6); false means only "not certified". nil: no certificate.
	fails func(x float64) bool

	proven map[float64]P
}

// probed is x with the probe's answer g(x).
type probed struct{ x, g float64 }

// errContradicted says that a probe proved a point its certificate said
// it fails (point 6).
var errContradicted = errors.New("accountant: a probe proved a point certified to fail")

// errBelowFloor says that the search halved down to its floor without a
// proof.
var errBelowFloor = errors.New("accountant: no proven x above the search's floor")

// eval probes x and keeps the proof when the probe proves the target.
func (s *largest[P]) eval(x float64) (float64, error) {
	g, p, err := s.probe(x)
	if err != nil {
		if s.outside != nil && s.outside(err) {
			return math.Inf(1), nil
		}
		return 0, err
	}
	if math.IsNaN(g) {
		return math.Inf(1), nil // not a proof
	}
	if g <= 0 {
		if s.proven == nil {
			s.proven = map[float64]P{}
		}
		s.proven[x] = p
	}
	return g, nil
}

// proof returns what the probe proved at x, if it proved the target there.
func (s *largest[P]) proof(x float64) (P, bool) {
	p, ok := s.proven[x]
	return p, ok
}

// bracket returns a proven a and an unproven b > a around the largest
// proven x, starting at x0: from an unproven x0 it halves until a proof
// (b is the last unproven point), from a proven one it grows by s.grow
// until a failure. When everything tried up to the ceiling is proven, b
// is a (then a.x is the ceiling, or x0 when s.grow is nil).
func (s *largest[P]) bracket(x0 float64) (a, b probed, err error) {
	if s.fails != nil && s.fails(x0) {
		a, b, err = s.halveCertified(x0)
		if !errors.Is(err, errContradicted) {
			return a, b, err
		}
		// The certificate is wrong (point 6): search as without it.
		s.fails = nil
	}
	g, err := s.eval(x0)
	if err != nil {
		return probed{}, probed{}, err
	}
	a = probed{x0, g}
	if a.g > 0 {
		for a.g > 0 {
			b = a
			x := a.x / 2
			if !(x >= s.floor) {
				return probed{}, probed{}, errBelowFloor
			}
			if g, err = s.eval(x); err != nil {
				return probed{}, probed{}, err
			}
			a = probed{x, g}
		}
		return a, b, nil
	}
	for step := 0; s.grow != nil && a.x < s.ceil; step++ {
		x := math.Min(s.grow(a.x, step), s.ceil)
		if !(x > a.x) {
			return probed{}, probed{}, fmt.Errorf("accountant: internal error: the search's growth rule went from %g to %g", a.x, x)
		}
		if g, err = s.eval(x); err != nil {
			return probed{}, probed{}, err
		}
		if g > 0 {
			return a, probed{x, g}, nil
		}
		a = probed{x, g}
	}
	return a, a, nil
}

// halveCertified is bracket's halving from an x0 certified to fail (point
// 6): it halves as bracket does, probing only the points the certificate
// does not settle, until a proof, then probes the last failing point when
// it was skipped. The points probed at the end, and so a and b, are those
// of bracket without the certificate.
func (s *largest[P]) halveCertified(x0 float64) (a, b probed, err error) {
	b = probed{x0, math.NaN()} // g not probed
	for {
		x := b.x / 2
		if !(x >= s.floor) {
			return probed{}, probed{}, errBelowFloor
		}
		if s.fails(x) {
			b = probed{x, math.NaN()}
			continue
		}
		g, err := s.eval(x)
		if err != nil {
			return probed{}, probed{}, err
		}
		if g > 0 {
			b = probed{x, g}
			continue
		}
		a = probed{x, g}
		break
	}
	if math.IsNaN(b.g) {
		if b.g, err = s.eval(b.x); err != nil {
			return probed{}, probed{}, err
		}
		if !(b.g > 0) {
			return probed{}, probed{}, errContradicted
		}
	}
	return a, b, nil
}

// run brackets from x0, narrows by illinoisFeasible, and returns the x
// found with the probe's proof there.
func (s *largest[P]) run(x0 float64) (float64, P, error) {
	var zero P
	a, b, err := s.bracket(x0)
	if err != nil {
		return 0, zero, err
	}
	x := a.x
	if b.g > 0 {
		if x, err = s.illinoisFeasible(a, b); err != nil {
			return 0, zero, err
		}
	}
	p, ok := s.proof(x)
	if !ok {
		// Unreachable by point 2; kept so that a future change cannot
		// return an unproven x silently.
		return 0, zero, fmt.Errorf("accountant: internal error: the search ended at an unproven x = %g", x)
	}
	return x, p, nil
}

// illinoisFeasible returns the proven end of a bracket [a, b] with
// g(a) <= 0 < g(b), shrunk to relative width s.tol by regula falsi with the
// Illinois modification (the value at an end kept twice in a row is
// halved), each step kept inside the middle 96% of the bracket. g(a) may be
// -Inf (bisection then).
func (s *largest[P]) illinoisFeasible(a, b probed) (float64, error) {
	kept := 0 // +1: b was kept last step, -1: a was kept
	for i := 0; i < 100 && b.x-a.x > s.tol*b.x; i++ {
		x := 0.5 * (a.x + b.x)
		if !math.IsInf(a.g, -1) {
			x = a.x + (b.x-a.x)*a.g/(a.g-b.g)
			w := b.x - a.x
			x = math.Min(math.Max(x, a.x+0.02*w), b.x-0.02*w)
		}
		gx, err := s.eval(x)
		if err != nil {
			return 0, err
		}
		if gx <= 0 {
			a = probed{x, gx}
			if kept == 1 {
				b.g /= 2
			}
			kept = 1
		} else {
			b = probed{x, gx}
			if kept == -1 {
				a.g /= 2
			}
			kept = -1
		}
	}
	return a.x, nil
}

// narrowMirrored returns a point x of [a, b] (a proven, b not, at the
// probe now in force) found by rootBracketLog on h(y) = g(a + b - y) over
// [a, b]: the smallest y with h(y) <= 0 to relative width rootTol gives
// x = a + b - y, clamped into [a, b] (a + b - y can round past an end).
// When nothing in the bracket is proven (the probe no longer proves a) it
// returns a itself, unproven: its caller, Calibrate, proves its answer
// with stepDown (point 3). It also returns fail, the nearest point above
// x at which the probe failed in its final bracket (x + rootTol x or so;
// b itself when nothing inside failed), or NaN when it proved b.
func (s *largest[P]) narrowMirrored(a, b float64) (x, fail float64, err error) {
	var firstErr error
	h := func(y float64) float64 {
		g, err := s.eval(math.Min(math.Max(a+b-y, a), b))
		if err != nil && firstErr == nil {
			firstErr = err
		}
		return g
	}
	yFail, y := rootBracketLog(h, a, b)
	if firstErr != nil {
		return 0, 0, firstErr
	}
	fail = math.NaN()
	if yFail.f > 0 {
		fail = math.Min(math.Max(a+b-yFail.x, a), b)
	}
	if y.f > 0 {
		return a, fail, nil // only a is known to meet the target
	}
	return math.Min(math.Max(a+b-y.x, a), b), fail, nil
}

// stepDown returns the first of x, x(1-step), x(1-step)^2, ... (at most 40
// of them) at which check proves the target, with what check states there.
// The calibrations end with it: their search proves x with one bound, and
// the guarantee a user is given at x comes from another query (Epsilon),
// whose root finder may state a little more; stepping down makes the two
// agree.
func stepDown[R any](x, step float64, check func(x float64) (R, bool, error)) (float64, R, bool, error) {
	var zero R
	for range 40 {
		r, ok, err := check(x)
		if err != nil {
			return 0, zero, false, err
		}
		if ok {
			return x, r, true, nil
		}
		x *= 1 - step
	}
	return 0, zero, false, nil
}

// isOutsideDomain is the outside rule of the budget searches: an invalid
// argument at a budget means the mechanism refuses that budget.
func isOutsideDomain(err error) bool { return errors.Is(err, ErrInvalidArgument) }
