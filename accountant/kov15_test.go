package accountant

import (
	"errors"
	"fmt"
	"math"
	"math/big"
	"regexp"
	"testing"

	"gonum.org/v1/gonum/stat/distuv"
)

// Tolerances of the KOV15 tests.
const (
	// kovtFloatRef: float64 transcriptions of the closed forms (a sum of at
	// most 30 positive terms with exponents below 60, and the k = 1
	// randomized-response profile) are accurate to a few hundred ulps.
	kovtFloatRef = 1e-12
	// kovtMono: two evaluations carry the same safety margin, so apart from
	// rounding (~1e-13 relative, see the file comment of kov15.go) a
	// monotone comparison is exact.
	kovtMono = 1e-12
	// kovtLgamma: the direct float64 sum over all k/2 terms with
	// lgamma-based log binomial coefficients: lgamma(1e5) ~ 1e6 carries
	// ~1e-10 absolute error, so each log term ~3e-10; with the margin of
	// the implementation (1e-9), 1e-8 is comfortable.
	kovtLgamma = 1e-8
	// kovtSolve: KOV15Epsilon's bracket is 1e-10 relative (cfRelTol), and
	// both ends of the round trip carry the same margin, so only rounding
	// (~1e-13 in delta) divided by |d log delta / d log eps| (above 1e-2
	// off the plateau) moves eps: 1e-8 leaves a factor 100 (observed:
	// 6e-11).
	kovtSolve = 1e-8
	// kovtNormal: k = 1e4 steps of +-0.05 against a normal law with the
	// same mean and variance. The skewness of the sum is ~2.5e-4 and the
	// lattice step 0.1 is 1/50 of a standard deviation, so the Edgeworth
	// and continuity corrections at |z| <= 3 are well below 1% (observed:
	// 0.36% at z = 3). A loose sanity check only.
	kovtNormal = 0.02
)

// kovtPrec is the precision of the big.Float reference, in bits.
const kovtPrec = 320

func kovtF(x float64) *big.Float { return new(big.Float).SetPrec(kovtPrec).SetFloat64(x) }

func kovtI(x int) *big.Float { return new(big.Float).SetPrec(kovtPrec).SetInt64(int64(x)) }

// kovtExp returns e^x to about 2^-290 relative: x is halved until it is below
// 2^-10, the Taylor series summed to 2^-(kovtPrec+4) of the sum, and the
// result squared back.
func kovtExp(x *big.Float) *big.Float {
	if x.Sign() < 0 {
		e := kovtExp(new(big.Float).SetPrec(kovtPrec).Neg(x))
		return new(big.Float).SetPrec(kovtPrec).Quo(kovtF(1), e)
	}
	j := 0
	if x.Sign() > 0 {
		j = max(0, x.MantExp(nil)+10)
	}
	y := new(big.Float).SetPrec(kovtPrec).SetMantExp(x, -j)
	sum, term := kovtF(1), kovtF(1)
	for n := 1; n < 1000; n++ {
		term.Mul(term, y)
		term.Quo(term, kovtI(n))
		sum.Add(sum, term)
		if term.Sign() == 0 || term.MantExp(nil) < sum.MantExp(nil)-kovtPrec-4 {
			break
		}
	}
	for range j {
		sum.Mul(sum, sum)
	}
	return sum
}

func kovtPow(x *big.Float, k int) *big.Float {
	r, b := kovtF(1), new(big.Float).SetPrec(kovtPrec).Set(x)
	for ; k > 0; k >>= 1 {
		if k&1 == 1 {
			r.Mul(r, b)
		}
		b.Mul(b, b)
	}
	return r
}

// kovtExact returns the KOV15 formula at the exact float64 inputs, to about
// 2^-280 relative: every float64 input and the products m eps1 are exact in
// 320 bits; E = e^eps1 by kovtExp; t_l = C(k,l) p^(k-l) (1-p)^l and
// e^(eps - (k-2l) eps1) are updated by exact-ratio multiplications.
func kovtExact(eps1, delta1 float64, k int, eps float64) *big.Float {
	E := kovtExp(kovtF(eps1))
	onePlusE := new(big.Float).SetPrec(kovtPrec).Add(kovtF(1), E)
	p := new(big.Float).SetPrec(kovtPrec).Quo(E, onePlusE)
	t := kovtPow(p, k) // l = 0
	gap := func(l int) *big.Float {
		m := new(big.Float).SetPrec(kovtPrec).Mul(kovtI(k-2*l), kovtF(eps1))
		return m.Sub(kovtF(eps), m)
	}
	ed := kovtExp(gap(0))
	E2 := new(big.Float).SetPrec(kovtPrec).Mul(E, E)
	S := kovtF(0)
	for l := 0; l <= k; l++ {
		if gap(l).Sign() >= 0 {
			break
		}
		f := new(big.Float).SetPrec(kovtPrec).Sub(kovtF(1), ed)
		S.Add(S, f.Mul(f, t))
		// t_{l+1} = t_l (k-l)/(l+1) / E; e^gap(l+1) = e^gap(l) E^2.
		t.Mul(t, kovtI(k-l))
		t.Quo(t, kovtI(l+1))
		t.Quo(t, E)
		ed.Mul(ed, E2)
	}
	// 1 - delta1 is exact at kovtKeepPrec bits for every normal delta1
	// (2^-1022 needs 1022 + 53 bits), and 1 - (1-delta1)^k keeps ~300 bits
	// after the cancellation.
	one := new(big.Float).SetPrec(kovtKeepPrec).SetInt64(1)
	keep := new(big.Float).SetPrec(kovtKeepPrec).Sub(one, new(big.Float).SetPrec(kovtKeepPrec).SetFloat64(delta1))
	r := new(big.Float).SetPrec(kovtKeepPrec).SetInt64(1)
	for b := k; b > 0; b >>= 1 {
		if b&1 == 1 {
			r.Mul(r, keep)
		}
		keep.Mul(keep, keep)
	}
	out := new(big.Float).SetPrec(kovtKeepPrec).Sub(one, r)
	return out.Add(out, S.Mul(S, r))
}

// kovtKeepPrec is the precision of (1-delta1)^k in kovtExact.
const kovtKeepPrec = 1500

// kovtCheckUpper checks that got is an upper bound on the exact value ref
// that exceeds it by at most twice the margin (or is the floor).
func kovtCheckUpper(t *testing.T, name string, got float64, ref *big.Float, k int) {
	t.Helper()
	refF, _ := ref.Float64()
	if ref.Cmp(kovtF(DeltaFloor)) < 0 {
		if ref.Sign() == 0 && got != 0 {
			t.Errorf("%s: got %v, want exactly 0", name, got)
		}
		if ref.Sign() > 0 && got != DeltaFloor {
			t.Errorf("%s: got %v for an exact value %v below DeltaFloor, want DeltaFloor", name, got, ref)
		}
		return
	}
	if got == 1 {
		return // the cap: a hockey-stick divergence never exceeds 1
	}
	// ref is accurate to 2^-280 relative; got must not be below it by more.
	floor := new(big.Float).SetPrec(kovtPrec).SetMantExp(ref, -280)
	floor.Sub(ref, floor)
	if kovtF(got).Cmp(floor) < 0 {
		t.Errorf("%s: got %v below the exact value %.20g", name, got, ref)
		return
	}
	rel := new(big.Float).SetPrec(kovtPrec).Sub(kovtF(got), ref)
	rel.Quo(rel, ref)
	r, _ := rel.Float64()
	if r > 2*kovMargin(k) && got != 1 {
		t.Errorf("%s: got %v, exact %.17g: excess %.3g > 2*margin %.3g", name, got, refF, r, 2*kovMargin(k))
	}
}

func TestKOV15DeltaMatchesBigFloat(t *testing.T) {
	// Small k over a wide grid; the eps grid includes the special points
	// (k-2i) eps1, where a term vanishes exactly.
	for _, k := range []int{1, 2, 3, 5, 10, 17, 30} {
		for _, eps1 := range []float64{1e-6, 0.01, 0.1, 0.5, 1, 2.3, 10, MaxEps0} {
			for _, delta1 := range []float64{0, 1e-300, 1e-12, 1e-6, 0.01, 0.3} {
				var epss []float64
				for _, f := range []float64{0, 0.01, 0.1, 0.3, 0.5, 0.7, 0.9, 0.99, 0.999999, 1, 1.5} {
					epss = append(epss, f*float64(k)*eps1)
				}
				for i := 0; 2*i < k; i++ {
					epss = append(epss, float64(k-2*i)*eps1)
				}
				for _, eps := range epss {
					got, err := KOV15Delta(eps1, delta1, k, eps)
					if err != nil {
						t.Fatal(err)
					}
					kovtCheckUpper(t, fmt.Sprintf("k=%d eps1=%g delta1=%g eps=%g", k, eps1, delta1, eps), got, kovtExact(eps1, delta1, k, eps), k)
				}
			}
		}
	}
}

func TestKOV15DeltaMatchesBigFloatLargeK(t *testing.T) {
	// Larger k exercises the truncated walk over the terms and Loader's
	// log-pmf at large arguments, and reaches tiny deltas (down to the
	// DeltaFloor) on the upper half of the eps range.
	ks := []int{200, 2000}
	if !testing.Short() {
		ks = append(ks, 20000)
	}
	for _, k := range ks {
		for _, eps1 := range []float64{0.01, 0.2, 3} {
			for _, delta1 := range []float64{0, 1e-7} {
				for _, f := range []float64{0, 0.02, 0.05, 0.1, 0.2, 0.4, 0.6, 0.9} {
					eps := f * float64(k) * eps1
					got, err := KOV15Delta(eps1, delta1, k, eps)
					if err != nil {
						t.Fatal(err)
					}
					kovtCheckUpper(t, fmt.Sprintf("k=%d eps1=%g delta1=%g eps=%g", k, eps1, delta1, eps), got, kovtExact(eps1, delta1, k, eps), k)
				}
			}
		}
	}
}

// kovtTheorem33 is KOV15 Theorem 3.3 at eps = (k-2i) eps1, in float64:
// delta_i = sum_{l<i} C(k,l) (e^{(k-l)eps1} - e^{(k-2i+l)eps1}) / (1+e^eps1)^k,
// composed with delta1: 1 - (1-delta1)^k (1 - delta_i).
func kovtTheorem33(eps1, delta1 float64, k, i int) float64 {
	lk, _ := math.Lgamma(float64(k + 1))
	logDen := float64(k) * math.Log1p(math.Exp(eps1))
	var s float64
	for l := 0; l < i; l++ {
		ll, _ := math.Lgamma(float64(l + 1))
		lkl, _ := math.Lgamma(float64(k - l + 1))
		// e^a - e^b = e^a (1 - e^(b-a)), b - a = -2(i-l) eps1.
		s += math.Exp(lk-ll-lkl+float64(k-l)*eps1-logDen) * -math.Expm1(-2*float64(i-l)*eps1)
	}
	keep := math.Exp(float64(k) * math.Log1p(-delta1))
	return -math.Expm1(float64(k)*math.Log1p(-delta1)) + keep*s
}

func TestKOV15Theorem33SpecialPoints(t *testing.T) {
	// Dyadic eps1 make (k-2i) eps1 exact in float64, so the special point
	// is the one of the theorem.
	for _, k := range []int{1, 2, 4, 7, 12, 30} {
		for _, eps1 := range []float64{0.125, 0.5, 1, 1.5} {
			for _, delta1 := range []float64{0, 1e-8, 0.05} {
				for i := 0; 2*i <= k; i++ {
					eps := float64(k-2*i) * eps1
					got, err := KOV15Delta(eps1, delta1, k, eps)
					if err != nil {
						t.Fatal(err)
					}
					want := kovtTheorem33(eps1, delta1, k, i)
					if got < want*(1-kovtFloatRef) || got > want*(1+kovMargin(k)+kovtFloatRef) {
						t.Errorf("k=%d eps1=%g delta1=%g i=%d: %v, Theorem 3.3 gives %v (rel %.3g)",
							k, eps1, delta1, i, got, want, (got-want)/want)
					}
				}
			}
		}
	}
}

func TestKOV15SingleMechanism(t *testing.T) {
	// k = 1: delta1 at and above eps1 (exactly 0 when delta1 = 0), and
	// delta1 + (1 - delta1) (e^eps1 - e^eps)/(1 + e^eps1) below: the
	// randomized-response profile.
	for _, eps1 := range []float64{0.01, 0.7, 3, 20} {
		for _, delta1 := range []float64{0, 1e-50, 1e-5, 0.2} {
			for _, f := range []float64{0, 0.1, 0.5, 0.9, 1, 1.2, 100} {
				eps := f * eps1
				got, err := KOV15Delta(eps1, delta1, 1, eps)
				if err != nil {
					t.Fatal(err)
				}
				want := delta1
				if eps < eps1 {
					want += (1 - delta1) * (math.Exp(eps1) - math.Exp(eps)) / (1 + math.Exp(eps1))
				}
				if want == 0 {
					if got != 0 {
						t.Errorf("eps1=%g eps=%g delta1=0: %v, want 0", eps1, eps, got)
					}
					continue
				}
				if got < want*(1-kovtFloatRef) || got > want*(1+kovMargin(1)+kovtFloatRef) {
					t.Errorf("eps1=%g delta1=%g eps=%g: %v, want %v (rel %.3g)", eps1, delta1, eps, got, want, (got-want)/want)
				}
				if eps >= eps1 && got < delta1 {
					t.Errorf("eps1=%g delta1=%g eps=%g: %v below delta1", eps1, delta1, eps, got)
				}
			}
		}
	}
}

func TestKOV15Monotone(t *testing.T) {
	d := func(eps1, delta1 float64, k int, eps float64) float64 {
		v, err := KOV15Delta(eps1, delta1, k, eps)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	// leq reports a <= b up to rounding.
	leq := func(a, b float64) bool { return a <= b*(1+kovtMono) }
	for _, k := range []int{1, 3, 10, 100, 1000} {
		for _, eps1 := range []float64{0.05, 0.5, 2} {
			for _, delta1 := range []float64{0, 1e-9, 1e-3} {
				prev := math.Inf(1)
				for i := 0; i <= 60; i++ {
					eps := float64(i) / 50 * float64(k) * eps1 * 0.6
					v := d(eps1, delta1, k, eps)
					if !leq(v, prev) {
						t.Errorf("k=%d eps1=%g delta1=%g: delta rises in eps at %g: %v > %v", k, eps1, delta1, eps, v, prev)
					}
					prev = v
					if !leq(v, d(eps1, delta1, k+1, eps)) {
						t.Errorf("k=%d eps1=%g delta1=%g eps=%g: delta falls from k to k+1", k, eps1, delta1, eps)
					}
					if !leq(v, d(eps1*1.01, delta1, k, eps)) {
						t.Errorf("k=%d eps1=%g delta1=%g eps=%g: delta falls as eps1 grows", k, eps1, delta1, eps)
					}
					if !leq(v, d(eps1, delta1*2+1e-12, k, eps)) {
						t.Errorf("k=%d eps1=%g delta1=%g eps=%g: delta falls as delta1 grows", k, eps1, delta1, eps)
					}
				}
			}
		}
	}
}

func TestKOV15EpsilonRoundTrip(t *testing.T) {
	for _, k := range []int{1, 2, 10, 100, 10000, 100000} {
		for _, eps1 := range []float64{0.01, 0.3, 2} {
			for _, delta1 := range []float64{0, 1e-12} {
				for _, f := range []float64{0.001, 0.01, 0.05, 0.2, 0.5, 0.8} {
					eps := f * float64(k) * eps1
					delta, err := KOV15Delta(eps1, delta1, k, eps)
					if err != nil {
						t.Fatal(err)
					}
					if delta < MinDelta || delta >= 1 {
						continue
					}
					// Where the composed delta is within a factor 2 of its
					// plateau 1-(1-delta1)^k, reached at large eps, delta
					// barely moves with eps and eps is not recoverable from
					// it; the feasibility check below still applies there.
					plateau := -math.Expm1(float64(k) * math.Log1p(-delta1))
					name := fmt.Sprintf("k=%d eps1=%g delta1=%g eps=%g delta=%.3g", k, eps1, delta1, eps, delta)
					got, err := KOV15Epsilon(eps1, delta1, k, delta)
					if err != nil {
						t.Errorf("%s: %v", name, err)
						continue
					}
					if back, _ := KOV15Delta(eps1, delta1, k, got); back > delta {
						t.Errorf("%s: Epsilon %v is infeasible: delta there %v", name, got, back)
					}
					if delta > 2*plateau && math.Abs(got-eps) > kovtSolve*eps {
						t.Errorf("%s: Epsilon(Delta(eps)) = %v (rel %.3g)", name, got, (got-eps)/eps)
					}
				}
			}
		}
	}
}

func TestKOV15EpsilonTinyDeltaAndMinimality(t *testing.T) {
	for _, c := range []struct {
		eps1, delta1 float64
		k            int
	}{{0.1, 0, 1000}, {1, 0, 50}, {0.05, 1e-120, 100000}, {3, 0, 7}, {0.5, 1e-200, 400}} {
		for _, delta := range []float64{0.5, 1e-6, 1e-30, MinDelta} {
			name := fmt.Sprintf("eps1=%g delta1=%g k=%d delta=%g", c.eps1, c.delta1, c.k, delta)
			got, err := KOV15Epsilon(c.eps1, c.delta1, c.k, delta)
			if err != nil {
				t.Errorf("%s: %v", name, err)
				continue
			}
			if got < 0 || got > kovCap(c.eps1, c.k) {
				t.Errorf("%s: %v outside [0, k eps1]", name, got)
			}
			at, _ := KOV15Delta(c.eps1, c.delta1, c.k, got)
			if at > delta {
				t.Errorf("%s: infeasible, delta(%v) = %v", name, got, at)
			}
			// Minimal to the promised relative 1e-9: slightly below, delta is
			// above the target.
			if below := got * (1 - 1e-9); got > 0 {
				if v, _ := KOV15Delta(c.eps1, c.delta1, c.k, below); v <= delta {
					t.Errorf("%s: %v is not minimal, delta(%v) = %v <= target", name, got, below, v)
				}
			}
		}
	}
}

func TestKOV15EpsilonUnreachableAndCap(t *testing.T) {
	// 1 - (1 - 0.01)^10 = 0.0956: a delta below it is never met.
	_, err := KOV15Epsilon(1, 0.01, 10, 0.05)
	if !errors.Is(err, ErrUnreachable) {
		t.Errorf("delta below 1-(1-delta1)^k: err = %v, want ErrUnreachable", err)
	}
	// Just above it, the answer is at most k eps1.
	got, err := KOV15Epsilon(1, 0.01, 10, 0.0957)
	if err != nil || got > 10 || got <= 0 {
		t.Errorf("delta just above 1-(1-delta1)^k: %v, %v, want in (0, 10]", got, err)
	}
	// delta1 = 0 and a delta below every positive term: the cap k eps1.
	// Here delta(eps) ~ p^5 (5 - eps) near eps = 5 and 1e-100 is far below
	// the smallest positive gap a float64 eps can leave.
	got, err = KOV15Epsilon(1, 0, 5, MinDelta)
	if err != nil || got != 5 {
		t.Errorf("tiny delta, delta1 = 0: %v, %v, want the cap 5", got, err)
	}
	// delta1 = delta/k (dyadic, so k delta1 = delta exactly): the plateau
	// 1-(1-delta1)^k is below k delta1 = delta, so the target is met at
	// k eps1 at the latest; the margin must not make it unreachable.
	for _, c := range []struct {
		k     int
		delta float64
	}{{1024, 0x1p-20}, {1 << 20, 0x1p-40}, {2, 0x1p-300}, {1, 0.25}} {
		d1 := c.delta / float64(c.k)
		got, err := KOV15Epsilon(0.3, d1, c.k, c.delta)
		if err != nil || got > kovCap(0.3, c.k) {
			t.Errorf("k=%d delta1=delta/k=%g: %v, %v, want at most k eps1", c.k, d1, got, err)
		}
		if at, _ := KOV15Delta(0.3, d1, c.k, kovCap(0.3, c.k)); at > c.delta {
			t.Errorf("k=%d delta1=%g: plateau %v above k delta1 = %v", c.k, d1, at, c.delta)
		}
	}
	// A delta above delta(0) gives 0.
	d0, _ := KOV15Delta(0.1, 0, 3, 0)
	if got, err := KOV15Epsilon(0.1, 0, 3, math.Min(0.99, d0*1.5)); err != nil || got != 0 {
		t.Errorf("delta above delta(0) = %v: %v, %v, want 0", d0, got, err)
	}
}

func TestKOV15BelowAdvancedComposition(t *testing.T) {
	// KOV15 is optimal, so it is never worse than the advanced composition
	// theorem (Dwork, Rothblum, Vadhan 2010): k (eps1, delta1)-DP mechanisms
	// are (sqrt(2k log(1/d')) eps1 + k eps1 (e^eps1 - 1), k delta1 + d')-DP,
	// nor than basic composition (k eps1, k delta1).
	for _, k := range []int{10, 100, 1000, 10000} {
		for _, eps1 := range []float64{0.01, 0.1, 1} {
			for _, delta1 := range []float64{0, 1e-8} {
				dp := 1e-6
				adv := math.Sqrt(2*float64(k)*math.Log(1/dp))*eps1 + float64(k)*eps1*math.Expm1(eps1)
				got, err := KOV15Epsilon(eps1, delta1, k, float64(k)*delta1+dp)
				if err != nil {
					t.Fatal(err)
				}
				if got > adv || got > float64(k)*eps1 {
					t.Errorf("k=%d eps1=%g delta1=%g: KOV15 %v above advanced %v or basic %v", k, eps1, delta1, got, adv, float64(k)*eps1)
				}
			}
		}
	}
}

func TestKOV15LargeKDirectSum(t *testing.T) {
	// The truncated walk against the plain sum over every term, with
	// lgamma-based log binomial coefficients (no Loader, no truncation).
	direct := func(eps1, delta1 float64, k int, eps float64) float64 {
		lk, _ := math.Lgamma(float64(k + 1))
		logP := -math.Log1p(math.Exp(-eps1))        // log p
		logQ := -eps1 - math.Log1p(math.Exp(-eps1)) // log (1-p)
		m := math.Inf(-1)
		var logs []float64
		for l := 0; 2*l < k; l++ {
			g := eps - float64(k-2*l)*eps1
			if g >= 0 {
				break
			}
			ll, _ := math.Lgamma(float64(l + 1))
			lkl, _ := math.Lgamma(float64(k - l + 1))
			v := lk - ll - lkl + float64(k-l)*logP + float64(l)*logQ + math.Log(-math.Expm1(g))
			logs = append(logs, v)
			m = math.Max(m, v)
		}
		var s float64
		for _, v := range logs {
			s += math.Exp(v - m)
		}
		keep := float64(k) * math.Log1p(-delta1)
		return -math.Expm1(keep) + math.Exp(keep+m)*s
	}
	for _, k := range []int{10000, 100000} {
		for _, eps1 := range []float64{0.003, 0.1, 1.5} {
			for _, delta1 := range []float64{0, 1e-9} {
				for _, f := range []float64{0, 0.01, 0.03, 0.1, 0.3} {
					eps := f * float64(k) * eps1
					got, _ := KOV15Delta(eps1, delta1, k, eps)
					want := direct(eps1, delta1, k, eps)
					if want < 1e-200 {
						continue
					}
					if math.Abs(got-want) > kovtLgamma*want {
						t.Errorf("k=%d eps1=%g delta1=%g eps=%g: %v, direct sum %v (rel %.3g)", k, eps1, delta1, eps, got, want, (got-want)/want)
					}
				}
			}
		}
	}
}

func TestKOV15MatchesRROracle(t *testing.T) {
	// delta1 = 0: the composition of eps1-randomized response, which is
	// 2-ary randomized response (oracleRRComposedDelta, k = 2, T rounds).
	for _, T := range []int{1, 10, 100, 1000} {
		for _, eps1 := range []float64{0.05, 0.5, 2} {
			for _, f := range []float64{0, 0.02, 0.1, 0.3, 0.6} {
				eps := f * float64(T) * eps1
				got, _ := KOV15Delta(eps1, 0, T, eps)
				want := oracleRRComposedDelta(eps1, 2, T, eps)
				if want < 1e-250 {
					continue
				}
				if got < want*(1-oracleTolLargeT) || got > want*(1+kovMargin(T)+oracleTolLargeT) {
					t.Errorf("T=%d eps1=%g eps=%g: %v, oracle %v (rel %.3g)", T, eps1, eps, got, want, (got-want)/want)
				}
			}
		}
	}
}

func TestKOV15LargeKNormal(t *testing.T) {
	// L = sum of k = 1e4 steps +-eps1, mean k eps1 tanh(eps1/2), variance
	// k eps1^2 / cosh^2(eps1/2). For L ~ N(mu, s^2),
	// E[(1 - e^(eps-L))_+] = Phi((mu-eps)/s) - e^(eps-mu+s^2/2) Phi((mu-eps-s^2)/s).
	const k = 10000
	eps1 := 0.05
	mu := k * eps1 * math.Tanh(eps1/2)
	sd := math.Sqrt(k) * eps1 / math.Cosh(eps1/2)
	std := distuv.UnitNormal
	for _, z := range []float64{-1, 0, 1, 2, 3} { // eps = mu + z sd
		eps := mu + z*sd
		want := std.CDF((mu-eps)/sd) - math.Exp(eps-mu+sd*sd/2)*std.CDF((mu-eps-sd*sd)/sd)
		got, _ := KOV15Delta(eps1, 0, k, eps)
		if math.Abs(got-want) > kovtNormal*want {
			t.Errorf("eps=%g: %v, normal approximation %v (rel %.3g)", eps, got, want, (got-want)/want)
		}
	}
}

func TestKOV15ArgumentErrors(t *testing.T) {
	nan, inf := math.NaN(), math.Inf(1)
	cases := []struct {
		name                   string
		eps1, delta1, eps, dlt float64
		k                      int
		param                  string
		deltaOnly, epsilonOnly bool
	}{
		{"eps1 NaN", nan, 0, 1, 1e-6, 5, "eps1", false, false},
		{"eps1 Inf", inf, 0, 1, 1e-6, 5, "eps1", false, false},
		{"eps1 0", 0, 0, 1, 1e-6, 5, "eps1", false, false},
		{"eps1 negative", -1, 0, 1, 1e-6, 5, "eps1", false, false},
		{"eps1 too big", MaxEps0 * 2, 0, 1, 1e-6, 5, "eps1", false, false},
		{"delta1 NaN", 1, nan, 1, 1e-6, 5, "delta1", false, false},
		{"delta1 negative", 1, -1e-9, 1, 1e-6, 5, "delta1", false, false},
		{"delta1 1", 1, 1, 1, 1e-6, 5, "delta1", false, false},
		{"delta1 -Inf", 1, -inf, 1, 1e-6, 5, "delta1", false, false},
		{"k 0", 1, 0, 1, 1e-6, 0, "k", false, false},
		{"k negative", 1, 0, 1, 1e-6, -3, "k", false, false},
		{"k too big", 1, 0, 1, 1e-6, KOV15MaxK + 1, "k", false, false},
		{"eps NaN", 1, 0, nan, 1e-6, 5, "eps", true, false},
		{"eps Inf", 1, 0, inf, 1e-6, 5, "eps", true, false},
		{"eps negative", 1, 0, -0.1, 1e-6, 5, "eps", true, false},
		{"delta 0", 1, 0, 1, 0, 5, "delta", false, true},
		{"delta 1", 1, 0, 1, 1, 5, "delta", false, true},
		{"delta NaN", 1, 0, 1, nan, 5, "delta", false, true},
		{"delta tiny", 1, 0, 1, MinDelta / 10, 5, "delta", false, true},
	}
	for _, c := range cases {
		word := regexp.MustCompile(`\b` + c.param + `\b`)
		check := func(fn string, err error) {
			if !errors.Is(err, ErrInvalidArgument) {
				t.Errorf("%s: %s err = %v, want ErrInvalidArgument", c.name, fn, err)
			} else if !word.MatchString(err.Error()) {
				t.Errorf("%s: %s error %q does not name %s", c.name, fn, err, c.param)
			}
		}
		_, errD := KOV15Delta(c.eps1, c.delta1, c.k, c.eps)
		_, errE := KOV15Epsilon(c.eps1, c.delta1, c.k, c.dlt)
		if !c.epsilonOnly {
			check("KOV15Delta", errD)
		} else if errD != nil {
			t.Errorf("%s: KOV15Delta err = %v, want nil", c.name, errD)
		}
		if !c.deltaOnly {
			check("KOV15Epsilon", errE)
		} else if errE != nil {
			t.Errorf("%s: KOV15Epsilon err = %v, want nil", c.name, errE)
		}
	}
}

func FuzzKOV15(f *testing.F) {
	f.Add(1.0, 1e-6, 10, 3.0, 1e-6)
	f.Add(0.01, 0.0, 100000, 1.0, 1e-100)
	f.Add(30.0, 0.5, 1, 0.0, 0.9)
	f.Add(1e-300, 0.0, 1000000, 1e-299, 0.3)
	f.Add(2.0, 1e-300, 7, 14.0, 1e-50)
	f.Add(0.5, 0.999999, 3, 1.0, 0.5)
	f.Add(math.NaN(), 0.0, 1, 1.0, 0.5)
	f.Add(1.0, 0.0, -1, math.Inf(1), 2.0)
	f.Fuzz(func(t *testing.T, eps1, delta1 float64, k int, eps, delta float64) {
		valid := !math.IsNaN(eps1) && eps1 > 0 && eps1 <= MaxEps0 &&
			delta1 >= 0 && delta1 < 1 && k >= 1 && k <= KOV15MaxK
		if valid && k > 100000 {
			// Each call is O(sqrt(k)); keep the fuzzer fast.
			k = 100000 + k%1000
		}
		d, err := KOV15Delta(eps1, delta1, k, eps)
		validD := valid && !math.IsNaN(eps) && !math.IsInf(eps, 0) && eps >= 0
		switch {
		case !validD && !errors.Is(err, ErrInvalidArgument):
			t.Fatalf("KOV15Delta(%v, %v, %d, %v) err = %v, want ErrInvalidArgument", eps1, delta1, k, eps, err)
		case validD && err != nil:
			t.Fatalf("KOV15Delta(%v, %v, %d, %v): %v", eps1, delta1, k, eps, err)
		case validD && !(d >= 0 && d <= 1):
			t.Fatalf("KOV15Delta(%v, %v, %d, %v) = %v outside [0, 1]", eps1, delta1, k, eps, d)
		}
		e, err := KOV15Epsilon(eps1, delta1, k, delta)
		validE := valid && delta >= MinDelta && delta < 1
		switch {
		case !validE:
			if !errors.Is(err, ErrInvalidArgument) {
				t.Fatalf("KOV15Epsilon(%v, %v, %d, %v) err = %v, want ErrInvalidArgument", eps1, delta1, k, delta, err)
			}
		case err != nil:
			if !errors.Is(err, ErrUnreachable) {
				t.Fatalf("KOV15Epsilon(%v, %v, %d, %v): %v", eps1, delta1, k, delta, err)
			}
			if at, _ := KOV15Delta(eps1, delta1, k, kovCap(eps1, k)); at <= delta {
				t.Fatalf("KOV15Epsilon(%v, %v, %d, %v) unreachable, but delta(k eps1) = %v", eps1, delta1, k, delta, at)
			}
		default:
			if !(e >= 0 && e <= kovCap(eps1, k)) {
				t.Fatalf("KOV15Epsilon(%v, %v, %d, %v) = %v outside [0, k eps1]", eps1, delta1, k, delta, e)
			}
			if at, _ := KOV15Delta(eps1, delta1, k, e); !(at <= delta) {
				t.Fatalf("KOV15Epsilon(%v, %v, %d, %v) = %v infeasible: delta there %v", eps1, delta1, k, delta, e, at)
			}
		}
	})
}

func ExampleKOV15Epsilon() {
	// A daily report that is (0.1, 1e-10)-DP, over a one-year horizon.
	eps, err := KOV15Epsilon(0.1, 1e-10, 365, 1e-6)
	if err != nil {
		panic(err)
	}
	fmt.Printf("optimal composition: eps = %.2f (basic: %.1f)\n", eps, 365*0.1)
	// Output:
	// optimal composition: eps = 10.33 (basic: 36.5)
}
