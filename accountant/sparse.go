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
	// terms, well below 1e-12 for n <= 1e10), of the log-factorials of the
	// small counts and of the sums.
	sparseRel = 1e-9
)

// sparseExact returns the bracket and true when the sparse path applies.
func sparseExact(p prepared, n int) (bracket, bool) {
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
	var total, comp float64
	add := func(v float64) {
		y := v - comp
		t := total + y
		comp = (t - total) - y
		total = t
	}
	var pw pairWalk
	sumRange := func(m0, m1 int) {
		for m := m0; m <= m1; m++ {
			lpm := logBinomPMF(m, n, pi)
			if math.IsInf(lpm, -1) {
				continue
			}
			base := float64(n-m) * z0
			lm := lpm + lf[m]
			// Enumerate counts of the other atoms summing to m.
			var rec func(j, left int, lp, s float64)
			rec = func(j, left int, lp, s float64) {
				if j == a-1 {
					s += float64(left) * zs[j]
					if s > 0 {
						lp += float64(left)*ls[j] - lf[left]
						add(math.Exp(lm+lp) * s)
					}
					return
				}
				// Remaining atoms have values <= zs[j]: if even all of left at
				// zs[j] cannot make the sum positive, prune.
				if s+float64(left)*zs[j] <= 0 {
					return
				}
				if j == a-2 {
					pw.sum(lm, lp, left, s, zs[j], zs[j+1], ls[j], ls[j+1], lf, add)
					return
				}
				for c := 0; c <= left; c++ {
					rec(j+1, left-c, lp+float64(c)*ls[j]-lf[c], s+float64(c)*zs[j])
				}
			}
			rec(0, m, 0, base)
		}
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
	sumRange(0, mMax)
	for mMax < n && tailAt(mMax) > 1e-3*sparseRel*total && tailAt(mMax) > 1e-6*MinDelta*nf {
		next := min(n, mMax+1+mMax/4)
		for m := mMax + 1; m <= next; m++ {
			terms += binom(m+a-1, a-1)
		}
		if terms > 4*sparseMaxTerms {
			return bracket{}, false
		}
		lf = logFactorials(next)
		sumRange(mMax+1, next)
		mMax = next
	}
	tail := tailAt(mMax)
	hi := math.Max((total*(1+sparseRel)+tail)/nf, DeltaFloor)
	lo := total * (1 - sparseRel) / nf
	return bracket{lo: lo, hi: hi}, true
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

func logFactorials(m int) []float64 {
	lf := make([]float64, m+1)
	for i := 1; i <= m; i++ {
		lf[i] = lf[i-1] + math.Log(float64(i))
	}
	return lf
}
