package accountant

// Test-only copies of the engine's loops as they were before they learned
// to skip work (a second engineer's review): the window without skipRun
// and without latticeEval's Chernoff return (both switchable), sparseExact
// without rootCounts and the dead-m skip, the pair walk without
// aliveLeaves. The skips must keep the brackets' bits, up to the one-ulp
// Kahan effect TestKahanAddZeroMovesRarely documents. The relative cut
// (sparse_cut.go) does not keep them, by design: these tests take the
// path without it, and sparse_cut_test.go compares the two.

import (
	"math"
	"math/cmplx"
	"math/rand/v2"
	"slices"
	"testing"
)

type r51PairWalkOld struct{ v, x []float64 }

func r51SparseExactOld(p prepared, n int) (bracket, bool) {
	// Dominant atom.
	d := 0
	for j := range p.w {
		if p.w[j] > p.w[d] {
			d = j
		}
	}
	var z, w []float64
	pi := 0.0
	for j := range p.w {
		if j != d {
			z = append(z, p.z[j])
			w = append(w, p.w[j])
			pi += p.w[j]
		}
	}
	z0 := p.z[d]
	nf := float64(n)
	if len(z) == 0 {
		v := math.Max(nf*z0, 0) / nf
		return bracket{lo: v, hi: v}, true
	}
	pi = math.Min(pi, 1)
	// Start with m_max a few standard deviations above the mean number of
	// non-dominant draws; it is extended below while the omitted part still
	// matters, relative to the sum or to the smallest delta of interest.
	mean := nf * pi
	mMax := int(math.Min(nf, math.Ceil(mean+6*math.Sqrt(mean)+10)))
	a := len(z)
	terms := 0.0
	for m := 0; m <= mMax; m++ {
		terms += binom(m+a-1, a-1)
		if terms > sparseMaxTerms {
			return bracket{}, false
		}
	}
	// Renormalised log masses of the other atoms.
	lw := make([]float64, a)
	for j := range w {
		lw[j] = math.Log(w[j] / pi)
	}
	// Sort atoms by value descending so partial sums allow pruning.
	order := make([]int, a)
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(x, y int) int {
		switch {
		case z[x] > z[y]:
			return -1
		case z[x] < z[y]:
			return 1
		}
		return 0
	})
	zs := make([]float64, a)
	ls := make([]float64, a)
	for i, o := range order {
		zs[i], ls[i] = z[o], lw[o]
	}
	lf := logFactorials(mMax)
	maxZ, maxL := math.Abs(z0), 0.0
	for j := range zs {
		maxZ = math.Max(maxZ, math.Abs(zs[j]))
		maxL = math.Max(maxL, math.Abs(ls[j]))
	}
	// The leaves' terms, rounding bounded per leaf (sparse_sum.go).
	var sum bandSum
	var pw r51PairWalkOld
	sumRange := func(m0, m1 int) bool {
		lpms := logBinomPMFs(n, pi, m1)
		for m := m0; m <= m1; m++ {
			lpm := lpms[m]
			if math.IsInf(lpm, -1) {
				continue
			}
			mf := float64(m)
			base := dd{}.addProd(float64(n-m), z0)
			em := float64(2*a+10) * ulp * (math.Abs(lpm) + 2*lf[m] + mf*(maxL+1))
			if a == 1 {
				// log m! - log m! cancels: the leaf's exponent is lpm + m l_1.
				em = 4 * ulp * (math.Abs(lpm) + mf*(maxL+1))
			}
			if em > 0.01 {
				return false
			}
			sum.eps = float64(8*(a+2)) * ulp * ulp * (math.Abs(base.hi) + mf*maxZ)
			sum.rel = 1.01*(em+8*ulp) + 1.4*walkRel // as sparse.go since the walk's exp premise (4u)
			lm := lpm + lf[m]
			// Enumerate counts of the other atoms summing to m.
			var rec func(j, left int, lp float64, s dd)
			rec = func(j, left int, lp float64, s dd) {
				if j == a-1 {
					x := s.addProd(float64(left), zs[j]).val()
					if !sum.counts(x) {
						return
					}
					if a == 1 {
						sum.leaf(math.Exp(lpm+float64(left)*ls[j]), x)
						return
					}
					lp += float64(left)*ls[j] - lf[left]
					sum.leaf(math.Exp(lm+lp), x)
					return
				}
				// Remaining atoms have values <= zs[j]: if even all of left at
				// zs[j] cannot make the sum positive, prune.
				if !sum.mayCount(s, left, zs[j]) {
					return
				}
				if j == a-2 {
					pw.sum(lm, lp, left, s, zs[j], zs[j+1], ls[j], ls[j+1], lf, &sum)
					return
				}
				for c := 0; c <= left; c++ {
					rec(j+1, left-c, lp+float64(c)*ls[j]-lf[c], s.addProd(float64(c), zs[j]))
				}
			}
			rec(0, m, 0, base)
		}
		return true
	}
	// Omitted mass beyond m_max: (S_n)_+ <= (n z_0)_+ + M Delta.
	delta := 0.0
	for _, v := range z {
		delta = math.Max(delta, v-z0)
	}
	tailAt := func(m int) float64 {
		if m >= n {
			return 0
		}
		return math.Max(nf*z0, 0)*math.Exp(binomTailLog(n, pi, m+1)) +
			delta*nf*pi*math.Exp(binomTailLog(n-1, pi, m))
	}
	if !sumRange(0, mMax) {
		return bracket{}, false
	}
	for mMax < n && tailAt(mMax) > 1e-3*sparseRel*sum.hi.sum && tailAt(mMax) > 1e-6*MinDelta*nf {
		next := min(n, mMax+1+mMax/4)
		for m := mMax + 1; m <= next; m++ {
			terms += binom(m+a-1, a-1)
		}
		if terms > 4*sparseMaxTerms {
			return bracket{}, false
		}
		lf = logFactorials(next)
		if !sumRange(mMax+1, next) {
			return bracket{}, false
		}
		mMax = next
	}
	tail := tailAt(mMax)
	hi := math.Max((sum.hi.sum*(1+sparseRel)+tail)/nf, DeltaFloor)
	lo := sum.lo.sum * (1 - sparseRel) / nf
	return bracket{lo: lo, hi: hi}, true
}

func (w *r51PairWalkOld) sum(lm, lp float64, left int, s dd, zx, zy, lx, ly float64, lf []float64, b *bandSum) {
	// direct and sc are sparseExact's per-leaf formulas, term for term.
	direct := func(c int) float64 {
		e := lp + float64(c)*lx - lf[c]
		e += float64(left-c)*ly - lf[left-c]
		return math.Exp(lm + e)
	}
	sc := func(c int) dd { return s.addProd(float64(c), zx).addProd(float64(left-c), zy) }
	d := lx - ly
	if left == 0 || math.Abs(d) > 600 || float64(left)*(math.Abs(d)+5)*ulp*1.01 > walkRel {
		for c := 0; c <= left; c++ {
			if x := sc(c).val(); b.counts(x) {
				b.leaf(direct(c), x)
			}
		}
		return
	}
	// The leaves that count, first to last, and their evaluated sums: the
	// scan starts at the leaf f the bisection finds (the proof is at the
	// top of the file) and applies the rule term by term from there, as the
	// evaluated sums need not rise.
	f := 0
	if !b.counts(sc(0).val()) {
		no, yes := 0, left+1 // no does not count; yes counts or is past the end
		for yes-no > 1 {
			if mid := no + (yes-no)/2; b.counts(sc(mid).val()) {
				yes = mid
			} else {
				no = mid
			}
		}
		f = yes
	}
	if cap(w.x) < left+1 {
		w.x = make([]float64, 2*left+1)
	}
	xs := w.x[:left+1]
	lo, hi := -1, -1
	for c := f; c <= left; c++ {
		xs[c] = sc(c).val()
		if b.counts(xs[c]) {
			if lo < 0 {
				lo = c
			}
			hi = c
		}
	}
	if lo < 0 {
		return
	}
	rho, rhoInv := math.Exp(d), math.Exp(-d)
	// The mode: masses rise while rho (left-c) >= c+1; the walk starts at
	// the largest mass of [lo, hi].
	c0 := 0
	if x := (rho*float64(left) - 1) / (1 + rho); x >= 0 {
		c0 = min(left, int(x)+1)
	}
	c0 = min(max(c0, lo), hi)
	if cap(w.v) < left+1 {
		w.v = make([]float64, 2*left+1)
	}
	v := w.v[:left+1]
	// v[c] < 0 marks a mass left to the exp per term. Each step's factor
	// (rho times one integer over another) does not depend on the walk,
	// so the chain of dependent operations is one multiplication a step.
	v[c0] = direct(c0)
	exact := v[c0] < walkTiny
	for c := c0; c < hi; c++ {
		v[c+1] = -1
		if !exact {
			x := v[c] * (rho * float64(left-c) / float64(c+1))
			if exact = x < walkTiny; !exact {
				v[c+1] = x
			}
		}
	}
	exact = v[c0] < walkTiny
	for c := c0; c > lo; c-- {
		v[c-1] = -1
		if !exact {
			x := v[c] * (rhoInv * float64(c) / float64(left-c+1))
			if exact = x < walkTiny; !exact {
				v[c-1] = x
			}
		}
	}
	for c := lo; c <= hi; c++ {
		if b.counts(xs[c]) {
			m := v[c]
			if m < 0 {
				m = direct(c)
			}
			b.leaf(m, xs[c])
		}
	}
}

func r51Window(l *lattice, nf, theta, k0 float64, A int64, L int, full, wantLo, skip bool) windowResult {
	h := l.h
	t := twiddleTable(L)
	// Tilted lattice weights and their positions modulo L.
	type pt struct {
		w   float64
		pos int
	}
	pts := make([]pt, len(l.idx))
	var werr float64
	for i, ix := range l.idx {
		pos := int(((ix % int64(L)) + int64(L)) % int64(L))
		w, e := tiltedWeight(l.logw[i], theta*h*float64(ix), k0)
		pts[i] = pt{w, pos}
		werr += e
	}
	// phi(k)'s error bound as window has it (the weights' part from
	// tiltedWeight since the per-atom bound; the scan is what this copy
	// keeps as it was).
	phiErr := werr*(1+float64(len(pts)+4)*ulp) + float64(12+2*len(pts)+4)*ulp
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
			if d := skipRun(a, phiErr, lip, skipBelow); skip && d > 0 {
				d = min(d, band-1-k)
				for i, q := range pts {
					rot[i] = int((int64(rot[i]) + int64(d)*int64(q.pos)) % int64(L))
				}
				k += d
			}
			continue
		}
		// The powers as the scan takes them (coefPowers): this
		// reference checks the order of the scan and its skips.
		yn, en, ym, em, aym, ok := coefPowers(phi, a, phiErr, nf, wantLo)
		if !ok {
			continue
		}
		coefN = append(coefN, halfCoef{k: k, y: yn, mult: mult})
		errNk = append(errNk, en)
		if wantLo {
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
	// from the kept coefficients (rampsum.go, with its error bound fpErr).
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

func r51LatticeEval(p prepared, n int, hRel float64, wantLo, early, skip bool) bracket {
	if p.maxZ <= 0 {
		return bracket{}
	}
	nf := float64(n)
	sd := tiltedSD(p)
	h := hRel * sd
	if !(h > 0) || math.IsInf(h, 0) {
		h = hRel * math.Max(p.maxZ, 1e-300)
	}
	l := newLattice(p, h)
	if l.imax <= 0 {
		return bracket{}
	}
	theta := l.tilt()
	k0, _, k2 := l.logMGF(theta)
	if early && theta > 0 && nf*k0-1-math.Log(theta*nf) < math.Log(DeltaFloor)-1 {
		// Chernoff: x_+ <= e^{theta x - 1}/theta for every x, so
		// E[(S~_n)_+]/n <= M~(theta)^n/(e theta n), below DeltaFloor here
		// (with e^{-1} to spare for the roundings of n k0, a few u of it):
		// the window would report DeltaFloor. Near eps0 the tilted law is
		// nearly a point mass and keeps every coefficient, which costs
		// L/2 closed-form sums (rampsum.go).
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
		r := r51Window(l, nf, theta, k0, int64(A), L, full, wantLo, skip)
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

// ---- Tests ----

// TestKahanAddZeroMovesRarely: the claim "adding +0 to a Kahan sum changes
// nothing" (71187eb, fc4e287) holds only when |comp| < half an ulp of the
// sum (or a tie rounds back); after a step whose term exceeds twice the
// sum, (t - sum) may round and comp may reach a full ulp. Counts such
// states on sequences of positive terms (as bandSum's), and logs one.
func TestKahanAddZeroMovesRarely(t *testing.T) {
	rng := rand.New(rand.NewPCG(51, 1))
	bad := 0
	for trial := 0; trial < 200000; trial++ {
		var k kahan
		for j := 0; j < 4; j++ {
			k.add(math.Ldexp(1+rng.Float64(), rng.IntN(60)-30))
			before := k
			k2 := k
			k2.add(0)
			if k2.sum != before.sum || k2.comp != before.comp {
				if bad == 0 {
					t.Logf("state sum %v comp %v: add(+0) gives sum %v comp %v", before.sum, before.comp, k2.sum, k2.comp)
				}
				bad++
			}
		}
	}
	t.Logf("%d of 800000 states change under add(+0)", bad)
	if bad == 0 {
		t.Errorf("expected some Kahan states (a full-ulp correction) that add(+0) changes")
	}
}

// TestAliveLeavesHugeD: a pair sum whose two atoms' masses differ
// by more than e^709.78/left: e^d left overflows to +Inf, int(+Inf) is
// MinInt64 on amd64, and aliveLeaves' seed is a negative index (panic);
// for d > 709.78, e^d itself is +Inf, x is NaN, the seed is 0 although the
// mass sits at c = left, and the whole pair sum is dropped (unsound: hi
// loses it). Before aliveLeaves the |d| > 600 branch summed such a pair
// directly; aliveLeaves now takes the mode in a form that does not
// overflow.
func TestAliveLeavesHugeD(t *testing.T) {
	lf := logFactorials(2000)
	for _, c := range []struct {
		left int
		d    float64
	}{{1000, 705}, {10, 708}, {1, 709.9}, {1000, 600.5}, {10, 712}, {3, 750}} {
		var b, bOld bandSum
		b.eps, bOld.eps = 1e-30, 1e-30
		var pw pairWalk
		var pwOld r51PairWalkOld
		ly := -c.d
		func() {
			defer func() {
				if r := recover(); r != nil {
					t.Errorf("left %d d %v: pairWalk.sum panics: %v", c.left, c.d, r)
				}
			}()
			pw.sum(0, 0, c.left, dd{}, 1, -1, 0, ly, lf, &b)
		}()
		pwOld.sum(0, 0, c.left, dd{}, 1, -1, 0, ly, lf, &bOld)
		if b.hi != bOld.hi || b.lo != bOld.lo {
			t.Errorf("left %d d %v: hi %v lo %v, before fc4e287 hi %v lo %v", c.left, c.d, b.hi, b.lo, bOld.hi, bOld.lo)
		}
	}
}

// TestSparseExactHugeD: the same through sparseExact, a dominant
// atom and two others whose masses differ by a factor above e^700 (the
// smaller one denormal for the drop: 1e-311).
func TestSparseExactHugeD(t *testing.T) {
	for _, c := range []struct {
		n  int
		wy float64
	}{{30000, 1e-306}, {30000, 1e-311}, {300, 1e-311}, {300, 1e-313}} {
		wx := 0.01
		p := prepared{z: []float64{-1e-6, 0.5, 0.1}, w: []float64{1 - wx - c.wy, wx, c.wy}, maxZ: 0.5}
		var got, want bracket
		var gok, wok bool
		func() {
			defer func() {
				if r := recover(); r != nil {
					t.Errorf("n %d w_y %v: sparseExact panics: %v", c.n, c.wy, r)
				}
			}()
			got, gok, _ = sparseExactCut(p, c.n, false)
		}()
		want, wok = r51SparseExactOld(p, c.n)
		t.Logf("n %d w_y %v: now %v %v, before 71187eb %v %v", c.n, c.wy, got, gok, want, wok)
		if got != want || gok != wok {
			t.Errorf("n %d w_y %v: bracket %+v (%v), before %+v (%v)", c.n, c.wy, got, gok, want, wok)
		}
	}
}

// TestSetDeltaDenormalAtom: the same through the public SetDelta,
// an atom of mass 1e-313 (accepted: finite, >= 0) beside one of mass 0.01;
// before fc4e287 the pair was summed directly.
func TestSetDeltaDenormalAtom(t *testing.T) {
	for _, rb := range []float64{1e-313, 1e-310} {
		set := AtomSet{{R: 0.01, P: 0.015, Q: 0.01}, {R: rb, P: 1.2 * rb, Q: rb}}
		var lo, hi float64
		var err error
		panicked := false
		func() {
			defer func() {
				if r := recover(); r != nil {
					panicked = true
					t.Errorf("R_b %v: SetDelta panics: %v", rb, r)
				}
			}()
			lo, hi, err = SetDelta(set, 300, 0)
		}()
		if panicked {
			continue
		}
		// The atom of mass rb changes D by at most rb: compare with the set without it.
		lo0, hi0, _ := SetDelta(set[:1], 300, 0)
		t.Logf("R_b %v: SetDelta [%v, %v] %v; without the atom [%v, %v]", rb, lo, hi, err, lo0, hi0)
		if err == nil && hi < lo0*(1-1e-6) {
			t.Errorf("R_b %v: hi %v below the value %v of the set without the tiny atom: unsound", rb, hi, lo0)
		}
	}
}

// r51SparseLaw returns a random law with a dominant atom for the sparse
// path: a other atoms (1 to 4), total mass pi with n pi from 1e-3 to ~3000.
func r51SparseLaw(rng *rand.Rand) (prepared, int) {
	a := 1 + rng.IntN(4)
	n := int(math.Pow(10, 0.3+6.7*rng.Float64()))
	n = max(n, 2)
	maxMean := []float64{3000, 1500, 150, 40}[a-1]
	mean := math.Pow(10, -3+(3+math.Log10(maxMean))*rng.Float64())
	pi := math.Min(mean/float64(n), 0.3)
	z0 := -math.Pow(10, -6+6*rng.Float64())
	if rng.IntN(5) == 0 {
		z0 = -z0 / 1000
	}
	p := prepared{z: []float64{z0}, w: []float64{1 - pi}, maxZ: math.Max(z0, 0)}
	ws := make([]float64, a)
	var W float64
	for j := range ws {
		ws[j] = math.Pow(rng.Float64(), 1+4*rng.Float64()) + 1e-6
		W += ws[j]
	}
	for j := range ws {
		zj := z0 + (rng.Float64()-0.4)*math.Pow(10, 1-3*rng.Float64())
		if rng.IntN(6) == 0 && j > 0 {
			zj = p.z[len(p.z)-1] // equal values
		}
		p.z = append(p.z, zj)
		p.w = append(p.w, pi*ws[j]/W)
		p.maxZ = math.Max(p.maxZ, zj)
	}
	return p, n
}

// TestSparseExactSkipsKeepBits compares sparseExact's brackets, bits,
// against the copy from before 71187eb and fc4e287 on random laws.
func TestSparseExactSkipsKeepBits(t *testing.T) {
	r51SparseCompare(t, 51, 600)
}

func r51SparseCompare(t *testing.T, seed uint64, trials int) {
	rng := rand.New(rand.NewPCG(seed, 2))
	var same, diff, used int
	for trial := range trials {
		p, n := r51SparseLaw(rng)
		if p.maxZ <= 0 {
			continue
		}
		got, gok, _ := sparseExactCut(p, n, false)
		want, wok := r51SparseExactOld(p, n)
		if gok {
			used++
		}
		if got == want && gok == wok {
			same++
			continue
		}
		diff++
		if diff <= 5 {
			t.Errorf("trial %d n %d z %v w %v: %+v %v, before %+v %v (hi %x vs %x, lo %x vs %x)", trial, n, p.z, p.w, got, gok, want, wok,
				math.Float64bits(got.hi), math.Float64bits(want.hi), math.Float64bits(got.lo), math.Float64bits(want.lo))
		}
		if got.hi < want.lo || want.hi < got.lo {
			t.Errorf("trial %d: disjoint brackets", trial)
		}
	}
	t.Logf("%d same, %d differ, %d on the sparse path", same, diff, used)
}

// r51MatrixSet returns a random pair set of a k-output mechanism whose
// rows differ by at most e^eps0.
func r51MatrixSet(rng *rand.Rand) (AtomSet, float64) {
	k := 2 + rng.IntN(5)
	eps0 := 0.1 + 2.9*rng.Float64()
	rows := make([][]float64, 3)
	base := make([]float64, k)
	for y := range base {
		base[y] = 0.1 + rng.Float64()
	}
	for x := range rows {
		rows[x] = make([]float64, k)
		var s float64
		for y := range rows[x] {
			rows[x][y] = base[y] * math.Exp(eps0*rng.Float64())
			s += rows[x][y]
		}
		for y := range rows[x] {
			rows[x][y] /= s
		}
	}
	var realEps float64
	for y := range k {
		realEps = math.Max(realEps, math.Abs(math.Log(rows[0][y]/rows[1][y])))
	}
	return audPairSet(rows, 0, 1).Merge(), realEps
}

type r51WindowStats struct {
	evals, skipDiff, earlyFired, earlyHiDiff, earlyLoDiff, earlyCappedDiff, otherDiff int
}

// r51WindowCompare compares latticeEval (skipRun and the Chernoff return)
// with the copy from before daf8193, and the copy with the return but
// without skipRun, bits, on random pair sets at an eps grid up to their
// eps0, n from 2 to nMax.
func r51WindowCompare(t *testing.T, seed uint64, sets int, nMax float64) r51WindowStats {
	rng := rand.New(rand.NewPCG(seed, 3))
	var st r51WindowStats
	for range sets {
		set, eps0 := r51MatrixSet(rng)
		n := int(math.Pow(10, 0.3+(math.Log10(nMax)-0.3)*rng.Float64()))
		n = max(n, 2)
		hRel := []float64{0.5, 0.25, 0.125}[rng.IntN(3)]
		for _, f := range []float64{0, 0.2, 0.5, 0.8, 0.95, 0.99, 0.999} {
			eps := f * eps0
			p := prepare(set, eps)
			if p.maxZ <= 0 {
				continue
			}
			st.evals++
			cur := latticeEval(p, n, hRel, true)
			noSkip := r51LatticeEval(p, n, hRel, true, true, false)
			old := r51LatticeEval(p, n, hRel, true, false, false)
			if cur != noSkip {
				st.skipDiff++
				t.Errorf("n %d eps %v (eps0 %v) h %v set %v: with skipRun %+v, without %+v", n, eps, eps0, hRel, set, cur, noSkip)
			}
			fired := cur == (bracket{lo: 0, hi: DeltaFloor}) && old != cur
			if cur == (bracket{lo: 0, hi: DeltaFloor}) {
				// Did the Chernoff return fire? Recompute its test.
				l := newLattice(p, r51H(p, hRel))
				if l.imax > 0 {
					th := l.tilt()
					k0, _, _ := l.logMGF(th)
					nf := float64(n)
					fired = th > 0 && nf*k0-1-math.Log(th*nf) < math.Log(DeltaFloor)-1
					if fired {
						// The spread lattice law dominates the atoms in
						// convex order: its MGF is at least theirs.
						lw := make([]float64, len(p.w))
						for j, w := range p.w {
							lw[j] = math.Log(w)
						}
						kt, _, _ := cumulants(lw, p.z, th)
						if kt > k0+1e-12*(1+math.Abs(k0)) {
							t.Errorf("n %d eps %v: log MGF of the atoms %v above the lattice's %v at theta %v", n, eps, kt, k0, th)
						}
					}
				}
			}
			if fired {
				st.earlyFired++
				if old.hi != cur.hi {
					st.earlyHiDiff++
					t.Logf("Chernoff return: n %d eps %v (eps0 %v) h %v: before %+v (hi - DeltaFloor %v)", n, eps, eps0, hRel, old, old.hi-DeltaFloor)
				}
				if old.capped != cur.capped {
					st.earlyCappedDiff++
				}
				if old.lo != cur.lo {
					st.earlyLoDiff++
					t.Logf("Chernoff return: n %d eps %v: lo before %v, now 0", n, eps, old.lo)
				}
				if old.lo > cur.hi {
					t.Errorf("n %d eps %v: lo %v before is above the Chernoff hi %v", n, eps, old.lo, cur.hi)
				}
			} else if old != cur {
				st.otherDiff++
				t.Errorf("n %d eps %v (eps0 %v) h %v: %+v, before daf8193 %+v", n, eps, eps0, hRel, cur, old)
			}
		}
	}
	t.Logf("%+v", st)
	return st
}

// r51H is latticeEval's lattice step.
func r51H(p prepared, hRel float64) float64 {
	h := hRel * tiltedSD(p)
	if !(h > 0) || math.IsInf(h, 0) {
		h = hRel * math.Max(p.maxZ, 1e-300)
	}
	return h
}

// TestWindowSkipsKeepBits: r51WindowCompare on 40 sets, n up to 1e6.
func TestWindowSkipsKeepBits(t *testing.T) {
	r51WindowCompare(t, 51, 40, 1e6)
}

// TestPairSumAliveKeepsBits compares pairWalk.sum with the copy from
// before fc4e287, bits of both compensated sums, on random pair sums:
// left up to 3000, lm from -1000 to 0 (dead tails, wholly dead sums),
// d from -40 to 40 (and a few |d| in (600, 700) for the direct branch),
// sums s near the counting threshold (zx = zy among them), random starting
// sums with random corrections.
func TestPairSumAliveKeepsBits(t *testing.T) {
	r51PairCompare(t, 51, 20000)
}

func r51PairCompare(t *testing.T, seed uint64, trials int) {
	rng := rand.New(rand.NewPCG(seed, 4))
	lf := logFactorials(4000)
	var pw pairWalk
	var pwOld r51PairWalkOld
	diff, flush := 0, 0
	for trial := range trials {
		left := rng.IntN(3000)
		if rng.IntN(3) == 0 {
			left = rng.IntN(30)
		}
		lm := -1000 * math.Pow(rng.Float64(), 2)
		d := (rng.Float64() - 0.5) * 80
		if rng.IntN(20) == 0 {
			d = math.Copysign(600+100*rng.Float64(), rng.Float64()-0.5)
		}
		// Two atoms of renormalised masses summing to at most 1.
		lx := -math.Log1p(math.Exp(-d)) - 0.1*rng.Float64()
		ly := lx - d
		zx := (rng.Float64() - 0.3) * math.Pow(10, 2-4*rng.Float64())
		zy := zx - math.Pow(10, 2-6*rng.Float64())
		if rng.IntN(5) == 0 {
			zy = zx
		}
		// s + c zx + (left - c) zy crosses 0 near c = c1.
		c1 := rng.Float64() * float64(left+2)
		s := dd{}.addProd(-c1, zx).addProd(-(float64(left) - c1), zy)
		if rng.IntN(3) == 0 {
			s = dd{}.addProd(float64(rng.IntN(1e6)), -1e-3).addProd(float64(rng.IntN(1e6)), 1e-3)
		}
		var b bandSum
		b.eps = 1e-20 * rng.Float64()
		b.rel = 1e-9 * rng.Float64()
		for range rng.IntN(4) {
			v := math.Ldexp(1+rng.Float64(), rng.IntN(200)-100)
			b.hi.add(v)
			b.lo.add(v / 3)
		}
		bOld := b
		pw.sum(lm, 0, left, s, zx, zy, lx, ly, lf, &b)
		pwOld.sum(lm, 0, left, s, zx, zy, lx, ly, lf, &bOld)
		if b.hi.sum != bOld.hi.sum || b.lo.sum != bOld.lo.sum {
			diff++
			// The old code's +0 terms at the end fold the correction
			// into the sum: is that the only difference?
			fh, fl := b.hi, b.lo
			fh.add(0)
			fl.add(0)
			if fh.sum == bOld.hi.sum && fl.sum == bOld.lo.sum {
				flush++
				if flush <= 2 {
					t.Logf("trial %d: the sums differ by the Kahan correction the old +0 terms folded in: hi %+v lo %+v, before %+v %+v", trial, b.hi, b.lo, bOld.hi, bOld.lo)
				}
				continue
			}
			if diff-flush <= 5 {
				t.Errorf("trial %d left %d lm %v d %v zx %v zy %v: hi %v lo %v, before fc4e287 hi %v lo %v", trial, left, lm, d, zx, zy, b.hi, b.lo, bOld.hi, bOld.lo)
			}
		}
	}
	t.Logf("%d of %d pair sums differ in their sums' bits, %d of them by the Kahan correction alone", diff, trials, flush)
	// flush > 0 is expected: skipping +0 terms is not bit-identical when
	// a correction of a full ulp is pending (TestKahanAddZeroMovesRarely);
	// both sums are valid. Any other difference fails above.
}

// TestChernoffReturnSound: a pair set near its eps0 at
// n = 643326, where the window before daf8193 gave hi = +Inf at every
// lattice step of deltaBracketOf (its refinements, 12 s: checked once, here
// only the first), and SetDelta now reports [0, DeltaFloor] through the
// Chernoff return. The new figure is sound (the atoms' own Chernoff bound is
// checked below); the commit's "the window would report DeltaFloor anyway"
// does not hold here.
func TestChernoffReturnSound(t *testing.T) {
	set := AtomSet{{R: 0.11966133093511759, P: 0.11966133093511759, Q: 0.14976746475631306}, {R: 0.03248757922201634, P: 0.03248757922201634, Q: 0.04317110446438109}, {R: 0.3502082825624517, P: 0.4860369350181203, Q: 0.6001789111104289}, {R: 0.18247696916373896, P: 0.2942472287072463, Q: 0.18247696916373896}, {R: 0.024405550505137947, P: 0.0675669261174995, Q: 0.024405550505137947}}
	n, eps := 643326, 0.9673926176297775
	p := prepare(set, eps)
	old := r51LatticeEval(p, n, hRelStart, true, false, false)
	lo, hi, err := SetDelta(set, n, eps)
	t.Logf("before daf8193, first window %+v; SetDelta now [%v, %v] %v", old, lo, hi, err)
	if !math.IsInf(old.hi, 1) || hi != DeltaFloor {
		t.Errorf("expected +Inf before and DeltaFloor now")
	}
	// Independent: E[(S_n)_+]/n <= min_theta e^{n K(theta) - 1}/(theta n)
	// on the atoms themselves.
	lw := make([]float64, len(p.w))
	for j, w := range p.w {
		lw[j] = math.Log(w)
	}
	best := math.Inf(1)
	for th := 0.01; th < 50; th *= 1.05 {
		k, _, _ := cumulants(lw, p.z, th)
		best = math.Min(best, float64(n)*k-1-math.Log(th*float64(n)))
	}
	if !(best < math.Log(DeltaFloor)) {
		t.Errorf("the atoms' Chernoff bound e^%v is not below DeltaFloor", best)
	}
}
