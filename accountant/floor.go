package accountant

// This file bounds the guarantee of a batch to which the shuffler adds a
// floor: m reports drawn from the randomizer's blanket distribution
// omega, beside the n_h honest reports (the victim's among them) and any
// number of fake ones (docs/accounting.md §13).
//
// Setting. Fix a candidate pair (x, x') and its merged atoms (r_j, p_j,
// q_j) (§3), gamma = sum_j r_j. The shuffler's draws are independent of
// every input, and the law of a draw over the pair's atoms is r_j / gamma
// (the contract of the plugin's blanket sampler, which the conformance kit
// checks against the declaration). Each of the n_h - 1 honest others
// draws, as in §3, from the blanket with probability gamma, else from a
// leftover law of its own value only; fakes are a post-processing (§11).
//
// The view. Hand the adversary the fakes, the honest others' leftover
// draws and which others made them. What remains is the victim's report
// among K = m + K' draws of omega, K' ~ Binomial(n_h - 1, gamma), and the
// adversary knows K. Within a merged atom the outputs have proportional
// masses under omega, under x and under x', so the counts N of the K + 1
// reports per atom are a sufficient statistic. Given K, with M ~ Mult(K,
// omega) the counts of the draws,
//
//	P_K(N) = sum_j p_j Mult(K, omega)(N - e_j) = Mult(K+1, omega)(N) gamma A / (K+1),
//
// A = sum_j N_j p_j / r_j (Mult(K, w)(N - e_j) = Mult(K+1, w)(N) N_j /
// ((K+1) w_j)), and Q_K the same with B = sum_j N_j q_j / r_j. So
//
//	H_{e^eps}(P_K || Q_K) = h(K) := (1/(K+1)) E[(Y_1 + ... + Y_{K+1})_+],
//
// Y_i i.i.d. taking (p_j - e^eps q_j) / (r_j / gamma) with probability
// r_j / gamma: the engine's value (§7) at n = K + 1 for the atom set
// (r_j / gamma, p_j, q_j), which has no residual. Since K is seen, the
// batch's divergence is the mixture E[h(m + K')]. At m = 0 this is §3's
// bound (Binomial(n-1, gamma) (K) gamma / (K+1) = Binomial(n, gamma)(K+1)
// / n turns it into (1/n) E[(Z_1 + ... + Z_n)_+]); at n_h = 1 it is the
// exact divergence of the victim among m draws, for every candidate pair,
// hence a lower bound too.
//
// h does not increase. The view with K + 1 draws is a post-processing of
// the view with K (add one draw of omega, which uses no data, and
// reshuffle), so h(K + 1) <= h(K). Hence the batch's bound E[h(m + K')]
// does not increase in m, nor in n_h: Binomial(n_h, gamma) is
// Binomial(n_h - 1, gamma) plus an independent Bernoulli(gamma), so it
// grows stochastically with n_h. (Pair by pair, the view at n_h' >= n_h
// and m' >= m is a post-processing of the view at (n_h, m): add
// Binomial(n_h' - n_h, gamma) + m' - m draws and reshuffle; the collector,
// which counts lower bounds of both, relies on it.)
//
// The mixture. K' is cut into strata [e_i, e_{i+1}) at evaluated points
// e_0 < ... < e_L; on a stratum h(m + K') <= h(m + e_i) <= hi(e_i) and
// h(m + K') >= h(m + e_{i+1}) >= lo(e_{i+1}), with the engine's certified
// brackets (deltaBracket) made monotone (a running minimum of the upper
// ends from the left, a running maximum of the lower ends from the right,
// both valid since h does not increase). The binomial probabilities come
// from Loader's saddle point (logBinomPMF) on [mu - 40 sd - 40, mu + 40 sd
// + 40], summed per stratum and widened by a relative 1e-9 (upper) or
// narrowed by it (lower); the mass outside is bounded by the Chernoff bound
// exp(-N KL(a || gamma)) and counted at h <= 1 on the upper side, at 0 on
// the lower. Strata are bisected where their share of the gap is largest
// until the bracket is narrow enough.
//
// The lower end of the bracket bounds the floor's own value from below; it
// certifies how close the upper end is, not a lower bound on the
// mechanism's eps (which needs the others' values, §4), except at n_h = 1
// where the value is exact.

import (
	"fmt"
	"math"
	"slices"
	"sync"
)

// floorMaxPoints bounds the strata points a floor bracket evaluates at one
// eps; past it the bracket is returned as it stands (sound, maybe loose).
const floorMaxPoints = 400

// floorSparseMaxN is the largest batch at which a floor point may take the
// sparse exact path (which enumerates about n^(a-1)/(a-1)! terms for a set
// of a atoms without a residual, cheap only at small n).
const floorSparseMaxN = 100

// floorSet returns the atom set whose engine value at n = K + 1 is h(K):
// the blanket masses divided by gamma, so that they sum to 1.
func floorSet(s AtomSet) (AtomSet, float64) {
	g := s.Gamma()
	out := make(AtomSet, 0, len(s))
	for _, a := range s {
		if a.R > 0 {
			out = append(out, Atom{R: a.R / g, P: a.P, Q: a.Q})
		}
	}
	return out, g
}

// localDivergence returns sum_j (p_j - e^eps q_j)_+, the hockey-stick
// divergence of one report of the pair: h when there is no blanket.
func localDivergence(s AtomSet, eps float64) float64 {
	e := math.Exp(eps)
	var d float64
	for _, a := range s {
		if v := a.P - e*a.Q; v > 0 {
			d += v
		}
	}
	return math.Min(1, d*(1+1e-12))
}

// binomStrata is the law of K' ~ Binomial(N, gamma) on [lo, lo+len(pmf)),
// with upper bounds on the mass below and above.
type binomStrata struct {
	lo        int
	pmf       []float64
	tailBelow float64
	tailAbove float64
}

func newBinomStrata(N int, gamma float64) binomStrata {
	if N == 0 || gamma <= 0 {
		return binomStrata{lo: 0, pmf: []float64{1}}
	}
	if gamma >= 1 {
		return binomStrata{lo: N, pmf: []float64{1}}
	}
	nf := float64(N)
	mu := nf * gamma
	sd := math.Sqrt(mu * (1 - gamma))
	lo := int(math.Max(0, math.Floor(mu-40*sd-40)))
	hi := int(math.Min(nf, math.Ceil(mu+40*sd+40)))
	b := binomStrata{lo: lo, pmf: make([]float64, hi-lo+1)}
	for i := range b.pmf {
		b.pmf[i] = math.Exp(logBinomPMF(lo+i, N, gamma))
	}
	if lo > 0 {
		b.tailBelow = chernoffBinom(N, gamma, float64(lo-1)/nf)
	}
	if hi < N {
		b.tailAbove = chernoffBinom(N, gamma, float64(hi+1)/nf)
	}
	return b
}

// chernoffBinom returns exp(-N KL(a || g)), which bounds P(X <= a N) for a
// < g and P(X >= a N) for a > g, X ~ Binomial(N, g), times a margin for
// rounding.
// KL is computed with log1p for its second term; its rounding (a few ulps
// of terms of order 1) is paid by a relative 1e-9 and an absolute 1e-15
// per trial in the exponent.
func chernoffBinom(N int, g, a float64) float64 {
	kl := 0.0
	if a > 0 {
		kl += a * math.Log(a/g)
	}
	if a < 1 {
		kl += (1 - a) * (math.Log1p(-a) - math.Log1p(-g))
	}
	nf := float64(N)
	return math.Min(1, math.Exp(-nf*kl*(1-1e-9)+nf*1e-15)*(1+1e-9))
}

// mass returns the probability of [a, b] (indices of K'), a <= b, within
// the computed range, widened (up) or narrowed (!up) for rounding.
func (b *binomStrata) mass(a, c int, up bool) float64 {
	a, c = max(a, b.lo), min(c, b.lo+len(b.pmf)-1)
	var s float64
	for k := a; k <= c; k++ {
		s += b.pmf[k-b.lo]
	}
	if up {
		return s * (1 + 1e-9)
	}
	return s * (1 - 1e-9)
}

// floorSolver evaluates the floor bound of one pair for a batch of nh
// honest reports and m draws, memoising the engine's brackets of h.
type floorSolver struct {
	set   AtomSet // r/gamma, p, q
	gamma float64
	pair  AtomSet // the pair itself, for gamma = 0
	m, nh int
	law   binomStrata
	mu    sync.Mutex
	memo  map[[3]float64]bracket
}

func newFloorSolver(s AtomSet, m, nh int) *floorSolver {
	set, g := floorSet(s)
	f := &floorSolver{set: set, gamma: g, pair: s, m: m, nh: nh, memo: map[[3]float64]bracket{}}
	f.law = newBinomStrata(nh-1, math.Min(1, g))
	return f
}

// h brackets h(m + k) at eps: certified within Tolerance in eps
// (deltaBracket) when point is 0, else only refined until the bracket is
// within a relative point, up to pointRefine + 1 halvings of the lattice
// (a profile point's accuracy, profile.go).
func (f *floorSolver) h(k int, eps, point float64) bracket {
	key := [3]float64{float64(k), eps, point}
	f.mu.Lock()
	b, ok := f.memo[key]
	f.mu.Unlock()
	if ok {
		return b
	}
	// With honest others the strata evaluate many batch sizes, where the
	// sparse path would enumerate every multinomial term of a set without
	// a residual: past floorSparseMaxN the lattice brackets them in far
	// less time.
	sv := &setSolver{set: f.set, n: f.m + k + 1, hRel: hRelStart, latticeOnly: f.nh > 1 && f.m+k+1 > floorSparseMaxN}
	switch {
	case f.gamma <= 0:
		v := localDivergence(f.pair, eps)
		b = bracket{lo: v * (1 - 1e-12), hi: v}
	case point == 0:
		b, _ = deltaBracketOf(sv, eps)
	default:
		sv.hRel = hRelProfile
		b = bracket{lo: 0, hi: math.Inf(1)}
		for r := 0; r <= pointRefine+1; r++ {
			c := sv.eval(eps, true)
			b.lo, b.hi = math.Max(b.lo, c.lo), math.Min(b.hi, c.hi)
			if b.hi-b.lo <= point*b.hi || c.capped {
				break
			}
			sv.hRel /= 2
		}
	}
	b.hi = math.Min(b.hi, 1)
	f.mu.Lock()
	f.memo[key] = b
	f.mu.Unlock()
	return b
}

// bracket returns bounds on E[h(m + K')] at eps, refining the strata until
// hi <= lo (1 + rel), hi <= abs, no stratum can be split, or
// floorMaxPoints points have been evaluated; each point certified (h with
// point 0), or, with point > 0, to that relative accuracy.
func (f *floorSolver) bracket(eps, rel, point, abs float64) bracket {
	lo, hi := f.law.lo, f.law.lo+len(f.law.pmf)-1
	pts := []int{lo, hi}
	if hi > lo {
		mu := float64(f.nh-1) * f.gamma
		sd := math.Sqrt(mu * (1 - math.Min(1, f.gamma)))
		for _, j := range []float64{-8, -4, -2, -1, 0, 1, 2, 4, 8} {
			if p := int(math.Round(mu + j*sd)); p > lo && p < hi {
				pts = append(pts, p)
			}
		}
	}
	slices.Sort(pts)
	pts = slices.Compact(pts)
	for {
		bs := make([]bracket, len(pts))
		parallelMap(len(pts), func(i int) { bs[i] = f.h(pts[i], eps, point) })
		// Monotone envelopes: h does not increase.
		up, low := make([]float64, len(pts)), make([]float64, len(pts))
		for i := range pts {
			up[i] = bs[i].hi
			if i > 0 {
				up[i] = math.Min(up[i], up[i-1])
			}
		}
		for i := len(pts) - 1; i >= 0; i-- {
			low[i] = bs[i].lo
			if i < len(pts)-1 {
				low[i] = math.Max(low[i], low[i+1])
			}
		}
		res := bracket{hi: f.law.tailBelow + f.law.tailAbove*up[len(up)-1]}
		gaps := make([]float64, len(pts)-1)
		var pointGap, strataGap float64
		for i := range pts {
			if i == len(pts)-1 {
				res.hi += f.law.mass(pts[i], pts[i], true) * up[i]
				res.lo += f.law.mass(pts[i], pts[i], false) * low[i]
				break
			}
			// The stratum [e_i, e_{i+1}): above by h(e_i) throughout,
			// below by h(e_i) at e_i itself and by h(e_{i+1}) after it.
			pu := f.law.mass(pts[i], pts[i+1]-1, true)
			p0, pl := f.law.mass(pts[i], pts[i], false), f.law.mass(pts[i]+1, pts[i+1]-1, false)
			res.hi += pu * up[i]
			res.lo += p0*low[i] + pl*low[i+1]
			pointGap += pu * (up[i] - low[i])
			if pts[i+1]-pts[i] > 1 {
				gaps[i] = pl * (low[i] - low[i+1])
				strataGap += gaps[i]
			}
		}
		res.hi = math.Min(res.hi, 1)
		// Stop when the bracket is narrow enough, or when what splitting
		// strata can remove is small beside what the points' own brackets
		// leave (the engine's lattice, refined per point).
		if res.hi <= math.Max(abs, DeltaFloor) || res.hi <= res.lo*(1+rel) || strataGap <= rel*res.lo || strataGap <= pointGap/4 || len(pts) >= floorMaxPoints {
			return res
		}
		// Bisect the strata that hold the largest shares of the gap.
		if len(gaps) == 0 {
			return res
		}
		worst := slices.Max(gaps)
		if worst <= 0 {
			return res
		}
		var add []int
		for i, g := range gaps {
			if g >= worst/4 {
				add = append(add, (pts[i]+pts[i+1])/2)
			}
		}
		pts = append(pts, add...)
		slices.Sort(pts)
		pts = slices.Compact(pts)
	}
}

// floorEpsUpper returns the smallest eps (to rootTol) in [0, cap] whose
// floor bound is at most delta, certified within Tolerance when the second
// result is true.
func (f *floorSolver) epsUpper(delta, cap float64) (float64, bool) {
	if f.nh == 1 {
		if f.gamma <= 0 {
			return epsUpperLocal(f.pair, delta, cap)
		}
		return epsUpper(f.set, f.m+1, delta, cap)
	}
	// The search reads upper ends with points refined to a relative rel/2
	// (every one an upper bound); the certificate reads a lower end with
	// certified points.
	hi := cap
	for _, rel := range []float64{0.05, 0.01, 2e-3} {
		e, ok := solveDecreasing(func(e float64) float64 { return f.bracket(e, rel, rel/2, 0).hi }, delta, 0, hi)
		if !ok {
			return hi, false
		}
		if e == 0 {
			return 0, true
		}
		// The floor's exact value at e / (1 + certTol) exceeds delta.
		if f.bracket(e/(1+certTol), rel, 0, 0).lo > delta {
			return e, true
		}
		hi = e
	}
	return hi, false
}

// epsUpperLocal is the smallest eps with sum (p - e^eps q)_+ <= delta.
func epsUpperLocal(s AtomSet, delta, cap float64) (float64, bool) {
	e, ok := solveDecreasing(func(e float64) float64 { return localDivergence(s, e) }, delta, 0, cap)
	if !ok {
		return cap, true
	}
	return e, true
}

// checkFloor validates a floor query: nh honest reports (the victim's
// included) and m shuffler draws.
func checkFloor(nh, m int) error {
	if err := checkN(nh); err != nil {
		return err
	}
	if m < 0 || m > MaxN {
		return argError("floor", m, fmt.Sprintf("in [0, %d]", MaxN))
	}
	return nil
}

// checkFloorDecomposition refuses a floor for a decomposition whose
// blanket no plugin samples (Decomposition.Sampled).
func checkFloorDecomposition(d *Decomposition, floor int, what string) error {
	if floor > 0 && !d.Sampled {
		return fmt.Errorf("%w: floor: %s has no blanket a randomizer samples (a composition, WorstOf or the generic clone); a shuffler floor needs one randomizer's own declaration", ErrInvalidArgument, what)
	}
	return nil
}

// FloorDelta returns the privacy profile point at eps of a batch of
// honest reports (the victim's included, >= 1) to which the shuffler adds
// floor draws of m's blanket distribution at eps0: Upper bounds delta
// whatever else the batch holds. Lower is the exact divergence of the
// worst candidate pair when honest = 1 (the victim among the draws alone),
// else 0.
func FloorDelta(m Mechanism, eps0 float64, honest, floor int, eps float64) (DeltaResult, error) {
	if err := checkQuery(eps0, honest); err != nil {
		return DeltaResult{}, err
	}
	if err := checkFloor(honest, floor); err != nil {
		return DeltaResult{}, err
	}
	if err := checkEps("eps", eps); err != nil {
		return DeltaResult{}, err
	}
	d, err := m.Decompose(eps0)
	if err != nil {
		return DeltaResult{}, err
	}
	if err := checkFloorDecomposition(d, floor, m.String()); err != nil {
		return DeltaResult{}, err
	}
	return floorDeltaOf(d, honest, floor, eps), nil
}

func floorDeltaOf(d *Decomposition, honest, floor int, eps float64) DeltaResult {
	res := make([]bracket, len(d.Upper))
	for i, s := range d.Upper {
		res[i] = newFloorSolver(s, floor, honest).bracket(eps, 1e-3, 0, 0)
	}
	var r DeltaResult
	for _, b := range res {
		r.Upper = math.Max(r.Upper, b.hi)
		if honest == 1 && d.ExactPairs {
			r.Lower = math.Max(r.Lower, b.lo)
		}
	}
	r.Upper = math.Min(r.Upper, 1)
	return r
}

// FloorEpsilon returns the central eps at delta of a batch of honest
// reports (the victim's included, >= 1) to which the shuffler adds floor
// draws of m's blanket distribution at eps0: Upper holds whatever else the
// batch holds. Lower is the exact eps of the worst candidate pair when
// honest = 1 and the candidates are exact pairs (Decomposition.ExactPairs),
// else 0; Tight says whether Upper was certified within
// Tolerance of the floor's exact value.
func FloorEpsilon(m Mechanism, eps0 float64, honest, floor int, delta float64) (EpsilonResult, error) {
	if err := checkQuery(eps0, honest); err != nil {
		return EpsilonResult{}, err
	}
	if err := checkFloor(honest, floor); err != nil {
		return EpsilonResult{}, err
	}
	if err := checkDelta("delta", delta); err != nil {
		return EpsilonResult{}, err
	}
	d, err := m.Decompose(eps0)
	if err != nil {
		return EpsilonResult{}, err
	}
	if err := checkFloorDecomposition(d, floor, m.String()); err != nil {
		return EpsilonResult{}, err
	}
	return floorEpsilonOf(d, honest, floor, delta), nil
}

func floorEpsilonOf(d *Decomposition, honest, floor int, delta float64) EpsilonResult {
	cap := d.LocalEps
	ups := make([]float64, len(d.Upper))
	oks := make([]bool, len(d.Upper))
	lows := make([]float64, len(d.Upper))
	for i, s := range d.Upper {
		f := newFloorSolver(s, floor, honest)
		ups[i], oks[i] = f.epsUpper(delta, cap)
		if honest == 1 && f.gamma > 0 && d.ExactPairs {
			lows[i], _, _ = epsLower(f.set, floor+1, delta, cap, nil)
		}
	}
	r := EpsilonResult{LocalEps: cap, Tight: true}
	for i, v := range ups {
		if v >= r.Upper {
			r.Upper = v
			r.Tight = r.Tight && oks[i]
		}
		r.Lower = math.Max(r.Lower, lows[i])
	}
	r.Upper = math.Min(r.Upper, cap)
	r.Amplified = r.Upper < cap*(1-rootTol)
	if !r.Amplified {
		r.Upper = cap
	}
	r.Lower = math.Min(r.Lower, r.Upper)
	return r
}

// The coupled floor, for compositions. Over several rounds the strata of
// the mixture are evaluated at every profile point, which is slow with
// many honest others; a composition then bounds a floor part by §3's bound
// at a larger batch instead, plus a small additive term:
//
// Let B ~ Binomial(M, gamma), independent of K', with M the largest batch
// such that P(B > m) <= eta. Then K'' = K' + B ~ Binomial(n_h - 1 + M,
// gamma), and on the event B <= m, m + K' >= K'', so h(m + K') <= h(K'')
// (h does not increase). Hand the adversary the indicator of that event
// (it depends on no one's data): the round's pair is a mixture, with
// weight at least 1 - eta, of a post-processing of the pair of §3 at n_c =
// n_h + M, and of something else, whose profile is at most 1. So the
// round's profile is at most §3's at n_c plus eta, for every eps, and over
// T rounds (condition on which rounds fell outside the event) the
// composition's is at most the composition of §3's pairs at n_c plus
// T eta. M uses the largest gamma of the candidate pairs' (the coupling
// holds for each, since P(B > m) grows with gamma, and §3's bound at n_c
// with each pair's own gamma is what the coupling gives). M falls
// short of m / gamma by about 9 standard deviations of Binomial(m/gamma,
// gamma) at eta = 1e-18, which matters for small m: a composition keeps
// the strata where they are few (floorStrataCheap), and otherwise takes,
// per part, the coupled bound or the draws alone (exact, and a bound with
// any honest others too, since more draws only help), whichever counts
// more blanket draws on average ((n_c - 1) gamma against m).

// floorEta is the additive term per round of a coupled floor part.
const floorEta = 1e-18

// floorCoupling selects the coupled floor for compositions with honest
// others, where floorStrataMax counts are too few for the strata; the
// tests change them to compare the two.
var (
	floorCoupling  = true
	floorStrataMax = 64.0
)

// floorCoupledN returns n_c = nh + M for nh honest reports and m draws of a
// blanket of mass gamma, M the largest with P(Binomial(M, gamma) > m) <=
// eta by the Chernoff bound exp(-M KL((m+1)/M || gamma)); nh when no M > 0
// qualifies.
func floorCoupledN(nh, m int, gamma, eta float64) int {
	if m <= 0 || gamma <= 0 {
		return nh
	}
	if gamma >= 1 {
		return nh + m
	}
	ok := func(M int) bool {
		if M <= m {
			return true // B <= M <= m surely
		}
		a := float64(m+1) / float64(M)
		if a <= gamma {
			return false
		}
		return chernoffBinom(M, gamma, a) <= eta
	}
	lo, hi := m, int(math.Min(float64(m)/gamma+1, float64(MaxN-nh)))
	for hi > lo && !ok(hi) {
		// Binary search for the largest M in [lo, hi] that qualifies.
		mid := lo + (hi-lo+1)/2
		if ok(mid) {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	return nh + hi
}

// floorStrataCheap reports whether the strata of a floor with nh honest
// reports stay few enough to evaluate at every profile point of a
// composition: the binomials' 16 standard deviations span at most 64
// counts for every candidate pair.
func floorStrataCheap(d *Decomposition, nh int) bool {
	for _, s := range d.Upper {
		g := math.Min(1, s.Gamma())
		if 16*math.Sqrt(float64(nh-1)*g*(1-g)) > floorStrataMax {
			return false
		}
	}
	return true
}

// floorCoupledPart returns the batch size at which a composition samples a
// floor part with honest others (the coupled bound), from its
// decomposition's candidate pairs, and the largest blanket mass among
// them.
func floorCoupledPart(d *Decomposition, nh, m int) (int, float64) {
	// The coupling must hold for every candidate: P(Binomial(M, gamma_i)
	// > m) <= eta grows with gamma_i, so M is chosen at the largest
	// (found in review: the smallest let a candidate with a larger gamma
	// count far more draws than its coupling allows).
	g := 0.0
	for _, s := range d.Upper {
		g = math.Max(g, s.Gamma())
	}
	return floorCoupledN(nh, m, g, floorEta), g
}
