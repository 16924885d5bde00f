package accountant

import (
	"fmt"
	"math"
)

// This file holds the optimal composition theorem of Kairouz, Oh and
// Viswanath 2015 (Theorems 3.3 and 3.5; Murtagh and Vadhan 2016 for an
// arbitrary eps), a baseline for privacy over time (docs/time.md section 4).
//
// Why the formula holds. Every (eps1, delta1)-DP mechanism is dominated by
// the pair whose privacy loss is +inf with P-mass delta1 and otherwise that
// of randomized response: +eps1 with P-mass (1-delta1) p and -eps1 with
// P-mass (1-delta1)(1-p), p = e^eps1/(1+e^eps1) (KOV15 Thm 2.1 / Lemma 3.2).
// Composition adds independent losses, so the k-fold loss is +inf unless all
// k copies avoid the delta1 atom (probability (1-delta1)^k), and otherwise
// (k - 2l) eps1 with l ~ Binomial(k, 1-p) the number of -eps1 steps. Reading
// the profile off the loss, delta(eps) = E_P[(1 - e^(eps - L))_+]:
//
//	delta(eps) = A + (1-A) S(eps),  A = 1 - (1-delta1)^k,
//	S(eps) = sum_{l : (k-2l) eps1 > eps} Bin(k, s)(l) (1 - e^(eps - (k-2l) eps1)),
//	s = 1 - p = 1/(1+e^eps1).
//
// Evaluation. S is a sum of positive terms t_l, computed in log space:
// log Bin(k, s)(l) by Loader's saddle-point method (logBinomPMF, no
// cancellation of log-gamma values) and log(1 - e^g) by kovLog1mExp. Both
// factors are log-concave in l (the binomial pmf is; log(1 - e^(-x)) is
// concave in x and x = (k-2l) eps1 - eps is affine in l), so t_l is
// unimodal. We locate its peak by bisection on the sign of
// log t_(l+1) - log t_l, then walk outwards. Log-concavity makes the ratios
// t_(l-1)/t_l non-increasing as the walk goes down (and t_(l+1)/t_l as it
// goes up), so once a step's ratio r is below 1 everything beyond is at most
// t_l r/(1-r); the walk stops when that bound is below 2^-60 of the partial
// sum and the bound is added. The work is O(sqrt(k) + log k).
//
// Floating point, and why the result is never below the exact value. Let
// u = 2^-53.
//
//   - The plateau A is -expm1(k log1p(-delta1)), relative error <= 4u,
//     multiplied by 1 + 8u and capped at k delta1 rounded up (Bernoulli's
//     inequality): an upper bound, and exactly k delta1 when that is the
//     smaller, so that delta1 = delta/k stays feasible at eps = k eps1.
//   - The gap g = eps - m eps1 (m = k - 2l) is one fused multiply-add,
//     fl(eps - m eps1) with a single rounding: its sign is exact (rounding to
//     nearest keeps the sign of a non-zero multiple of 2^-1074), so the set
//     of terms is exact, and its relative error is at most u.
//   - S, in the range that matters (results >= DeltaFloor = 1e-250, where
//     every term that affects the result to a relative 1e-15 has a log of
//     magnitude below 700 + log k): the per-term relative errors are, for
//     kovLog1mExp(g), at most 4u (2u from g); for the binomial log-pmf, a
//     few hundred u from Loader's method (measured in the tests against
//     320-bit evaluation: below 1e-13) plus at most 4 k u from the rounding
//     of s (d log pmf / ds = (l - k s)/(s(1-s)), |l - k s| <= k, s has
//     relative error <= 2u); for the exponentials and log-space offsets,
//     about 700u each. Summing at most k+1 positive terms adds (k+1) u.
//   - (1-A) S = exp(x + log S), x = k log1p(-delta1): the argument carries
//     an absolute error of about u |log S| + 3u |x|. Where (1-A) S does not
//     underflow, |x| < 745 and (as above) |log S| < 700 + log k, so that is
//     below 3000u; where it underflows, A >= 1 - e^-745 and the 8u A added
//     to the plateau exceeds it. A positive (1-A) S that underflows is
//     counted as the smallest positive float64.
//
// Together the relative error of (1-A) S is below 1e-10 + 6 k u; it is
// multiplied by 1 + kovMargin, kovMargin = 1e-9 + 8 k u, at least ten times
// that. The sum A + (1-A) S is rounded up (the next float64 when TwoSum
// reports it inexact) and capped at 1 (a hockey-stick divergence never
// exceeds 1). A positive value below DeltaFloor is reported as DeltaFloor,
// still an upper bound; outside the range the analysis covers (exact value
// below DeltaFloor) that floor is the bound. The exact zero (delta1 = 0 and
// eps >= k eps1) is returned as 0.

// KOV15MaxK is the largest number of compositions KOV15Delta and
// KOV15Epsilon accept.
const KOV15MaxK = 10_000_000

// kovTailRel is the relative size of the geometric tail bound at which the
// walk over the terms of S stops (the bound itself is added).
const kovTailRel = 0x1p-60

// kovLogSlack is added to every computed log-ratio of consecutive terms
// before the tail bound is formed: it exceeds twice the largest per-term log
// error (about 1e-10), so the computed ratio is never below the true one.
const kovLogSlack = 1e-9

// kovMargin is the relative safety factor applied to the result (see the
// floating-point argument above).
func kovMargin(k int) float64 { return 1e-9 + 8*float64(k)*ulp }

// KOV15Delta returns an upper bound on the optimal delta at eps of the
// k-fold adaptive composition of mechanisms that are each (eps1, delta1)-DP
// (Kairouz, Oh, Viswanath 2015, Theorem 3.5; Murtagh, Vadhan 2016):
//
//	delta(eps) = 1 - (1-delta1)^k + (1-delta1)^k sum_{l=0}^{k} C(k,l) p^(k-l) (1-p)^l (1 - e^(eps - (k-2l) eps1))_+,
//
// p = e^eps1/(1+e^eps1). The bound is never below the exact value of the
// formula at the given float64 inputs and exceeds it by a relative
// 1e-9 + 8.9e-16 k at most; a positive value below DeltaFloor is reported as
// DeltaFloor. It is 1 - (1-delta1)^k (0 when delta1 = 0) for eps >= k eps1.
// eps1 must be in (0, MaxEps0], delta1 in [0, 1), k in [1, KOV15MaxK] and
// eps >= 0, all finite.
func KOV15Delta(eps1, delta1 float64, k int, eps float64) (float64, error) {
	if err := kovCheck(eps1, delta1, k); err != nil {
		return 0, err
	}
	if err := checkEps("eps", eps); err != nil {
		return 0, err
	}
	return kovDelta(eps1, delta1, k, eps), nil
}

// KOV15Epsilon returns the smallest eps >= 0 (to relative precision 1e-9,
// rounded up: the returned eps always satisfies KOV15Delta(eps) <= delta)
// at which the k-fold composition of (eps1, delta1)-DP mechanisms is
// (eps, delta)-DP by KOV15Delta. The result is at most k eps1 (rounded up to
// a float64), where the composed delta is 1 - (1-delta1)^k; if that exceeds
// delta the error wraps ErrUnreachable. Inputs as for KOV15Delta, with delta
// in [MinDelta, 1).
func KOV15Epsilon(eps1, delta1 float64, k int, delta float64) (float64, error) {
	if err := kovCheck(eps1, delta1, k); err != nil {
		return 0, err
	}
	if err := checkDelta("delta", delta); err != nil {
		return 0, err
	}
	meets := func(e float64) bool { return kovDelta(eps1, delta1, k, e) <= delta }
	hi := kovCap(eps1, k)
	if !meets(hi) {
		return 0, fmt.Errorf("%w: delta = %g is below 1-(1-delta1)^k = %g, the composed delta of %d (eps1 = %g, delta1 = %g)-DP mechanisms at every eps",
			ErrUnreachable, delta, kovDelta(eps1, delta1, k, hi), k, eps1, delta1)
	}
	if meets(0) {
		return 0, nil
	}
	return cfBisect(meets, 0, hi), nil
}

// kovCheck validates the parameters shared by both entry points.
func kovCheck(eps1, delta1 float64, k int) error {
	if err := checkFinite("eps1", eps1); err != nil {
		return err
	}
	if !(eps1 > 0) || eps1 > MaxEps0 {
		return argError("eps1", eps1, fmt.Sprintf("in (0, %g]", MaxEps0))
	}
	if err := checkFinite("delta1", delta1); err != nil {
		return err
	}
	if !(delta1 >= 0 && delta1 < 1) {
		return argError("delta1", delta1, "in [0, 1)")
	}
	if k < 1 || k > KOV15MaxK {
		return argError("k", k, fmt.Sprintf("in [1, %d]", KOV15MaxK))
	}
	return nil
}

// kovCap returns the smallest float64 >= k eps1 (exact product).
func kovCap(eps1 float64, k int) float64 {
	kf := float64(k)
	hi := kf * eps1
	if math.FMA(kf, eps1, -hi) > 0 {
		hi = math.Nextafter(hi, math.Inf(1))
	}
	return hi
}

// kovDelta is KOV15Delta on validated inputs: A + (1-A) S rounded up,
// capped at 1 and floored at DeltaFloor unless it is exactly 0.
func kovDelta(eps1, delta1 float64, k int, eps float64) float64 {
	a := kovPlateau(delta1, k)
	var b float64
	if logS := kovLogRR(eps1, k, eps); !math.IsInf(logS, -1) {
		// (1-A) S with its margin; a positive value too small for float64
		// becomes the smallest one, so that the sum below stays an upper
		// bound.
		x := float64(k) * math.Log1p(-delta1) // log (1-A)
		b = math.Max(math.Exp(x+logS)*(1+kovMargin(k)), math.SmallestNonzeroFloat64)
	}
	total := kovAddUp(a, b)
	switch {
	case total == 0:
		return 0
	case total >= 1:
		return 1
	}
	return math.Max(total, DeltaFloor)
}

// kovPlateau returns an upper bound on A = 1 - (1-delta1)^k, the delta at
// every eps >= k eps1: -expm1(k log1p(-delta1)) (relative error <= 4u: 2u
// from x = k log1p(-delta1), whose relative condition number in -expm1 is
// below 1, and one rounding each in log1p and expm1) times 1 + 8u, and
// never above k delta1 rounded up (Bernoulli's inequality
// (1-delta1)^k >= 1 - k delta1), so that delta1 = delta/k is not lost to the
// margin.
func kovPlateau(delta1 float64, k int) float64 {
	if delta1 == 0 {
		return 0
	}
	a := -math.Expm1(float64(k)*math.Log1p(-delta1)) * (1 + 8*ulp)
	kf := float64(k)
	kd := kf * delta1
	if math.FMA(kf, delta1, -kd) > 0 {
		kd = math.Nextafter(kd, math.Inf(1))
	}
	return math.Min(a, kd)
}

// kovAddUp returns a + b rounded up: the next float64 above fl(a+b) when
// the sum is inexact (TwoSum error > 0).
func kovAddUp(a, b float64) float64 {
	s, e := twoSum(a, b)
	if e > 0 {
		return math.Nextafter(s, math.Inf(1))
	}
	return s
}

// kovLogRR returns log S(eps): S is the delta at eps of the k-fold
// composition of eps1-randomized response, -Inf when no term is positive.
func kovLogRR(eps1 float64, k int, eps float64) float64 {
	// The terms are positive for l in [0, lmax], the l with gap < 0; the gap
	// grows with l.
	if !(kovGap(eps, eps1, k) < 0) {
		return math.Inf(-1)
	}
	// Only m = k - 2l >= 1 can give a negative gap (eps >= 0), so the
	// candidates are l in [0, (k-1)/2]; gap(lo) < 0 and hi = (k-1)/2 + 1 has
	// m <= 0, gap >= 0.
	lo, hi := 0, (k-1)/2+1
	for hi-lo > 1 {
		mid := lo + (hi-lo)/2
		if kovGap(eps, eps1, k-2*mid) < 0 {
			lo = mid
		} else {
			hi = mid
		}
	}
	lmax := lo

	e := math.Exp(-eps1)
	s := e / (1 + e) // 1/(1+e^eps1), the probability of a -eps1 step
	logTerm := func(l int) float64 {
		return logBinomPMF(l, k, s) + kovLog1mExp(kovGap(eps, eps1, k-2*l))
	}

	// Peak: the first l where the terms stop increasing.
	a, b := 0, lmax // the peak is in [a, b]
	for a < b {
		mid := a + (b-a)/2
		if logTerm(mid+1) > logTerm(mid) {
			a = mid + 1
		} else {
			b = mid
		}
	}
	peak := a
	ref := logTerm(peak)

	var sum kovSum
	sum.add(1)
	walk := func(start, step int) {
		prev := ref
		for l := start; l >= 0 && l <= lmax; l += step {
			v := logTerm(l)
			sum.add(math.Exp(v - ref))
			d := v - prev + kovLogSlack // log of the ratio of this term to the last, rounded up
			prev = v
			if d < 0 {
				tail := math.Exp(v-ref+d) / -math.Expm1(d) // t_l r/(1-r)
				if tail <= kovTailRel*sum.value() {
					sum.add(tail)
					return
				}
			}
		}
	}
	walk(peak-1, -1)
	walk(peak+1, 1)
	return ref + math.Log(sum.value())
}

// kovGap returns eps - m eps1 for an integer 0 <= m <= KOV15MaxK, rounded
// once (FMA): the sign is exact and the relative error at most u.
func kovGap(eps, eps1 float64, m int) float64 {
	return math.FMA(-float64(m), eps1, eps)
}

// kovLog1mExp returns log(1 - e^x) for x < 0 without cancellation (Maechler
// 2012): log(-expm1(x)) near 0, log1p(-exp(x)) below -log 2.
func kovLog1mExp(x float64) float64 {
	if x > -math.Ln2 {
		return math.Log(-math.Expm1(x))
	}
	return math.Log1p(-math.Exp(x))
}

// kovSum is a Neumaier compensated sum of non-negative terms.
type kovSum struct{ s, c float64 }

func (k *kovSum) add(x float64) {
	t := k.s + x
	if math.Abs(k.s) >= math.Abs(x) {
		k.c += (k.s - t) + x
	} else {
		k.c += (x - t) + k.s
	}
	k.s = t
}

func (k *kovSum) value() float64 { return k.s + k.c }
