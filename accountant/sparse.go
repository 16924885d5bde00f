package accountant

import (
	"math"
	"slices"
)

// The sparse path computes D(eps) = (1/n) E[(S_n)_+] exactly, without a
// lattice, when almost every user draws the same atom: with the dominant atom
// z_0 of mass w_0 and M ~ Binomial(n, 1 - w_0) the number of other draws,
//
//	E[(S_n)_+] = sum_m P(M = m) E[((n - m) z_0 + T_m)_+],
//
// where T_m is the sum of m draws from the other atoms, renormalised. The
// inner expectation is a finite sum over the multinomial counts of those
// atoms. The sum over m stops at m_max where the remaining mass is bounded by
// a Chernoff bound: with Delta = max_j (z_j - z_0)_+,
// (S_n)_+ <= (n z_0)_+ + M Delta, so the omitted part is at most
// (n z_0)_+ P(M > m_max) + Delta n pi P(Binomial(n-1, pi) >= m_max).
// This is the regime (large eps0, tiny blanket) where the lattice would need
// an enormous number of points, and it also covers every small n.

const (
	// sparseMaxTerms bounds the multinomial terms enumerated.
	sparseMaxTerms = 3_000_000
	// sparseRel is the relative margin for the rounding of the binomial
	// probabilities (Loader's method: a few ulps times the size of its
	// terms; measured against a 320-bit reference wherever log P >= -746,
	// n up to 1e10: at most 5.4e-12, review62_loader_test.go). Every
	// other rounding (the sums, the log-factorials, the masses' exponents,
	// the pair walk) is bounded per leaf and per m (sparse_sum.go).
	sparseRel = 1e-9
)

// sparseExact returns the bracket and true when the sparse path applies.
func sparseExact(p prepared, n int) (bracket, bool) {
	b, ok, tight := sparseExactCut(p, n, true)
	if ok && !tight {
		b, ok, _ = sparseExactCut(p, n, false)
	}
	return b, ok
}

// sparseExactCut is sparseExact with or without the relative cut of its
// pair sums (sparse_cut.go); tight is false when the cut's bound on the
// leaves it dropped came to more than cutCheck of the lower sum.
func sparseExactCut(p prepared, n int, cut bool) (_ bracket, ok, tight bool) {
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
		return bracket{lo: v, hi: v}, true, true
	}
	pi = math.Min(pi, 1)
	// Start with m_max a few standard deviations above the mean number of
	// non-dominant draws; it is extended below while the omitted part still
	// matters, relative to the sum or to the smallest delta of interest.
	mean := nf * pi
	mMax := int(math.Min(nf, math.Ceil(mean+6*math.Sqrt(mean)+10)))
	a := len(z)
	terms := termsUpTo(a, 0, mMax, 0, sparseMaxTerms)
	if terms > sparseMaxTerms {
		return sparseMerged(p, d, n, cut)
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
	var pw pairWalk
	mFirst, mLast := rootCounts(nf, z0, zs[0])
	sumRange := func(m0, m1, stride int) bool {
		// The m outside [mFirst, mLast] only check the exponent's error
		// E_m: where no E_m of [m0, m1] can pass 0.01, walk only the m
		// whose leaves may count (the same m, the same order, the same
		// answer: countingCounts), and compute only their masses.
		m, end := m0, m1
		if !sparseWalkEveryCount && emBelow(a, n, pi, lf[m1], m1, maxL) {
			m, end = countingCounts(m0, m1, stride, mFirst, mLast)
		}
		if m > end {
			return true
		}
		lpms := logBinomPMFsFrom(n, pi, m, end)
		for ; m <= end; m += stride {
			lpm := lpms.at(m)
			if math.IsInf(lpm, -1) {
				continue
			}
			mf := float64(m)
			em := float64(2*a+10) * ulp * (math.Abs(lpm) + 2*lf[m] + mf*(maxL+1))
			if a == 1 {
				// log m! - log m! cancels: the leaf's exponent is lpm + m l_1.
				em = 4 * ulp * (math.Abs(lpm) + mf*(maxL+1))
			}
			if em > 0.01 {
				return false
			}
			if float64(m) < mFirst || float64(m) > mLast {
				continue // no leaf of this m counts (rootCounts)
			}
			if lpm < -746 {
				// Every leaf's log mass is lpm plus the log of a multinomial
				// probability (<= 0) computed within E_m <= 0.01: below
				// exp's underflow (-745.13), so each mass is exactly 0,
				// and so is every product a pair walk forms from it.
				// Their terms are +0. Adding +0 to a compensated sum
				// leaves it as it is, except in the rare state where the
				// correction has reached a full ulp (after a term over
				// twice the sum), where it moves the sum by that ulp
				// (TestKahanAddZeroMovesRarely): either way a rounding
				// of the same exact sum, within the bound sparseRel
				// allows for it.
				continue
			}
			base := dd{}.addProd(float64(n-m), z0)
			sum.eps = float64(8*(a+2)) * ulp * ulp * (math.Abs(base.hi) + mf*maxZ)
			sum.rel = 1.01*(em+8*ulp) + 1.4*walkRel
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
	if cut && a >= 2 {
		// The probe pass sets the cut's per-pair budget from about 64 of
		// the m in [0, m_max]; R bounds the number of pair sums: one per m
		// for two non-dominant atoms, at most one per leaf otherwise.
		sum.probe = true
		if !sumRange(0, mMax, max(1, (mMax+1)/64)) {
			return bracket{}, false, true
		}
		sum.probe = false
		R := terms
		if a == 2 {
			R = float64(mMax + 1)
		}
		sum.startCut(math.Max(sum.est.sum, DeltaFloor*nf), R)
	}
	if !sumRange(0, mMax, 1) {
		return bracket{}, false, true
	}
	for mMax < n && tailAt(mMax) > 1e-3*sparseRel*sum.hi.sum && tailAt(mMax) > 1e-6*MinDelta*nf {
		next := min(n, mMax+1+mMax/4)
		terms = termsUpTo(a, mMax+1, next, terms, math.Inf(1))
		if terms > 4*sparseMaxTerms {
			return bracket{}, false, true
		}
		lf = logFactorials(next)
		if !sumRange(mMax+1, next, 1) {
			return bracket{}, false, true
		}
		mMax = next
	}
	if sum.cutOn && !(sum.drop.sum <= cutCheck*math.Max(sum.lo.sum, DeltaFloor*nf)) {
		return bracket{}, true, false
	}
	tail := tailAt(mMax)
	hi := math.Max(((sum.hi.sum+sum.drop.sum)*(1+sparseRel)+tail)/nf, DeltaFloor)
	lo := sum.lo.sum * (1 - sparseRel) / nf
	return bracket{lo: lo, hi: hi}, true, true
}

// termsUpTo returns terms plus the number of leaves of every m in [m0, m1],
// sum_m C(m + a - 1, a - 1), added one m at a time in that order, or the
// first running sum above limit (or an estimate of the whole sum, when it
// is over twice limit); for a <= 2 the terms are the integers 1
// and m + 1, whose running sum is exact below 2^53, so its closed form is
// the same number (and exceeds limit exactly when a running sum does).
func termsUpTo(a, m0, m1 int, terms, limit float64) float64 {
	if m1 < m0 {
		return terms
	}
	switch {
	case a == 1 && terms+float64(m1-m0+1) < 1<<53:
		return terms + float64(m1-m0+1)
	case a == 2 && terms+float64(m1+2)*float64(m1+2) < 1<<53:
		// sum_{m=m0}^{m1} (m+1) = (m1+1)(m1+2)/2 - m0(m0+1)/2, exact.
		return terms + float64((int64(m1)+1)*(int64(m1)+2)/2-int64(m0)*(int64(m0)+1)/2)
	}
	if m0 == 0 && terms == 0 && !math.IsInf(limit, 1) {
		// The whole sum is C(m1 + a, a) (hockey stick). Where an estimate
		// puts it far above limit, the running sum ends above limit too
		// (each binom is within 1e-9 of its exact value), which is all a
		// caller reads then: skip the loop.
		lg := func(x int) float64 { v, _ := math.Lgamma(float64(x) + 1); return v }
		if est := math.Exp(lg(m1+a) - lg(a) - lg(m1)); est > 2*limit {
			return est
		}
	}
	for m := m0; m <= m1; m++ {
		terms += binom(m+a-1, a-1)
		if terms > limit {
			break
		}
	}
	return terms
}

// rootCounts returns an interval [first, last] of m outside which no leaf
// of sparseExact can count: every leaf's sum is at most
// X(m) = (n - m) z_0 + m zmax (all non-dominant draws at the largest value
// zmax), and the tests that prune (bandSum.counts for one non-dominant
// atom, mayCount at the root otherwise) compare a computed X(m) within
// eps_m + 3u of the magnitudes |n z_0| + m |zmax| (sparse_sum.go), far
// below 1e-9 of them. So where X(m) + 1e-9 (n |z_0| + m (|zmax| + |z_0|))
// < 0 the computed test fails and the m adds nothing; the interval is
// widened by two on each side for the rounding of this function's own
// arithmetic. Skipping such m leaves every sum the same bits.
func rootCounts(nf, z0, zmax float64) (first, last float64) {
	// X(m) + margin = r0 + m s with:
	s := (zmax - z0) + 1e-9*(math.Abs(zmax)+math.Abs(z0))
	r0 := nf*z0 + 1e-9*nf*math.Abs(z0)
	switch {
	case s > 0:
		return math.Floor(-r0/s) - 2, math.Inf(1)
	case s < 0:
		return math.Inf(-1), math.Ceil(-r0/s) + 2
	case r0 >= 0:
		return math.Inf(-1), math.Inf(1)
	}
	return math.Inf(1), math.Inf(-1)
}

// sparseWalkEveryCount makes sumRange walk every m, as it did before
// countingCounts: the reference the tests compare with.
var sparseWalkEveryCount = false

// emBelow reports whether no m of [0, m1] can have the exponent error
// E_m = (2a+10) ulp (|log P(M = m)| + 2 log m! + m (maxL + 1)) of sumRange
// above 0.01 (E_m of a = 1 is smaller), with lfm1 = log m1! and M ~
// Binomial(n, pi): P(M = m) >= pi^m (1-pi)^(n-m), so |log P(M = m)| <=
// n L with L = max(-log pi, -log(1-pi)); the computed log masses are
// within 1e-9 of the exact ones (sparseRel), and log m! and m grow with m.
// It asks the bound to be at most 0.005, so that the rounding of E_m
// itself cannot take it past 0.01.
func emBelow(a, n int, pi, lfm1 float64, m1 int, maxL float64) bool {
	L := math.Max(-math.Log(pi), -math.Log1p(-pi))
	lpm := 1.001*float64(n)*L + 1
	b := float64(2*a+10) * ulp * (lpm + 2*lfm1 + float64(m1)*(maxL+1))
	return b <= 0.005
}

// countingCounts returns the first and last m of m0, m0 + stride, ...,
// up to m1 with mFirst <= m <= mLast (first > last when none): the m
// whose leaves may count (rootCounts), in float64 as sumRange compares
// them.
func countingCounts(m0, m1, stride int, mFirst, mLast float64) (first, last int) {
	first, last = m0, m1
	if mFirst > float64(m0) {
		if mFirst > float64(m1) {
			return m1 + 1, m1
		}
		k := int(math.Ceil((mFirst - float64(m0)) / float64(stride)))
		first = m0 + k*stride
		for first-stride >= m0 && float64(first-stride) >= mFirst {
			first -= stride
		}
		for first <= m1 && float64(first) < mFirst {
			first += stride
		}
	}
	if mLast < float64(m1) {
		if !(mLast >= float64(first)) {
			return m1 + 1, m1
		}
		// The last stride point at or below mLast.
		k := int(math.Floor((mLast - float64(first)) / float64(stride)))
		last = first + k*stride
		for last+stride <= m1 && float64(last+stride) <= mLast {
			last += stride
		}
		for last >= first && float64(last) > mLast {
			last -= stride
		}
	}
	return first, last
}

// binomTailLog returns a Chernoff upper bound on log P(Binomial(n, p) >= m).
func binomTailLog(n int, p float64, m int) float64 {
	nf, mf := float64(n), float64(m)
	if mf <= nf*p {
		return 0
	}
	if m > n {
		return math.Inf(-1)
	}
	x := mf / nf
	// -n KL(x || p)
	kl := x * math.Log(x/p)
	if x < 1 {
		kl += (1 - x) * math.Log((1-x)/(1-p))
	}
	return -nf * kl
}

// sparseMerged is the sparse path where it has too many terms, for a set
// some of whose atoms are almost never drawn: n w_j <= 1e-6 (a matrix
// declaration's masses summing to 1 - 1e-16 leave a residual atom of mass
// 1e-16, and one more atom multiplies the terms by about m_max / a:
// summation:k=8 at eps0 16, n 1e8, 2.7e7 terms and a minute on the lattice).
// Each such atom j is merged into the dominant one d. Drawing z_d wherever
// the set draws z_j couples the two sums with |S_n - S'_n| <= sum of
// |z_j - z_d| over those draws, and (.)_+ is 1-Lipschitz, so D is within
// W = sum_j w_j |z_j - z_d| of the merged set's D' (times 1 + 1e-12 for
// the rounding of W's sum of at most 1000 terms). The bracket is widened by
// that on both sides, rounded outward, and taken only when W is at most
// 1e-9 of its lower end: otherwise the path declines, as it did before.
func sparseMerged(p prepared, d, n int, cut bool) (_ bracket, ok, tight bool) {
	var q prepared
	var W float64
	merged := 0
	for j := range p.z {
		if j != d && float64(n)*p.w[j] <= 1e-6 {
			W += p.w[j] * math.Abs(p.z[j]-p.z[d])
			merged++
			continue
		}
		q.z = append(q.z, p.z[j])
		q.w = append(q.w, p.w[j])
	}
	if merged == 0 || merged > 1000 {
		return bracket{}, false, true
	}
	W *= 1 + 1e-12
	b, ok, tight := sparseExactCut(q, n, cut)
	if !ok || !tight {
		return bracket{}, ok, tight
	}
	if !(W <= 1e-9*b.lo) {
		return bracket{}, false, true
	}
	// Outward: b can be exact (a single atom left), and W below half an
	// ulp of it would round away (a reviewer's case).
	return bracket{
		lo: math.Max(math.Nextafter(b.lo-W, math.Inf(-1)), 0),
		hi: math.Nextafter(b.hi+W, math.Inf(1)),
	}, true, true
}
