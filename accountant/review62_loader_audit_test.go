//go:build audit

package accountant

import (
	"math"
	"math/rand/v2"
	"sort"
	"testing"
)

// TestReview62LoaderAudit is the wide grid of review 62 (go test -tags
// audit -run TestReview62LoaderAudit ./accountant/): random laws over
// n in [2, 1e10] and p in [1e-12, 1 - 1e-12], each with the default
// grid's m (r62Ms) and random m across the band log P >= -746, plus two
// targeted families: n in [3e9, 1e10] with p in [0.02, 0.98] at the
// band's edges (the largest |m - n p|, where the rounding of n p, n q and
// q counts most), and n p in [1e3, 6e4] at bd0's series/direct switch
// (the largest x on the direct branch). Asserts r62Bound pointwise and
// r62Limit per n.
func TestReview62LoaderAudit(t *testing.T) {
	r62Init()
	rng := rand.New(rand.NewPCG(62, 2026))
	type law = r62Job
	var laws []law
	randP := func() float64 {
		switch rng.IntN(3) {
		case 0:
			return math.Pow(10, -12+12*rng.Float64())
		case 1:
			return 1 - math.Pow(10, -12+11.7*rng.Float64())
		}
		return rng.Float64()
	}
	withBand := func(n int64, p float64, ms []int64, k int, edge bool) law {
		if first, last, ok := r62Band(n, p); ok {
			for range k {
				if edge {
					w := max(1, (last-first)/50)
					ms = append(ms, last-rng.Int64N(w), first+rng.Int64N(w))
				} else {
					ms = append(ms, first+rng.Int64N(last-first+1))
				}
			}
		}
		return law{n, p, ms}
	}
	for range 500 {
		n := int64(math.Round(math.Pow(10, 0.3+9.7*rng.Float64())))
		p := randP()
		laws = append(laws, withBand(n, p, r62Ms(n, p, 300), 60, false))
	}
	for range 150 {
		n := int64(3e9 + 7e9*rng.Float64())
		p := 0.02 + 0.96*rng.Float64()
		laws = append(laws, withBand(n, p, nil, 40, true))
	}
	for range 150 {
		mean := 1e3 * math.Pow(60, rng.Float64())
		lo := math.Log10(3 * mean)
		n := int64(math.Round(math.Pow(10, lo+(10-lo)*rng.Float64())))
		p := mean / float64(n)
		if rng.IntN(2) == 0 {
			p = 1 - p
		}
		var ms []int64
		for _, x := range []float64{mean * 11 / 9, mean * 9 / 11} {
			for d := -3.0; d <= 3; d++ {
				m := int64(math.Floor(x + d))
				if p > 0.5 {
					m = n - m
				}
				if m >= 0 && m <= n {
					ms = append(ms, m)
				}
			}
		}
		laws = append(laws, withBand(n, p, ms, 10, false))
	}
	pts := r62MeasureAll(laws, logBinomPMF)
	r62Report(t, pts, r62Bound, true)
	// Worst by decade of n and by the ratio |error| / (u |m - n p|).
	worstDec := map[int]r62Point{}
	worstRatio := r62Point{}
	ratio := func(pt r62Point) float64 {
		return math.Abs(pt.err) / (0x1p-53 * math.Max(1, math.Abs(float64(pt.m)-float64(pt.n)*pt.p)))
	}
	for _, pt := range pts {
		d := int(math.Floor(math.Log10(float64(pt.n))))
		if math.Abs(pt.err) >= math.Abs(worstDec[d].err) {
			worstDec[d] = pt
		}
		if math.Abs(float64(pt.m)-float64(pt.n)*pt.p) > 1e5 && ratio(pt) > ratio(worstRatio) {
			worstRatio = pt
		}
		if !(math.Abs(pt.err) <= r62Limit(pt.n)) {
			t.Errorf("n=%d p=%g m=%d: error %.3g over %.3g", pt.n, pt.p, pt.m, pt.err, r62Limit(pt.n))
		}
	}
	for d := 0; d <= 10; d++ {
		if pt, ok := worstDec[d]; ok {
			t.Logf("n in [1e%d, 1e%d): worst %.3g at n=%d p=%g m=%d z=%+.1f logP=%.1f", d, d+1, pt.err, pt.n, pt.p, pt.m, pt.z, pt.logP)
		}
	}
	t.Logf("largest |error| / (u |m - n p|) with |m - n p| > 1e5: %.2f at n=%d p=%g m=%d", ratio(worstRatio), worstRatio.n, worstRatio.p, worstRatio.m)
}

// TestReview62LoaderAdversarial picks, for n near 1e10, the p in [0.3, 0.7]
// whose roundings of n p, q = 1 - p and n q add up most (their relative
// errors e_np - e_nq, which multiply m - n p in the error of log P), and
// measures logBinomPMF at the edges of the band log P >= -746 there: the
// largest error the input rounding can reach at that n.
func TestReview62LoaderAdversarial(t *testing.T) {
	r62Init()
	rng := rand.New(rand.NewPCG(62, 33))
	var worst r62Point
	for _, n := range []int64{1e10, 1 << 33, 9999999967, 1e9, 1e8} {
		type cand struct {
			p, b float64
		}
		var cs []cand
		nb := r62I(n)
		for range 20000 {
			p := 0.3 + 0.4*rng.Float64()
			nf := float64(n)
			npE := r62New().Mul(nb, r62F(p))
			nqE := r62New().Mul(nb, r62New().Sub(r62I(1), r62F(p)))
			e1 := r62New().Quo(r62New().Sub(r62F(nf*p), npE), npE)
			e2 := r62New().Quo(r62New().Sub(r62F(nf*(1-p)), nqE), nqE)
			b, _ := e1.Sub(e1, e2).Float64()
			cs = append(cs, cand{p, math.Abs(b)})
		}
		sort.Slice(cs, func(i, j int) bool { return cs[i].b > cs[j].b })
		for _, c := range cs[:3] {
			first, last, ok := r62Band(n, c.p)
			if !ok {
				continue
			}
			pts := r62MeasureF(n, c.p, []int64{first, first + 1, last - 1, last}, logBinomPMF)
			for _, pt := range pts {
				if b := r62Bound(pt); !(math.Abs(pt.err) <= b) {
					t.Errorf("n=%d p=%g m=%d: error %.3g over the bound %.3g", pt.n, pt.p, pt.m, pt.err, b)
				}
				if math.Abs(pt.err) > math.Abs(worst.err) {
					worst = pt
				}
			}
			t.Logf("n=%d p=%.17g: |e_np - e_nq| = %.2f u; errors at the band edges %.3g %.3g (|m - n p| = %.3g)",
				n, c.p, c.b/0x1p-53, pts[0].err, pts[len(pts)-1].err, math.Abs(float64(pts[0].m)-float64(n)*c.p))
		}
	}
	t.Logf("worst %.3g at n=%d p=%.17g m=%d (z=%+.2f, log P=%.2f); limit at n=1e10 %.3g", worst.err, worst.n, worst.p, worst.m, worst.z, worst.logP, r62Limit(1e10))
	if !(math.Abs(worst.err) <= r62Limit(1e10)) {
		t.Errorf("worst %.3g over r62Limit", worst.err)
	}
}
