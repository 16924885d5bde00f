package accountant_test

// Reference implementations of the shuffled divergence of docs/accounting.md §3,
//
//	delta(eps) = (1/n) E[(Z_1 + ... + Z_n)_+],  Z = (p_j - e^eps q_j)/r_j w.p. r_j,
//
// written from docs/accounting.md alone and sharing no code with the engine:
//
//   - exactDelta enumerates the multinomial counts of the atoms (n <= 40,
//     more for sets with few atoms) in float64 with compensated summation;
//   - bigExactDelta does the same in math/big (200 bits, exact multinomial
//     coefficients) for tiny cases, to check exactDelta's rounding;
//   - krrExactDelta computes k-RR's upper-bound divergence at any n up to 1e5
//     by enumerating the counts of the two rare atoms and summing the merged
//     "other" atom in closed form with binomial CDFs.
//
// exactEps inverts any of them by a bracketing solver.

import (
	"math"
	"math/big"
	"math/rand/v2"
	"runtime"
	"sync"
	"testing"

	"gonum.org/v1/gonum/mathext"

	"github.com/blanket-dp/blanket/accountant"
)

// kahan is Neumaier's compensated summation.
type kahan struct{ sum, c float64 }

func (k *kahan) add(x float64) {
	t := k.sum + x
	if math.Abs(k.sum) >= math.Abs(x) {
		k.c += (k.sum - t) + x
	} else {
		k.c += (x - t) + k.sum
	}
	k.sum = t
}

func (k *kahan) value() float64 { return k.sum + k.c }

// gparv returns the atom values z_j = (p_j - e^eps q_j)/r_j and masses r_j of
// set at eps, with the residual atom (mass 1 - sum r, z = 0) appended when its
// mass is positive. Atoms with r = 0 carry no mass and are dropped. The value
// is computed as ((p - q) - (e^eps - 1) q)/r, which avoids the cancellation
// of p - e^eps q when eps is small.
func gparv(set accountant.AtomSet, eps float64) (z, w []float64) {
	em1 := math.Expm1(eps)
	var g kahan
	for _, a := range set {
		if a.R <= 0 {
			continue
		}
		z = append(z, ((a.P-a.Q)-em1*a.Q)/a.R)
		w = append(w, a.R)
		g.add(a.R)
	}
	if res := 1 - g.value(); res > 0 {
		z = append(z, 0)
		w = append(w, res)
	}
	return z, w
}

// compositions returns the number of count vectors (c_1..c_parts) summing to
// n, C(n+parts-1, parts-1): the work of exactDelta.
func compositions(n, parts int) float64 {
	lg := func(x int) float64 { v, _ := math.Lgamma(float64(x) + 1); return v }
	return math.Round(math.Exp(lg(n+parts-1) - lg(n) - lg(parts-1)))
}

// exactDelta returns (1/n) E[(Z_1+...+Z_n)_+] for set at eps by enumerating
// every vector of atom counts (c_j) with sum n, each with its multinomial
// probability n!/prod c_j! prod r_j^c_j (log-factorials from math.Lgamma),
// and summing the positive parts with compensated summation. Its cost is
// compositions(n, atoms+1).
func exactDelta(set accountant.AtomSet, n int, eps float64) float64 {
	z, w := gparv(set, eps)
	lw := make([]float64, len(w))
	for j, v := range w {
		lw[j] = math.Log(v)
	}
	lfact := make([]float64, n+1)
	for i := range lfact {
		lfact[i], _ = math.Lgamma(float64(i) + 1)
	}
	var acc kahan
	last := len(z) - 1
	var rec func(j, left int, logp, s float64)
	rec = func(j, left int, logp, s float64) {
		if j == last {
			logp += float64(left)*lw[j] - lfact[left]
			s += float64(left) * z[j]
			if s > 0 {
				acc.add(math.Exp(lfact[n]+logp) * s)
			}
			return
		}
		for c := 0; c <= left; c++ {
			rec(j+1, left-c, logp+float64(c)*lw[j]-lfact[c], s+float64(c)*z[j])
		}
	}
	rec(0, n, 0, 0)
	return acc.value() / float64(n)
}

// bigPrec is the precision of bigExactDelta, in bits.
const bigPrec = 200

func newBig(x float64) *big.Float { return new(big.Float).SetPrec(bigPrec).SetFloat64(x) }

// bigExp returns e^x by its Taylor series, to about 2^-bigPrec relative.
func bigExp(x float64) *big.Float {
	xb := newBig(x)
	sum := newBig(1)
	term := newBig(1)
	eps := new(big.Float).SetPrec(bigPrec).SetMantExp(newBig(1), -bigPrec-20)
	for k := 1; k < 10000; k++ {
		term.Mul(term, xb)
		term.Quo(term, newBig(float64(k)))
		sum.Add(sum, term)
		t := new(big.Float).Abs(term)
		if t.Cmp(new(big.Float).Mul(eps, sum)) < 0 && float64(k) > math.Abs(x) {
			break
		}
	}
	return sum
}

// bigExactDelta is exactDelta in 200-bit arithmetic: exact multinomial
// coefficients (math/big.Int), exact powers of the float64 masses, the
// residual 1 - sum r computed exactly, and e^eps to 200 bits. Only the final
// conversion to float64 rounds. For tiny n and few atoms only.
func bigExactDelta(set accountant.AtomSet, n int, eps float64) float64 {
	E := bigExp(eps)
	var z, w []*big.Float
	gamma := newBig(0)
	for _, a := range set {
		if a.R <= 0 {
			continue
		}
		zj := new(big.Float).SetPrec(bigPrec).Mul(E, newBig(a.Q))
		zj.Sub(newBig(a.P), zj)
		zj.Quo(zj, newBig(a.R))
		z = append(z, zj)
		w = append(w, newBig(a.R))
		gamma.Add(gamma, newBig(a.R))
	}
	res := new(big.Float).SetPrec(bigPrec).Sub(newBig(1), gamma)
	if res.Sign() > 0 {
		z = append(z, newBig(0))
		w = append(w, res)
	}
	// pow[j][c] = w_j^c.
	pow := make([][]*big.Float, len(w))
	for j := range w {
		pow[j] = make([]*big.Float, n+1)
		pow[j][0] = newBig(1)
		for c := 1; c <= n; c++ {
			pow[j][c] = new(big.Float).SetPrec(bigPrec).Mul(pow[j][c-1], w[j])
		}
	}
	fact := make([]*big.Int, n+1)
	fact[0] = big.NewInt(1)
	for i := 1; i <= n; i++ {
		fact[i] = new(big.Int).Mul(fact[i-1], big.NewInt(int64(i)))
	}
	total := newBig(0)
	counts := make([]int, len(z))
	var rec func(j, left int)
	rec = func(j, left int) {
		if j == len(z)-1 {
			counts[j] = left
			s := newBig(0)
			for i, c := range counts {
				s.Add(s, new(big.Float).SetPrec(bigPrec).Mul(z[i], newBig(float64(c))))
			}
			if s.Sign() <= 0 {
				return
			}
			coef := new(big.Int).Set(fact[n])
			for _, c := range counts {
				coef.Quo(coef, fact[c])
			}
			prob := new(big.Float).SetPrec(bigPrec).SetInt(coef)
			for i, c := range counts {
				prob.Mul(prob, pow[i][c])
			}
			total.Add(total, prob.Mul(prob, s))
			return
		}
		for c := 0; c <= left; c++ {
			counts[j] = c
			rec(j+1, left-c)
		}
	}
	rec(0, n)
	total.Quo(total, newBig(float64(n)))
	f, _ := total.Float64()
	return f
}

// hockeyStick returns sum_y (P[y] - e^eps Q[y])_+, the divergence of one
// report (n = 1), straight from two rows of a matrix.
func hockeyStick(p, q []float64, eps float64) float64 {
	var acc kahan
	e := math.Exp(eps)
	for y := range p {
		if d := p[y] - e*q[y]; d > 0 {
			acc.add(d)
		}
	}
	return acc.value()
}

// Binomial distribution helpers for krrExactDelta. The probability mass
// function uses Loader's saddle-point expansion ("Fast and accurate
// computation of binomial probabilities", 2000; the algorithm of R's
// dbinom_raw), which keeps full relative precision at n = 1e5 where
// log-gamma differences would lose five digits.

const lnSqrt2Pi = 0.918938533204672741780329736406 // log(sqrt(2 pi))

// stirlerr returns log(n!) - log(sqrt(2 pi n) (n/e)^n) for n >= 1.
func stirlerr(n float64) float64 {
	const (
		s0 = 1.0 / 12
		s1 = 1.0 / 360
		s2 = 1.0 / 1260
		s3 = 1.0 / 1680
		s4 = 1.0 / 1188
	)
	if n <= 15 {
		lg, _ := math.Lgamma(n + 1)
		return lg - (n+0.5)*math.Log(n) + n - lnSqrt2Pi
	}
	nn := n * n
	switch {
	case n > 500:
		return (s0 - s1/nn) / n
	case n > 80:
		return (s0 - (s1-s2/nn)/nn) / n
	case n > 35:
		return (s0 - (s1-(s2-s3/nn)/nn)/nn) / n
	}
	return (s0 - (s1-(s2-(s3-s4/nn)/nn)/nn)/nn) / n
}

// bd0 returns x log(x/np) + np - x without cancellation.
func bd0(x, np float64) float64 {
	if math.Abs(x-np) < 0.1*(x+np) {
		v := (x - np) / (x + np)
		s := (x - np) * v
		ej := 2 * x * v
		v *= v
		for j := 1; j < 1000; j++ {
			ej *= v
			s1 := s + ej/float64(2*j+1)
			if s1 == s {
				return s1
			}
			s = s1
		}
	}
	return x*math.Log(x/np) + np - x
}

// binomPMF returns P(X = x) for X ~ Binomial(n, p); q = 1 - p is passed
// separately so that it can be exact.
func binomPMF(x, n int, p, q float64) float64 {
	if x < 0 || x > n {
		return 0
	}
	xf, nf := float64(x), float64(n)
	switch {
	case p == 0:
		if x == 0 {
			return 1
		}
		return 0
	case q == 0:
		if x == n {
			return 1
		}
		return 0
	case x == 0:
		if n == 0 {
			return 1
		}
		if p < 0.1 {
			return math.Exp(-bd0(nf, nf*q) - nf*p)
		}
		return math.Exp(nf * math.Log(q))
	case x == n:
		if q < 0.1 {
			return math.Exp(-bd0(nf, nf*p) - nf*q)
		}
		return math.Exp(nf * math.Log(p))
	}
	lc := stirlerr(nf) - stirlerr(xf) - stirlerr(nf-xf) - bd0(xf, nf*p) - bd0(nf-xf, nf*q)
	lf := 2*lnSqrt2Pi + math.Log(xf) + math.Log1p(-xf/nf)
	return math.Exp(lc - 0.5*lf)
}

// binomCDF returns P(X <= j) for X ~ Binomial(n, p), q = 1 - p, by the
// regularised incomplete beta function: P(X <= j) = I_q(n-j, j+1).
func binomCDF(j, n int, p, q float64) float64 {
	switch {
	case j < 0:
		return 0
	case j >= n:
		return 1
	case p == 0:
		return 1
	case q == 0:
		return 0
	}
	return mathext.RegIncBeta(float64(n-j), float64(j+1), q)
}

// binomSF returns P(X > j) = I_p(j+1, n-j).
func binomSF(j, n int, p, q float64) float64 {
	switch {
	case j < 0:
		return 1
	case j >= n:
		return 0
	case p == 0:
		return 0
	case q == 0:
		return 1
	}
	return mathext.RegIncBeta(float64(j+1), float64(n-j), p)
}

// negligibleMass is the probability a truncation window may leave out on each
// side: far below any delta the tests ask about (>= 1e-15) even after the
// crude bound "each left-out user contributes at most max z" is applied.
const negligibleMass = 1e-40

// binomWindow returns [lo, hi] such that X ~ Binomial(n, p) falls outside with
// probability at most negligibleMass on each side (checked with the exact
// CDF), together with the two left-out masses.
func binomWindow(n int, p, q float64) (lo, hi int, below, above float64) {
	mean := float64(n) * p
	sd := math.Sqrt(float64(n) * p * q)
	step := math.Max(sd, 4)
	lo = max(0, int(math.Floor(mean-13*sd-10)))
	hi = min(n, int(math.Ceil(mean+13*sd+10)))
	for lo > 0 && binomCDF(lo-1, n, p, q) > negligibleMass {
		lo = max(0, lo-int(step))
	}
	for hi < n && binomSF(hi, n, p, q) > negligibleMass {
		hi = min(n, hi+int(step))
	}
	return lo, hi, binomCDF(lo-1, n, p, q), binomSF(hi, n, p, q)
}

// krrExactDelta returns the k-RR upper-bound divergence at any n
// (docs/accounting.md §3 atoms); see krrExactDeltaBound.
func krrExactDelta(k int, eps0 float64, n int, eps float64) float64 {
	d, _ := krrExactDeltaBound(k, eps0, n, eps)
	return d
}

// krrExactDeltaBound returns (1/n) E[(S_n)_+] for k-RR's upper-bound atoms
//
//	A1 (y = x):   mass c,        z1 = e^eps0 - e^eps
//	A2 (y = x'):  mass c,        z2 = 1 - e^(eps+eps0)
//	A3 (other y): mass (k-2) c,  z3 = 1 - e^eps
//	residual:     mass 1 - k c,  z  = 0,          c = 1/(e^eps0 + k - 1),
//
// and a bound trunc on what the truncation of the enumeration leaves out
// (see twoRareExactDelta).
func krrExactDeltaBound(k int, eps0 float64, n int, eps float64) (delta, trunc float64) {
	e0m1, em1 := math.Expm1(eps0), math.Expm1(eps)
	kf := float64(k)
	c := 1 / (e0m1 + kf)
	return twoRareExactDelta(n, c, e0m1-em1, -math.Expm1(eps+eps0), (kf-2)*c, -em1, e0m1*c)
}

// cloneExactDelta returns the divergence of the generic clone decomposition
// (docs/accounting.md §6): two atoms of mass e^-eps0/2 with
// z = (e^eps0 - e^eps)/(e^eps0+1) * 2 e^eps0 and
// z = (1 - e^(eps+eps0))/(e^eps0+1) * 2 e^eps0, residual 1 - e^-eps0.
func cloneExactDelta(eps0 float64, n int, eps float64) (delta, trunc float64) {
	e0 := math.Exp(eps0)
	s := 2 * e0 / (e0 + 1)
	return twoRareExactDelta(n, math.Exp(-eps0)/2, s*(math.Expm1(eps0)-math.Expm1(eps)), -s*math.Expm1(eps+eps0), 0, 0, -math.Expm1(-eps0))
}

// krr3LowerExactDelta returns the lower-bound divergence of 3-RR
// (docs/accounting.md §4 atoms with k = 3): y = x (mass c, z1 = e^eps0 - e^eps),
// y = x' (mass c, z2 = 1 - e^(eps+eps0)), y = x3 (mass e^eps0 c,
// z3 = (1 - e^eps)/e^eps0), no residual; c = 1/(e^eps0 + 2).
func krr3LowerExactDelta(eps0 float64, n int, eps float64) (delta, trunc float64) {
	e0 := math.Exp(eps0)
	c := 1 / (e0 + 2)
	return twoRareExactDelta(n, c, math.Expm1(eps0)-math.Expm1(eps), -math.Expm1(eps+eps0), e0*c, -math.Expm1(eps)/e0, 0)
}

// twoRareExactDelta returns (1/n) E[(S_n)_+] for the atoms
//
//	A1: mass c,   value z1
//	A2: mass c,   value z2 <= 0
//	A3: mass r3,  value z3 <= 0
//	residual: mass res = 1 - 2c - r3, value 0,
//
// and a rigorous bound trunc on the part the truncation of the enumeration
// leaves out (the returned value is low by at most trunc).
//
// Method. T = N1 + N2 ~ Binomial(n, 2c) and N1 | T ~ Binomial(T, 1/2) are
// enumerated over windows outside which their mass is below negligibleMass.
// Given N1, N2, a = N1 z1 + N2 z2, and the m = n - T other users split into
// N3 ~ Binomial(m, pi), pi = r3/(1-2c), and the residual, so
//
//	E[(a + N3 z3)_+] = E[(a - N3 |z3|) 1{N3 <= J}],  J = floor(a/|z3|)
//	                 = (a - J|z3|) F(J) + |z3| K(J),  K(J) = sum_{j<J} F(j),
//
// F the CDF of N3. This rearrangement of a F(J) - |z3| E[N3 1{N3 <= J}] (the
// textbook closed form, E[N3 1{N3<=J}] = m pi P(Binomial(m-1, pi) <= J-1))
// has two non-negative terms and so no cancellation. F and K are tabulated
// on a window of N3 from the exact binomial pmf, started from the
// regularised incomplete beta function below the window.
//
// Truncation. Every Z is at most z1, so S_n <= N1 z1 <= n z1 and the users
// left out by a window contribute at most (left-out mass) * z1 to delta;
// for N3 outside its window the error is at most a * (left-out mass) / n.
//
// The T values are shared among GOMAXPROCS workers.
func twoRareExactDelta(n int, c, z1, z2, r3, z3, res float64) (delta, trunc float64) {
	if z1 <= 0 {
		return 0, 0 // every atom value is <= 0
	}
	pT, qT := 2*c, r3+res
	pi, qi := r3/qT, res/qT
	az3 := -z3
	nf := float64(n)
	tlo, thi, tb, ta := binomWindow(n, pT, qT)

	type table struct {
		lo, hi int
		F, K   []float64 // F[i-lo] = P(N3 <= i), K[i-lo] = sum_{j<i} F(j) - K(lo)
		below  float64   // P(N3 < lo)
		above  float64   // P(N3 > hi)
		mean   float64   // m pi
	}
	makeTable := func(m int) table {
		lo, hi, below, above := binomWindow(m, pi, qi)
		t := table{lo: lo, hi: hi, below: below, above: above, mean: float64(m) * pi}
		t.F = make([]float64, hi-lo+1)
		t.K = make([]float64, hi-lo+1)
		var F, K kahan
		F.add(below)
		for i := lo; i <= hi; i++ {
			t.K[i-lo] = K.value()
			F.add(binomPMF(i, m, pi, qi))
			t.F[i-lo] = math.Min(F.value(), 1)
			K.add(t.F[i-lo])
		}
		return t
	}

	workers := runtime.GOMAXPROCS(0)
	accs := make([]kahan, workers)
	bounds := make([]kahan, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			acc, bound := &accs[w], &bounds[w]
			for T := tlo + w; T <= thi; T += workers {
				pt := binomPMF(T, n, pT, qT)
				if pt == 0 {
					continue
				}
				m := n - T
				lo1, hi1, b1, a1 := binomWindow(T, 0.5, 0.5)
				bound.add(pt * (b1 + a1) * z1)
				// a = N1 z1 + (T - N1) z2 increases with N1; start at the
				// first N1 with a > 0.
				start := lo1
				if first := int(math.Floor(float64(T)*(-z2)/(z1-z2))) - 1; first > start {
					start = first
				}
				var tab *table
				for N1 := start; N1 <= hi1; N1++ {
					a := float64(N1)*z1 + float64(T-N1)*z2
					if a <= 0 {
						continue
					}
					p := pt * binomPMF(N1, T, 0.5, 0.5)
					if p == 0 {
						continue
					}
					var v float64
					switch {
					case pi == 0 || az3 == 0 || m == 0:
						v = a
					default:
						if tab == nil {
							t := makeTable(m)
							tab = &t
							// K omits K(lo) = sum_{i<lo} (lo-i) P(N3=i)
							// <= lo * below.
							bound.add(pt * float64(tab.lo) * tab.below * az3 / nf)
						}
						J := math.Floor(a / az3)
						switch {
						case J < float64(tab.lo):
							// v <= a P(N3 <= J) <= a * below.
							bound.add(p * a * tab.below / nf)
							v = 0
						case J > float64(tab.hi):
							// v = a - |z3| m pi + E[(N3|z3| - a) 1{N3 > J}],
							// the last term in [0, |z3| E[N3 1{N3 > hi}]]
							// and E[N3 1{N3 > hi}] <= m P(N3 > hi).
							v = a - az3*tab.mean
							bound.add(p * az3 * float64(m) * tab.above / nf)
						default:
							i := int(J) - tab.lo
							v = (a-J*az3)*tab.F[i] + az3*tab.K[i]
						}
					}
					acc.add(p * v)
				}
			}
		}()
	}
	wg.Wait()
	var acc, bound kahan
	bound.add((tb + ta) * z1)
	for w := range workers {
		acc.add(accs[w].sum)
		acc.add(accs[w].c)
		bound.add(bounds[w].value())
	}
	return acc.value() / nf, bound.value()
}

// epsSolveTol is the relative precision of exactEps: far below the 0.5%
// tightness tolerance the engine is held to, so that the reference's own
// error does not matter.
const epsSolveTol = 1e-7

// exactEps returns the smallest eps in [0, hi] with f(eps) <= delta for a
// non-increasing f with f(hi) <= delta, to relative precision epsSolveTol.
// guess, when in (0, hi), is tried first to narrow the bracket. The solver is
// Brent's method on log f (smooth in eps) with bisection safeguards.
func exactEps(f func(float64) float64, delta, hi, guess float64) float64 {
	g := func(e float64) float64 {
		v := f(e)
		if v <= 0 {
			return -1e3 // far below any log delta the tests use
		}
		return math.Log(v) - math.Log(delta)
	}
	a, b := 0.0, hi
	ga := g(a)
	if ga <= 0 {
		return 0
	}
	gb := g(b)
	if gb > 0 {
		return hi
	}
	if guess > 0 && guess < hi {
		// Probe a narrow bracket around the guess.
		for _, x := range []float64{guess * (1 - 1e-3), guess * (1 + 1e-3)} {
			if x <= a || x >= b {
				continue
			}
			if gx := g(x); gx > 0 {
				a, ga = x, gx
			} else {
				b, gb = x, gx
			}
		}
	}
	// Brent's method (zero of g on [a, b], g(a) > 0 >= g(b)); b is always
	// the feasible side (g <= 0).
	c, gc := a, ga
	d := b - a
	e := d
	for range 200 {
		if (gb > 0) == (gc > 0) {
			c, gc = a, ga
			d = b - a
			e = d
		}
		if math.Abs(gc) < math.Abs(gb) {
			a, b, c = b, c, b
			ga, gb, gc = gb, gc, gb
		}
		tol := 0.5 * epsSolveTol * math.Abs(b)
		xm := 0.5 * (c - b)
		if math.Abs(xm) <= tol || gb == 0 {
			break
		}
		if math.Abs(e) >= tol && math.Abs(ga) > math.Abs(gb) {
			var p, q float64
			s := gb / ga
			if a == c {
				p = 2 * xm * s
				q = 1 - s
			} else {
				qq := ga / gc
				r := gb / gc
				p = s * (2*xm*qq*(qq-r) - (b-a)*(r-1))
				q = (qq - 1) * (r - 1) * (s - 1)
			}
			if p > 0 {
				q = -q
			}
			p = math.Abs(p)
			if 2*p < math.Min(3*xm*q-math.Abs(tol*q), math.Abs(e*q)) {
				e, d = d, p/q
			} else {
				d, e = xm, xm
			}
		} else {
			d, e = xm, xm
		}
		a, ga = b, gb
		if math.Abs(d) > tol {
			b += d
		} else {
			b += math.Copysign(tol, xm)
		}
		gb = g(b)
	}
	// Return the feasible end of the final bracket.
	if gb <= 0 {
		return b
	}
	return c
}

// Tests of the references themselves.

// randomMatrix returns a k x m row-stochastic matrix with all entries
// positive: entries e^(spread*U) normalised per row, U uniform on [0,1).
func randomMatrix(rng *rand.Rand, k, m int, spread float64) [][]float64 {
	rows := make([][]float64, k)
	for x := range rows {
		rows[x] = make([]float64, m)
		var s float64
		for y := range rows[x] {
			rows[x][y] = math.Exp(spread * rng.Float64())
			s += rows[x][y]
		}
		for y := range rows[x] {
			rows[x][y] /= s
		}
	}
	return rows
}

// pairAtomsFromSpec returns the unmerged blanket atoms of the pair (x, x')
// of a dense matrix, one per output, as docs/accounting.md §3 defines them.
func pairAtomsFromSpec(rows [][]float64, x, xp int) accountant.AtomSet {
	var s accountant.AtomSet
	for y := range rows[x] {
		r := math.Inf(1)
		for _, row := range rows {
			r = math.Min(r, row[y])
		}
		s = append(s, accountant.Atom{R: r, P: rows[x][y], Q: rows[xp][y]})
	}
	return s
}

func krrUpper(t testing.TB, k int, eps0 float64) accountant.AtomSet {
	t.Helper()
	d, err := accountant.KRR(k).Decompose(eps0)
	if err != nil {
		t.Fatalf("KRR(%d).Decompose(%v): %v", k, eps0, err)
	}
	return d.Upper[0]
}

func krrLower(t testing.TB, k int, eps0 float64) accountant.AtomSet {
	t.Helper()
	d, err := accountant.KRR(k).Decompose(eps0)
	if err != nil {
		t.Fatalf("KRR(%d).Decompose(%v): %v", k, eps0, err)
	}
	return d.Lower[0]
}

func relErr(got, want float64) float64 {
	if got == want {
		return 0
	}
	return math.Abs(got-want) / math.Max(math.Abs(want), math.SmallestNonzeroFloat64)
}

func TestExactDeltaMatchesBigFloat(t *testing.T) {
	// bigTol: exactDelta rounds each log-probability (|log p| <= ~60, so
	// ~1e-14 relative per term) and each partial sum of z; compensated
	// summation keeps the total within a few times that of the 200-bit value.
	const bigTol = 1e-13
	rng := rand.New(rand.NewPCG(1, 2))
	m, err := accountant.NewMatrix(randomMatrix(rng, 3, 3, 1.5))
	if err != nil {
		t.Fatal(err)
	}
	md, err := accountant.Decompose(&accountant.Declaration{Eps0: 0, Form: accountant.FormMatrix, Matrix: m})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		set  accountant.AtomSet
		eps0 float64
	}{
		{"krr3 upper", krrUpper(t, 3, 1), 1},
		{"krr5 lower", krrLower(t, 5, 2), 2},
		{"clone", accountant.CloneDecomposition(1.5).Upper[0], 1.5},
		{"random 3x3", md.Upper[0], md.LocalEps},
	}
	for _, c := range cases {
		for _, n := range []int{1, 2, 5, 9} {
			for _, f := range []float64{0, 0.2, 0.5} {
				eps := f * c.eps0
				got, want := exactDelta(c.set, n, eps), bigExactDelta(c.set, n, eps)
				if relErr(got, want) > bigTol {
					t.Errorf("%s n=%d eps=%v: exactDelta = %.17g, 200-bit = %.17g (rel %.2g > %g)", c.name, n, eps, got, want, relErr(got, want), bigTol)
				}
			}
		}
	}
}

func TestExactDeltaOneUserIsHockeyStick(t *testing.T) {
	// hsTol: both sides add a handful of float64 terms of size <= 1.
	const hsTol = 1e-14
	// mergeTol: merging atoms with equal ratios is exact in real arithmetic
	// (docs/accounting.md §3); in float64 the merged sums differ by a few ulps and
	// exactDelta at n = 6 amplifies that by at most the number of terms.
	const mergeTol = 1e-12
	rng := rand.New(rand.NewPCG(3, 4))
	for trial := range 20 {
		k, mOut := 2+rng.IntN(3), 2+rng.IntN(3)
		rows := randomMatrix(rng, k, mOut, 2)
		m, err := accountant.NewMatrix(rows)
		if err != nil {
			t.Fatal(err)
		}
		d, err := accountant.Decompose(&accountant.Declaration{Eps0: 0, Form: accountant.FormMatrix, Matrix: m})
		if err != nil {
			t.Fatalf("trial %d: Decompose: %v", trial, err)
		}
		for _, eps := range []float64{0, 0.1 * d.LocalEps, 0.5 * d.LocalEps} {
			var bestHS, bestSpec6 float64
			for x := range k {
				for xp := range k {
					if x == xp {
						continue
					}
					hs := hockeyStick(rows[x], rows[xp], eps)
					spec := pairAtomsFromSpec(rows, x, xp)
					if got := exactDelta(spec, 1, eps); math.Abs(got-hs) > hsTol {
						t.Errorf("trial %d pair (%d,%d) eps=%v: exactDelta(n=1) = %.17g, hockey-stick = %.17g", trial, x, xp, eps, got, hs)
					}
					bestHS = math.Max(bestHS, hs)
					bestSpec6 = math.Max(bestSpec6, exactDelta(spec, 6, eps))
				}
			}
			var dec1, dec6 float64
			for _, s := range d.Upper {
				dec1 = math.Max(dec1, exactDelta(s, 1, eps))
				dec6 = math.Max(dec6, exactDelta(s, 6, eps))
			}
			if math.Abs(dec1-bestHS) > hsTol {
				t.Errorf("trial %d eps=%v: max over Decompose(0).Upper of exactDelta(n=1) = %.17g, max hockey-stick over pairs = %.17g", trial, eps, dec1, bestHS)
			}
			if relErr(dec6, bestSpec6) > mergeTol && math.Abs(dec6-bestSpec6) > 1e-300 {
				t.Errorf("trial %d eps=%v: n=6: merged decomposition gives %.17g, unmerged spec atoms %.17g", trial, eps, dec6, bestSpec6)
			}
		}
	}
}

func TestBinomialHelpers(t *testing.T) {
	// pmfTol: Loader's expansion evaluates log P as a sum of terms of size
	// up to ~|log P| + 20, each to a few ulps, so P has a relative error of
	// a few 1e-14 plus ulps times |log P|; the 200-bit reference is exact
	// to the precision shown.
	pmfTol := func(p float64) float64 { return 5e-14 + 2e-15*math.Abs(math.Log(p)) }
	// cdfTol: RegIncBeta (Cephes incbet) is documented to ~1e-13 relative
	// over its domain; the tails of the tests below are far from underflow.
	const cdfTol = 1e-12
	for _, c := range []struct {
		n int
		p float64
	}{{1, 0.3}, {7, 0.5}, {30, 0.01}, {200, 0.3}, {500, 0.9}} {
		q := 1 - c.p
		// Exact pmf by big.Float: C(n,x) p^x q^(n-x).
		pmf := make([]*big.Float, c.n+1)
		coef := big.NewInt(1)
		for x := 0; x <= c.n; x++ {
			if x > 0 {
				coef.Mul(coef, big.NewInt(int64(c.n-x+1)))
				coef.Quo(coef, big.NewInt(int64(x)))
			}
			v := new(big.Float).SetPrec(bigPrec).SetInt(coef)
			for range x {
				v.Mul(v, newBig(c.p))
			}
			for range c.n - x {
				v.Mul(v, newBig(q))
			}
			pmf[x] = v
		}
		cdf := make([]float64, c.n+1)
		sf := make([]float64, c.n+1)
		acc := newBig(0)
		for x := 0; x <= c.n; x++ {
			acc.Add(acc, pmf[x])
			cdf[x], _ = acc.Float64()
		}
		acc = newBig(0)
		for x := c.n; x >= 0; x-- {
			sf[x], _ = acc.Float64() // P(X > x)
			acc.Add(acc, pmf[x])
		}
		for x := 0; x <= c.n; x++ {
			want, _ := pmf[x].Float64()
			if got := binomPMF(x, c.n, c.p, q); relErr(got, want) > pmfTol(want) {
				t.Errorf("binomPMF(%d; %d, %v) = %.17g, want %.17g", x, c.n, c.p, got, want)
			}
			if got := binomCDF(x, c.n, c.p, q); cdf[x] > 1e-300 && relErr(got, cdf[x]) > cdfTol {
				t.Errorf("binomCDF(%d; %d, %v) = %.17g, want %.17g (rel %.2g)", x, c.n, c.p, got, cdf[x], relErr(got, cdf[x]))
			}
			if got := binomSF(x, c.n, c.p, q); sf[x] > 1e-300 && relErr(got, sf[x]) > cdfTol {
				t.Errorf("binomSF(%d; %d, %v) = %.17g, want %.17g (rel %.2g)", x, c.n, c.p, got, sf[x], relErr(got, sf[x]))
			}
		}
	}
}

func TestKRRExactMatchesEnumeration(t *testing.T) {
	// refAgreeTol: the two references compute the same sum in different
	// orders (closed-form binomial tail vs. full enumeration); each is
	// accurate to ~1e-13 relative, so they must agree to ~1e-12.
	const refAgreeTol = 1e-12
	// negligibleTrunc: krrExactDelta's windows leave out mass below 1e-40
	// per side; its error bound must stay far below any delta of interest.
	const negligibleTrunc = 1e-30
	for _, k := range []int{2, 3, 10, 100} {
		for _, eps0 := range []float64{0.5, 1, 3} {
			set := krrUpper(t, k, eps0)
			for _, n := range []int{1, 2, 7, 20, 40, 150} {
				for _, f := range []float64{0, 0.05, 0.2, 0.5, 0.9} {
					eps := f * eps0
					want := exactDelta(set, n, eps)
					got, trunc := krrExactDeltaBound(k, eps0, n, eps)
					if math.Abs(got-want) > refAgreeTol*want+trunc || got > want*(1+refAgreeTol) {
						t.Errorf("k=%d eps0=%v n=%d eps=%v: krrExactDelta = %.17g, exactDelta = %.17g (rel %.2g, trunc bound %.2g)", k, eps0, n, eps, got, want, relErr(got, want), trunc)
					}
					if trunc > negligibleTrunc {
						t.Errorf("k=%d eps0=%v n=%d eps=%v: truncation bound %.3g not negligible", k, eps0, n, eps, trunc)
					}
				}
			}
		}
	}
	// The same enumeration serves the generic clone decomposition.
	for _, eps0 := range []float64{0.5, 2, 5} {
		set := accountant.CloneDecomposition(eps0).Upper[0]
		for _, n := range []int{1, 3, 40, 400} {
			for _, f := range []float64{0, 0.1, 0.5} {
				eps := f * eps0
				want := exactDelta(set, n, eps)
				got, trunc := cloneExactDelta(eps0, n, eps)
				if math.Abs(got-want) > refAgreeTol*want+trunc || got > want*(1+refAgreeTol) {
					t.Errorf("clone eps0=%v n=%d eps=%v: cloneExactDelta = %.17g, exactDelta = %.17g (rel %.2g, trunc bound %.2g)", eps0, n, eps, got, want, relErr(got, want), trunc)
				}
			}
		}
	}
	// And 3-RR's lower-bound set, which has the same shape without a
	// residual.
	for _, eps0 := range []float64{0.5, 2, 5} {
		set := krrLower(t, 3, eps0)
		for _, n := range []int{1, 3, 40, 400} {
			for _, f := range []float64{0, 0.1, 0.5} {
				eps := f * eps0
				want := exactDelta(set, n, eps)
				got, trunc := krr3LowerExactDelta(eps0, n, eps)
				if math.Abs(got-want) > refAgreeTol*want+trunc || got > want*(1+refAgreeTol) {
					t.Errorf("3-RR lower eps0=%v n=%d eps=%v: krr3LowerExactDelta = %.17g, exactDelta = %.17g (rel %.2g, trunc bound %.2g)", eps0, n, eps, got, want, relErr(got, want), trunc)
				}
			}
		}
	}
	// One larger n, where every truncation window is active, still within
	// reach of the enumeration (C(403,3) = 1.1e7 count vectors).
	for _, c := range []struct {
		k         int
		eps0, eps float64
	}{{10, 1, 0.1}, {3, 2, 0.3}} {
		const n = 400
		want := exactDelta(krrUpper(t, c.k, c.eps0), n, c.eps)
		got, trunc := krrExactDeltaBound(c.k, c.eps0, n, c.eps)
		if math.Abs(got-want) > refAgreeTol*want+trunc || got > want*(1+refAgreeTol) {
			t.Errorf("k=%d eps0=%v n=%d eps=%v: krrExactDelta = %.17g, exactDelta = %.17g (rel %.2g, trunc bound %.2g)", c.k, c.eps0, n, c.eps, got, want, relErr(got, want), trunc)
		}
	}
}
