package accountant

import (
	"math"
	"sync"
)

// The rounding of sparseExact's leaves, bounded per leaf.
//
// A leaf is a choice of counts c_j of the non-dominant atoms with
// sum_j c_j = m; its term is V s with mass V = P(M = m) m!/prod c_j!
// prod w_j^c_j (renormalised masses) and sum s = (n-m) z_0 + sum_j c_j z_j.
// Both are computed in floating point; the bracket must hold whatever the
// rounding. With u = 2^-53:
//
// The sum. s is accumulated as an unevaluated double-double (dd): each
// product c z by FMA (c z = p + e exactly: c is an integer below 2^53) and
// each addition by TwoSum, so the only roundings are those of the low
// parts, each at most u times a low part, itself at most u (|x| + |c z|)
// where x is the sum so far. Over the a + 1 products of a leaf the error
// is at most eps_m = 8 (a + 2) u^2 (|(n-m) z_0| + m max_j |z_j|) (a
// constant per m). The evaluated sum x = hi + lo adds u |x|, counted in
// the term's relative error below. A leaf with x + eps_m <= 0 has a true
// sum <= 0 and adds nothing (x is hi, the rounded hi + lo, so the true sum
// is within eps_m of x up to |lo| <= u |x|, which eps_m's slack covers:
// the products' errors reach about 7 u^2 of the magnitudes against the
// 8 (a + 2) u^2 allowed; and the test x + eps_m > 0, rounded, has the
// exact sum's sign, 0 being representable); the others add V (x + eps_m) to the upper
// sum and, when x - eps_m > 0, V (x - eps_m) to the lower one: each is
// then above, resp. below, the leaf's true term V s_+ up to the relative
// errors of V and of the products. Near-zero sums thus widen the bracket
// by their own mass times eps_m, about 1e-19 at n = 1e10, instead of the
// u n |z_0| of a plain sum (1e-6 relative at n = 1e10), which no relative
// margin could cover.
//
// The mass. log V is lpm + log m! + sum_j (c_j l_j - log c_j!), summed
// left to right in 2a + 2 terms, with lpm = logBinomPMF(m, n, pi) (its own
// error is sparseRel's), log factorials from logFactorials (compensated:
// at most 6u log k! each: the logs' 2u relative, the compensated sum's 3u
// and N u^2), and
// l_j = log(w_j/pi) (at most u + 2u |l_j| absolute each, times c_j). A
// sum of K terms rounds by at most (K-1) u times the sum of their
// magnitudes; so log V is off by at most
//
//	E_m = (2a + 10) u (|lpm| + 2 log m! + m (max_j |l_j| + 1)),
//
// and V by the factor e^(+-E_m) and exp's own error, up to 4u (Go's amd64
// exp reaches about 2.5u; the pair walk adds (7/5) walkRel). The factor
// is applied per m: the upper sum takes V (1 + r_m), the lower
// V (1 - r_m), with r_m = 1.01 (E_m + 8u) + (7/5) walkRel (for E_m <=
// 0.01; beyond, sparseExact declines), which also covers the evaluation of
// x (u), x +- eps_m (u) and the two products (2u); the compensated sums of
// the terms (2u each) and the final scaling by (1 +- sparseRel)/n are left
// to sparseRel, far above them. The exponents' magnitudes grow with m: at
// m = 5000 with |l_j| <= 30, r_m is about 5e-10. With a single
// non-dominant atom (a = 1) log m! cancels exactly from the exponent, which
// sparseExact then takes as lpm + m l_1: E_m = 4u (|lpm| + m (|l_1| + 1)),
// about 1e-9 at m = 10^6 (the general bound would have been 3.6e-8 there;
// a second engineer's review measured it).

// dd is the unevaluated sum hi + lo.
type dd struct{ hi, lo float64 }

// addProd returns x + c z for an integer-valued c below 2^53.
func (x dd) addProd(c, z float64) dd {
	p := c * z
	pe := math.FMA(c, z, -p)
	s, e := twoSum(x.hi, p)
	e += x.lo + pe
	hi, lo := twoSum(s, e)
	return dd{hi, lo}
}

// val returns hi + lo, rounded.
func (x dd) val() float64 { return x.hi + x.lo }

// bandSum accumulates the leaves' terms into an upper and a lower sum, with
// the sum's error eps and the mass's relative error rel of the current m.
type bandSum struct {
	hi, lo   kahan
	eps, rel float64
	// The relative cut (sparse_cut.go): the log of the per-pair budget
	// when cutOn, the dropped leaves' bound, and the probe pass's state.
	cutOn  bool
	cut    float64
	cutExp float64
	drop   kahan
	probe  bool
	est    kahan
}

// counts reports whether a leaf of evaluated sum x = s.val() adds
// anything.
func (b *bandSum) counts(x float64) bool { return x+b.eps > 0 }

// leaf adds the leaf of mass v and evaluated sum x, one that counts.
func (b *bandSum) leaf(v, x float64) {
	b.hi.add(v * (x + b.eps) * (1 + b.rel))
	if x-b.eps > 0 {
		b.lo.add(v * (x - b.eps) * (1 - b.rel))
	}
}

// mayCount reports whether some leaf below a node of sum s, with left
// draws still to make of atoms of value at most z, may add anything: the
// largest sum below is s + left z, evaluated with its own rounding
// (at most 3u of the magnitudes, besides eps).
func (b *bandSum) mayCount(s dd, left int, z float64) bool {
	t := s.addProd(float64(left), z).val()
	return t+b.eps+3*ulp*(math.Abs(t)+math.Abs(s.hi)+float64(left)*math.Abs(z)) > 0
}

// logFactorials returns log k! for k = 0..m, each within 6u log k!
// (compensated sum of the logs). The slice is shared: callers only read
// it.
//
// The table is a running sum, so the first m + 1 entries of a longer table
// are the same bits as a table of m + 1: one table, grown as needed and
// kept up to lfCacheMax entries, serves every call (a calibration asks
// for tables of tens of thousands of entries at every probe).
func logFactorials(m int) []float64 {
	if m > lfCacheMax {
		lf := make([]float64, m+1)
		var sum kahan
		extendLogFactorials(lf, 2, &sum)
		return lf
	}
	c := &lfCache
	c.Lock()
	defer c.Unlock()
	if len(c.lf) <= m {
		size := max(m+1, min(2*len(c.lf), lfCacheMax+1))
		lf := make([]float64, size)
		copy(lf, c.lf)
		extendLogFactorials(lf, max(len(c.lf), 2), &c.sum)
		c.lf = lf
	}
	return c.lf[: m+1 : m+1]
}

// extendLogFactorials fills lf[from:] with log k!, continuing the
// compensated sum of log 2 + ... + log (from - 1) held in sum.
func extendLogFactorials(lf []float64, from int, sum *kahan) {
	for i := from; i < len(lf); i++ {
		sum.add(math.Log(float64(i)))
		lf[i] = sum.sum
	}
}

// lfCacheMax bounds the shared table of logFactorials (32 MB).
const lfCacheMax = 1 << 22

// lfCache is logFactorials' shared table and the compensated sum that
// produced its last entry.
var lfCache struct {
	sync.Mutex
	lf  []float64
	sum kahan
}
