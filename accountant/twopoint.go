package accountant

import (
	"math"
	"sync"
)

// Two-point sets, summed exactly (the lower side's sets at small eps0).
//
// A set whose prepared law has exactly two atoms, z_A < z_B with masses
// 1 - p and p, and no residual (k-RR's k = 2 lower-bound set, one of the
// generic randomizer's; Hadamard's have 4 and 7 atoms, the generic's
// other 3, and keep the lattice) has S_n = (n - M) z_A + M z_B with
// M ~ Binomial(n, p), so that
//
//	E[(S_n)_+] = sum_m P(M = m) ((n - m) z_A + m z_B)_+,
//
// a sum over one integer, whose terms are increasing in m where positive
// (f(m) = n z_A + m (z_B - z_A)). The masses are taken as 1 - p and p,
// as the sparse path takes its binomial (prepare leaves them summing to 1
// within a few u). The lattice brackets such a set only loosely when its
// two lattice points are a few steps apart (the law is then a comb, nearly
// periodic modulo L, and most of its L/2 coefficients survive the n-th
// power): each window costs a full inverse FFT, and the lower side's eps
// search runs a hundred of them at n = 1e8.
//
// Here the sum runs over m in [m0, m1], the intersection of the window
// mean +- twoPointSD standard deviations of M with the m where f(m) may be
// positive (m0 >= floor(m*) - 2, m* = -n z_A/(z_B - z_A)), and the rest
// is bounded:
//
//   - m > m1: f(m)_+ <= (n z_A)_+ + m Delta (Delta = z_B - z_A > 0), so
//     the omitted part is at most (n z_A)_+ P(M > m1) + Delta n p
//     P(Binomial(n-1, p) >= m1) (E[M 1{M > m1}] = n p P(B_{n-1} >= m1)),
//     each probability by its Chernoff bound (binomTailLog, as the sparse
//     path bounds its tail). When m* is beyond m1 nothing is summed
//     (m0 = m1 + 1): lo = 0 and hi is this bound (about e^-800 of the
//     mass, in practice DeltaFloor);
//   - m < m0: f is increasing, so the omitted part is at most f(m0-1)_+
//     P(M <= m0-1) = f(m0-1)_+ P(Binomial(n, 1-p) >= n-m0+1), again by
//     Chernoff (0 when m0 = 0, or when f(m0-1) <= 0: then every omitted
//     f(m) is <= 0).
//
// Both go to the upper side only; the lower side is the window's sum, a
// sum of non-negative terms, so it is below the exact value whatever is
// omitted. The terms are summed as the sparse path sums its leaves with
// one non-dominant atom (sparse_sum.go): f(m) as a double-double from the
// exact products (n-m) z_A and m z_B, within eps_m = 24 u^2 (|(n-m) z_A| +
// m |z_B|) (8 (a + 2) u^2 with a = 1); a leaf with x + eps_m <= 0 adds
// nothing, the others add V (x + eps_m)(1 + r) to the upper sum and, when
// x - eps_m > 0, V (x - eps_m)(1 - r) to the lower one, with V =
// exp(logBinomPMF(m, n, p)). Here log V is lpm itself (no exponent sum:
// the sparse path's E_m is 0), so r = 1.01 * 9u covers exp (4u: Go's
// amd64 exp errs by up to about 2.5u), the evaluation of x and x +- eps_m
// and the two products (4u), the rounding of 1 +- r and the second-order
// terms (u; a reviewer found 8u used up exactly once exp took 4u); lpm's
// own error (Loader's method, a few u of its terms' magnitudes, which at
// |m - np| <= 40 sd stay below a few thousand) and the compensated sums'
// are left to sparseRel, applied to both sums at the end, as there. The
// bracket is thus [lo, hi] with lo <= D(eps) <= hi, and hi - lo is
// sparseRel-sized, where the lattice's bracket was as wide as its
// tolerance allowed.
//
// The path is taken only by the lower side's eps search (setSolver's
// twoPoint; epsLower), and only where the sparse path certainly declines
// (n min(p, 1-p) >= twoPointMinMean, so that its m_max, above the mean,
// passes its term limit): upper figures, delta brackets and baselines keep
// their lattice or sparse evaluations bit for bit, and a two-point lower
// set the sparse path summed keeps its figure.

const (
	// twoPointSD is the half-width of the window over M, in standard
	// deviations: the binomial's Chernoff tail there is about e^-800.
	twoPointSD = 40
	// twoPointMinMean is the smallest n min(p, 1-p) the path takes: the
	// sparse path's binomial is that of the lighter atom, and its m_max is
	// at least the mean, so it counts at least 3e6 + 1 terms and declines
	// (sparseMaxTerms is 3e6).
	twoPointMinMean = 3e6
	// twoPointMaxWindow bounds a window's entries (8 MB; n p (1-p) up to
	// about 1.7e8, n = 7e8 at p = 1/2).
	twoPointMaxWindow = 1 << 20
)

// twoPointExact returns the bracket of D(eps) for a prepared two-point law
// and true, or false when the set is not two-point or the sparse path
// could take it.
func twoPointExact(p prepared, n int) (bracket, bool) {
	if len(p.z) != 2 {
		return bracket{}, false
	}
	a, b := 0, 1
	if p.z[0] > p.z[1] {
		a, b = 1, 0
	}
	if !(p.z[a] < p.z[b]) || !(p.w[a] > 0) || !(p.w[b] > 0) {
		return bracket{}, false
	}
	if float64(n)*math.Min(p.w[a], p.w[b]) < twoPointMinMean {
		return bracket{}, false
	}
	return twoPointSum(p.z[a], p.z[b], p.w[b], n)
}

// twoPointSum brackets (1/n) E[((n - M) zA + M zB)_+], M ~ Binomial(n,
// pB), zA < zB, by the window sum and tail bounds above (lo = 0 when the
// positive part starts beyond the window); false when the window would be
// too long.
func twoPointSum(zA, zB, pB float64, n int) (bracket, bool) {
	nf := float64(n)
	t, ok := binomWindowPMF(n, pB)
	if !ok {
		return bracket{}, false
	}
	m1 := t.m0 + len(t.lpm) - 1
	// m* = -n zA/(zB - zA): f(m) <= 0 below it. Its rounding is covered by
	// starting two below its floor (and by the leaves' own sign test).
	delta := (zB - zA) * (1 + 2*ulp) // above the exact difference
	m0 := t.m0
	if zA < 0 {
		// Beyond the window (ms > m1) nothing is summed: the bracket is
		// [0, the tail bound above m1].
		ms := math.Min(math.Floor(-nf*zA/(zB-zA))-2, float64(m1+1))
		m0 = max(m0, int(ms))
	}
	var sum bandSum
	for m := m0; m <= m1; m++ {
		mf := float64(m)
		s := dd{}.addProd(float64(n-m), zA).addProd(mf, zB)
		sum.eps = 24 * ulp * ulp * (math.Abs(float64(n-m)*zA) + mf*math.Abs(zB))
		x := s.val()
		if !sum.counts(x) {
			continue
		}
		sum.rel = 1.01 * 9 * ulp
		sum.leaf(math.Exp(t.lpm[m-t.m0]), x)
	}
	// Omitted above m1.
	var tail float64
	if m1 < n {
		tail += math.Max(nf*zA, 0)*(1+2*ulp)*math.Exp(binomTailLog(n, pB, m1+1)) +
			delta*nf*pB*(1+4*ulp)*math.Exp(binomTailLog(n-1, pB, m1))
	}
	// Omitted below m0: f(m0-1)_+ P(M <= m0-1).
	if m0 > 0 {
		c := float64(n - m0 + 1)
		f := dd{}.addProd(c, zA).addProd(float64(m0-1), zB).val()
		f += 4 * ulp * (math.Abs(c*zA) + float64(m0-1)*math.Abs(zB))
		if f > 0 {
			tail += f * math.Exp(binomTailLog(n, 1-pB, n-m0+1)) * (1 + 1e-6)
		}
	}
	hi := math.Max((sum.hi.sum*(1+sparseRel)+tail)/nf, DeltaFloor)
	lo := sum.lo.sum * (1 - sparseRel) / nf
	return bracket{lo: lo, hi: hi}, true
}

// binomWindow holds log P(M = m), M ~ Binomial(n, p), for m in [m0, m0 +
// len(lpm)), the window mean +- twoPointSD sd (clipped to [0, n]).
type binomWindow struct {
	m0  int
	lpm []float64
}

// binomWindowPMF returns the window of Binomial(n, p), each entry
// logBinomPMF's value, and false when it would exceed twoPointMaxWindow
// entries. The few most recent are kept: p is an atom set's
// mass, which eps does not change, and a search evaluates the same set at
// dozens of eps. The window is shared: callers only read it.
func binomWindowPMF(n int, p float64) (binomWindow, bool) {
	k := pmfKey{n, math.Float64bits(p)}
	c := &binomWindowCache
	c.Lock()
	defer c.Unlock()
	if w, ok := c.tables[k]; ok {
		return w, true
	}
	nf := float64(n)
	mean, sd := nf*p, math.Sqrt(nf*p*(1-p))
	lo := max(0, int(math.Floor(mean-twoPointSD*sd)))
	hi := min(n, int(math.Ceil(mean+twoPointSD*sd)))
	if hi-lo+1 > twoPointMaxWindow {
		return binomWindow{}, false
	}
	w := binomWindow{m0: lo, lpm: make([]float64, hi-lo+1)}
	for i := range w.lpm {
		w.lpm[i] = logBinomPMF(lo+i, n, p)
	}
	if c.tables == nil {
		c.tables = map[pmfKey]binomWindow{}
	}
	if len(c.order) >= maxPMFTables {
		delete(c.tables, c.order[0])
		c.order = c.order[1:]
	}
	c.tables[k] = w
	c.order = append(c.order, k)
	return w, true
}

// binomWindowCache holds binomWindowPMF's windows, oldest first in order.
var binomWindowCache struct {
	sync.Mutex
	tables map[pmfKey]binomWindow
	order  []pmfKey
}
