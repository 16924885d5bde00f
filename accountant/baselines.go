package accountant

import (
	"fmt"
	"math"
)

// This file holds the closed-form amplification-by-shuffling bounds of the
// literature (docs/accounting.md §6), used as baselines. They are independent of the
// lattice engine: each is a formula in (eps0, n, eps, delta), plus a bracketing
// solve where the paper states the bound the other way round.
//
// Conventions shared by the three entry points:
//
//   - Inputs must be finite, eps0 in (0, MaxEps0], n >= 1, krr == 0 (generic)
//     or krr >= 2 (k-ary randomized response), eps >= 0 and delta in (0,1).
//     Anything else gives ok == false.
//   - ok == false also where the bound's own conditions cannot hold
//     (FMT21: eps0 <= log(n/(16 log(2/delta))); EFMRTT19: eps0 < 1/2,
//     n >= 1000, delta < 1/100).
//   - Shuffling never hurts: an eps above eps0 is reported as eps0, and at
//     eps >= eps0 the delta is 0 (the shuffled mechanism is eps0-DP).
//   - A delta of 1 from ClosedFormDelta means the bound certifies nothing at
//     that eps (it is vacuous there, though its conditions hold).

// ClosedForm identifies a closed-form baseline bound.
type ClosedForm int

const (
	// FMT21 is the bound of Feldman, McMillan and Talwar 2021 ("Hiding among
	// the clones"), eq. (1) of an earlier version of the paper (Theorem 2.1
	// there; docs/accounting.md §6):
	//
	//	eps = log(1 + (1 - e^-2eps0) (8 sqrt(e^eps0 log(4/delta)/n) + 8 e^eps0/n)),
	//
	// valid when eps0 <= log(n/(16 log(2/delta))). Later versions of the
	// paper (Theorem 3.1) state the smaller factor tanh(eps0/2) in place of
	// 1 - e^-2eps0; we keep the larger, conservative one. It is generic: krr
	// is ignored.
	FMT21 ClosedForm = iota
	// BBGN19Hoeffding is the Hoeffding bound of Balle, Bell, Gascon and
	// Nissim 2019 ("The privacy blanket of the shuffle model"): Theorem 5.3,
	// eq. (4), for a generic eps0-LDP randomizer (krr == 0), or Lemmas 5.1,
	// 5.3, 5.7 and 5.5 for k-ary randomized response (krr == k).
	BBGN19Hoeffding
	// BBGN19Bennett is the Bennett bound of Balle et al. 2019: Lemmas 5.2,
	// 5.3, 5.4 and 5.6 for a generic randomizer (krr == 0), or Lemmas 5.1,
	// 5.3, 5.7 and 5.6 for k-ary randomized response (krr == k).
	BBGN19Bennett
	// EFMRTT19 is the bound of Erlingsson, Feldman, Mironov, Raghunathan,
	// Talwar and Thakurta 2019 as restated in Balle et al. 2019, Theorem 5.1:
	// eps = 12 eps0 sqrt(log(1/delta)/n) for eps0 < 1/2, n >= 1000 and
	// delta < 1/100. It is generic: krr is ignored.
	EFMRTT19
)

// String returns the baseline's short name ("fmt21", "bbgn19_hoeffding",
// "bbgn19_bennett", "efmrtt19"), the same keys as the Baseline* constants.
func (b ClosedForm) String() string {
	switch b {
	case FMT21:
		return BaselineFMT21
	case BBGN19Hoeffding:
		return BaselineBBGN19Hoeffding
	case BBGN19Bennett:
		return BaselineBBGN19Bennett
	case EFMRTT19:
		return BaselineEFMRTT19
	}
	return fmt.Sprintf("ClosedForm(%d)", int(b))
}

// cfHoeffdingC is C = 1 - e^-2 of Balle et al. 2019, Theorem 5.3.
var cfHoeffdingC = -math.Expm1(-2)

// cfEFMRTTMaxEps0, cfEFMRTTMinN and cfEFMRTTMaxDelta are the (strict,
// inclusive, strict) conditions of Erlingsson et al. 2019 as restated in
// Balle et al. 2019, Theorem 5.1: eps0 < 1/2, n >= 1000, delta < 1/100.
const (
	cfEFMRTTMaxEps0  = 0.5
	cfEFMRTTMinN     = 1000
	cfEFMRTTMaxDelta = 0.01
)

// cfRelTol is the relative precision of the bracketing solves. The exported
// contract is 1e-9; the solves stop ten times tighter.
const cfRelTol = 1e-10

func cfFinite(xs ...float64) bool {
	for _, x := range xs {
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return false
		}
	}
	return true
}

// cfValid checks the inputs shared by all entry points.
func cfValid(b ClosedForm, eps0 float64, krr, n int) bool {
	if b < FMT21 || b > EFMRTT19 {
		return false
	}
	if !cfFinite(eps0) || !(eps0 > 0) || eps0 > MaxEps0 {
		return false
	}
	if n < 1 || krr < 0 || krr == 1 {
		return false
	}
	return true
}

// ClosedFormDelta returns the delta the baseline guarantees at central eps
// for an eps0-LDP randomizer shuffled among n users; krr > 0 selects the
// k-RR-specific variant where one exists (BBGN19), krr == 0 the generic one.
// ok is false where the bound does not apply (invalid input, or its
// conditions fail for every delta < 1: FMT21 needs some delta < 1 with
// eps0 <= log(n/(16 log(2/delta))); EFMRTT19 needs eps0 < 1/2 and
// n >= 1000). The result is 0 for eps >= eps0 and 1 where the bound is
// vacuous at eps. FMT21 and EFMRTT19, stated as eps(delta), are inverted in
// closed form. The BBGN19 bounds, stated as delta(eps), are not monotone in
// eps near eps0; since (eps', delta)-DP implies (eps, delta)-DP for
// eps' <= eps, the result is the bound at min(eps, its minimizer over
// (0, eps0)), which makes it non-increasing in eps.
func ClosedFormDelta(b ClosedForm, eps0 float64, krr int, n int, eps float64) (delta float64, ok bool) {
	if !cfValid(b, eps0, krr, n) || !cfFinite(eps) || eps < 0 {
		return 0, false
	}
	nf := float64(n)
	switch b {
	case FMT21:
		dmin := cfFMTMinDelta(eps0, nf)
		if !(dmin < 1) {
			return 0, false
		}
		if eps >= eps0 {
			return 0, true
		}
		return math.Max(cfFMTDelta(eps0, nf, eps), dmin), true
	case EFMRTT19:
		if !(eps0 < cfEFMRTTMaxEps0) || n < cfEFMRTTMinN {
			return 0, false
		}
		if eps >= eps0 {
			return 0, true
		}
		r := eps / (12 * eps0)
		d := math.Exp(-nf * r * r)
		if !(d < cfEFMRTTMaxDelta) {
			return 1, true
		}
		return d, true
	}
	if eps >= eps0 {
		return 0, true
	}
	// (eps', delta)-DP implies (eps, delta)-DP for eps' <= eps, and the
	// BBGN19 bounds rise again as eps approaches eps0, so report the bound at
	// min(eps, its minimizer).
	f := func(e float64) float64 { return cfBBGNLogDelta(b, eps0, krr, nf, e) }
	e := math.Min(eps, cfArgmin(f, 0, eps0))
	return math.Min(1, math.Exp(f(e))), true
}

// ClosedFormEpsilon returns the smallest eps (to relative precision 1e-9) at
// which the baseline guarantees delta, capped at eps0 (shuffling never
// hurts); ok=false where it does not apply (invalid input, FMT21 with
// eps0 > log(n/(16 log(2/delta))), EFMRTT19 with eps0 >= 1/2, n < 1000 or
// delta >= 1/100). For FMT21 and EFMRTT19 eps is the paper's closed form;
// for BBGN19, stated as delta(eps), it is found by bisection on eps below the
// bound's minimizer, and the bound holds at the returned eps.
func ClosedFormEpsilon(b ClosedForm, eps0 float64, krr int, n int, delta float64) (eps float64, ok bool) {
	if !cfValid(b, eps0, krr, n) || !cfFinite(delta) || !(delta > 0 && delta < 1) {
		return 0, false
	}
	nf := float64(n)
	switch b {
	case FMT21:
		if !cfFMTApplies(eps0, nf, delta) {
			return 0, false
		}
		return math.Min(cfFMTEps(eps0, nf, delta), eps0), true
	case EFMRTT19:
		if !(eps0 < cfEFMRTTMaxEps0) || n < cfEFMRTTMinN || !(delta < cfEFMRTTMaxDelta) {
			return 0, false
		}
		return math.Min(12*eps0*math.Sqrt(math.Log(1/delta)/nf), eps0), true
	}
	// The bound decreases in eps up to its minimizer m and (in the cases
	// that matter, with delta < 1) rises after it; search [0, m].
	f := func(e float64) float64 { return cfBBGNLogDelta(b, eps0, krr, nf, e) }
	logDelta := math.Log(delta)
	meets := func(e float64) bool { return f(e) <= logDelta }
	m := cfArgmin(f, 0, eps0)
	if !meets(m) {
		return eps0, true
	}
	// meets(0) is false: at eps = 0 both bounds are infinite (a = 0).
	return cfBisect(meets, 0, m), true
}

// ClosedFormCalibrate returns the largest eps0 (to relative precision 1e-9,
// rounded down) at which the baseline guarantees (eps, delta) for n users,
// ok=false if none. With the eps0 cap of ClosedFormEpsilon every
// eps0 <= eps qualifies where the bound's conditions hold, so the result is
// at least min(eps, the largest eps0 meeting the conditions). The search is
// over (0, MaxEps0].
func ClosedFormCalibrate(b ClosedForm, krr int, n int, eps, delta float64) (eps0 float64, ok bool) {
	if !cfValid(b, 1, krr, n) || !cfFinite(eps, delta) || !(eps > 0) || !(delta > 0 && delta < 1) {
		return 0, false
	}
	nf := float64(n)
	hi := MaxEps0
	switch b {
	case FMT21:
		// eps0 <= log(n/(16 log(2/delta))).
		hi = math.Min(hi, math.Log(nf/(16*math.Log(2/delta))))
	case EFMRTT19:
		if n < cfEFMRTTMinN || !(delta < cfEFMRTTMaxDelta) {
			return 0, false
		}
		hi = math.Nextafter(cfEFMRTTMaxEps0, 0)
	}
	if !(hi > 0) {
		return 0, false
	}
	meets := func(e0 float64) bool {
		got, ok := ClosedFormEpsilon(b, e0, krr, n, delta)
		return ok && got <= eps
	}
	if meets(hi) {
		return hi, true
	}
	lo := math.Min(eps, hi)
	if !meets(lo) {
		// Only reachable through rounding at the condition boundary.
		return 0, false
	}
	// Bisect for the largest eps0 that meets the target; meets is monotone
	// (every bound here grows with eps0, and the conditions are eps0 <= c).
	lo, _ = cfBisectDown(meets, lo, hi)
	return lo, true
}

// cfBisect returns the smallest x in (lo, hi] with meets(x) true, to relative
// precision cfRelTol, given meets(hi) and !meets(lo) and meets monotone. It
// returns the feasible end of the final bracket.
func cfBisect(meets func(float64) bool, lo, hi float64) float64 {
	for i := 0; i < 2000 && hi-lo > cfRelTol*hi; i++ {
		mid := lo + (hi-lo)/2
		if lo > 0 && hi/lo > 4 {
			mid = math.Sqrt(lo * hi) // geometric steps while the bracket spans decades
		}
		if mid <= lo || mid >= hi {
			break
		}
		if meets(mid) {
			hi = mid
		} else {
			lo = mid
		}
	}
	return hi
}

// cfBisectDown returns the largest x in [lo, hi) with meets(x) true, to
// relative precision cfRelTol, given meets(lo) and !meets(hi); it returns
// the bracket (feasible lo, infeasible hi).
func cfBisectDown(meets func(float64) bool, lo, hi float64) (float64, float64) {
	for i := 0; i < 2000 && hi-lo > cfRelTol*hi; i++ {
		mid := lo + (hi-lo)/2
		if lo > 0 && hi/lo > 4 {
			mid = math.Sqrt(lo * hi)
		}
		if mid <= lo || mid >= hi {
			break
		}
		if meets(mid) {
			lo = mid
		} else {
			hi = mid
		}
	}
	return lo, hi
}

// cfArgmin returns a point of the open interval (lo, hi) with the smallest f
// found by a golden-section search: the minimizer for unimodal f, and for any
// f a point where f was evaluated, so a bound read there is still valid. The
// end points are never evaluated (the k-RR Bennett bound jumps to 0 at
// eps = eps0, where Lemma 5.6 degenerates).
func cfArgmin(f func(float64) float64, lo, hi float64) float64 {
	const invPhi = 0.6180339887498949 // (sqrt(5)-1)/2
	a, b := lo, hi
	x1, x2 := b-invPhi*(b-a), a+invPhi*(b-a)
	f1, f2 := f(x1), f(x2)
	for i := 0; i < 200 && b-a > 1e-13*hi; i++ {
		if f1 <= f2 {
			b, x2, f2 = x2, x1, f1
			x1 = b - invPhi*(b-a)
			f1 = f(x1)
		} else {
			a, x1, f1 = x1, x2, f2
			x2 = a + invPhi*(b-a)
			f2 = f(x2)
		}
	}
	if f1 <= f2 {
		return x1
	}
	return x2
}

// --- FMT21 -----------------------------------------------------------------

// cfFMTFactor is the eps0 factor of eq. (1) in the project's copy of the
// fmt21 paper: 1 - e^-2eps0. (Later versions state the smaller tanh(eps0/2);
// this one dominates it, so it is the conservative reading.)
func cfFMTFactor(eps0 float64) float64 { return -math.Expm1(-2 * eps0) }

// cfFMTEps is eq. (1) of the fmt21 paper.
func cfFMTEps(eps0, n, delta float64) float64 {
	e0 := math.Exp(eps0)
	x := cfFMTFactor(eps0) * (8*math.Sqrt(e0*math.Log(4/delta)/n) + 8*e0/n)
	return math.Log1p(x)
}

// cfFMTApplies is the condition of the fmt21 theorem:
// eps0 <= log(n/(16 log(2/delta))).
func cfFMTApplies(eps0, n, delta float64) bool {
	return eps0 <= math.Log(n/(16*math.Log(2/delta)))
}

// cfFMTMinDelta is the smallest delta at which the fmt21 condition holds:
// eps0 <= log(n/(16 log(2/delta))) iff delta >= 2 exp(-n e^-eps0 / 16).
func cfFMTMinDelta(eps0, n float64) float64 {
	return 2 * math.Exp(-n*math.Exp(-eps0)/16)
}

// cfFMTDelta inverts eq. (1) exactly: the delta whose eps is the given one,
// or 1 if none below 1 exists.
func cfFMTDelta(eps0, n, eps float64) float64 {
	e0 := math.Exp(eps0)
	// (e^eps - 1)/K - 8 e^eps0/n = 8 sqrt(e^eps0 log(4/delta)/n).
	t := math.Expm1(eps)/cfFMTFactor(eps0) - 8*e0/n
	if !(t > 0) {
		return 1
	}
	l4 := n * t * t / (64 * e0) // log(4/delta)
	return math.Min(1, 4*math.Exp(-l4))
}

// --- BBGN19 ----------------------------------------------------------------

// cfBBGNLogDelta returns the log of the BBGN19 bound on delta at eps, for
// 0 <= eps < eps0 (+Inf at eps = 0). It is not capped at 0 (delta 1).
func cfBBGNLogDelta(b ClosedForm, eps0 float64, krr int, n, eps float64) float64 {
	if !(eps > 0) {
		return math.Inf(1)
	}
	if b == BBGN19Hoeffding && krr == 0 {
		return cfBBGNHoeffdingGenericLog(eps0, n, eps)
	}
	a := math.Expm1(eps) // -E L = e^eps - 1 (Lemma 5.4 (1))
	var gamma, logK, s float64
	if krr == 0 {
		// Generic randomizer, Lemmas 5.2 and 5.4. The Bennett term below is
		// increasing in b+ and in c, so we take their suprema over the
		// unknown gamma in [e^-eps0, 1]; what remains,
		// (1/(gamma n)) sum_m Bin(n,gamma)(m) K e^{-s m}, equals
		// E_{J~Bin(n-1,gamma)}[K e^{-s(J+1)}/(J+1)] and is decreasing in
		// gamma, so its worst case is gamma = e^-eps0.
		gamma = math.Exp(-eps0)
		bPlus := math.Exp(eps0) - math.Exp(eps-eps0) // gamma e^eps0 (1 - e^(eps-2eps0)) at gamma = 1
		logK, s = cfBennett(a, bPlus, cfGenericSecondMoment(eps0, eps))
	} else {
		// k-ary randomized response, Lemmas 5.1 and 5.7.
		k := float64(krr)
		em1 := math.Expm1(eps0)
		gamma = k / (em1 + k)            // k/(e^eps0 + k - 1)
		oneMinusGamma := em1 / (em1 + k) // computed without cancellation
		kTerm := oneMinusGamma * k       // (1-gamma) k = gamma (e^eps0 - 1)
		if b == BBGN19Hoeffding {
			// Range b = b+ - b- = (1-gamma) k (1 + e^eps), Lemma 5.7 (1).
			r := kTerm * (1 + math.Exp(eps))
			logK, s = cfHoeffding(a, r)
		} else {
			// b+ = gamma (1 - e^eps) + (1-gamma) k = gamma (e^eps0 - e^eps).
			bPlus := gamma * (math.Exp(eps0) - math.Exp(eps))
			if !(bPlus > 0) {
				// L <= 0 almost surely, so E[sum L]_+ = 0.
				return math.Inf(-1)
			}
			// E L^2, Lemma 5.7 (2).
			c := gamma*(1+oneMinusGamma)*a*a + oneMinusGamma*oneMinusGamma*k*(1+math.Exp(2*eps))
			logK, s = cfBennett(a, bPlus, c)
		}
	}
	// Lemma 5.3: delta <= (1/(gamma n)) sum_{m=1}^n Bin(n,gamma)(m) E[sum_{i<=m} L_i]_+
	// with E[sum_{i<=m} L_i]_+ <= K e^{-s m}.
	return logK + cfLogBinomialSum(n, gamma, s) - math.Log(gamma*n)
}

// cfBBGNHoeffdingGenericLog is the log of the left-hand side of eq. (4),
// Balle et al. 2019, Theorem 5.3:
//
//	(e^eps+1)^2 (e^eps0-e^-eps0)^2 / (4 n (e^eps-1))
//	  * exp(-C n min(e^-eps0, (e^eps-1)^2 / ((e^eps+1)^2 (e^eps0-e^-eps0)^2))).
func cfBBGNHoeffdingGenericLog(eps0, n, eps float64) float64 {
	d := 2 * math.Sinh(eps0) // e^eps0 - e^-eps0
	t := math.Tanh(eps / 2)  // (e^eps-1)/(e^eps+1)
	ratio := t / d
	x := math.Min(math.Exp(-eps0), ratio*ratio)
	return 2*math.Log1p(math.Exp(eps)) + 2*math.Log(d) - math.Log(4*n) - math.Log(math.Expm1(eps)) - cfHoeffdingC*n*x
}

// cfGenericSecondMoment is sup over gamma in [e^-eps0, 1] of the bound of
// Lemma 5.4 (3): gamma e^eps0 (e^2eps + 1) - 2 gamma^2 e^(eps - 2eps0), a
// concave quadratic in gamma.
func cfGenericSecondMoment(eps0, eps float64) float64 {
	lin := math.Exp(eps0) * (math.Exp(2*eps) + 1)
	quad := 2 * math.Exp(eps-2*eps0)
	g := lin / (2 * quad) // vertex
	g = math.Max(math.Exp(-eps0), math.Min(1, g))
	return g*lin - g*g*quad
}

// cfHoeffding returns (log K, s) with E[sum_{i<=m} L_i]_+ <= K e^{-s m}, Lemma
// 5.5: K = b^2/(4a), s = 2a^2/b^2, for E L = -a and range b.
func cfHoeffding(a, b float64) (logK, s float64) {
	return 2*math.Log(b) - math.Log(4*a), 2 * (a / b) * (a / b)
}

// cfBennett returns (log K, s) with E[sum_{i<=m} L_i]_+ <= K e^{-s m}, Lemma
// 5.6 for E L = -a, L <= b+ and E L^2 <= c: K = b+/log(1 + a b+/c),
// s = (c/b+^2) phi(a b+/c), phi(u) = (1+u) log(1+u) - u.
//
// The lemma as printed has K = b+/(a m log(1 + a b+/c)). Its proof (Lemma
// A.4 with h(t) = (mc/b+^2) phi((t+am) b+/(mc)), so h'(0) = log(1+a b+/c)/b+)
// gives K = b+/log(1 + a b+/c) with no 1/(a m); the printed extra factor
// would make the bound smaller whenever a m > 1, i.e. unsound. We use the
// proof's value, which is also what the authors' released code computes.
func cfBennett(a, bPlus, c float64) (logK, s float64) {
	u := a * bPlus / c
	return math.Log(bPlus) - math.Log(math.Log1p(u)), c / (bPlus * bPlus) * cfPhi(u)
}

// cfPhi is phi(u) = (1+u) log(1+u) - u, by its series for small u, where the
// closed form cancels.
func cfPhi(u float64) float64 {
	if u < 1e-3 {
		// u^2/2 - u^3/6 + u^4/12 - u^5/20; the next term, u^6/30, is below
		// 4e-14 u^2.
		return u * u * (0.5 - u*(1.0/6-u*(1.0/12-u/20)))
	}
	return (1+u)*math.Log1p(u) - u
}

// cfLogBinomialSum returns log sum_{m=1}^n Bin(n,gamma)(m) e^{-s m} for
// 0 < gamma < 1 and s >= 0, exactly, from the generating function:
//
//	sum_{m=0}^n Bin(n,gamma)(m) e^{-s m} = (1 - gamma (1 - e^-s))^n =: A^n,
//
// minus the m = 0 term (1-gamma)^n; in logs,
// n log A + log(1 - ((1-gamma)/A)^n), evaluated with log1p/expm1 so that it
// stays accurate for n up to 1e10 and any s.
func cfLogBinomialSum(n, gamma, s float64) float64 {
	logA := math.Log1p(gamma * math.Expm1(-s)) // log(1 - gamma(1 - e^-s))
	// ((1-gamma)/A)^n = exp(-n log(1 + gamma e^-s/(1-gamma))).
	r := math.Log1p(gamma * math.Exp(-s) / (1 - gamma))
	return n*logA + math.Log(-math.Expm1(-n*r))
}
