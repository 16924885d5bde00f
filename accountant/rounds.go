package accountant

import (
	"errors"
	"fmt"
	"math"
	"sync"

	"github.com/blanket-dp/blanket/accountant/declare"
)

// This file is the public API for privacy over time: a user's reports over
// a horizon, each shuffled in its own batch, composed through privacy loss
// distributions (docs/time.md). The math is in pld.go (profile points to
// PLDs), profile.go (sampling) and convolve.go (composition).

const (
	// HorizonTolerance is the relative accuracy in eps to which a
	// composition's upper bound is certified against the composition of the
	// exact single-report dominating pairs (EpsilonResult.Tight).
	HorizonTolerance = 0.01
	// maxHorizonRefine bounds how often the loss grid is halved to reach
	// HorizonTolerance.
	maxHorizonRefine = 2
	// tauFineRel and tauTailRel set the profile floors relative to
	// delta/rounds: the fine grid runs until the single-report profile is
	// below tauFineRel*delta/rounds, the tail until tauTailRel times that.
	tauFineRel = 1e-3
	tauTailRel = 1e-6
	// deltaRef is the delta whose floors a delta(eps) query uses.
	deltaRef = 1e-12
	// MaxRounds is the largest number of reports a composition accepts
	// (declare.MaxRounds).
	MaxRounds = declare.MaxRounds
)

// Part is one mechanism's share of a user's reports in a composition:
// Rounds reports, each at local budget Eps0 and shuffled in a batch of N
// reports.
type Part struct {
	// Mech is the randomizer. Required.
	Mech Mechanism
	// Eps0 is the total local budget of one report. Required unless Mech
	// fixes its own (then 0 means that budget).
	Eps0 float64
	// N is the batch size each report is shuffled in. Required, >= 1.
	N int
	// Rounds is the number of reports. Defaults to 1.
	Rounds int
	// Floor is the number of draws of the blanket the shuffler adds to
	// each batch (docs/accounting.md §13); N is then the number of honest
	// reports, the victim's included, and the bounds hold whatever else
	// the batch holds. 0, the default, adds none.
	Floor int
}

// Composition is the composition of several parts, ready to be queried.
// It memoises the single-report evaluations, so repeated queries (and
// compositions made from it with WithRounds) are cheaper.
type Composition struct {
	parts    []Part
	decs     []*Decomposition
	samplers []*partSampler
	// coupled marks the floor parts bounded by the coupled floor
	// (floor.go), which add floorEta per round.
	coupled []bool
	// clone is the same parts with the generic clone, built once and
	// shared by WithRounds copies (the clone_composed baseline).
	clone *cloneCache
}

type cloneCache struct {
	once sync.Once
	c    *Composition
	err  error
}

// NewComposition validates the parts and returns their composition.
func NewComposition(parts ...Part) (*Composition, error) {
	if len(parts) == 0 {
		return nil, argError("composition parts", 0, "at least 1")
	}
	c := &Composition{clone: &cloneCache{}}
	var total int
	for i, p := range parts {
		name := fmt.Sprintf("part %d", i+1)
		if p.Mech == nil {
			return nil, argError(name+" mechanism", nil, "set")
		}
		if p.Rounds == 0 {
			p.Rounds = 1
		}
		if p.Rounds < 1 || p.Rounds > MaxRounds {
			return nil, argError(name+" rounds", p.Rounds, fmt.Sprintf("in [1, %d]", MaxRounds))
		}
		total += p.Rounds
		if total > MaxRounds {
			return nil, argError("total rounds", total, fmt.Sprintf("<= %d", MaxRounds))
		}
		if p.Eps0 == 0 {
			if e, ok := p.Mech.FixedEps0(); ok {
				p.Eps0 = e
			}
		}
		if err := checkQuery(p.Eps0, p.N); err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		if err := checkFloor(p.N, p.Floor); err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		d, err := p.Mech.Decompose(p.Eps0)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		if err := checkFloorDecomposition(d, p.Floor, p.Mech.String()); err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		c.parts = append(c.parts, p)
		c.decs = append(c.decs, d)
		c.coupled = append(c.coupled, false)
		if p.Floor > 0 && p.N > 1 && floorCoupling && !floorStrataCheap(d, p.N) {
			// With honest others, the coupled floor (floor.go: §3's
			// pairs at a larger batch, plus floorEta per round) or the
			// draws alone, whichever counts more blanket draws on
			// average; either bounds the part, neither gives a lower
			// bound.
			nn, g := floorCoupledPart(d, p.N, p.Floor)
			coupled := float64(nn-1)*g > float64(p.Floor)
			var s *partSampler
			if coupled {
				s = newMechSampler(p.Mech, d, nn, 0)
			} else {
				s = newMechSampler(p.Mech, d, 1, p.Floor)
			}
			c.coupled[len(c.coupled)-1] = coupled
			s.lows, s.lowSwaps = nil, nil
			c.samplers = append(c.samplers, s)
			continue
		}
		c.samplers = append(c.samplers, newMechSampler(p.Mech, d, p.N, p.Floor))
	}
	return c, nil
}

// WithRounds returns the same parts with new round counts (one per part),
// sharing the memoised evaluations.
func (c *Composition) WithRounds(rounds ...int) (*Composition, error) {
	if len(rounds) != len(c.parts) {
		return nil, argError("rounds", len(rounds), fmt.Sprintf("one per part (%d)", len(c.parts)))
	}
	out := &Composition{decs: c.decs, samplers: c.samplers, coupled: c.coupled, clone: c.clone}
	var total int
	for i, p := range c.parts {
		if rounds[i] < 1 || rounds[i] > MaxRounds {
			return nil, argError(fmt.Sprintf("part %d rounds", i+1), rounds[i], fmt.Sprintf("in [1, %d]", MaxRounds))
		}
		total += rounds[i]
		p.Rounds = rounds[i]
		out.parts = append(out.parts, p)
	}
	if total > MaxRounds {
		return nil, argError("total rounds", total, fmt.Sprintf("<= %d", MaxRounds))
	}
	return out, nil
}

// coupledEta returns the additive delta of the composition's coupled
// floor parts: floorEta per round of each (floor.go).
func (c *Composition) coupledEta() float64 {
	var e float64
	for i, p := range c.parts {
		if c.coupled[i] {
			e += float64(p.Rounds) * floorEta
		}
	}
	return e
}

// Rounds returns the total number of reports.
func (c *Composition) Rounds() int {
	var t int
	for _, p := range c.parts {
		t += p.Rounds
	}
	return t
}

// LocalEps returns the composition's pure local guarantee: the sum over
// reports of their local eps.
func (c *Composition) LocalEps() float64 {
	var s float64
	for i, p := range c.parts {
		s += float64(p.Rounds) * c.decs[i].LocalEps
	}
	return s
}

// single reports whether the composition is one report that the
// single-report engine answers alone: not a part with an exact profile
// (node_exact.go), whose bound the engine's would only loosen.
func (c *Composition) single() bool {
	return len(c.parts) == 1 && c.parts[0].Rounds == 1 && c.samplers[0].exact == nil
}

// horizonPLDs are the composed parts' PLDs at one grid.
type horizonPLDs struct {
	upper, pairLower, lower []pldPart
	hasLower                bool
	built                   []builtPart
}

// plds builds every part's PLDs for a query at delta (floors), with the
// grid halved refine times; only the pessimistic ones with upperOnly.
func (c *Composition) plds(delta float64, refine int, upperOnly ...bool) horizonPLDs {
	only := len(upperOnly) > 0 && upperOnly[0]
	T := float64(c.Rounds())
	tauFine := tauFineRel * delta / T
	tauTail := tauTailRel * delta / T
	desired := make([]float64, len(c.parts))
	step, which := math.Inf(1), 0
	for i, s := range c.samplers {
		desired[i] = s.desiredStep() / math.Pow(2, float64(refine))
		if desired[i] < step {
			step, which = desired[i], i
		}
	}
	// Align the lattice with the finest part's local eps.
	le := c.decs[which].LocalEps
	step = le / math.Ceil(le/step)
	h := horizonPLDs{hasLower: !only}
	h.built = make([]builtPart, len(c.parts))
	parallelMap(len(c.parts), func(i int) {
		fine := int64(math.Max(1, math.Floor(desired[i]/step*(1+1e-9))))
		h.built[i] = c.samplers[i].build(step, fine, tauFine, tauTail, refine, only)
	})
	for i, b := range h.built {
		r := c.parts[i].Rounds
		h.upper = append(h.upper, pldPart{b.upper, r})
		if only {
			continue
		}
		h.pairLower = append(h.pairLower, pldPart{b.pairLower, r})
		if b.lower == nil {
			h.hasLower = false
		} else {
			h.lower = append(h.lower, pldPart{b.lower, r})
		}
	}
	return h
}

// epsUpperOf returns the smallest eps in [0, cap] with delta_up <= delta
// (cap when none).
func epsUpperOf(parts []pldPart, delta, cap float64) float64 {
	f := func(e float64) float64 { return composedDelta(parts, e, true) }
	e, ok := solveDecreasing(f, delta, 0, cap)
	if !ok {
		return cap
	}
	return e
}

// epsLowerOf returns the largest eps with delta_lo >= delta (0 when none).
func epsLowerOf(parts []pldPart, delta, cap float64) float64 {
	f := func(e float64) float64 { return composedDelta(parts, e, false) }
	return solveDecreasingLow(f, delta, 0, cap)
}

// Epsilon returns the central eps of the composition at delta: Upper is a
// sound upper bound for every user's reports together, Lower the exact
// eps of the composed lower-bound datasets (docs/accounting.md §4,
// the same datasets in every round), or less. Tight reports whether Upper
// is certified within HorizonTolerance of the composition of the exact
// single-report dominating pairs. A single report (one part, one round) is
// answered by the single-report engine, exactly as Epsilon.
func (c *Composition) Epsilon(delta float64) (EpsilonResult, error) {
	if err := checkDelta("delta", delta); err != nil {
		return EpsilonResult{}, err
	}
	if c.single() {
		return c.singleEpsilon(0, delta), nil
	}
	cap := c.LocalEps()
	r := EpsilonResult{Upper: math.Inf(1), LocalEps: cap}
	// Coupled floor parts add their eta to every delta (floor.go): the
	// PLDs must meet what is left.
	if eta := c.coupledEta(); eta > 0 {
		if delta <= 2*eta {
			r.Upper, r.Tight = cap, false
			return r, nil
		}
		delta -= eta
	}
	var pair float64
	for refine := 0; ; refine++ {
		h := c.plds(delta, refine)
		// Every refinement's bounds are proven: keep the smallest upper
		// and the largest lowers.
		r.Upper = math.Min(r.Upper, epsUpperOf(h.upper, delta, cap))
		pair = math.Max(pair, epsLowerOf(h.pairLower, delta, cap))
		r.Tight = r.Upper <= pair*(1+HorizonTolerance) || r.Upper == 0
		if h.hasLower {
			r.Lower = math.Max(r.Lower, epsLowerOf(h.lower, delta, cap))
		}
		if r.Tight || refine == maxHorizonRefine {
			break
		}
	}
	// Basic composition is also a proof: when the PLD bound is not
	// certified tight, never report more than it gives.
	if !r.Tight {
		if basic, err := c.basicEpsilon(delta); err == nil && basic < r.Upper {
			r.Upper = basic
		}
	}
	r.Upper = math.Min(r.Upper, cap)
	r.Amplified = r.Upper < cap*(1-rootTol)
	if !r.Amplified {
		r.Upper = cap
	}
	r.Lower = math.Min(r.Lower, r.Upper)
	return r, nil
}

// Delta returns the composition's delta at eps: Upper a sound upper bound,
// Lower the exact delta of the composed lower-bound datasets or less.
func (c *Composition) Delta(eps float64) (DeltaResult, error) {
	if err := checkEps("eps", eps); err != nil {
		return DeltaResult{}, err
	}
	if c.single() {
		if p := c.parts[0]; p.Floor > 0 {
			return floorDeltaOf(c.decs[0], p.N, p.Floor, eps), nil
		}
		return Delta(c.parts[0].Mech, c.parts[0].Eps0, c.parts[0].N, eps)
	}
	if eps >= c.LocalEps() {
		return DeltaResult{}, nil
	}
	var r DeltaResult
	// Every query's bounds are proven: keep the smallest upper and the
	// largest lower.
	best := DeltaResult{Upper: math.Inf(1)}
	ref := deltaRef
	for refine := 0; ; refine++ {
		h := c.plds(ref, refine)
		r.Upper = composedDelta(h.upper, eps, true)
		pair := composedDelta(h.pairLower, eps, false)
		if h.hasLower {
			r.Lower = composedDelta(h.lower, eps, false)
		}
		best.Upper, best.Lower = math.Min(best.Upper, r.Upper), math.Max(best.Lower, r.Lower)
		if r.Upper < 1e-2*ref && ref > MinDelta {
			// The profile floors were set for a larger delta: the cut tail
			// may dominate. Refit them to this delta and start again.
			ref = math.Max(r.Upper, MinDelta)
			refine = -1
			continue
		}
		// Tight in eps: the upper bound is met by the exact pair at
		// eps/(1+HorizonTolerance).
		if refine == maxHorizonRefine || r.Upper <= pair || composedDelta(h.pairLower, eps/(1+HorizonTolerance), false) >= r.Upper {
			break
		}
	}
	r.Upper = math.Min(best.Upper+c.coupledEta(), 1)
	r.Lower = math.Min(best.Lower, r.Upper)
	return r, nil
}

// basicEpsilon is basic composition: every report gets delta/T and the
// eps of its single-report bound there; the eps add up.
// singleEpsilon is the single-report eps of part i at delta, with its
// floor if it has one.
func (c *Composition) singleEpsilon(i int, delta float64) EpsilonResult {
	if p := c.parts[i]; p.Floor > 0 {
		return floorEpsilonOf(c.decs[i], p.N, p.Floor, delta)
	}
	return epsilonOf(c.decs[i], c.parts[i].N, delta)
}

func (c *Composition) basicEpsilon(delta float64) (float64, error) {
	T := float64(c.Rounds())
	var sum float64
	for i, p := range c.parts {
		r := c.singleEpsilon(i, delta/T)
		sum += float64(p.Rounds) * r.Upper
	}
	return sum, nil
}

// ComposeEpsilon returns the central eps at delta of the composition of
// parts (NewComposition, then Epsilon).
func ComposeEpsilon(parts []Part, delta float64) (EpsilonResult, error) {
	c, err := NewComposition(parts...)
	if err != nil {
		return EpsilonResult{}, err
	}
	return c.Epsilon(delta)
}

// ComposeDelta returns the delta at eps of the composition of parts.
func ComposeDelta(parts []Part, eps float64) (DeltaResult, error) {
	c, err := NewComposition(parts...)
	if err != nil {
		return DeltaResult{}, err
	}
	return c.Delta(eps)
}

// Baseline names of compositions, keys of the maps returned by the
// composition baselines (with the single-report ones, which apply to one
// report only).
const (
	// BaselineBasicComposition is basic composition: T eps_1 at delta/T.
	BaselineBasicComposition = "basic_composition"
	// BaselineKOV15 is the optimal composition of a single (eps_1,
	// delta_1) guarantee (Kairouz, Oh, Viswanath 2015), best over eps_1 on
	// the single-report profile; homogeneous compositions only.
	BaselineKOV15 = "kov15"
	// BaselineCloneComposed is the generic clone decomposition composed
	// through the same PLD machinery.
	BaselineCloneComposed = "clone_composed"
)

// CompositionBaselineNames lists the composition baselines in display
// order.
var CompositionBaselineNames = []string{BaselineBasicComposition, BaselineKOV15, BaselineCloneComposed}

// cloneComposition returns the same parts with every mechanism replaced by
// the generic clone at its local eps (memoised evaluations shared with
// every WithRounds copy).
func (c *Composition) cloneComposition() (*Composition, error) {
	c.clone.once.Do(func() {
		parts := make([]Part, len(c.parts))
		for i, p := range c.parts {
			parts[i] = Part{Mech: GenericMech{Eps0: c.decs[i].LocalEps}, N: p.N, Rounds: p.Rounds}
		}
		c.clone.c, c.clone.err = NewComposition(parts...)
	})
	if c.clone.err != nil {
		return nil, c.clone.err
	}
	rounds := make([]int, len(c.parts))
	for i, p := range c.parts {
		rounds[i] = p.Rounds
	}
	return c.clone.c.WithRounds(rounds...)
}

// cloneEpsilon is the clone_composed baseline: the upper bound of the
// composed clones (pessimistic PLDs only; refined like Epsilon while the
// grid could still gain more than HorizonTolerance is not needed for a
// baseline, so one grid level).
func (c *Composition) cloneEpsilon(delta float64) (float64, error) {
	cl, err := c.cloneComposition()
	if err != nil {
		return 0, err
	}
	if cl.single() {
		return epsilonOf(cl.decs[0], cl.parts[0].N, delta).Upper, nil
	}
	return math.Min(epsUpperOf(cl.plds(delta, 0, true).upper, delta, cl.LocalEps()), cl.LocalEps()), nil
}

// EpsilonBaselines returns every baseline's eps at delta; nil where a
// baseline does not apply. A single report gets the single-report
// baselines (EpsilonBaselines) and nil composition baselines; a
// composition gets basic_composition, kov15 (one part only) and
// clone_composed, and nil single-report ones.
func (c *Composition) EpsilonBaselines(delta float64) (map[string]*float64, error) {
	if err := checkDelta("delta", delta); err != nil {
		return nil, err
	}
	if c.single() {
		m, err := EpsilonBaselines(c.parts[0].Mech, c.parts[0].Eps0, c.parts[0].N, delta)
		if err != nil {
			return nil, err
		}
		return withNil(m, CompositionBaselineNames), nil
	}
	out := withNil(map[string]*float64{}, BaselineNames)
	basic, err := c.basicEpsilon(delta)
	if err != nil {
		return nil, err
	}
	out[BaselineBasicComposition] = ptr(math.Min(basic, c.LocalEps()))
	out[BaselineKOV15] = nil
	if len(c.parts) == 1 {
		if v, ok := c.kov15Epsilon(delta); ok {
			out[BaselineKOV15] = ptr(v)
		}
	}
	ce, err := c.cloneEpsilon(delta)
	if err != nil {
		return nil, err
	}
	out[BaselineCloneComposed] = ptr(ce)
	return out, nil
}

// kov15Epsilon is the best over eps_1 on the sampled single-report upper
// profile of KOV15Epsilon(eps_1, delta_up(eps_1), T, delta).
func (c *Composition) kov15Epsilon(delta float64) (float64, bool) {
	p := c.parts[0]
	h := c.plds(delta, 0)
	b := h.built[0]
	best, ok := math.Inf(1), false
	for i, e1 := range b.eps {
		d1 := b.u[i]
		if e1 <= 0 || d1 >= 1 {
			continue
		}
		v, err := KOV15Epsilon(e1, d1, p.Rounds, delta)
		if err != nil {
			continue
		}
		if v < best {
			best, ok = v, true
		}
	}
	// Basic composition's own point (eps_1(delta/T), delta/T), so that
	// kov15 is never above basic_composition.
	T := float64(p.Rounds)
	if e1 := c.singleEpsilon(0, delta/T).Upper; e1 > 0 {
		if v, err := KOV15Epsilon(e1, delta/T, p.Rounds, delta); err == nil && v < best {
			best, ok = v, true
		}
	}
	// eps_1 = local eps with delta_1 = 0 is always a candidate.
	if v, err := KOV15Epsilon(c.decs[0].LocalEps, 0, p.Rounds, delta); err == nil && v < best {
		best, ok = v, true
	}
	return math.Min(best, c.LocalEps()), ok
}

// DeltaBaselines returns every baseline's delta at eps (nil where a
// baseline does not apply): basic_composition (the smallest delta with
// T eps_1(delta/T) <= eps), kov15 (best over eps_1), clone_composed.
func (c *Composition) DeltaBaselines(eps float64) (map[string]*float64, error) {
	if err := checkEps("eps", eps); err != nil {
		return nil, err
	}
	if c.single() {
		m, err := DeltaBaselines(c.parts[0].Mech, c.parts[0].Eps0, c.parts[0].N, eps)
		if err != nil {
			return nil, err
		}
		return withNil(m, CompositionBaselineNames), nil
	}
	out := withNil(map[string]*float64{}, BaselineNames)
	out[BaselineBasicComposition] = nil
	if len(c.parts) == 1 {
		// Basic: each report (eps/T, delta_1(eps/T)); delta = T delta_1.
		p := c.parts[0]
		T := float64(p.Rounds)
		d, err := Delta(p.Mech, p.Eps0, p.N, eps/T)
		if err == nil {
			out[BaselineBasicComposition] = ptr(math.Min(1, T*d.Upper))
		}
	}
	out[BaselineKOV15] = nil
	if len(c.parts) == 1 {
		p := c.parts[0]
		h := c.plds(deltaRef, 0)
		b := h.built[0]
		best := math.Inf(1)
		for i, e1 := range b.eps {
			if v, err := KOV15Delta(e1, b.u[i], p.Rounds, eps); err == nil {
				best = math.Min(best, v)
			}
		}
		if !math.IsInf(best, 1) {
			out[BaselineKOV15] = ptr(best)
		}
	}
	cl, err := c.cloneComposition()
	if err != nil {
		return nil, err
	}
	// The composed clones' upper bound (pessimistic PLDs only), with the
	// floors refitted as in Delta.
	ref := deltaRef
	d := composedDelta(cl.plds(ref, 0, true).upper, eps, true)
	for d < 1e-2*ref && ref > MinDelta {
		ref = math.Max(d, MinDelta)
		d = composedDelta(cl.plds(ref, 0, true).upper, eps, true)
	}
	out[BaselineCloneComposed] = ptr(math.Min(d, 1))
	return out, nil
}

// calibrateRounds is Calibrate for t.Rounds > 1: the largest eps0 (to
// relative calTol) whose composition over t.Rounds reports at t.N meets the
// target. It solves log(delta_up(eps; eps0)/delta) = 0 in eps0 by
// safeguarded regula falsi on the first grid level, then certifies the
// answer with Epsilon and steps eps0 down until Epsilon meets the target.
func calibrateRounds(m Mechanism, t Target) (CalibrationResult, error) {
	eps0, _, err := searchRounds(m, t)
	if err != nil {
		return CalibrationResult{}, err
	}
	eps0, ach, ok, err := stepDown(eps0, calTol, func(eps0 float64) (EpsilonResult, bool, error) {
		c, err := NewComposition(Part{Mech: m, Eps0: eps0, N: t.N, Rounds: t.Rounds, Floor: t.Floor})
		if err != nil {
			return EpsilonResult{}, false, err
		}
		ach, err := c.Epsilon(t.Delta)
		return ach, err == nil && ach.Upper <= t.Eps, err
	})
	if err != nil {
		return CalibrationResult{}, err
	}
	if !ok {
		return CalibrationResult{}, fmt.Errorf("%w: calibration over %d rounds did not settle for eps = %g, delta = %g at n = %d", ErrUnreachable, t.Rounds, t.Eps, t.Delta, t.N)
	}
	return CalibrationResult{Eps0: eps0, Achieved: ach}, nil
}

// calibrateUpperRounds is calibrateRounds without the final full query:
// the eps0 found by the search and the upper bound proven for it by the
// search's own pessimistic PLDs (no lower bound, Tight false). Plans use
// it: their guarantee needs only the proof.
func calibrateUpperRounds(m Mechanism, t Target) (CalibrationResult, error) {
	eps0, proven, err := searchRounds(m, t)
	if err != nil {
		return CalibrationResult{}, err
	}
	p := proven()
	up, local := p.eps, p.local
	return CalibrationResult{Eps0: eps0, Achieved: EpsilonResult{Upper: up, LocalEps: local, Amplified: up < local*(1-rootTol)}}, nil
}

// roundsProof is what a horizon search's PLDs prove at an eps0: the eps at
// the target delta (at most the target eps) and the composition's local
// eps.
type roundsProof struct{ eps, local float64 }

// searchRounds returns the largest eps0 (to relative calTol) for which the
// pessimistic PLDs at refinement 0 of t.Rounds reports of m at t.N prove
// delta(t.Eps) <= t.Delta, with a function giving the eps at t.Delta those
// PLDs prove for it and the composition's local eps (read off the PLDs
// only when called): the largest proven x (largest.go) with
// g(eps0) = log(delta_up/delta), starting at 1.25 times the single-report
// answer and halving.
func searchRounds(m Mechanism, t Target) (float64, func() roundsProof, error) {
	return searchRoundsWith(m, t, func(eps0 float64) bool { return lowerExceeds(m, eps0, t) })
}

// searchRoundsWith is searchRounds with the certificate that a probe fails
// (largest.go, point 6; nil for none), which only saves probes.
func searchRoundsWith(m Mechanism, t Target, fails func(eps0 float64) bool) (float64, func() roundsProof, error) {
	one, err := calibrateEps0(m, Target{Eps: t.Eps, Delta: t.Delta, N: t.N})
	if err != nil {
		return 0, nil, err
	}
	// The proof's eps is read off the PLDs only for the eps0 returned.
	s := largest[func() roundsProof]{
		probe: func(eps0 float64) (float64, func() roundsProof, error) {
			c, err := NewComposition(Part{Mech: m, Eps0: eps0, N: t.N, Rounds: t.Rounds, Floor: t.Floor})
			if err != nil {
				return 0, nil, err
			}
			le := c.LocalEps()
			if le <= t.Eps {
				return math.Inf(-1), func() roundsProof { return roundsProof{le, le} }, nil
			}
			h := c.plds(t.Delta, 0, true)
			d := composedDelta(h.upper, t.Eps, true)
			proof := func() roundsProof { return roundsProof{math.Min(epsUpperOf(h.upper, t.Delta, t.Eps), t.Eps), le} }
			if d <= 0 {
				return math.Inf(-1), proof, nil
			}
			return math.Log(d / t.Delta), proof, nil
		},
		floor: 1e-6,
		tol:   calTol,
		// The start is usually far above the answer, where the PLDs are
		// costliest: one report's lower bound settles it (horizon_fails.go).
		fails: fails,
	}
	// Bracket: more reports never need less noise, so eps0 <= the
	// single-report answer (with a margin for the two analyses' slack).
	start := math.Min(one*1.25, MaxEps0)
	s.ceil = start
	eps0, p, err := s.run(start)
	if errors.Is(err, errBelowFloor) {
		return 0, nil, fmt.Errorf("%w: no eps0 meets eps = %g, delta = %g over %d rounds at n = %d", ErrUnreachable, t.Eps, t.Delta, t.Rounds, t.N)
	} else if err != nil {
		return 0, nil, err
	}
	return eps0, p, nil
}

// calTol is the relative accuracy of horizon calibration in eps0.
const calTol = 1e-3

// withNil sets every name in names to nil in m and returns m.
func withNil(m map[string]*float64, names []string) map[string]*float64 {
	for _, n := range names {
		m[n] = nil
	}
	return m
}

// calibrateBaselinesRounds returns the largest eps0 each composition
// baseline allows for t over t.Rounds reports (nil where none applies):
// basic_composition calibrates one report to (eps/T, delta/T); kov15 the
// best over eps_1 of one report calibrated to (eps_1, delta_1) with
// delta_1 the largest whose KOV15 composition meets the target;
// clone_composed the generic clone composed over the horizon.
func calibrateBaselinesRounds(m Mechanism, t Target) map[string]*float64 {
	out := withNil(map[string]*float64{}, BaselineNames)
	T := float64(t.Rounds)
	var basic, kov, clone *float64
	parallelMap(3, func(i int) {
		switch i {
		case 0:
			if c, err := calibrateEps0(m, Target{Eps: t.Eps / T, Delta: t.Delta / T, N: t.N}); err == nil {
				basic = ptr(c)
			}
		case 1:
			kov = kovCalibrate(m, t)
		case 2:
			if c, err := Calibrate(Generic(), t); err == nil {
				clone = ptr(c.Eps0)
			}
		}
	})
	out[BaselineBasicComposition], out[BaselineKOV15], out[BaselineCloneComposed] = basic, kov, clone
	return out
}

// kovDelta1 returns the largest delta_1 (bisection, rounded down) with
// KOV15Delta(eps1, delta_1, T, eps) <= delta; ok false when even 0 fails.
func kovDelta1(eps1 float64, T int, eps, delta float64) (float64, bool) {
	meets := func(d1 float64) bool {
		v, err := KOV15Delta(eps1, d1, T, eps)
		return err == nil && v <= delta
	}
	if !meets(0) {
		return 0, false
	}
	if meets(delta) {
		return delta, true
	}
	lo, _ := cfBisectDown(meets, 0, delta)
	return lo, lo > 0
}

// kovCalibrate maximises over eps_1 (golden section on log eps_1 in
// [eps/T, eps]) the single-report calibration to (eps_1, delta_1).
func kovCalibrate(m Mechanism, t Target) *float64 {
	at := func(le float64) float64 {
		e1 := math.Exp(le)
		d1, ok := kovDelta1(e1, t.Rounds, t.Eps, t.Delta)
		if !ok || d1 < MinDelta {
			return 0
		}
		c, err := calibrateEps0(m, Target{Eps: e1, Delta: d1, N: t.N})
		if err != nil {
			return 0
		}
		return c
	}
	a, b := math.Log(t.Eps/float64(t.Rounds)), math.Log(t.Eps)
	const g = 0.6180339887498949
	x1, x2 := b-g*(b-a), a+g*(b-a)
	f1, f2 := at(x1), at(x2)
	// The left end (eps_1 = eps/T, basic composition's eps) is feasible
	// whenever anything is; at small T it is often the only feasible
	// region, which the interior search can miss.
	best := math.Max(at(a), math.Max(f1, f2))
	for range 14 {
		if f1 >= f2 {
			b, x2, f2 = x2, x1, f1
			x1 = b - g*(b-a)
			f1 = at(x1)
		} else {
			a, x1, f1 = x1, x2, f2
			x2 = a + g*(b-a)
			f2 = at(x2)
		}
		best = math.Max(best, math.Max(f1, f2))
	}
	if best <= 0 {
		return nil
	}
	return ptr(best)
}
