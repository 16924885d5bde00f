package accountant

import (
	"maps"
	"math"
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
// The window grows until the tail and alias terms are negligible (windows
// that would fail that test whatever their main sum are passed over, with
// the same result: latticeEvalSkip), and the lattice step h = hRel * sd is
// halved by the caller until the bracket is within tolerance in eps.

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
	mx := maxShifted(logw, v, lambda)
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

// maxShifted returns the fold of math.Max over logw[i] + lambda v[i] from
// -Inf, bit for bit, with comparisons in the loop instead of calls
// (math.Max is not inlined: its calls were a tenth of a Laplace horizon
// calibration). math.Max gives +Inf if any term is +Inf, else NaN if any
// is NaN, else the largest, +0 over -0: the loop keeps the largest by >,
// notes NaNs, and a zero maximum is made +0 when some term is +0.
func maxShifted(logw, v []float64, lambda float64) float64 {
	mx := math.Inf(-1)
	nan := false
	for i, lw := range logw {
		x := lw + lambda*v[i]
		if x > mx {
			mx = x
		} else if x != x {
			nan = true
		}
	}
	switch {
	case math.IsInf(mx, 1):
		return mx
	case nan:
		return math.NaN()
	case mx == 0 && math.Signbit(mx):
		for i, lw := range logw {
			if x := lw + lambda*v[i]; x == 0 && !math.Signbit(x) {
				return x
			}
		}
	}
	return mx
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
	// Expand hi while f keeps decreasing at the end (f is pure: its value
	// at hi is taken once).
	for range 60 {
		if fh := f(hi); fh < best {
			best = fh
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
	t := makeHuge[complex128](L/2+1, L/2+1)
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
	return computePaths(s, n, eps, hRel, wantLo, false)
}

// computePaths is compute, trying the compound path (compound.go) between
// the sparse path and the lattice when compound is set.
func computePaths(s AtomSet, n int, eps, hRel float64, wantLo, compound bool) bracket {
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
	if compound {
		if b, ok := compoundEval(p, n, hRel, wantLo); ok {
			return b
		}
	}
	return latticeEval(p, n, hRel, wantLo)
}

// latticeEval is the lattice/FFT path of evaluate.
func latticeEval(p prepared, n int, hRel float64, wantLo bool) bracket {
	b, _ := latticeEvalSkip(p, n, hRel, wantLo, true)
	return b
}

// latticeEvalSkip is latticeEval, passing over the windows whose tail test
// fails for certain when skip is set (the same bracket: see below), and
// the number of windows passed over.
func latticeEvalSkip(p prepared, n int, hRel float64, wantLo, skip bool) (bracket, int) {
	if p.maxZ <= 0 {
		return bracket{}, 0
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
		return bracket{hi: math.Max(p.exactOne*(1+float64(len(p.z)+2)*ulp), DeltaFloor), capped: true}, 0
	}
	l := newLattice(p, h)
	if l.imax <= 0 {
		return bracket{}, 0
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
		return bracket{lo: 0, hi: DeltaFloor}, 0
	}
	sdIdx := math.Sqrt(nf*k2) / h
	fullLo, fullHi := nf*float64(l.imin), nf*float64(l.imax)
	half := math.Ceil(windowSD*sdIdx) + 2
	capped := false
	doublings := 0
	// The windows passed over (see below), with their tail terms.
	type passed struct {
		A int64
		L int
		t tails
	}
	var skipped []passed
	skips := 0
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
		var known tails
		haveKnown := false
		if skip && !capped && !full && doublings < maxDoublings {
			// The tail test below needs tailAbove + alias maxSU <=
			// tailRel |main|, and |main| is at most about maxSU: the
			// wrapped tilted law has mass 1 and every weight of the main
			// sum is at most maxSU; only a rounding bound fpErr above
			// maxSU, a bracket wider than its value, could take the
			// computed |main| past 2 maxSU. The tail terms and maxSU
			// need no coefficients (window computes them the same way),
			// so a window whose tails exceed tailRel 2 maxSU would only
			// be doubled: it is not computed. (Near eps0 the law is
			// nearly a point mass and keeps every coefficient; the
			// windows before the one that passes cost as much as it.)
			tailAbove, alias := l.windowTails(nf, theta, nf*k0, int64(A), L)
			if maxSU := windowMaxSU(L, int64(A), l.h, theta); tailAbove+alias*maxSU > tailRel*math.Max(2*maxSU, 1e-300) {
				skipped = append(skipped, passed{int64(A), L, tails{tailAbove, alias}})
				doublings++
				half *= 2
				skips++
				continue
			}
			known, haveKnown = tails{tailAbove, alias}, true
		}
		r := l.windowWith(nf, theta, k0, int64(A), L, full, wantLo, known, haveKnown)
		r.capped = capped
		// A window passed over could have returned for its hi <=
		// DeltaFloor below. Every window's hi is at least r.below
		// (window) and at least its own tailAbove scaled back (its main
		// sum plus fpErr is at least the exact main sum, >= 0); where
		// neither puts it above DeltaFloor, it is computed now, in
		// order, as the loop without skipping would have (and its
		// bracket returned if it returns).
		for _, w := range skipped {
			if math.Max(r.below, scaleBack(w.t.above, nf*k0, nf))*(1-1e-9) > DeltaFloor {
				continue
			}
			if rw := l.windowWith(nf, theta, k0, w.A, w.L, false, wantLo, w.t, true); rw.tailOK || rw.hi <= DeltaFloor {
				return rw.bracket, skips
			}
		}
		skipped = skipped[:0]
		// A window whose upper bound is already at DeltaFloor is not
		// widened: a wider one could at most lower hi, which is reported
		// as DeltaFloor anyway, and raise lo, which is then below
		// DeltaFloor too (lo <= the exact value <= this window's hi), far
		// below MinDelta and any target. Only this bracket's own
		// soundness matters, and it has it. (At eps near eps0 with a
		// steep tilt the tail test otherwise doubled the window to 8
		// times its length, 3 s at n = 1e8, for a bound of 1e-250.)
		if r.tailOK || capped || full || doublings >= maxDoublings || r.hi <= DeltaFloor {
			return r.bracket, skips
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

// tiltedSDOf is the standard deviation of Z under the tilt that centres
// it, computed on the exact atoms (tiltedSD remembers it: sd_memo.go).
// It reads p.z, p.w and p.maxZ only.
func tiltedSDOf(p prepared) float64 {
	logw := make([]float64, len(p.w))
	for j, w := range p.w {
		logw[j] = math.Log(w)
	}
	theta := centringTilt(func(t float64) float64 { _, k1, _ := cumulants(logw, p.z, t); return k1 }, 1/p.maxZ)
	_, _, k2 := cumulants(logw, p.z, theta)
	return math.Sqrt(k2)
}
