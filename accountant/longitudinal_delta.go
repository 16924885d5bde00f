package accountant

// The delta of the longitudinal tree protocol at a given eps: the dual of
// Longitudinal.Epsilon, from the same proof (the top of longitudinal.go).
//
// Each bound of Epsilon is an (eps, delta) statement that holds for every
// eps, so each has a delta at eps, and the smallest of them is sound:
//
//   - Per period (points 1-5). For any number of level-mates m0 fixed in
//     advance (it may depend on the public parameters and on eps, never on
//     the data), the window is (eps, delta_A(m0) + tail(m0))-DP, where
//     delta_A(m0) is the composed delta at eps of the node pairs among m0
//     mates (and of the other parts) and tail(m0) = (W + H - 1) Pr[1 +
//     Binomial(N-1, 1/L) < m0] is the union bound of point 5 on some
//     period that can hold a differing report having fewer mates (tailAt, the tail inferMates pays for its
//     own m0). Epsilon takes the largest m0 with tail(m0) <= 5% of delta;
//     here delta is the unknown, so Delta evaluates a few m0 and keeps the
//     smallest sum (each is a bound, so their minimum is). With Mates
//     given, m0 = Mates and the tail is 0.
//   - Transcript (point 6), when Users > 0: the composed delta at eps of T
//     rounds of the generic eps0-LDP randomizer among Users (and of the
//     other parts), exactly the composition Epsilon inverts.
//   - Local: the window is pure L-DP, L = Local as in Epsilon (T trees of
//     TranscriptLocalEps plus the other parts' local levels). For a pair
//     (P, Q) with P <= e^L Q and Q <= e^L P, and S the outputs where
//     P > e^eps Q, delta(eps) = P(S) - e^eps Q(S) with Q(S) >= max(e^-L
//     P(S), 1 - e^L (1 - P(S))); the right side is largest at P(S) =
//     e^L/(e^L+1), which gives delta(eps) <= (e^L - e^eps)/(e^L + 1) below
//     L (binary randomized response at L attains it), and 0 from L on.
//
// Consistency with Epsilon: at eps = Epsilon(delta).Upper, Epsilon's
// per-period bound used m0* = inferMates(5% of delta), with delta_A(m0*) +
// tail(m0*) <= delta. Delta's candidates are that rule at
// longitudinalDeltaRef, the same rule at the delta just found, and the
// minima of a model of the sum (log delta_A linear in m0, the exact tail),
// so Delta(Epsilon(delta).Upper) <= delta whenever m0* is among them or
// beaten by one of them; the sum is flat near its minimum, and m0* sits
// where the tail is 5% of it, so in practice the minimum found beats it
// (longitudinal_delta_test.go checks the round trip).

import (
	"math"
)

const (
	// longitudinalDeltaRef is the delta whose 5% tail gives Delta's first
	// candidate number of mates.
	longitudinalDeltaRef = 1e-6
	// longitudinalDeltaEvals bounds the composed-delta evaluations Delta
	// spends choosing the number of mates (each builds the node pairs'
	// loss distributions at a new batch size).
	longitudinalDeltaEvals = 4
)

// LongitudinalDeltaResult is the delta of a Longitudinal at one eps.
type LongitudinalDeltaResult struct {
	// Upper is the sound bound: the smallest of PerPeriod, Transcript and
	// LocalDelta.
	Upper float64
	// PerPeriod is the bound through the per-period shuffled reports
	// (points 1-5 of the proof), Tail included, capped by LocalDelta.
	PerPeriod float64
	// Transcript is the bound through the whole transcripts' LDP level
	// (point 6), capped by LocalDelta; +Inf when Users is 0.
	Transcript float64
	// LocalDelta is the delta at eps of the local bound, pure Local-DP:
	// (e^Local - e^eps)/(e^Local + 1) below Local, 0 from Local on.
	LocalDelta float64
	// Trees is the number of trees the window can meet.
	Trees int
	// Levels is the number of levels of a tree, log2(Tree)+1.
	Levels int
	// Mates is the number of level-mates (the victim included) the
	// per-period bound assumes (0 when LocalDelta is 0 and nothing else
	// was computed, unless Mates was given).
	Mates int
	// Tail is the part of PerPeriod spent on fewer mates (0 when Mates was
	// given).
	Tail float64
	// Local is the local bound in eps, as in LongitudinalResult.
	Local float64
}

// LongitudinalOf returns the Longitudinal of the tree protocol m at eps0:
// its Tree, its Eps0 (m's own when m fixes one) and its declared node law.
// The caller sets the window (Periods), the batches (Batch or Mates) and
// Users. ok is false when m is not a tree protocol (a FuncMech without a
// Declare function included: it declares nothing).
func LongitudinalOf(m Mechanism, eps0 float64) (l Longitudinal, ok bool, err error) {
	return longitudinalOf(m, eps0)
}

// LongitudinalDelta returns the delta at eps of a tree protocol m at eps0
// over a window of periods with batches of at least n reports (mates
// inferred binomially): Longitudinal.Delta.
func LongitudinalDelta(m Mechanism, eps0 float64, n, periods int, eps float64) (LongitudinalDeltaResult, error) {
	l, ok, err := longitudinalOf(m, eps0)
	if err != nil {
		return LongitudinalDeltaResult{}, err
	}
	if !ok {
		return LongitudinalDeltaResult{}, argError("mechanism", m.String(), "a longitudinal tree protocol")
	}
	l.Periods, l.Batch = periods, n
	return l.Delta(eps)
}

// pureDelta returns the delta at eps of binary randomized response at
// local, which dominates every pure local-DP mechanism.
func pureDelta(local, eps float64) float64 {
	if eps >= local {
		return 0
	}
	// (e^L - e^eps)/(e^L + 1) = (1 - e^(eps-L))/(1 + e^-L), without
	// overflow at large L.
	return -math.Expm1(eps-local) / (1 + math.Exp(-local))
}

// Delta returns the guarantee's delta at eps, composed with the other parts
// a user's reports of other metrics contribute over the same window (none
// for a metric alone); see the top of longitudinal_delta.go. When eps is at
// least the local bound the result is 0 and nothing else is computed.
func (l Longitudinal) Delta(eps float64, others ...Part) (LongitudinalDeltaResult, error) {
	if err := l.check(); err != nil {
		return LongitudinalDeltaResult{}, err
	}
	if err := checkEps("eps", eps); err != nil {
		return LongitudinalDeltaResult{}, err
	}
	T := TreesInWindow(l.Tree, l.Periods)
	res := LongitudinalDeltaResult{Trees: T, Levels: treeLevels(l.Tree), Transcript: math.Inf(1), Mates: l.Mates}
	var otherCap float64
	for _, p := range others {
		c, err := NewComposition(p)
		if err != nil {
			return LongitudinalDeltaResult{}, err
		}
		otherCap += c.LocalEps()
	}
	res.Local = float64(T)*l.transcriptLocal() + otherCap
	res.LocalDelta = pureDelta(res.Local, eps)
	if res.LocalDelta == 0 {
		if l.Users > 0 {
			res.Transcript = 0
		}
		return res, nil
	}
	a, mates, tail, err := l.perPeriodDelta(eps, T, others)
	if err != nil {
		return LongitudinalDeltaResult{}, err
	}
	res.Mates, res.Tail = mates, tail
	res.PerPeriod = math.Min(a, res.LocalDelta)
	if l.Users > 0 {
		parts := append([]Part{{Mech: GenericMech{Eps0: l.transcriptLocal()}, N: l.Users, Rounds: T}}, others...)
		r, err := ComposeDelta(parts, eps)
		if err != nil {
			return LongitudinalDeltaResult{}, err
		}
		res.Transcript = math.Min(r.Upper, res.LocalDelta)
	}
	res.Upper = math.Min(math.Min(res.PerPeriod, res.Transcript), res.LocalDelta)
	return res, nil
}

// tailAt returns the tail the per-period bound pays for assuming m
// level-mates in batches of l.Batch (point 5: a union over the leakPeriods
// of Pr[1 + Binomial(Batch-1, 1/L) < m]), the tail inferMates
// reports for its own m. It is not capped at 1.
func (l Longitudinal) tailAt(m int) float64 {
	return float64(l.leakPeriods()) * mateTail(l.Batch, treeLevels(l.Tree), m)
}

// mateCandidate is one number of mates the per-period delta was evaluated
// at: the composed delta dA and the tail.
type mateCandidate struct {
	m        int
	dA, tail float64
}

func (c mateCandidate) total() float64 { return c.dA + c.tail }

// perPeriodDelta returns the per-period bound's delta at eps (the composed
// node pairs plus the tail), the mates it assumes and its tail.
func (l Longitudinal) perPeriodDelta(eps float64, T int, others []Part) (delta float64, mates int, tail float64, err error) {
	composed := func(m int) (float64, error) {
		part, err := l.nodePart(m, l.windowRounds())
		if err != nil {
			return 0, err
		}
		r, err := ComposeDelta(append(append([]Part(nil), others...), part), eps)
		if err != nil {
			return 0, err
		}
		return r.Upper, nil
	}
	levels := treeLevels(l.Tree)
	if l.Mates > 0 || levels == 1 {
		// Known mates, or one level sending (every report of the batch is
		// a mate): no tail.
		m := l.Mates
		if m == 0 {
			m = l.Batch
		}
		d, err := composed(m)
		return d, m, 0, err
	}
	rawTail := func(m int) float64 { return l.tailAt(m) }
	tailOf := func(m int) float64 { return math.Min(1, rawTail(m)) }
	// The model's search stays below the binomial's mean, where the tail is
	// a true lower tail (binomLowerTail is 1 from the mean on).
	modelHi := max(1, int(float64(l.Batch-1)/float64(levels)))
	// ruleAt is Epsilon's choice of mates at delta.
	ruleAt := func(delta float64) int {
		m, _ := l.inferMates(longitudinalTailShare * delta)
		return m
	}
	var seen []mateCandidate
	eval := func(m int) (mateCandidate, bool, error) {
		for _, c := range seen {
			if c.m == m {
				return c, false, nil
			}
		}
		d, err := composed(m)
		if err != nil {
			return mateCandidate{}, false, err
		}
		c := mateCandidate{m: m, dA: d, tail: tailOf(m)}
		seen = append(seen, c)
		return c, true, nil
	}
	best := func() mateCandidate {
		b := seen[0]
		for _, c := range seen[1:] {
			if c.total() < b.total() {
				b = c
			}
		}
		return b
	}
	// 1. Epsilon's rule at the reference delta.
	cur, _, err := eval(ruleAt(longitudinalDeltaRef))
	if err != nil {
		return 0, 0, 0, err
	}
	for len(seen) < longitudinalDeltaEvals {
		var next int
		switch {
		case len(seen) >= 2 && cur.dA > 0:
			// 3. The minimum of a model: log dA linear in m through the
			// last two candidates, plus the exact tail.
			a, b := seen[len(seen)-2], cur
			if a.m == b.m || a.dA == 0 || b.dA == 0 {
				next = ruleAt(best().total())
				break
			}
			slope := (math.Log(b.dA) - math.Log(a.dA)) / float64(b.m-a.m)
			if !(slope < 0) {
				next = ruleAt(best().total())
				break
			}
			next = modelArgmin(b.m, b.dA, slope, modelHi, rawTail)
		case cur.dA == 0:
			// The composed delta vanished at these mates: fewer mates
			// (a smaller tail) cost nothing until it reappears.
			next = ruleAt(math.Max(cur.tail*1e-6, MinDelta))
		default:
			// 2. Epsilon's rule at the delta just found.
			next = ruleAt(cur.total())
		}
		c, fresh, err := eval(next)
		if err != nil {
			return 0, 0, 0, err
		}
		if !fresh {
			break
		}
		cur = c
	}
	b := best()
	return math.Min(b.total(), 1), b.m, b.tail, nil
}

// modelArgmin returns the m in [1, hi] minimising dA exp(slope (m - m0)) +
// tail(m), slope < 0, by ternary search: the first term is convex and
// decreasing, the tail (uncapped) convex and increasing below the
// binomial's mode, where hi lies (the terms of the lower tail grow up to
// the mode), so the sum is unimodal there.
func modelArgmin(m0 int, dA, slope float64, hi int, tail func(int) float64) int {
	model := func(m int) float64 { return dA*math.Exp(slope*float64(m-m0)) + tail(m) }
	lo := 1
	for hi-lo > 2 {
		m1 := lo + (hi-lo)/3
		m2 := hi - (hi-lo)/3
		if model(m1) <= model(m2) {
			hi = m2
		} else {
			lo = m1
		}
	}
	bestM, bestV := lo, model(lo)
	for m := lo + 1; m <= hi; m++ {
		if v := model(m); v < bestV {
			bestM, bestV = m, v
		}
	}
	return bestM
}
