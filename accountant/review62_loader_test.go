package accountant

// Review 62: the error of logBinomPMF (Loader's saddle point, binom.go)
// against an independent high-precision reference, for the premise of
// sparseRel = 1e-9 (sparse.go): |exp(logBinomPMF) / P(M = m) - 1| must be
// far below 1e-9 wherever the sparse path reads a probability (computed
// log P >= -746).
//
// Reference (nothing from binom.go): math/big.Float at r62Prec bits; ln by
// range reduction to [1/sqrt2, sqrt2) times a power of two and the atanh
// series; log k! exactly from the big.Int factorial below 1000 and by
// Stirling's series with Bernoulli numbers (big.Rat) from 1000 on; pi the
// float64 input taken as exact, 1 - pi formed exactly in big.Float.
//
// Finding (see the tests' logs), first against binom.go as it was: the
// error was dominated by the rounding of Loader's inputs n*p, n*q and
// q = 1 - p (the bd0 arguments), which moved log P by (m - n p)(e_np -
// e_nq), e_np and e_nq the relative errors of the rounded n p and n q
// (|e_np - e_nq| reached 2.2u, u = 2^-53, at most ~3u); at log P >= -746,
// |m - n p| <= ~38.3 sd. Measured worst: 4.2e-10 at n = 1e10 (adversarial
// p near 0.49, band edge), 1.4e-10 at n = 1e9, 4.4e-11 at n = 1e8, <= 7e-12
// for n <= 1e6: within sparseRel, by 2.4x only at n = 1e10. binom.go now
// takes d = x - n p from one FMA and uses it for both bd0 terms, which
// removes that part: worst about 5e-12 on the audit grid. What is left is
// bd0's direct branch (x log(x/np) - d), ~1.5u x with x <= ~5e4 there:
// <= 7e-12; stirlerr, bd0's series, the 0.5 log term and the sum: <= ~3e-13.

import (
	"fmt"
	"math"
	"math/big"
	"sort"
	"strings"
	"sync"
	"testing"
)

const r62Prec = 320

var r62Once sync.Once
var r62Ln2, r62Pi, r62HalfLn2Pi *big.Float
var r62Bern []*big.Rat // B_0 .. B_2K

func r62F(x float64) *big.Float { return new(big.Float).SetPrec(r62Prec).SetFloat64(x) }
func r62I(x int64) *big.Float   { return new(big.Float).SetPrec(r62Prec).SetInt64(x) }
func r62New() *big.Float        { return new(big.Float).SetPrec(r62Prec) }

// r62Atanh is sum_k t^(2k+1)/(2k+1) for |t| <= ~0.2 (or 1/3 for ln 2).
func r62Atanh(t *big.Float) *big.Float { return r62OddSeries(t, false) }

// r62Atan is sum_k (-1)^k t^(2k+1)/(2k+1) for small t (Machin).
func r62Atan(t *big.Float) *big.Float { return r62OddSeries(t, true) }

// r62OddSeries is sum_k s^k t^(2k+1)/(2k+1), s = -1 when alternate, else 1,
// to below 2^-(r62Prec+20) per term.
func r62OddSeries(t *big.Float, alternate bool) *big.Float {
	sum := r62New().Set(t)
	t2 := r62New().Mul(t, t)
	pow := r62New().Set(t)
	eps := new(big.Float).SetMantExp(big.NewFloat(1), -(r62Prec + 20))
	for k := int64(1); ; k++ {
		pow.Mul(pow, t2)
		if alternate {
			pow.Neg(pow)
		}
		term := r62New().Quo(pow, r62I(2*k+1))
		sum.Add(sum, term)
		if new(big.Float).Abs(term).Cmp(eps) < 0 {
			return sum
		}
	}
}

func r62Init() {
	r62Once.Do(func() {
		third := r62New().Quo(r62I(1), r62I(3))
		r62Ln2 = r62New().Mul(r62I(2), r62Atanh(third))
		// pi = 16 atan(1/5) - 4 atan(1/239).
		a := r62New().Mul(r62I(16), r62Atan(r62New().Quo(r62I(1), r62I(5))))
		b := r62New().Mul(r62I(4), r62Atan(r62New().Quo(r62I(1), r62I(239))))
		r62Pi = r62New().Sub(a, b)
		r62HalfLn2Pi = r62New().Mul(r62F(0.5), r62Ln(r62New().Mul(r62I(2), r62Pi)))
		// Bernoulli numbers: sum_{k=0}^{m} C(m+1, k) B_k = 0.
		const M = 2 * r62StirTerms
		r62Bern = make([]*big.Rat, M+1)
		r62Bern[0] = big.NewRat(1, 1)
		for m := 1; m <= M; m++ {
			s := new(big.Rat)
			for k := 0; k < m; k++ {
				c := new(big.Int).Binomial(int64(m+1), int64(k))
				s.Add(s, new(big.Rat).Mul(new(big.Rat).SetInt(c), r62Bern[k]))
			}
			r62Bern[m] = s.Neg(s.Quo(s, big.NewRat(int64(m+1), 1)))
		}
	})
}

// r62Ln is the natural log of x > 0 to ~r62Prec bits.
func r62Ln(x *big.Float) *big.Float {
	if x.Sign() <= 0 {
		panic("r62Ln of a non-positive number")
	}
	f := r62New()
	e := x.MantExp(f) // x = f 2^e, f in [0.5, 1)
	if f.Cmp(big.NewFloat(0.7071067811865476)) < 0 {
		f.SetMantExp(f, 1)
		e--
	}
	one := r62I(1)
	t := r62New().Quo(r62New().Sub(f, one), r62New().Add(f, one))
	lf := r62New().Mul(r62I(2), r62Atanh(t))
	if e == 0 {
		return lf
	}
	return lf.Add(lf, r62New().Mul(r62I(int64(e)), r62Ln2))
}

const r62StirTerms = 20

var r62LnFactCache sync.Map // int64 -> *big.Float

// r62LnFact is log k! : exact factorial below 1000, Stirling's series above.
func r62LnFact(k int64) *big.Float {
	if v, ok := r62LnFactCache.Load(k); ok {
		return v.(*big.Float)
	}
	var r *big.Float
	if k < 1000 {
		r = r62LnFactExact(k)
	} else {
		r = r62LnFactStirling(k)
	}
	r62LnFactCache.Store(k, r)
	return r
}

func r62LnFactExact(k int64) *big.Float {
	if k <= 1 {
		return r62New()
	}
	f := new(big.Int).MulRange(1, k)
	return r62Ln(r62New().SetInt(f))
}

func r62LnFactStirling(k int64) *big.Float {
	r62Init()
	z := r62I(k)
	lz := r62Ln(z)
	s := r62New().Mul(r62New().Add(z, r62F(0.5)), lz)
	s.Sub(s, z)
	s.Add(s, r62HalfLn2Pi)
	zpow := r62New().Set(z) // z^(2j-1)
	z2 := r62New().Mul(z, z)
	for j := 1; j <= r62StirTerms; j++ {
		b := r62New().SetRat(r62Bern[2*j])
		den := r62New().Mul(r62I(int64(2*j*(2*j-1))), zpow)
		s.Add(s, b.Quo(b, den))
		zpow.Mul(zpow, z2)
	}
	return s
}

// r62Law caches log p and log(1 - p) for the float64 p taken as exact.
type r62Law struct {
	n      int64
	p      *big.Float
	lp, lq *big.Float
	lnN    *big.Float
}

func r62NewLaw(n int64, p float64) *r62Law {
	r62Init()
	bp := r62F(p)
	bq := r62New().Sub(r62I(1), bp) // exact at r62Prec bits
	return &r62Law{n: n, p: bp, lp: r62Ln(bp), lq: r62Ln(bq), lnN: r62LnFact(n)}
}

// logPMF is log P(Binomial(n, p) = m), p exact.
func (l *r62Law) logPMF(m int64) *big.Float {
	s := r62New().Set(l.lnN)
	s.Sub(s, r62LnFact(m))
	s.Sub(s, r62LnFact(l.n-m))
	if m > 0 {
		s.Add(s, r62New().Mul(r62I(m), l.lp))
	}
	if l.n-m > 0 {
		s.Add(s, r62New().Mul(r62I(l.n-m), l.lq))
	}
	return s
}

// r62Err is got - ref, formed in big.Float, as a float64.
func r62Err(got float64, ref *big.Float) float64 {
	d, _ := r62New().Sub(r62F(got), ref).Float64()
	return d
}

// r62Parts splits logBinomPMF's error at (m, n, p) into its stirlerr part,
// its bd0 parts (each into the part from the rounded argument n p or n q,
// with q = 1 - p rounded, and the part from evaluating bd0 at the rounded
// argument) and the 0.5 log term's part.
type r62Split struct {
	stir, bd0In, bd0Ev, half float64
}

func r62ExactStirlerr(k int64) *big.Float {
	z := r62I(k)
	s := r62New().Set(r62LnFact(k))
	s.Sub(s, r62New().Mul(r62New().Add(z, r62F(0.5)), r62Ln(z)))
	s.Add(s, z)
	return s.Sub(s, r62HalfLn2Pi)
}

// r62ExactBd0 is x log(x/np) + np - x for exact big arguments.
func r62ExactBd0(x, np *big.Float) *big.Float {
	if x.Sign() == 0 {
		return r62New().Set(np)
	}
	s := r62New().Mul(x, r62Ln(r62New().Quo(x, np)))
	s.Add(s, np)
	return s.Sub(s, x)
}

func r62Parts(m, n int64, p float64) r62Split {
	var sp r62Split
	nf, xf := float64(n), float64(m)
	q := 1 - p
	es := r62New().Sub(r62F(stirlerr(nf)), r62ExactStirlerr(n))
	es.Sub(es, r62New().Sub(r62F(stirlerr(xf)), r62ExactStirlerr(m)))
	es.Sub(es, r62New().Sub(r62F(stirlerr(nf-xf)), r62ExactStirlerr(n-m)))
	sp.stir, _ = es.Float64()
	bp := r62F(p)
	npExact := r62New().Mul(r62I(n), bp)
	nqExact := r62New().Mul(r62I(n), r62New().Sub(r62I(1), bp))
	// binom.go passes bd0 the difference d = x - n p from one FMA (and -d
	// for n - x against n q): the whole error of each bd0 term is now its
	// evaluation's (bd0In stays 0; it held the rounding of n p and n q,
	// which the code no longer subtracts).
	d := math.FMA(-nf, p, xf)
	in := func(x int64, argRounded, dx float64, argExact *big.Float) (float64, float64) {
		atE := r62ExactBd0(r62I(x), argExact)
		dEv, _ := r62New().Sub(atE, r62F(bd0(float64(x), argRounded, dx))).Float64()
		return 0, dEv
	}
	i1, e1 := in(m, nf*p, d, npExact)
	i2, e2 := in(n-m, nf*q, -d, nqExact)
	sp.bd0In, sp.bd0Ev = i1+i2, e1+e2
	// 0.5 log(n / (2 pi x (n - x))).
	den := r62New().Mul(r62New().Mul(r62I(2), r62Pi), r62New().Mul(r62I(m), r62I(n-m)))
	h := r62New().Mul(r62F(0.5), r62Ln(r62New().Quo(r62I(n), den)))
	sp.half, _ = r62New().Sub(r62F(0.5*math.Log(nf/(2*math.Pi*xf*(nf-xf)))), h).Float64()
	return sp
}

// TestReview62Reference checks the reference on known values.
func TestReview62Reference(t *testing.T) {
	r62Init()
	near := func(name string, got *big.Float, want string, tol float64) {
		t.Helper()
		w, _, err := big.ParseFloat(want, 10, r62Prec, big.ToNearestEven)
		if err != nil {
			t.Fatal(err)
		}
		d, _ := r62New().Sub(got, w).Float64()
		if !(math.Abs(d) <= tol) {
			t.Errorf("%s: off by %g", name, d)
		}
	}
	near("ln 2", r62Ln2, "0.69314718055994530941723212145817656807550013436025525412068", 1e-58)
	near("ln 2 via r62Ln", r62Ln(r62I(2)), "0.69314718055994530941723212145817656807550013436025525412068", 1e-58)
	near("pi", r62Pi, "3.14159265358979323846264338327950288419716939937510582097494459", 1e-60)
	near("ln 10", r62Ln(r62I(10)), "2.30258509299404568401799145468436420760110148862877297603332790", 1e-60)
	near("ln 3", r62Ln(r62I(3)), "1.09861228866810969139524523692252570464749055782274945173469433", 1e-60)
	near("ln 1e-12", r62Ln(r62F(1e-12)), "-27.6310211159285482080", 1e-16) // float64 1e-12 is within 1e-28 of 1e-12
	near("ln 120 = ln 5!", r62LnFact(5), "4.78749174278204599424770093452324304839959231517203", 1e-48)
	// Bernoulli numbers.
	for _, c := range []struct {
		k    int
		a, b int64
	}{{2, 1, 6}, {4, -1, 30}, {6, 1, 42}, {12, -691, 2730}, {20, -174611, 330}, {3, 0, 1}} {
		if r62Bern[c.k].Cmp(big.NewRat(c.a, c.b)) != 0 {
			t.Errorf("B_%d = %v, want %d/%d", c.k, r62Bern[c.k], c.a, c.b)
		}
	}
	// log k! against math.Lgamma for small k (float64 accuracy).
	for k := int64(0); k < 200; k++ {
		lg, _ := math.Lgamma(float64(k) + 1)
		d, _ := r62New().Sub(r62LnFact(k), r62F(lg)).Float64()
		if math.Abs(d) > 4e-16*math.Max(1, lg) {
			t.Errorf("lnfact(%d) - Lgamma = %g", k, d)
		}
	}
	// Stirling's series against the exact factorial and against direct
	// summation of ln j, around and above the switch at 1000.
	for _, k := range []int64{1000, 1001, 1500, 3000} {
		st := r62LnFactStirling(k)
		ex := r62LnFactExact(k)
		sum := r62New()
		for j := int64(2); j <= k; j++ {
			sum.Add(sum, r62Ln(r62I(j)))
		}
		d1, _ := r62New().Sub(st, ex).Float64()
		d2, _ := r62New().Sub(st, sum).Float64()
		if math.Abs(d1) > 1e-70 || math.Abs(d2) > 1e-70 {
			t.Errorf("lnfact(%d): Stirling - exact %g, Stirling - sum %g", k, d1, d2)
		}
	}
	// A whole pmf by exact rational arithmetic: C(n, m) p^m (1-p)^(n-m)
	// with p the float64 as a big.Rat, then ln; n = 2000 takes Stirling's
	// series for log n!. Also sum_m P = 1 through the reference.
	for _, c := range []struct {
		n int64
		p float64
	}{{2000, 0.3}, {60, 1e-3}, {1200, 0.9}} {
		law := r62NewLaw(c.n, c.p)
		pr := new(big.Rat).SetFloat64(c.p)
		qr := new(big.Rat).Sub(big.NewRat(1, 1), pr)
		for _, m := range []int64{0, 1, 2, c.n / 7, c.n / 3, c.n / 2, c.n - 1, c.n} {
			v := new(big.Rat).SetInt(new(big.Int).Binomial(c.n, m))
			v.Mul(v, r62RatPow(pr, m))
			v.Mul(v, r62RatPow(qr, c.n-m))
			want := r62Ln(r62New().SetRat(v))
			d, _ := r62New().Sub(law.logPMF(m), want).Float64()
			if math.Abs(d) > 1e-60 {
				t.Errorf("n=%d p=%g m=%d: reference - exact rational %g", c.n, c.p, m, d)
			}
		}
	}
	// sum over m of exp(reference) = 1 (float64 sum of exp of the rounded reference).
	law := r62NewLaw(3000, 0.25)
	s := 0.0
	for m := int64(0); m <= 3000; m++ {
		v, _ := law.logPMF(m).Float64()
		s += math.Exp(v)
	}
	if math.Abs(s-1) > 1e-13 {
		t.Errorf("sum of reference pmf = 1 %+g", s-1)
	}
}

func r62RatPow(x *big.Rat, k int64) *big.Rat {
	r := big.NewRat(1, 1)
	b := new(big.Rat).Set(x)
	for k > 0 {
		if k&1 == 1 {
			r.Mul(r, b)
		}
		b.Mul(b, b)
		k >>= 1
	}
	return r
}

// r62Point is one measured (n, p, m).
type r62Point struct {
	n      int64
	p      float64
	m      int64
	logP   float64
	err    float64
	z      float64 // (m - n p) / sd
	region string
}

// r62Ms returns the m of the review's grid for (n, p): 0, 1, small m and
// n - small m, the stirlerr switch points (15/16, 35/36, 80/81, 500/501) of
// m and n - m, mean +- k sd for k up to 40, bd0's series/direct switch of
// both terms (|x - np| = 0.1 (x + np)), and the first and last m with
// computed log P >= -746; every m with log P >= -746 when n <= allUpTo.
func r62Ms(n int64, p float64, allUpTo int64) []int64 {
	set := map[int64]bool{}
	add := func(m int64) {
		if m >= 0 && m <= n {
			set[m] = true
		}
	}
	addF := func(x float64) {
		if x > -1 && x < float64(n)+1 {
			add(int64(math.Floor(x)))
			add(int64(math.Ceil(x)))
		}
	}
	if n <= allUpTo {
		for m := int64(0); m <= n; m++ {
			add(m)
		}
	}
	for _, s := range []int64{0, 1, 2, 3, 4, 5, 7, 10, 15, 16, 17, 20, 35, 36, 80, 81, 100, 500, 501, 1000} {
		add(s)
		add(n - s)
	}
	nf := float64(n)
	mean := nf * p
	sd := math.Sqrt(nf * p * (1 - p))
	for _, k := range []float64{0, 0.25, 0.5, 1, 2, 3, 4, 6, 8, 10, 12, 15, 20, 25, 30, 33, 35, 37, 38, 39, 40} {
		addF(mean + k*sd)
		addF(mean - k*sd)
	}
	nq := nf * (1 - p)
	for _, x := range []float64{mean * 11 / 9, mean * 9 / 11, nf - nq*11/9, nf - nq*9/11} {
		for d := -2.0; d <= 2; d++ {
			addF(x + d)
		}
	}
	// The edges of the band log P >= -746.
	if first, last, ok := r62Band(n, p); ok {
		for d := int64(-3); d <= 3; d++ {
			add(last + d)
			add(first + d)
		}
	}
	out := make([]int64, 0, len(set))
	for m := range set {
		out = append(out, m)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// r62Band returns the first and the last m with computed log P >= -746,
// by bisection on the computed values (unimodal in m) either side of the
// mode.
func r62Band(n int64, p float64) (first, last int64, ok bool) {
	nf := float64(n)
	mode := min(int64(math.Floor((nf+1)*p)), n)
	in := func(m int64) bool { return logBinomPMF(int(m), int(n), p) >= -746 }
	if !in(mode) {
		return 0, 0, false
	}
	lo, hi := mode, n // last m in [mode, n] in the band
	if in(n) {
		lo = n
	}
	for hi-lo > 1 {
		mid := lo + (hi-lo)/2
		if in(mid) {
			lo = mid
		} else {
			hi = mid
		}
	}
	last = lo
	lo, hi = 0, mode // first m in [0, mode] in the band
	if in(0) {
		hi = 0
	}
	for hi-lo > 1 {
		mid := lo + (hi-lo)/2
		if in(mid) {
			hi = mid
		} else {
			lo = mid
		}
	}
	return hi, last, true
}

// r62Region is the region of m for the report.
func r62Region(m int64, z float64) string {
	switch {
	case m <= 3:
		return "m<=3"
	case math.Abs(z) <= 1:
		return "|z|<=1"
	case math.Abs(z) <= 5:
		return "1<|z|<=5"
	case math.Abs(z) <= 15:
		return "5<|z|<=15"
	case math.Abs(z) <= 30:
		return "15<|z|<=30"
	}
	return "|z|>30"
}

// r62MeasureF measures f at every m of ms with computed log P >= -746 (the
// values the sparse path reads; which m qualify is decided by
// logBinomPMF, as the sparse path does).
func r62MeasureF(n int64, p float64, ms []int64, f func(x, n int, p float64) float64) []r62Point {
	law := r62NewLaw(n, p)
	nf := float64(n)
	sd := math.Sqrt(nf * p * (1 - p))
	var pts []r62Point
	for _, m := range ms {
		if !(logBinomPMF(int(m), int(n), p) >= -746) {
			continue
		}
		got := f(int(m), int(n), p)
		z := (float64(m) - nf*p) / sd
		pts = append(pts, r62Point{n: n, p: p, m: m, logP: got, err: r62Err(got, law.logPMF(m)), z: z, region: r62Region(m, z)})
	}
	return pts
}

// r62Bound is the a-priori bound the analysis gives: ~1e-12 for stirlerr,
// the 0.5 log term, the sum and bd0's series (terms <= ~750 in magnitude, a
// few ulps each; d = x - n p comes from one FMA, within u |d|, which moves
// bd0 ~ d^2/(2 n p) by 2u of itself), plus, where bd0 takes its direct
// branch x log(x/a) - d (|d| >= 0.1 (x + a)), ~1.5u x for the rounding of
// x/a and of the log (the result is small against x log(x/a) there).
// Before binom.go took d from an FMA it rounded n p, q = 1 - p and n q
// apart, which added up to 3u |m - n p| (4.2e-10 at n = 1e10): the bound
// then had 4u |m - n p| more (review 62's first measurement).
func r62Bound(pt r62Point) float64 {
	const u = 0x1p-53
	nf, xf, p := float64(pt.n), float64(pt.m), pt.p
	b := 2e-12
	for _, c := range [][2]float64{{xf, nf * p}, {nf - xf, nf * (1 - p)}} {
		if c[0] > 0 && c[0] < nf && math.Abs(c[0]-c[1]) >= 0.1*(c[0]+c[1]) {
			b += 2 * u * c[0]
		}
	}
	return b
}

func r62Report(t *testing.T, pts []r62Point, bound func(r62Point) float64, parts bool) (worst r62Point) {
	t.Helper()
	type agg struct {
		worst r62Point
		cnt   int
	}
	groups := map[string]map[string]*agg{"n": {}, "p": {}, "region": {}}
	note := func(kind, key string, pt r62Point) {
		g := groups[kind][key]
		if g == nil {
			g = &agg{worst: pt}
			groups[kind][key] = g
		}
		g.cnt++
		if math.Abs(pt.err) > math.Abs(g.worst.err) {
			g.worst = pt
		}
	}
	for _, pt := range pts {
		if math.Abs(pt.err) >= math.Abs(worst.err) {
			worst = pt
		}
		if len(pts) > 20000 { // the audit's random laws: by decade
			note("n", fmt.Sprintf("n in 1e%02d..", int(math.Floor(math.Log10(float64(pt.n))))), pt)
			if pt.p <= 0.5 {
				note("p", fmt.Sprintf("p in 1e%03d..", int(math.Floor(math.Log10(pt.p)))), pt)
			} else {
				note("p", fmt.Sprintf("1-p in 1e%03d..", int(math.Floor(math.Log10(1-pt.p)))), pt)
			}
		} else {
			note("n", fmt.Sprintf("n=%.0e", float64(pt.n)), pt)
			note("p", fmt.Sprintf("p=%.6g", pt.p), pt)
		}
		note("region", pt.region, pt)
		if b := bound(pt); !(math.Abs(pt.err) <= b) {
			t.Errorf("n=%d p=%g m=%d (z=%.1f, log P=%.2f): error %.3g over the bound %.3g", pt.n, pt.p, pt.m, pt.z, pt.logP, pt.err, b)
		}
	}
	for _, kind := range []string{"n", "p", "region"} {
		var keys []string
		for k := range groups[kind] {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		var b strings.Builder
		fmt.Fprintf(&b, "worst |error in log P| by %s:\n", kind)
		for _, k := range keys {
			g := groups[kind][k]
			w := g.worst
			fmt.Fprintf(&b, "  %-14s %5d pts  %9.3g  at n=%.0e p=%g m=%d z=%+.1f logP=%.1f", k, g.cnt, math.Abs(w.err), float64(w.n), w.p, w.m, w.z, w.logP)
			if parts && kind == "n" && w.m > 0 && w.m < w.n {
				sp := r62Parts(w.m, w.n, w.p)
				fmt.Fprintf(&b, "  [stirlerr %.1g, bd0 inputs %.2g, bd0 eval %.2g, half-log %.1g]", sp.stir, sp.bd0In, sp.bd0Ev, sp.half)
			}
			b.WriteString("\n")
		}
		t.Log(b.String())
	}
	if !parts {
		t.Logf("%d points; worst %.3g at n=%d p=%g m=%d (z=%+.2f, log P=%.2f)", len(pts), worst.err, worst.n, worst.p, worst.m, worst.z, worst.logP)
		return worst
	}
	sp := r62Parts(worst.m, worst.n, worst.p)
	t.Logf("%d points; worst %.3g at n=%d p=%g m=%d (z=%+.2f, log P=%.2f); parts: stirlerr %.2g, bd0 input rounding (np, nq, q) %.3g, bd0 evaluation %.2g, 0.5 log term %.2g",
		len(pts), worst.err, worst.n, worst.p, worst.m, worst.z, worst.logP, sp.stir, sp.bd0In, sp.bd0Ev, sp.half)
	return worst
}

var r62Ns = []int64{2, 10, 1000, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10}
var r62Ps = []float64{1e-12, 1e-9, 1e-6, 1e-3, 0.01, 0.1, 0.3, 0.5, 0.9, 1 - 1e-6}

// r62Limit is the worst error the test allows at n: r62Bound's constant
// plus bd0's direct branch, which at log P >= -746 needs n p or n q below
// ~4.3e4 (bd0 >= 0.0176 n p at the switch x = 9/11 n p), so x <= ~5e4.
func r62Limit(n int64) float64 {
	const u = 0x1p-53
	return 2e-12 + 2*u*math.Min(float64(n), 5e4)
}

// TestReview62LoaderError measures logBinomPMF's error on the review grid,
// asserts the analysis' bound (r62Bound) pointwise and r62Limit per n, and
// logs the worst cases by n, p and region of m (z = (m - n p) / sd).
func TestReview62LoaderError(t *testing.T) {
	pts := r62Grid(r62Ns, r62Ps, 1000, logBinomPMF)
	r62Report(t, pts, r62Bound, true)
	worstN := map[int64]float64{}
	for _, pt := range pts {
		worstN[pt.n] = math.Max(worstN[pt.n], math.Abs(pt.err))
		if !(math.Abs(pt.err) <= r62Limit(pt.n)) {
			t.Errorf("n=%d p=%g m=%d: error %.3g over %.3g", pt.n, pt.p, pt.m, pt.err, r62Limit(pt.n))
		}
	}
	for _, n := range r62Ns {
		t.Logf("n=%-11d worst %.3g, limit %.3g", n, worstN[n], r62Limit(n))
	}
	// The sparse path reads the cached table: same bits as the calls.
	for _, c := range []struct {
		n int
		p float64
	}{{1e8, 0.01}, {1e10, 1e-6}, {1000, 0.3}} {
		m1 := int(float64(c.n)*c.p + 40*math.Sqrt(float64(c.n)*c.p) + 40)
		tab := logBinomPMFs(c.n, c.p, m1)
		for m := 0; m <= m1; m += 1 + m1/500 {
			if math.Float64bits(tab[m]) != math.Float64bits(logBinomPMF(m, c.n, c.p)) {
				t.Errorf("logBinomPMFs(%d, %g)[%d] differs from logBinomPMF", c.n, c.p, m)
			}
		}
	}
}

// r62Job is a law and the m to measure it at.
type r62Job struct {
	n  int64
	p  float64
	ms []int64
}

// r62Grid measures f (logBinomPMF or a variant) on every (n, p).
func r62Grid(ns []int64, ps []float64, allUpTo int64, f func(x, n int, p float64) float64) []r62Point {
	r62Init()
	var jobs []r62Job
	for _, n := range ns {
		for _, p := range ps {
			jobs = append(jobs, r62Job{n, p, r62Ms(n, p, allUpTo)})
		}
	}
	return r62MeasureAll(jobs, f)
}

// r62MeasureAll measures f on the jobs, two laws at a time, sorted by n,
// p and m.
func r62MeasureAll(jobs []r62Job, f func(x, n int, p float64) float64) []r62Point {
	var pts []r62Point
	var mu sync.Mutex
	var wg sync.WaitGroup
	sem := make(chan struct{}, 2)
	for _, j := range jobs {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			r := r62MeasureF(j.n, j.p, j.ms, f)
			mu.Lock()
			pts = append(pts, r...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	sort.Slice(pts, func(i, k int) bool {
		a, b := pts[i], pts[k]
		if a.n != b.n {
			return a.n < b.n
		}
		if a.p != b.p {
			return a.p < b.p
		}
		return a.m < b.m
	})
	return pts
}
