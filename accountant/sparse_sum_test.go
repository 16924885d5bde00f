package accountant

import (
	"math"
	"math/big"
	"math/rand/v2"
	"testing"
)

// TestDDAddProdBound checks dd sums of integer multiples against exact
// big.Float arithmetic: after k steps from an exact start the error is
// within sparse_sum.go's 8 (k + 1) u^2 times the magnitudes, and a plain
// float64 sum of the same terms is often far outside it.
func TestDDAddProdBound(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 9))
	worse := 0
	for i := range 2000 {
		n := float64(r.Int64N(1e10) + 1)
		z0 := -(0.01 + 10*r.Float64())
		x := dd{}.addProd(n, z0)
		plain := n * z0
		exact := new(big.Float).SetPrec(2000).Mul(big.NewFloat(n), big.NewFloat(z0))
		mag := math.Abs(n * z0)
		k := 1 + r.IntN(6)
		for range k {
			c := float64(r.Int64N(int64(n)/int64(k) + 1))
			z := 20*r.Float64() - 5
			x = x.addProd(c, z)
			plain += c * z
			exact.Add(exact, new(big.Float).SetPrec(2000).Mul(big.NewFloat(c), big.NewFloat(z)))
			mag += math.Abs(c * z)
		}
		bound := 8 * float64(k+1) * ulp * ulp * mag
		diff := new(big.Float).Sub(exact, new(big.Float).SetPrec(2000).Add(big.NewFloat(x.hi), big.NewFloat(x.lo)))
		d, _ := diff.Float64()
		if math.Abs(d) > bound {
			t.Fatalf("case %d: dd error %g above the bound %g", i, d, bound)
		}
		pd, _ := new(big.Float).Sub(exact, big.NewFloat(plain)).Float64()
		if math.Abs(pd) > bound {
			worse++
		}
	}
	if worse < 1000 {
		t.Fatalf("a plain sum was outside the dd bound in only %d of 2000 cases: the test does not exercise cancellation", worse)
	}
}

// TestBandSumNearZero: a leaf whose true sum is 1e-7 at a base of -1e9
// (a plain float64 sum is off by about 1e-7 there) is counted, inside both
// sums' band, and one whose true sum is exactly 0 adds nothing to the lower
// sum and at most its eps to the upper.
func TestBandSumNearZero(t *testing.T) {
	b := bandSum{eps: 1e-20}
	// 1e9 * (-0.1) + 1e9 * 0.1000000000000001 ... built from exact pieces:
	// base = -(2^30) * 0.75, then + 2^30 * 0.75 + 2^-24.
	base := dd{}.addProd(1<<30, -0.75)
	s := base.addProd(1<<30, 0.75).addProd(1, 0x1p-24)
	if !b.counts(s.val()) {
		t.Fatal("a leaf of sum 2^-24 is not counted")
	}
	b.leaf(1, s.val())
	if want := 0x1p-24; b.lo.sum > want || b.hi.sum < want || b.hi.sum-b.lo.sum > 3e-20 {
		t.Fatalf("band [%g, %g] around the true %g", b.lo.sum, b.hi.sum, want)
	}
	z := base.addProd(1<<30, 0.75)
	var c bandSum
	c.eps = 1e-20
	if x := z.val(); c.counts(x) {
		c.leaf(1, x)
	}
	if c.lo.sum != 0 || c.hi.sum > 1e-20 {
		t.Fatalf("a leaf of sum 0: band [%g, %g], want [0, <= 1e-20]", c.lo.sum, c.hi.sum)
	}
}

// TestSparseExactOneOtherAtom checks sparseExact on two atoms (a dominant
// one and one other: the sum over m alone) against a second derivation:
// the binomial masses by ratios walked from the mode and normalised by
// their sum (relative error below 4u a step: 5e-12 within 10,000 steps of
// the mode, where the mass is) and the sums exactly in big.Float, at n up
// to 3 10^8 (m up to about 3 10^6, where the exponents of the masses reach
// 4 10^7).
func TestSparseExactOneOtherAtom(t *testing.T) {
	for _, tc := range []struct {
		n      int
		w1     float64
		z0, z1 float64
	}{
		{1000, 0.01, -0.5, 80},
		{200_000, 0.001, -0.02, 30},
		{10_000_000, 0.01, -0.9, 95},
		// m about 10^6 and 2.85 10^6: the bracket stayed within 1e-7 only
		// once the single atom's exponent dropped its log m! - log m!
		// (review of 8370e34: 7.4e-8 and 2.2e-7 before).
		{100_000_000, 0.01, -0.9, 95},
		{300_000_000, 0.0095, -0.9, 95},
	} {
		p := prepared{z: []float64{tc.z0, tc.z1}, w: []float64{1 - tc.w1, tc.w1}}
		p.maxZ = tc.z1
		got, ok := sparseExact(p, tc.n)
		if !ok {
			t.Fatalf("%+v: the sparse path declined", tc)
		}
		want := oneAtomReference(tc.n, tc.w1, tc.z0, tc.z1)
		if got.lo > want*(1+2e-11) || got.hi < want*(1-2e-11) {
			t.Errorf("%+v: bracket [%.15g, %.15g] misses the reference %.15g", tc, got.lo, got.hi, want)
		}
		if (got.hi-got.lo)/want > 1e-7 {
			t.Errorf("%+v: bracket [%.15g, %.15g] wider than 1e-7 relative", tc, got.lo, got.hi)
		}
	}
}

// oneAtomReference is (1/n) sum_m P(M = m) ((n-m) z0 + m z1)_+ with M ~
// Binomial(n, w1): the masses relative to the mode's by the ratios of
// consecutive ones, normalised by their own sum (the walk stops where they
// fall below 1e-300 of the mode's), the sums exact in big.Float.
func oneAtomReference(n int, w1, z0, z1 float64) float64 {
	nf := float64(n)
	mode := int(math.Floor((nf + 1) * w1))
	pos := func(m int) float64 {
		s := new(big.Float).SetPrec(200).Mul(big.NewFloat(float64(n-m)), big.NewFloat(z0))
		s.Add(s, new(big.Float).SetPrec(200).Mul(big.NewFloat(float64(m)), big.NewFloat(z1)))
		v, _ := s.Float64()
		return math.Max(v, 0)
	}
	ratio := w1 / (1 - w1)
	var mass, total kahan
	mass.add(1)
	total.add(pos(mode))
	pm := 1.0
	for m := mode; m < n && pm > 1e-300; m++ {
		pm *= ratio * float64(n-m) / float64(m+1)
		mass.add(pm)
		total.add(pm * pos(m+1))
	}
	pm = 1
	for m := mode; m > 0 && pm > 1e-300; m-- {
		pm *= float64(m) / (ratio * float64(n-m+1))
		mass.add(pm)
		total.add(pm * pos(m-1))
	}
	return total.sum / mass.sum / nf
}

// TestLogFactorialsSharedTable checks that the shared, grown table of
// logFactorials gives, for requests of any size in any order, the same bits
// as a table computed afresh by the running compensated sum (the table's
// prefix property), and stays within its stated 6u log k! of Lgamma's
// value at a few sizes (tolerance: 6u log k! plus Lgamma's own few ulps).
func TestLogFactorialsSharedTable(t *testing.T) {
	fresh := func(m int) []float64 {
		lf := make([]float64, m+1)
		var sum kahan
		for i := 2; i <= m; i++ {
			sum.add(math.Log(float64(i)))
			lf[i] = sum.sum
		}
		return lf
	}
	want := fresh(300_000)
	for _, m := range []int{0, 1, 2, 7, 100, 5000, 3, 70_000, 300_000, 12, 150_000} {
		got := logFactorials(m)
		if len(got) != m+1 {
			t.Fatalf("logFactorials(%d) has %d entries", m, len(got))
		}
		for k := range got {
			if got[k] != want[k] {
				t.Fatalf("logFactorials(%d)[%d] = %v, afresh %v", m, k, got[k], want[k])
			}
		}
	}
	// Requests of random sizes, the tables dropped now and then
	// (ForgetMemo), as a long-lived process sees them.
	r := rand.New(rand.NewPCG(28, 5))
	for range 200 {
		m := r.IntN(300_000)
		if r.IntN(20) == 0 {
			ForgetMemo()
		}
		got := logFactorials(m)
		for k := range got {
			if math.Float64bits(got[k]) != math.Float64bits(want[k]) {
				t.Fatalf("logFactorials(%d)[%d] = %v, afresh %v", m, k, got[k], want[k])
			}
		}
	}
	for _, k := range []int{10, 1000, 299_999} {
		lg, _ := math.Lgamma(float64(k) + 1)
		if d := math.Abs(want[k] - lg); d > (6+4)*ulp*lg {
			t.Errorf("log %d! = %v, Lgamma %v: off by %g", k, want[k], lg, d)
		}
	}
}

// TestBinomSmallK checks binom's exact cases (k or n - k at most 1, which
// the sparse path's term count uses), and the log-gamma formula used
// otherwise where it is exact. Over every count the sparse path can ask
// for, binom(m + a - 1, a - 1) with at most 4 sparseMaxTerms terms (m up
// to about 4,900 for a = 2; m <= 2 once a > 3), binom also equals the
// log-gamma formula it used for every k before the exact cases, so those
// did not change a term count. (The formula's rounding first departs
// from n at binom(8,945,579, 1), far above those counts.)
func TestBinomSmallK(t *testing.T) {
	logGamma := func(n, k int) float64 {
		lg := func(x int) float64 { v, _ := math.Lgamma(float64(x) + 1); return v }
		return math.Round(math.Exp(lg(n) - lg(k) - lg(n-k)))
	}
	for a := 1; a <= 4000; a++ {
		for m := 0; m <= 6000; m++ {
			if a > 3 && m > 2 {
				break
			}
			if want, got := logGamma(m+a-1, a-1), binom(m+a-1, a-1); got != want {
				t.Errorf("binom(%d, %d) = %v, the log-gamma formula %v", m+a-1, a-1, got, want)
			}
		}
	}
	for _, n := range []int{0, 1, 2, 3, 10, 1000, 123_457, 1 << 40} {
		if got := binom(n, 0); got != 1 {
			t.Errorf("binom(%d, 0) = %v", n, got)
		}
		if got := binom(n, n); got != 1 {
			t.Errorf("binom(%d, %d) = %v", n, n, got)
		}
		if n >= 1 {
			if got := binom(n, 1); got != float64(n) {
				t.Errorf("binom(%d, 1) = %v", n, got)
			}
			if got := binom(n, n-1); got != float64(n) {
				t.Errorf("binom(%d, %d) = %v", n, n-1, got)
			}
		}
	}
	if got := binom(10, 3); got != 120 {
		t.Errorf("binom(10, 3) = %v, want 120", got)
	}
	if got := binom(20, 10); got != 184756 {
		t.Errorf("binom(20, 10) = %v, want 184756", got)
	}
}

// TestLogBinomPMFsSameAsCalls checks that the shared tables of
// logBinomPMFs give, for requests of any length in any order and for more
// laws than the cache keeps, the same bits as logBinomPMF called afresh.
func TestLogBinomPMFsSameAsCalls(t *testing.T) {
	laws := []struct {
		n int
		p float64
	}{{1_000_000, 0.0045}, {10_000_000, 0.0012}, {500, 0.3}, {100_000_000, 1e-4}, {40, 0.9}, {1_000_000, 0.0045000000000000005}}
	for round := range 3 {
		for i, law := range laws {
			m1 := []int{10, 3000, 60_000}[(i+round)%3]
			m1 = min(m1, law.n)
			got := logBinomPMFs(law.n, law.p, m1)
			if len(got) != m1+1 {
				t.Fatalf("logBinomPMFs(%d, %v, %d) has %d entries", law.n, law.p, m1, len(got))
			}
			for m, v := range got {
				if w := logBinomPMF(m, law.n, law.p); v != w && !(math.IsInf(v, -1) && math.IsInf(w, -1)) {
					t.Fatalf("logBinomPMFs(%d, %v)[%d] = %v, logBinomPMF %v", law.n, law.p, m, v, w)
				}
			}
		}
	}
}

// TestLogBinomPMFsFromSameAsCalls: logBinomPMFsFrom's entries in the range
// asked are logBinomPMF's bits, whatever ranges were asked before (the
// entries below it left uncomputed), and a later logBinomPMFs of the same
// law fills every entry with the same bits.
func TestLogBinomPMFsFromSameAsCalls(t *testing.T) {
	rng := rand.New(rand.NewPCG(65, 3))
	laws := []struct {
		n int
		p float64
	}{{2_000_000, 0.0031}, {300, 0.45}, {50_000_000, 2e-5}}
	same := func(v, w float64) bool { return math.Float64bits(v) == math.Float64bits(w) }
	for range 40 {
		law := laws[rng.IntN(len(laws))]
		m1 := min(law.n, rng.IntN(40_000))
		m0 := rng.IntN(m1 + 1)
		got := logBinomPMFsFrom(law.n, law.p, m0, m1)
		if got.lo != m0 || len(got.v) != m1-m0+1 {
			t.Fatalf("window [%d, %d), want [%d, %d]", got.lo, got.lo+len(got.v), m0, m1)
		}
		for m := m0; m <= m1; m++ {
			if w := logBinomPMF(m, law.n, law.p); !same(got.at(m), w) {
				t.Fatalf("logBinomPMFsFrom(%d, %v, %d, %d)[%d] = %v, logBinomPMF %v", law.n, law.p, m0, m1, m, got.at(m), w)
			}
		}
	}
	for _, law := range laws {
		m1 := min(law.n, 40_000)
		for m, v := range logBinomPMFs(law.n, law.p, m1) {
			if w := logBinomPMF(m, law.n, law.p); !same(v, w) {
				t.Fatalf("logBinomPMFs(%d, %v)[%d] = %v after partial requests, logBinomPMF %v", law.n, law.p, m, v, w)
			}
		}
	}
}

// TestLogBinomPMFsFromWindows: one law's table takes in requests below,
// above and far from what it holds (past pmfCacheMax from its start, so
// that it starts afresh), and every entry asked is logBinomPMF's bits,
// before and after.
func TestLogBinomPMFsFromWindows(t *testing.T) {
	n, p := 3_000_000_000, 0.0017
	same := func(v, w float64) bool { return math.Float64bits(v) == math.Float64bits(w) }
	for i, r := range [][2]int{
		{500_000, 500_100}, {499_000, 499_999}, {499_500, 502_000}, {502_001, 502_001},
		{500_000 + pmfCacheMax, 500_050 + pmfCacheMax}, {499_990, 500_010}, {0, 20}, {3, 3},
	} {
		m0, m1 := r[0], r[1]
		got := logBinomPMFsFrom(n, p, m0, m1)
		if got.lo != m0 || len(got.v) != m1-m0+1 {
			t.Fatalf("request %d: window [%d, %d), want [%d, %d]", i, got.lo, got.lo+len(got.v), m0, m1)
		}
		for m := m0; m <= m1; m++ {
			if w := logBinomPMF(m, n, p); !same(got.at(m), w) {
				t.Fatalf("request %d [%d, %d]: entry %d = %v, logBinomPMF %v", i, m0, m1, m, got.at(m), w)
			}
		}
	}
	pmfCache.Lock()
	defer pmfCache.Unlock()
	var sum int
	for _, tab := range pmfCache.tables {
		if len(tab.v) > pmfCacheMax {
			t.Errorf("a table of %d entries, past pmfCacheMax", len(tab.v))
		}
		sum += len(tab.v)
	}
	if sum != pmfCache.entries {
		t.Errorf("the tables hold %d entries, the count says %d", sum, pmfCache.entries)
	}
}
