package accountant

// The window: the tilted lattice law's n-fold sum on [A, A+L), from its
// characteristic function at the kept coefficients (engine.go's steps 4
// and 5 say why each step is sound), and the coefficient scan's skips
// (bandEnd, skipRun), each with its argument at its definition.

import (
	"math"
)

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
	return bisectFirst(0, half-1, passes) // k = 0 never passes (c = 0, W >= skipBelow)
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
	// below is a lower bound on every window's hi for this lattice and
	// tilt (0 when none is known).
	below float64
}

// window computes the bracket on the window [A, A+L) of lattice indices.
func (l *lattice) window(nf, theta, k0 float64, A int64, L int, full, wantLo bool) windowResult {
	return l.windowWith(nf, theta, k0, A, L, full, wantLo, tails{}, false)
}

// tails is what windowTails returns for a window.
type tails struct{ above, alias float64 }

// windowWith is window, with the window's tail terms when the caller has
// them already (windowTails at the same arguments: the same bits).
func (l *lattice) windowWith(nf, theta, k0 float64, A int64, L int, full, wantLo bool, known tails, haveKnown bool) windowResult {
	h := l.h
	t := twiddleTable(L)
	// Tilted lattice weights and their positions modulo L.
	pts := make([]scanPoint, len(l.idx))
	var werr float64
	for i, ix := range l.idx {
		pos := int(((ix % int64(L)) + int64(L)) % int64(L))
		w, e := tiltedWeight(l.logw[i], theta*h*float64(ix), k0)
		pts[i] = scanPoint{w, pos}
		werr += e
	}
	// phi(k) directly. Its error per coefficient, with weights summing to 1:
	// the weights' own errors, at most werr in all (tiltedWeight bounds
	// each, its sum's rounding is the factor); each table entry <= 12 ulp
	// absolute (the angle 2 pi m / L carries <= 3 ulp relative error, at
	// most pi, plus sincos); each complex product and sum adds <= 2 ulp
	// per term. The same k0 normalises the weights and untilts the
	// result, so its own error cancels.
	phiErr := werr*(1+float64(len(pts)+4)*ulp) + float64(12+2*len(pts)+4)*ulp
	// The n-fold law's kept coefficients (coefN, with their error bounds
	// errN) enter the main sum in the frequency domain (rampsum.go). The
	// (n-1)-fold law is needed only at the few points -a_j of the
	// convexity correction: its non-zero coefficients are kept (coefM)
	// and summed at those points directly (pmAt). Neither is transformed.
	// Most coefficients' n-th powers underflow (the n-fold law is smooth
	// on the lattice's scale): skipBelow is a magnitude below which
	// n log(a + phiErr) < -745 for certain, so that the test below would
	// skip the coefficient too, and the two logs are not needed.
	// exp(-745/n) is within a few ulps, log within one, the product within
	// one more: a relative margin of 1e-9 on x = a + phiErr < exp(-745/n)
	// keeps log x below -745/n by 1e-9, far above those roundings (at most
	// 1e-15 of 745/n). A coefficient skipped here is skipped below.
	skipBelow := math.Exp(-745/nf) * (1 - 1e-9)
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
	// The coefficients below band, in ranges on several cores where they
	// are many (windowscan.go).
	sc := (&coefScan{pts: pts, t: t, L: L, nf: nf, phiErr: phiErr, skipBelow: skipBelow, lip: lip, wantLo: wantLo}).scan(band)
	defer sc.release()
	coefN, errNk, coefM := sc.coefN, sc.errN, sc.coefM
	errM, absM, l2M := sc.errM, sc.absM, sc.l2M
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
	switch {
	case full:
	case haveKnown:
		tailAbove, alias = known.above, known.alias
	default:
		tailAbove, alias = l.windowTails(nf, theta, logScale, A, L)
	}
	hiScaled := main + fpErr + tailAbove
	loScaled := main - fpErr - alias*maxSU
	if wantLo {
		// Convexity correction: n sum_j r_j kappa_j P(S~_{n-1} = -a_j h).
		// Neighbouring atoms share lattice indices (a merged set lists its
		// atoms in ratio order, so along Laplace's outputs the losses, and
		// their indices, run in order: 72% of the in-window atoms of a
		// horizon calibration repeat the index before them), and prob
		// depends on s alone (pmAt, Chernoff): an atom at the index of the
		// atom before it takes that atom's prob, the same bits, and the sum
		// is taken in atom order as before. (A map of every index seen cost
		// more than it saved where atoms are many and windows small.)
		probAt := func(s int64) float64 {
			if s >= A && s < A+int64(L) {
				pv := pmAt(coefM, t, L, int(((s%int64(L))+int64(L))%int64(L)))/Lf + epsM
				// P_{n-1}(s) = p e^{-theta s h} e^{(n-1) k0}; in scaled units
				// divide by e^{k0}.
				return math.Max(pv, 0) * math.Exp(-theta*h*float64(s)-k0)
			}
			// Outside the window: Chernoff on the untilted n-1 fold sum,
			// P(S = s) <= P(S >= s) or P(S <= s).
			sv := h * float64(s)
			var lp float64
			if s >= A+int64(L) {
				lp = l.chernoffUpper(nf-1, 0, sv)
			} else {
				lp = l.chernoffLower(nf-1, 0, sv)
			}
			return math.Exp(lp - logScale)
		}
		var corr, prob float64
		for i, at := range l.atoms {
			if i == 0 || at.a != l.atoms[i-1].a {
				prob = probAt(-at.a)
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
	// Below every window's hi (latticeEval's skipped windows): the
	// lower side before the convexity correction is at most the lattice
	// value sum_{s > 0} s P(s) (aliasing only adds mass, bounded by
	// alias at maxSU), and every window's hiScaled is at least that.
	below := scaleBack(main-fpErr-alias*maxSU, logScale, nf) * (1 - safety)
	return windowResult{bracket: bracket{lo: lo, hi: hi}, tailOK: ok, below: below}
}

// windowTails returns the tail and alias terms of the window [A, A+L) in
// the scaled unit: tailAbove >= E[S 1{S >= a}] beyond it, a = h (A+L),
// and alias >= the tilted mass outside it (which wraps into it), both by
// Chernoff bounds from the lattice's exact moment generating function.
func (l *lattice) windowTails(nf, theta, logScale float64, A int64, L int) (tailAbove, alias float64) {
	h := l.h
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
	return tailAbove, alias
}

// tiltedWeight returns w = exp(logw + prod - k0) as computed and a bound
// on |w - omega|, omega = exp(logw + P - k0) with P the exact product of
// which prod is the computed value, two roundings away (theta h ix in
// window, theta (j step) in convolve: |prod - P| <= (2u + u^2) |P|).
//
// Why. With s = fl(logw + prod) and arg = fl(s - k0), each rounding
// within u = 2^-53 relative of its result:
//
//	|arg - (logw + P - k0)| <= |prod - P| + u |logw + prod| + u |s - k0|
//	                        <= u (2 |prod| + |s| + |arg|) (1 + 4u),
//
// and exp is within 4u relative (Go's amd64 exp errs by up to about 2.5u,
// measured against 256-bit arithmetic; a reviewer found 2.14u where this
// bound first allowed 2u): |log(w/omega)| <= x with x that plus 4.0001u
// (rounded up by 1 + 8u for x's own arithmetic). Then |w -
// omega| = w |1 - e^(log(omega/w))| <= w expm1(x), times 1 + 4u for the
// product. Below 2^-1000 w may be subnormal (exp's error is then up to
// 2^-1074 absolute) or 0: |w - omega| <= max(w, omega) <= (w + 2^-1000)
// e^x.
//
// Summed over the atoms this bound weighs each atom's exponent by its
// weight. window's bound was (2 max a + 4) u sum w, a the magnitude of
// the exponent's terms: a far atom (laplace at eps0 = 20: a value of
// -1.4e14, theta h ix about -1.6e10) has a huge a and a weight of 0, and
// the max made every coefficient's error 3.6e-6 where this sum gives
// 3e-14. That bound also fell short by up to 2x for an atom whose terms
// are large (4a + 2 above against its 2a + 4); a test against 256-bit
// arithmetic (weighterr_test.go) found such a case.
func tiltedWeight(logw, prod, k0 float64) (w, err float64) {
	s := logw + prod
	arg := s - k0
	w = math.Exp(arg)
	x := ulp * ((2*math.Abs(prod)+math.Abs(s)+math.Abs(arg))*(1+4*ulp) + 4.0001) * (1 + 8*ulp)
	if w < 0x1p-1000 {
		return w, (w + 0x1p-1000) * math.Exp(x)
	}
	return w, w * math.Expm1(x) * (1 + 4*ulp)
}
