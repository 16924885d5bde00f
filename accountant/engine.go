package accountant

import (
	"maps"
	"math"
	"math/cmplx"
	"slices"
	"sync"
)

// The engine brackets
//
//	D(eps) = (1/n) E[(S_n)_+],  S_n = Z_1 + ... + Z_n i.i.d.,
//	Z = (p_j - e^eps q_j)/r_j with probability r_j, 0 with probability 1 - gamma,
//
// from both sides. The method, and why each step is sound:
//
//  1. Lattice by mean-preserving spread. Each atom value z_j = (a_j + t_j) h,
//     a_j integer, t_j in [0,1), is split between a_j h (mass r_j (1-t_j)) and
//     (a_j+1) h (mass r_j t_j). The lattice variable Z~ has E[Z~ | Z] = Z, so
//     S~_n is a mean-preserving spread of S_n and, (.)_+ being convex,
//     E[(S~_n)_+] >= E[(S_n)_+]: the lattice value is an upper bound.
//  2. Lower side by convexity. With g = 1[S~_n > 0], a subgradient of (.)_+
//     at S~_n, (S_n)_+ >= (S~_n)_+ + g (S_n - S~_n). Taking expectations and
//     using independence,
//     E[(S_n)_+] >= E[(S~_n)_+] - n sum_j r_j kappa_j P(S~_{n-1} = -a_j h),
//     kappa_j = h t_j (1 - t_j). Atoms on the lattice (the residual at 0)
//     cost nothing.
//  3. Exponential tilting. The lattice distribution is tilted by e^{theta s}
//     with theta chosen so that the tilted sum has mean 0; probabilities near
//     s = 0, where (s)_+ starts, are then of order 1/sqrt(n) instead of
//     delta, and float64 keeps full relative precision even for delta = 1e-12
//     and below. P(S = s) = P_theta(S = s) e^{-theta s} M(theta)^n.
//  4. Window and aliasing. The tilted n-fold distribution is computed modulo
//     L on a window [A, A+L) of lattice points: its DFT is phi(k)^n, where
//     phi is evaluated directly from the few lattice atoms (no forward FFT,
//     so its rounding error is a few ulps). Only a few hundred
//     coefficients survive the n-th power; the sum of s e^{-theta s}
//     against the wrapped law over the window is taken in the frequency
//     domain from them, with the weights' transforms in closed form
//     (rampsum.go), so no inverse FFT is needed and the cost does not grow
//     with L. A nearly point-mass law keeps most coefficients; there one
//     inverse FFT is cheaper and is taken (windowfft.go; windowmain.go
//     chooses). The (n-1)-fold law of step 2 is needed at
//     a few points only (one per split atom): it is summed there directly
//     from its non-zero coefficients (pmAt). Wrapping only adds
//     non-negative mass, which keeps the upper side sound; on the lower
//     side the aliased mass is bounded by Chernoff bounds from the exact
//     lattice moment generating function and subtracted at its worst
//     position. Mass beyond the window
//     is bounded the same way (E[S 1{S >= a}] <= a e^{-va} M(v)^n, v >= 1/a).
//  5. Floating point. The error of phi is bounded by a few ulps; raising to
//     the n-th power multiplies its relative error by n. The main sum's
//     bound is sum_k mult_k (e_k |G_k| + |Y_k| errG + ...) / L over the
//     kept coefficients, from each coefficient's error e_k and the closed
//     forms' errG (rampsum.go), or, by the FFT, Cauchy-Schwarz over the
//     window's points (windowfft.go); the direct sums of the (n-1)-fold law add
//     (K + 32) u sum |Y_k| over their K terms. These bounds are added on
//     the upper side and subtracted on the lower side, weighted by the
//     untilting factors, and a final relative margin (4 L u + 1e-12)
//     covers the rounding of the untilting (log, exp and the scale n k0).
//     The (n-1)-fold law's points carry 2F more, F = 5 u log2(L) ||p||_2
//     of that law: the bound its inverse FFT had when it was transformed
//     (before the direct sums). Soundness does not need it; it keeps every
//     lower figure at or below the transform's. At a point with exact
//     wrapped value x (normalised), coefficient error term e (the same
//     either way) and direct-sum bound P, the transform gave at most x + F
//     and read x_FFT + e + F; the direct sum gives at least x - P and
//     reads x_dir + e + P + 2F >= x + e + 2F >= x_FFT + e + F. So each
//     point's bound, hence the convexity correction, is at least what it
//     was, and the lower figure at most, up to roundings of a few u of the
//     point's bound (the pair computes e and F in the same order, the
//     same bits). Without the 2F the lower figures rose by up to 6.8e-9
//     relative (hadamard:k=256, eps0 0.5, n 1e8: the dropped F), where
//     issue 28 allows 1e-9 or a sounder figure; with it they fall by
//     about as much.
//
// The window grows until the tail and alias terms are negligible, and the
// lattice step h = hRel * sd is halved by the caller until the bracket is
// within tolerance in eps.

const (
	// ulp is the unit roundoff of float64.
	ulp = 0x1p-53
	// maxLattice caps the window's length: 2^24 points. Its twiddle table
	// of L/2 + 1 entries is 128 MB there, built per call above 2^22
	// (twiddleTable); a window that keeps most coefficients also takes an
	// inverse FFT (windowfft.go: L reals and L/2 + 1 complex, about 400 MB
	// in all at the cap).
	maxLattice = 1 << 24
	// windowSD is the initial half-width of the window in tilted standard
	// deviations of S_n.
	windowSD = 9
	// tailRel is the relative size the tail and alias terms may reach before
	// the window is widened.
	tailRel = 1e-6
	// DeltaFloor is the smallest upper bound on delta the engine reports:
	// a bound below it is reported as DeltaFloor (still an upper bound).
	// Values this small are far below any meaningful delta, and reporting
	// them exactly would need more exponent range than float64 has.
	DeltaFloor = 1e-250
	// maxDoublings bounds how often the window is widened; the tail terms
	// are part of the bracket, so stopping early only loosens it.
	maxDoublings = 3
)

// bracket is the result of one evaluation.
type bracket struct {
	lo, hi float64
	// capped is set when the lattice needed exceeds maxLattice; the bracket
	// is then that of the coarsest feasible window and may be loose.
	capped bool
}

// latticeAtom is one atom after the spread, for the lower-side correction.
type latticeAtom struct {
	r, kappa float64
	a        int64
}

// prepared holds an atom set at one eps, ready for the lattice.
type prepared struct {
	z, w     []float64 // atom values and masses (residual included at z = 0)
	maxZ     float64
	exactOne float64 // E[Z_+], the exact value for n = 1
}

func prepare(s AtomSet, eps float64) prepared {
	em1 := math.Expm1(eps)
	var p prepared
	var gamma float64
	p.maxZ = math.Inf(-1)
	for _, a := range s {
		if a.R <= 0 {
			continue
		}
		z := ((a.P - a.Q) - em1*a.Q) / a.R
		p.z = append(p.z, z)
		p.w = append(p.w, a.R)
		gamma += a.R
		p.maxZ = math.Max(p.maxZ, z)
		if z > 0 {
			p.exactOne += a.R * z
		}
	}
	if res := 1 - gamma; res > 0 {
		p.z = append(p.z, 0)
		p.w = append(p.w, res)
		p.maxZ = math.Max(p.maxZ, 0)
	} else if gamma > 1 {
		// Masses that sum to slightly more than 1 (rounding in a
		// declaration, tolerated by validation) would give the n-fold law a
		// total mass of gamma^n: renormalise. For a pair this shrinks the
		// blanket, which stays valid; for a triple it restores the
		// distribution R[x3].
		for j := range p.w {
			p.w[j] /= gamma
		}
		p.exactOne /= gamma
	}
	return p
}

// lattice is the spread distribution on hZ.
type lattice struct {
	h     float64
	idx   []int64   // distinct lattice indices
	logw  []float64 // log masses
	v     []float64 // values h * idx
	atoms []latticeAtom
	imin  int64
	imax  int64
}

func newLattice(p prepared, h float64) *lattice {
	mass := map[int64]float64{}
	l := &lattice{h: h, imin: math.MaxInt64, imax: math.MinInt64}
	for j, z := range p.z {
		x := z / h
		a := math.Floor(x)
		t := x - a
		ai := int64(a)
		if t == 0 {
			mass[ai] += p.w[j]
		} else {
			mass[ai] += p.w[j] * (1 - t)
			mass[ai+1] += p.w[j] * t
			l.atoms = append(l.atoms, latticeAtom{r: p.w[j], kappa: h * t * (1 - t), a: ai})
		}
	}
	// In index order: a map's order changes from run to run, and the sums
	// over the lattice points (the cumulants, phi) would round differently
	// each time (evaluate is a pure function: memo.go).
	for _, i := range slices.Sorted(maps.Keys(mass)) {
		m := mass[i]
		if m <= 0 {
			continue
		}
		l.idx = append(l.idx, i)
		l.v = append(l.v, h*float64(i))
		l.logw = append(l.logw, math.Log(m))
		l.imin = min(l.imin, i)
		l.imax = max(l.imax, i)
	}
	return l
}

// latticeTooWide reports whether some atom of p is 2^52 or more lattice
// steps h from 0.
func latticeTooWide(p prepared, h float64) bool {
	for _, z := range p.z {
		if !(math.Abs(z/h) < 1<<52) {
			return true
		}
	}
	return false
}

// logMGF returns log E[e^{lambda h I}] and the first two derivatives of the
// cumulant generating function in lambda (in units of h).
func (l *lattice) logMGF(lambda float64) (k0, k1, k2 float64) {
	return cumulants(l.logw, l.v, lambda)
}

// cumulants returns the log moment generating function at lambda of the
// law with log masses logw at values v, and its first two derivatives
// (the tilted mean and variance), by log-sum-exp.
func cumulants(logw, v []float64, lambda float64) (k0, k1, k2 float64) {
	mx := math.Inf(-1)
	for i, lw := range logw {
		mx = math.Max(mx, lw+lambda*v[i])
	}
	var s0, s1, s2 float64
	for i, lw := range logw {
		e := math.Exp(lw + lambda*v[i] - mx)
		s0 += e
		s1 += e * v[i]
		s2 += e * v[i] * v[i]
	}
	k0 = mx + math.Log(s0)
	k1 = s1 / s0
	k2 = s2/s0 - k1*k1
	return k0, k1, math.Max(k2, 0)
}

// tilt returns theta >= 0 with K'(theta) = 0 (theta = 0 when the mean is
// already >= 0).
func (l *lattice) tilt() float64 {
	if l.imax <= 0 {
		return 0
	}
	return centringTilt(func(t float64) float64 { _, k1, _ := l.logMGF(t); return k1 }, 1/(l.h*float64(l.imax)))
}

// centringTilt returns theta >= 0 with mean(theta) = 0 for the increasing
// tilted mean of a law with some positive value (0 when mean(0) >= 0), by
// doubling from start and then bisection to the last float.
func centringTilt(mean func(float64) float64, start float64) float64 {
	if mean(0) >= 0 {
		return 0
	}
	lo, hi := 0.0, start
	for range 2000 {
		if mean(hi) > 0 {
			break
		}
		lo, hi = hi, 2*hi
	}
	for range 200 {
		mid := 0.5 * (lo + hi)
		if mid == lo || mid == hi {
			break
		}
		if mean(mid) > 0 {
			hi = mid
		} else {
			lo = mid
		}
	}
	return lo
}

// chernoffUpper bounds log P(S_n >= a) under the lattice law tilted by
// theta (theta = 0: untilted): min over lambda >= 0 of
// -lambda a + n (K(theta+lambda) - K(theta)).
func (l *lattice) chernoffUpper(n float64, theta, a float64) float64 {
	k0, _, _ := l.logMGF(theta)
	f := func(lam float64) float64 {
		k, _, _ := l.logMGF(theta + lam)
		return -lam*a + n*(k-k0)
	}
	return minimize1D(f, 0, l.lambdaScale(n, theta))
}

// chernoffLower bounds log P(S_n <= a).
func (l *lattice) chernoffLower(n float64, theta, a float64) float64 {
	k0, _, _ := l.logMGF(theta)
	f := func(lam float64) float64 {
		k, _, _ := l.logMGF(theta - lam)
		return lam*a + n*(k-k0)
	}
	return minimize1D(f, 0, l.lambdaScale(n, theta))
}

func (l *lattice) lambdaScale(n float64, theta float64) float64 {
	_, _, k2 := l.logMGF(theta)
	span := l.h * float64(max(l.imax-l.imin, 1))
	s := 50 / span
	if k2 > 0 {
		s = math.Max(s, 50/math.Sqrt(n*k2))
	}
	return s + math.Abs(theta)
}

// minimize1D returns an approximate minimum of f on [lo, hi] (golden section
// on a bracket found by scanning). Any value of f is a valid Chernoff bound,
// so approximate minimisation is sound.
func minimize1D(f func(float64) float64, lo, hi float64) float64 {
	best := f(lo)
	// Expand hi while f keeps decreasing at the end.
	for range 60 {
		if f(hi) < best {
			best = f(hi)
			lo, hi = hi/2, hi*2
			continue
		}
		break
	}
	a, b := lo, hi
	const g = 0.6180339887498949
	c, d := b-g*(b-a), a+g*(b-a)
	fc, fd := f(c), f(d)
	for range 80 {
		if fc < fd {
			b, d, fd = d, c, fc
			c = b - g*(b-a)
			fc = f(c)
		} else {
			a, c, fc = c, d, fd
			d = a + g*(b-a)
			fd = f(d)
		}
	}
	return math.Min(best, math.Min(fc, fd))
}

// twiddleCache keeps the tables e^{-2 pi i m / L}, m in [0, L/2], of the
// few most recent lengths: a calibration or an eps search evaluates many
// points at the same length. It is bounded (maxTables tables of at most
// 2^21+1 entries, 256 MB in the worst case, typically a few MB).
var twiddleCache struct {
	sync.Mutex
	tables map[int][]complex128
	order  []int
}

const maxTables = 8

func twiddleTable(L int) []complex128 {
	c := &twiddleCache
	c.Lock()
	if t, ok := c.tables[L]; ok {
		c.Unlock()
		return t
	}
	c.Unlock()
	t := make([]complex128, L/2+1)
	for m := range t {
		s, co := math.Sincos(-2 * math.Pi * float64(m) / float64(L))
		t[m] = complex(co, s)
	}
	if L > 1<<22 {
		return t
	}
	c.Lock()
	defer c.Unlock()
	if c.tables == nil {
		c.tables = map[int][]complex128{}
	}
	if _, ok := c.tables[L]; !ok {
		if len(c.order) >= maxTables {
			delete(c.tables, c.order[0])
			c.order = c.order[1:]
		}
		c.tables[L] = t
		c.order = append(c.order, L)
	}
	return t
}

// fastSize returns the smallest integer >= n of the form 2^a 3^b 5^c that
// gonum's fftpack can factor: it splits a length into factors 4, 2, 3 and 5
// and holds at most 13 of them.
func fastSize(n int) int {
	best := math.MaxInt
	for p5 := 1; p5 < 2*n || p5 == 1; p5 *= 5 {
		for p3 := p5; p3 < 2*n || p3 == p5; p3 *= 3 {
			p := p3
			for p < n {
				p *= 2
			}
			if p < best && fftFactors(p) <= 13 {
				best = p
			}
			if p3 > n {
				break
			}
		}
		if p5 > n {
			break
		}
	}
	if best == math.MaxInt {
		// Powers of two always factor (into 4s): 2^24 needs 12 factors.
		best = 1
		for best < n {
			best *= 2
		}
	}
	return best
}

// fftFactors counts the factors fftpack uses for n (4s first, then 2, 3, 5).
func fftFactors(n int) int {
	c := 0
	for n%4 == 0 {
		n /= 4
		c++
	}
	for _, f := range []int{2, 3, 5} {
		for n%f == 0 {
			n /= f
			c++
		}
	}
	if n > 1 {
		c += 99
	}
	return c
}

// evaluate brackets D(eps) for set s with lattice step h = hRel * sd(Z)
// (tilted). wantLo selects whether the lower side (the (n-1)-fold law) is
// computed; otherwise lo is 0.
func evaluate(s AtomSet, n int, eps, hRel float64, wantLo bool) bracket {
	key := memoKey(s, n, eps, hRel, wantLo)
	return memo.do(key, func() bracket { return compute(s, n, eps, hRel, wantLo) })
}

// compute is evaluate without the memo (memo.go).
func compute(s AtomSet, n int, eps, hRel float64, wantLo bool) bracket {
	p := prepare(s, eps)
	if p.maxZ <= 0 {
		return bracket{lo: 0, hi: 0}
	}
	if n == 1 {
		return bracket{lo: p.exactOne, hi: p.exactOne}
	}
	if b, ok := sparseExact(p, n); ok {
		return b
	}
	return latticeEval(p, n, hRel, wantLo)
}

// latticeEval is the lattice/FFT path of evaluate.
func latticeEval(p prepared, n int, hRel float64, wantLo bool) bracket {
	if p.maxZ <= 0 {
		return bracket{}
	}
	nf := float64(n)
	sd := tiltedSD(p)
	h := hRel * sd
	if !(h > 0) || math.IsInf(h, 0) {
		h = hRel * math.Max(p.maxZ, 1e-300)
	}
	if latticeTooWide(p, h) {
		// An atom lies 2^52 or more steps from 0: the indices would not
		// be exact (nor fit an int64 beyond 2^63). Subadditivity,
		// (S_n)_+ <= sum_i (Z_i)_+, gives D <= E[Z_+], a valid if
		// loose upper end (with room for its sum's rounding).
		return bracket{hi: math.Max(p.exactOne*(1+float64(len(p.z)+2)*ulp), DeltaFloor), capped: true}
	}
	l := newLattice(p, h)
	if l.imax <= 0 {
		return bracket{}
	}
	theta := l.tilt()
	k0, _, k2 := l.logMGF(theta)
	if theta > 0 && nf*k0-1-math.Log(theta*nf) < math.Log(DeltaFloor)-1 {
		// Chernoff: x_+ <= e^{theta x - 1}/theta for every x, so
		// E[(S~_n)_+]/n <= M~(theta)^n/(e theta n), below DeltaFloor here
		// (with e^{-1} to spare for the roundings of n k0, a few u of it):
		// [0, DeltaFloor] is a valid bracket. Near eps0 the tilted law is
		// nearly a point mass and keeps every coefficient, which costs
		// L/2 closed-form sums (rampsum.go). The window itself could give
		// a positive lo below DeltaFloor, or a hi above it (even +Inf
		// where its tails could not be bounded: a reviewer found 21 such
		// cases in 1,672 evaluations near eps0); every target is at least
		// MinDelta = 1e-100, so only the bracket's own validity matters.
		return bracket{lo: 0, hi: DeltaFloor}
	}
	sdIdx := math.Sqrt(nf*k2) / h
	fullLo, fullHi := nf*float64(l.imin), nf*float64(l.imax)
	half := math.Ceil(windowSD*sdIdx) + 2
	capped := false
	doublings := 0
	for {
		A, B := math.Max(fullLo, -half), math.Min(fullHi, half) // tilted mean is 0 (or <= 0 when theta = 0)
		if theta == 0 {
			_, k1, _ := l.logMGF(0)
			c := math.Round(nf * k1 / h)
			A, B = math.Max(fullLo, c-half), math.Min(fullHi, math.Max(c+half, half))
			A = math.Min(A, -1)
		}
		full := A <= fullLo && B >= fullHi
		L := fastSize(int(B - A + 1))
		if L > maxLattice {
			// Cap the window around the region that matters (s just
			// above 0, where the tilted mass sits); the tail and alias
			// terms keep the bracket sound.
			capped = true
			L = maxLattice
			A = math.Max(fullLo, -float64(L)/2)
			full = false
		}
		r := l.window(nf, theta, k0, int64(A), L, full, wantLo)
		r.capped = capped
		// A window whose upper bound is already at DeltaFloor is not
		// widened: a wider one could at most lower hi, which is reported
		// as DeltaFloor anyway, and raise lo, which is then below
		// DeltaFloor too (lo <= the exact value <= this window's hi), far
		// below MinDelta and any target. Only this bracket's own
		// soundness matters, and it has it. (At eps near eps0 with a
		// steep tilt the tail test otherwise doubled the window to 8
		// times its length, 3 s at n = 1e8, for a bound of 1e-250.)
		if r.tailOK || capped || full || doublings >= maxDoublings || r.hi <= DeltaFloor {
			return r.bracket
		}
		doublings++
		half *= 2
	}
}

// scaleBack returns v e^{logScale} / n, 0 for v <= 0.
func scaleBack(v, logScale, n float64) float64 {
	if !(v > 0) {
		return 0
	}
	return math.Exp(math.Log(v) + logScale - math.Log(n))
}

// tiltedSD is the standard deviation of Z under the tilt that centres it,
// computed on the exact atoms.
func tiltedSD(p prepared) float64 {
	logw := make([]float64, len(p.w))
	for j, w := range p.w {
		logw[j] = math.Log(w)
	}
	theta := centringTilt(func(t float64) float64 { _, k1, _ := cumulants(logw, p.z, t); return k1 }, 1/p.maxZ)
	_, _, k2 := cumulants(logw, p.z, theta)
	return math.Sqrt(k2)
}

// bandEnd returns a k1 <= L/2 + 1 such that every coefficient k in
// [k1, L/2] of the lattice law with weights w at indices idx (ascending)
// would be skipped by window's test a + phiErr < skipBelow, so that the
// window need not compute them (the n-fold law is smooth on the
// lattice's scale, and only the first few coefficients survive the n-th
// power).
//
// Why. With W = sum_i w_i and any two points i, j at adjacent indices,
//
//	|phi(k)|^2 = sum_{i,l} w_i w_l cos(2 pi k (x_i - x_l)/L)
//	           = W^2 - sum_{i != l} w_i w_l (1 - cos(...))
//	          <= W^2 - 2 w_i w_j (1 - cos(2 pi k/L)),
//
// every term dropped being >= 0; the right side falls as k grows to L/2.
// The computed a of window is within phiErr of the exact |phi| of the
// computed weights (phiErr covers the weights' own errors too, and the
// sum's and the table's, which are all that a carries besides) and 2u
// relative (the modulus). So where sqrt of the bound at k1, with margins
// for its own rounding (W's sum: (len + 2) u relative; the product and
// the table's cosine: 4u and 16u; a relative 1e-10 on the whole, far
// above the rest), plus 2 phiErr is below skipBelow, window's test skips
// k1 and every k after it. The skipped coefficients add nothing to any
// sum, as when the test skips them: the window's results are the same
// bits. Without adjacent points no k is skipped here.
func bandEnd(w []float64, idx []int64, L int, t []complex128, phiErr, skipBelow float64) int {
	half := L/2 + 1
	var W, P float64
	for i, x := range w {
		W += x
		if i > 0 && idx[i] == idx[i-1]+1 {
			P = math.Max(P, w[i-1]*x)
		}
	}
	if P == 0 {
		return half
	}
	W *= 1 + float64(len(w)+2)*ulp
	P *= 1 - 4*ulp
	passes := func(k int) bool {
		c := math.Max(1-real(t[k])-16*ulp, 0)
		b := math.Max(W*W-2*P*c, 0)
		return math.Sqrt(b)*(1+1e-10)+2*phiErr < skipBelow
	}
	// Any k1 whose computed test passes will do (the argument above holds
	// at k1 alone), and the test passes from some k on as k grows (the
	// bound falls; its computed value up to a few u): bisect for it rather
	// than scan every k. Where the computed test is not monotone the
	// bisection may stop at another passing k1, which skips the same
	// coefficients in effect: those between would be skipped anyway.
	if half < 2 || !passes(half-1) {
		return half
	}
	no, yes := 0, half-1 // k = 0 never passes (c = 0, W >= skipBelow)
	for yes-no > 1 {
		if mid := no + (yes-no)/2; passes(mid) {
			yes = mid
		} else {
			no = mid
		}
	}
	return yes
}

// lipschitzPhi returns lip >= (2 pi/L) sum_i w_i |idx_i - c|, c the
// weights' mean index: a bound on |d phi/d kappa| for phi(kappa) = sum_i
// w_i e^{-2 pi i kappa idx_i/L} over real kappa, which at integers is the
// window's phi (idx_i and its position modulo L give the same phase), and
// so on how far |phi| moves between two of them. Its rounding (a few u
// relative) is covered by the factor 1 + 1e-10.
func lipschitzPhi(w []float64, idx []int64, L int) float64 {
	var W, m float64
	for i, x := range w {
		W += x
		m += x * float64(idx[i])
	}
	c := m / W
	var s float64
	for i, x := range w {
		s += x * math.Abs(float64(idx[i])-c)
	}
	return 2 * math.Pi / float64(L) * s * (1 + 1e-10)
}

// skipRun returns how many coefficients after one whose computed modulus
// is a the window's test a' + phiErr < skipBelow skips for certain: for
// each of the next d, |phi| <= |phi(k)| + lip d <= a + phiErr + lip d, and
// a' <= |phi| + phiErr, so a' + phiErr < skipBelow once a + 3 phiErr + lip
// d < skipBelow (with a relative 1e-10 to spare for this test's own
// roundings). The coefficients passed over would add nothing to any sum,
// as when the test skips them: the window's results are the same bits.
func skipRun(a, phiErr, lip, skipBelow float64) int {
	room := skipBelow*(1-1e-10) - a - 3*phiErr
	if !(room > 0) || !(lip > 0) {
		return 0
	}
	d := math.Floor(room / (lip * (1 + 1e-10)))
	if d > 1<<40 {
		d = 1 << 40
	}
	return int(d)
}

// halfCoef is a non-zero coefficient k of a half spectrum, with its
// multiplicity in the real inverse DFT (1 for k = 0 and k = L/2, else 2).
type halfCoef struct {
	k    int
	y    complex128
	mult float64
}

// pmAt returns the unnormalised real inverse DFT of length L of the half
// spectrum c at pos, sum_k mult_k Re(y_k e^{2 pi i k pos/L}), as gonum's
// Sequence defines it (the imaginary parts of the coefficients 0 and L/2
// ignored), from the twiddle table t of L (t[m] = e^{-2 pi i m/L}, m <=
// L/2). Its rounding: the table index k pos mod L is exact; each entry is
// within 12 u absolute (window's phi comment), so a term mult Re(y w) is
// within mult |y| (2*12 + 4) u of its exact value; a recursive sum of K
// terms adds at most (K - 1) u times the sum of their magnitudes. In all
// at most (K + 32) u sum_k mult_k |y_k|, the bound window uses.
func pmAt(c []halfCoef, t []complex128, L, pos int) float64 {
	var v float64
	for _, h := range c {
		m := int(int64(h.k) * int64(pos) % int64(L))
		var co, si float64 // cos and sin of 2 pi m/L
		if m <= L/2 {
			co, si = real(t[m]), -imag(t[m])
		} else {
			co, si = real(t[L-m]), imag(t[L-m])
		}
		if h.mult == 1 {
			v += real(h.y) * co
		} else {
			v += h.mult * (real(h.y)*co - imag(h.y)*si)
		}
	}
	return v
}

type windowResult struct {
	bracket
	tailOK bool
}

// window computes the bracket on the window [A, A+L) of lattice indices.
func (l *lattice) window(nf, theta, k0 float64, A int64, L int, full, wantLo bool) windowResult {
	h := l.h
	t := twiddleTable(L)
	// Tilted lattice weights and their positions modulo L.
	type pt struct {
		w   float64
		pos int
	}
	pts := make([]pt, len(l.idx))
	var maxArg float64
	for i, ix := range l.idx {
		pos := int(((ix % int64(L)) + int64(L)) % int64(L))
		arg := l.logw[i] + theta*h*float64(ix) - k0
		maxArg = math.Max(maxArg, math.Abs(l.logw[i])+math.Abs(theta*h*float64(ix))+math.Abs(k0))
		pts[i] = pt{math.Exp(arg), pos}
	}
	// phi(k) directly. Its error per coefficient, with weights summing to 1:
	// each weight has relative error <= (maxArg + 2) ulp from the rounding
	// of its exponent; each table entry <= 12 ulp absolute (the angle
	// 2 pi m / L carries <= 3 ulp relative error, at most pi, plus sincos);
	// each complex product and sum adds <= 2 ulp per term. The same k0
	// normalises the weights and untilts the result, so its own error
	// cancels.
	phiErr := (2*(maxArg+2) + 12 + 2*float64(len(pts)) + 4) * ulp
	// The n-fold law's kept coefficients (coefN, with their error bounds
	// errN) enter the main sum in the frequency domain (rampsum.go). The
	// (n-1)-fold law is needed only at the few points -a_j of the
	// convexity correction: its non-zero coefficients are kept (coefM)
	// and summed at those points directly (pmAt). Neither is transformed.
	var coefN, coefM []halfCoef
	var errNk []float64
	var errM, l2M, absM float64
	// Most coefficients' n-th powers underflow (the n-fold law is smooth
	// on the lattice's scale): skipBelow is a magnitude below which
	// n log(a + phiErr) < -745 for certain, so that the test below would
	// skip the coefficient too, and the two logs are not needed.
	// exp(-745/n) is within a few ulps, log within one, the product within
	// one more: a relative margin of 1e-9 on x = a + phiErr < exp(-745/n)
	// keeps log x below -745/n by 1e-9, far above those roundings (at most
	// 1e-15 of 745/n). A coefficient skipped here is skipped below.
	skipBelow := math.Exp(-745/nf) * (1 - 1e-9)
	// rot[i] is k·pos_i mod L for the current k, advanced by pos_i at each
	// step (the same table index as the product taken modulo L).
	rot := make([]int, len(pts))
	ws := make([]float64, len(pts))
	for i, q := range pts {
		ws[i] = q.w
	}
	// Between integers, |phi| moves at most lip per unit of k (its
	// derivative is 2 pi/L sum_i w_i (idx_i - c) e^{...} for any centre c):
	// after a skipped coefficient, the next ones that the test below would
	// skip for certain are passed over (skipRun).
	lip := lipschitzPhi(ws, l.idx, L)
	band := bandEnd(ws, l.idx, L, t, phiErr, skipBelow)
	for k := 0; k < band; k++ {
		var re, im float64
		for i, q := range pts {
			m := rot[i]
			if m <= L/2 {
				re += q.w * real(t[m])
				im += q.w * imag(t[m])
			} else {
				re += q.w * real(t[L-m])
				im -= q.w * imag(t[L-m])
			}
			if m += q.pos; m >= L {
				m -= L
			}
			rot[i] = m
		}
		phi := complex(re, im)
		a := cmplx.Abs(phi)
		mult := 2.0
		if k == 0 || (L%2 == 0 && k == L/2) {
			mult = 1
		}
		if a == 0 || a+phiErr < skipBelow {
			if d := skipRun(a, phiErr, lip, skipBelow); d > 0 {
				d = min(d, band-1-k)
				for i, q := range pts {
					rot[i] = int((int64(rot[i]) + int64(d)*int64(q.pos)) % int64(L))
				}
				k += d
			}
			continue
		}
		la := math.Log(a)
		lae := math.Log(a + phiErr)
		if nf*lae < -745 {
			continue // |phi^n| and its error underflow
		}
		arg := cmplx.Phase(phi)
		rn := math.Exp(nf * la)
		yn := cmplx.Rect(rn, nf*arg)
		// Relative error of phi^n: n * (phiErr/|phi|) from phi, plus the
		// rounding of n*log|phi| and n*arg(phi) in exp and rect.
		rel := nf*phiErr/a + (math.Abs(nf*la)+math.Abs(nf*arg))*2*ulp + 8*ulp
		en := math.Exp(nf*lae) - rn + cmplx.Abs(yn)*rel
		coefN = append(coefN, halfCoef{k: k, y: yn, mult: mult})
		errNk = append(errNk, en)
		if wantLo {
			m1 := nf - 1
			rm := math.Exp(m1 * la)
			ym := cmplx.Rect(rm, m1*arg)
			aym := cmplx.Abs(ym)
			relm := m1*phiErr/a + (math.Abs(m1*la)+math.Abs(m1*arg))*2*ulp + 8*ulp
			em := math.Exp(m1*lae) - rm + aym*relm
			coefM = append(coefM, halfCoef{k: k, y: ym, mult: mult})
			errM += mult * em
			absM += mult * aym
			l2M += mult * real(ym*cmplx.Conj(ym))
		}
	}
	Lf := float64(L)
	logL := math.Log2(Lf) + 1
	var epsM float64
	if wantLo {
		// Per point: the coefficients' errors through the normalised
		// inverse DFT (errM/L), plus pmAt's rounding (see there), plus
		// twice the inverse FFT's bound 5 u log2(L) ||p||_2 that the
		// (n-1)-fold law carried when it was transformed: not needed for
		// soundness, it keeps each point's bound at or above the FFT's
		// (step 5), so that no lower figure rises.
		fftM := 5 * ulp * logL * math.Sqrt(l2M/Lf)
		epsM = errM/Lf + float64(len(coefM)+32)*ulp*absM/Lf + 2*fftM
	}
	// Main sum over s = i h > 0 in the window, sum_s s e^{-theta s} p(s),
	// in the scaled unit e^{n k0} (P(s) = p(s) e^{-theta s} e^{n k0}),
	// from the kept coefficients, with its error bound (windowmain.go).
	logScale := nf * k0
	main, fpErr, maxSU := windowMain(coefN, errNk, L, A, h, theta, t)
	// Tail and alias terms (in the scaled unit).
	var tailAbove, alias float64
	if !full {
		a := h * float64(A+int64(L))
		if a > 0 {
			// E[S 1{S >= a}] <= a e^{-v a} M(v)^n, v >= max(1/a, lambda*).
			f := func(v float64) float64 {
				k, _, _ := l.logMGF(v)
				return math.Log(a) - v*a + nf*k - logScale
			}
			lb := math.Max(1/a, 0)
			tailAbove = math.Exp(minimize1D(f, lb, lb+l.lambdaScale(nf, theta)))
		}
		alias = math.Exp(l.chernoffUpper(nf, theta, a)) +
			math.Exp(l.chernoffLower(nf, theta, h*float64(A-1)))
	}
	hiScaled := main + fpErr + tailAbove
	loScaled := main - fpErr - alias*maxSU
	if wantLo {
		// Convexity correction: n sum_j r_j kappa_j P(S~_{n-1} = -a_j h).
		var corr float64
		for _, at := range l.atoms {
			s := -at.a
			var prob float64
			if s >= A && s < A+int64(L) {
				pv := pmAt(coefM, t, L, int(((s%int64(L))+int64(L))%int64(L)))/Lf + epsM
				// P_{n-1}(s) = p e^{-theta s h} e^{(n-1) k0}; in scaled units
				// divide by e^{k0}.
				prob = math.Max(pv, 0) * math.Exp(-theta*h*float64(s)-k0)
			} else {
				// Outside the window: Chernoff on the untilted n-1 fold sum,
				// P(S = s) <= P(S >= s) or P(S <= s).
				sv := h * float64(s)
				var lp float64
				if s >= A+int64(L) {
					lp = l.chernoffUpper(nf-1, 0, sv)
				} else {
					lp = l.chernoffLower(nf-1, 0, sv)
				}
				prob = math.Exp(lp - logScale)
			}
			corr += at.r * at.kappa * prob
		}
		loScaled -= nf * corr
	}
	// Back to probability units in log space, so that nothing underflows
	// before the floor below.
	safety := 4*Lf*ulp + 1e-12
	hi := scaleBack(hiScaled, logScale, nf) * (1 + safety)
	lo := scaleBack(loScaled, logScale, nf) * (1 - safety)
	if !wantLo {
		lo = 0
	}
	hi = math.Max(hi, DeltaFloor)
	ok := tailAbove+alias*maxSU <= tailRel*math.Max(math.Abs(main), 1e-300)
	return windowResult{bracket: bracket{lo: lo, hi: hi}, tailOK: ok}
}
