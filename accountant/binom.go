package accountant

import (
	"math"
	"sync"
)

// logBinomPMF returns log P(Binomial(n, p) = x) accurately for n up to
// 10^10 and beyond, by Loader's saddle-point method ("Fast and accurate
// computation of binomial probabilities", 2000): the Stirling remainders and
// the deviance term are computed without the cancellation that differences
// of log-gamma values suffer at large n (lgamma(1e10) ~ 2.2e11 loses about
// 1e-5 in absolute terms).
func logBinomPMF(x, n int, p float64) float64 {
	q := 1 - p
	switch {
	case p == 0:
		if x == 0 {
			return 0
		}
		return math.Inf(-1)
	case q == 0:
		if x == n {
			return 0
		}
		return math.Inf(-1)
	case x < 0 || x > n:
		return math.Inf(-1)
	}
	nf, xf := float64(n), float64(x)
	if x == 0 {
		return nf * math.Log1p(-p)
	}
	if x == n {
		return nf * math.Log(p)
	}
	// d = x - n p with the product exact and one rounding; the other
	// deviance's difference is (n - x) - n q = -d exactly (q = 1 - p, the
	// law's). Computing n p and n q and subtracting in bd0 rounded n p, q
	// and n q apart, an error of up to 3u |m - n p| in log P: 4.2e-10 at
	// n = 1e10 with p near 1/2 at the edge of log P >= -746 (review 62,
	// against a 320-bit reference), within sparseRel = 1e-9 but by 2.4x
	// only; with d from one FMA the worst found is 5.4e-12.
	d := math.FMA(-nf, p, xf)
	lc := stirlerr(nf) - stirlerr(xf) - stirlerr(nf-xf) - bd0(xf, nf*p, d) - bd0(nf-xf, nf*q, -d)
	return lc + 0.5*math.Log(nf/(2*math.Pi*xf*(nf-xf)))
}

// stirlerr returns log(n!) - log(sqrt(2 pi n) (n/e)^n).
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
		return lg - (n+0.5)*math.Log(n) + n - 0.5*math.Log(2*math.Pi)
	}
	nn := n * n
	switch {
	case n > 500:
		return (s0 - s1/nn) / n
	case n > 80:
		return (s0 - (s1-s2/nn)/nn) / n
	case n > 35:
		return (s0 - (s1-(s2-s3/nn)/nn)/nn) / n
	default:
		return (s0 - (s1-(s2-(s3-s4/nn)/nn)/nn)/nn) / n
	}
}

// bd0 returns x log(x/np) + np - x, the deviance term, accurately when x is
// close to np, given d = x - np (from the caller, which has it with one
// rounding).
func bd0(x, np, d float64) float64 {
	if math.Abs(d) < 0.1*(x+np) {
		v := d / (x + np)
		s := d * v
		ej := 2 * x * v
		v2 := v * v
		for j := 1; j < 1000; j++ {
			ej *= v2
			s1 := s + ej/float64(2*j+1)
			if s1 == s {
				return s1
			}
			s = s1
		}
		return s
	}
	return x*math.Log(x/np) - d
}

// logBinomPMFs returns logBinomPMF(m, n, p) for m = 0..m1. The slice is
// shared: callers only read it.
//
// The sparse path sums over the same binomial at every eps a search
// tries (its p is the blanket mass of the atom set, which eps does not
// change), so the values of the few most recent (n, p) are kept and
// extended as needed: each is logBinomPMF's value, the same bits as a call.
func logBinomPMFs(n int, p float64, m1 int) []float64 {
	return logBinomPMFsFrom(n, p, 0, m1).v
}

// pmfWindow is logBinomPMF(m, n, p) for m in [lo, lo+len(v)): a shared
// table's entries, read only.
type pmfWindow struct {
	lo int
	v  []float64
}

// at returns logBinomPMF(m, n, p) for m in the window.
func (w pmfWindow) at(m int) float64 { return w.v[m-w.lo] }

// logBinomPMFsFrom is logBinomPMFs for m = m0..m1 only. A law's table
// covers one range of counts, grown to take in each request: a sum over
// m that starts far above 0 (the sparse path's counting range near a
// large mean, n pi ~ 5e5 at n = 1e6) neither computes nor allocates the
// masses below. An entry computed is logBinomPMF's value; each is
// computed on its own, so which were computed before changes no bit.
func logBinomPMFsFrom(n int, p float64, m0, m1 int) pmfWindow {
	m0 = max(m0, 0)
	if m1 < m0 {
		return pmfWindow{lo: m0}
	}
	if m1-m0 >= pmfCacheMax {
		out := make([]float64, m1-m0+1)
		for m := m0; m <= m1; m++ {
			out[m-m0] = logBinomPMF(m, n, p)
		}
		return pmfWindow{lo: m0, v: out}
	}
	c := &pmfCache
	c.Lock()
	defer c.Unlock()
	k := pmfKey{n, math.Float64bits(p)}
	t, ok := c.tables[k]
	if !ok {
		if c.tables == nil {
			c.tables = map[pmfKey]pmfWindow{}
		}
		c.order = append(c.order, k)
	}
	if hi := t.lo + len(t.v); len(t.v) == 0 || m0 < t.lo || m1 >= hi {
		// Take in [m0, m1], growing upwards by doubling (searches extend
		// their range of m a quarter at a time); start afresh with the
		// request alone when the union would pass the cap.
		lo, top := m0, m1+1
		if len(t.v) > 0 {
			lo, top = min(t.lo, m0), max(hi, m1+1)
			if m1 >= hi {
				top = max(top, lo+min(2*len(t.v), pmfCacheMax))
			}
			if top-lo > pmfCacheMax {
				// Sized to the request: a law asked in turn at two
				// places far apart would otherwise fill a full-size
				// table at each switch (review 67).
				lo, top = m0, m1+1
			}
		}
		ext := pmfWindow{lo: lo, v: make([]float64, top-lo)}
		for i := range ext.v {
			ext.v[i] = math.NaN()
		}
		if len(t.v) > 0 && t.lo >= lo && hi <= top {
			copy(ext.v[t.lo-lo:], t.v)
		}
		c.entries += len(ext.v) - len(t.v)
		t = ext
		c.tables[k] = t
	}
	for m := m0; m <= m1; m++ {
		// logBinomPMF never returns NaN for a valid p; were it to, the
		// entry would only be computed again.
		if i := m - t.lo; t.v[i] != t.v[i] {
			t.v[i] = logBinomPMF(m, n, p)
		}
	}
	// Evict the oldest other tables past the limits.
	for len(c.order) > 1 && (len(c.order) > maxPMFTables || c.entries > pmfCacheMax) {
		old := c.order[0]
		c.order = c.order[1:]
		if old == k {
			c.order = append(c.order, k)
			continue
		}
		c.entries -= len(c.tables[old].v)
		delete(c.tables, old)
	}
	return pmfWindow{lo: m0, v: t.v[m0-t.lo : m1+1-t.lo : m1+1-t.lo]}
}

const (
	// pmfCacheMax bounds the entries of one table of logBinomPMFs (16 MB)
	// and, but for the table in use, of all the tables kept; maxPMFTables
	// the tables kept. A calibration's searches ask for the tables of many
	// (n, p) in turn (the compound path's k draws, each set's blanket
	// mass), most of a few thousand entries: four tables were evicted
	// and recomputed over and over (8% of a horizon calibration).
	pmfCacheMax  = 1 << 21
	maxPMFTables = 256
)

// pmfKey identifies a binomial law: n and the bits of p.
type pmfKey struct {
	n int
	p uint64
}

// pmfCache holds logBinomPMFs' tables, oldest first in order.
var pmfCache struct {
	sync.Mutex
	tables  map[pmfKey]pmfWindow
	order   []pmfKey
	entries int
}

// forgetSparseTables drops the tables of logFactorials, logBinomPMFs and
// binomWindowPMF (ForgetMemo).
func forgetSparseTables() {
	lfCache.Lock()
	lfCache.lf, lfCache.sum = nil, kahan{}
	lfCache.Unlock()
	pmfCache.Lock()
	pmfCache.tables, pmfCache.order, pmfCache.entries = nil, nil, 0
	pmfCache.Unlock()
	binomWindowCache.Lock()
	binomWindowCache.tables, binomWindowCache.order = nil, nil
	binomWindowCache.Unlock()
}
