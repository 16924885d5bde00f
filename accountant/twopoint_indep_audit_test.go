//go:build audit

package accountant

import (
	"fmt"
	"math"
	"testing"
)

// An independent check (a reviewer's, of 89b436b and ee9181f) of the
// two-point sum and the lattice's lower side. Nothing here reuses the
// accountant's binomial code or its two-point conventions: the k-RR k = 2
// pair (x, x', ..., x') vs (x', ..., x') is computed from the count of
// x-outputs directly.

// indepPMF returns Binomial(n, p)'s pmf on [m0, m0+len) (mean +- 45 sd),
// by the ratio recurrence in log space from the mode, normalised by its
// own sum (so no log-gamma or Stirling series is involved).
func indepPMF(n int, p float64) (int, []float64) {
	nf := float64(n)
	mean, sd := nf*p, math.Sqrt(nf*p*(1-p))
	lo := max(0, int(math.Floor(mean-45*sd)))
	hi := min(n, int(math.Ceil(mean+45*sd)))
	mode := int(math.Floor((nf + 1) * p))
	mode = min(max(mode, lo), hi)
	lr := math.Log(p) - math.Log1p(-p)
	lw := make([]float64, hi-lo+1)
	// up from the mode: log P(m+1) - log P(m) = log((n-m)/(m+1)) + lr
	var acc, comp float64
	for m := mode; m < hi; m++ {
		d := math.Log(float64(n-m)/float64(m+1)) + lr
		// Kahan
		y := d - comp
		t := acc + y
		comp = (t - acc) - y
		acc = t
		lw[m+1-lo] = acc
	}
	acc, comp = 0, 0
	for m := mode; m > lo; m-- {
		// log P(m-1) - log P(m) = log(m/(n-m+1)) - lr
		d := math.Log(float64(m)/float64(n-m+1)) - lr
		y := d - comp
		t := acc + y
		comp = (t - acc) - y
		acc = t
		lw[m-1-lo] = acc
	}
	w := make([]float64, len(lw))
	var s kahan
	for i, l := range lw {
		w[i] = math.Exp(l)
		s.add(w[i])
	}
	for i := range w {
		w[i] /= s.sum
	}
	return lo, w
}

// indepDelta returns the pair's exact hockey-stick divergence at eps:
// fwd = sum_m (P1(m) - e^eps P0(m))_+, rev = sum_m (P0(m) - e^eps P1(m))_+,
// P0 = Binomial(n, c) (all x'), P1 = law with one user at x, where
// P1(m)/P0(m) = L(m) = ((n-m) e^-eps0 + m e^eps0)/n.
func indepDelta(m0 int, w []float64, n int, eps0, eps float64) (fwd, rev float64) {
	nf := float64(n)
	em := math.Expm1(eps)
	zlo := math.Expm1(-eps0) - em // e^-eps0 - e^eps
	zhi := math.Expm1(eps0) - em  // e^eps0 - e^eps
	// rev: P0 (1 - e^eps L)_+ = P0 (e^eps/n) ((n-m)(e^-eps - e^-eps0) + m (e^-eps - e^eps0))_+
	emr := math.Expm1(-eps)
	rlo := emr - math.Expm1(-eps0)
	rhi := emr - math.Expm1(eps0)
	var f, r kahan
	for i, p := range w {
		m := float64(m0 + i)
		x := (nf-m)*zlo + m*zhi
		if x > 0 {
			f.add(p * x)
		}
		y := (nf-m)*rlo + m*rhi
		if y > 0 {
			r.add(p * y)
		}
	}
	return f.sum / nf, r.sum / nf * math.Exp(eps)
}

// indepEps returns the smallest eps with divergence <= delta (bisection).
func indepEps(m0 int, w []float64, n int, eps0, delta float64, rev bool) float64 {
	g := func(e float64) float64 {
		a, b := indepDelta(m0, w, n, eps0, e)
		if rev {
			return b
		}
		return a
	}
	lo, hi := 0.0, eps0
	if g(lo) <= delta {
		return 0
	}
	for range 200 {
		mid := 0.5 * (lo + hi)
		if g(mid) > delta {
			lo = mid
		} else {
			hi = mid
		}
		if hi-lo <= 1e-13*hi {
			break
		}
	}
	return 0.5 * (lo + hi)
}

func indepC(eps0 float64) float64 { return 1 / (math.Exp(eps0) + 1) }

// TestIndependentLoaderAt1e8: logBinomPMF's window at n = 1e8 against the
// normalised ratio recurrence.
func TestIndependentLoaderAt1e8(t *testing.T) {
	for _, tc := range []struct {
		n int
		p float64
	}{
		{100_000_000, indepC(0.5)}, {100_000_000, 1 - indepC(0.5)}, {100_000_000, indepC(2)},
		{10_000_000, indepC(0.5)}, {100_000_000, 0.3}, {100_000_000, 0.37}, {100_000_000, 0.1}, {100_000_000, 0.1 + 0x1p-56}, {500_000_000, 0.5}, {600_000_000, indepC(0.5)}, {1_000_000_000, indepC(4)},
	} {
		m0, w := indepPMF(tc.n, tc.p)
		bw, ok := binomWindowPMF(tc.n, tc.p)
		if !ok {
			t.Fatalf("declined")
		}
		var sum kahan
		var maxRel10, maxRel40 float64
		nf := float64(tc.n)
		mean, sd := nf*tc.p, math.Sqrt(nf*tc.p*(1-tc.p))
		for i, l := range bw.lpm {
			m := bw.m0 + i
			v := math.Exp(l)
			sum.add(v)
			j := m - m0
			if j < 0 || j >= len(w) {
				continue
			}
			rel := math.Abs(v/w[j] - 1)
			if k := math.Abs(float64(m)-mean) / sd; k <= 10 {
				maxRel10 = math.Max(maxRel10, rel)
			} else if k <= 38 && w[j] > 1e-300 {
				maxRel40 = math.Max(maxRel40, rel)
			}
		}
		q := 1 - tc.p
		t.Logf("n %d p %.17g: 1-p exact? %v (p+fl(1-p)-1 = %.3g u); sum exp(lpm) - 1 = %.3e; max rel diff vs recurrence: |k|<=10sd %.3e, 10..38sd %.3e",
			tc.n, tc.p, 1-q == tc.p, (tc.p-(1-q))/ulp, sum.sum-1, maxRel10, maxRel40)
		if maxRel10 > 1e-9 {
			t.Errorf("n %d p %v: Loader's pmf off by %.3e relative near the mean (> sparseRel 1e-9)", tc.n, tc.p, maxRel10)
		}
	}
}

// TestIndependentTwoPointVsPair: twoPointExact's bracket on k-RR k = 2's
// lower set against the pair's divergence computed independently.
func TestIndependentTwoPointVsPair(t *testing.T) {
	for _, tc := range []struct {
		eps0 float64
		n    int
		eps  []float64
	}{
		{0.5, 100_000_000, []float64{8.3e-5, 8.408421e-05, 8.423278e-05, 8.43e-5, 1e-4}},
		{0.5, 10_000_000, []float64{2e-4, 2.7e-4, 3e-4}},
		{2, 100_000_000, []float64{1e-4, 2e-4, 3e-4}},
	} {
		d, _ := KRR(2).Decompose(tc.eps0)
		m0, w := indepPMF(tc.n, indepC(tc.eps0))
		for _, e := range tc.eps {
			p := prepare(d.Lower[0], e)
			b, ok := twoPointExact(p, tc.n)
			fwd, rev := indepDelta(m0, w, tc.n, tc.eps0, e)
			t.Logf("eps0 %v n %d eps %.7g: z %v w %v | twoPoint ok %v lo %.12e hi %.12e | indep fwd %.12e rev %.12e | (lo-fwd)/fwd %.3e (hi-fwd)/fwd %.3e",
				tc.eps0, tc.n, e, p.z, p.w, ok, b.lo, b.hi, fwd, rev, (b.lo-fwd)/fwd, (b.hi-fwd)/fwd)
			if ok && !(b.lo <= fwd*(1+1e-10)) {
				t.Errorf("eps0 %v n %d eps %v: twoPoint lo %.12e above independent %.12e", tc.eps0, tc.n, e, b.lo, fwd)
			}
			if ok && !(b.hi >= fwd*(1-1e-10)) {
				t.Errorf("eps0 %v n %d eps %v: twoPoint hi %.12e below independent %.12e", tc.eps0, tc.n, e, b.hi, fwd)
			}
		}
	}
}

// TestIndependentKRR2Epsilon: the accountant's eps figures for k-RR k = 2
// against the pair's exact eps (both directions).
func TestIndependentKRR2Epsilon(t *testing.T) {
	ns := []int{10_000, 100_000, 1_000_000, 10_000_000, 100_000_000}
	if testing.Short() {
		ns = ns[:3]
	}
	for _, eps0 := range []float64{0.5, 2} {
		for _, n := range ns {
			m0, w := indepPMF(n, indepC(eps0))
			for _, delta := range []float64{1e-6, 1e-10} {
				ef := indepEps(m0, w, n, eps0, delta, false)
				er := indepEps(m0, w, n, eps0, delta, true)
				r, err := Epsilon(KRR(2), eps0, n, delta)
				if err != nil {
					t.Fatal(err)
				}
				name := fmt.Sprintf("eps0 %v n %d delta %v", eps0, n, delta)
				t.Logf("%s: lower %.9e  pair fwd %.9e rev %.9e  upper %.9e  (lower/fwd-1 %.3e, upper/max-1 %.3e) amplified %v",
					name, r.Lower, ef, er, r.Upper, r.Lower/ef-1, r.Upper/math.Max(ef, er)-1, r.Amplified)
				if r.Lower > ef*(1+1e-9) {
					t.Errorf("%s: lower %.12e above the pair's exact eps %.12e", name, r.Lower, ef)
				}
				if r.Upper < math.Max(ef, er)*(1-1e-9) {
					t.Errorf("%s: upper %.12e below the pair's exact eps %.12e", name, r.Upper, math.Max(ef, er))
				}
			}
		}
	}
}

// TestIndependentGenericTwoPoint: the generic randomizer's two-point lower
// set (R(x) = (a, b), R(x') = (b, a), R(x3) = (1/2, 1/2)) at n = 1e8,
// against the pair's divergence from Binomial(n, 1/2) directly:
// P1(m) = P(m) 2 (a m + b (n-m))/n, P0(m) = P(m) 2 (b m + a (n-m))/n.
func TestIndependentGenericTwoPoint(t *testing.T) {
	const n = 100_000_000
	eps0 := 0.5
	e := math.Exp(eps0)
	a, b := e/(e+1), 1/(e+1)
	d, _ := Generic().Decompose(eps0)
	m0, w := indepPMF(n, 0.5)
	nf := float64(n)
	div := func(eps float64) float64 {
		ee := math.Exp(eps)
		var s kahan
		for i, p := range w {
			m := float64(m0 + i)
			x := (a*m + b*(nf-m)) - ee*(b*m+a*(nf-m))
			if x > 0 {
				s.add(p * x)
			}
		}
		return 2 * s.sum / nf
	}
	for _, eps := range []float64{5e-5, 8.1e-5, 1e-4} {
		p := prepare(d.Lower[0], eps)
		br, ok := twoPointExact(p, n)
		v := div(eps)
		t.Logf("generic eps %.4g: z %v w %v ok %v lo %.12e hi %.12e indep %.12e (lo/indep-1 %.3e, hi/indep-1 %.3e)",
			eps, p.z, p.w, ok, br.lo, br.hi, v, br.lo/v-1, br.hi/v-1)
		if ok && (br.lo > v*(1+1e-10) || br.hi < v*(1-1e-10)) {
			t.Errorf("generic eps %v: bracket [%v, %v] misses independent %v", eps, br.lo, br.hi, v)
		}
	}
	// The pair's eps at delta 1e-6 vs the reported lower figure.
	lo, hi := 0.0, eps0
	for range 100 {
		mid := 0.5 * (lo + hi)
		if div(mid) > 1e-6 {
			lo = mid
		} else {
			hi = mid
		}
	}
	r, _ := Epsilon(Generic(), eps0, n, 1e-6)
	t.Logf("generic eps0 0.5 n 1e8 delta 1e-6: lower %.9e, this pair's exact eps %.9e (lower/pair-1 %.3e), upper %.9e", r.Lower, lo, r.Lower/lo-1, r.Upper)
}

// TestIndependentLatticeLowerVsPair: the lattice path's lower end (with
// ee9181f's point bound), the twoPoint path off, against the independent
// divergence of k-RR k = 2's pair.
func TestIndependentLatticeLowerVsPair(t *testing.T) {
	for _, tc := range []struct {
		eps0 float64
		n    int
		eps  []float64
	}{
		{0.5, 100_000_000, []float64{8.3e-5, 8.42373e-5, 9e-5}},
		{2, 10_000_000, []float64{1.9e-3, 1.950916e-3}},
		{0.5, 1_000_000, []float64{1.2e-3, 1.2645928e-3}},
	} {
		d, _ := KRR(2).Decompose(tc.eps0)
		m0, w := indepPMF(tc.n, indepC(tc.eps0))
		for _, e := range tc.eps {
			for _, h := range []float64{hRelStart, hRelStart / 4} {
				sv := &setSolver{set: d.Lower[0], n: tc.n, hRel: h, latticeOnly: true}
				b := sv.eval(e, true)
				fwd, _ := indepDelta(m0, w, tc.n, tc.eps0, e)
				t.Logf("eps0 %v n %d eps %.7g hRel %v: lattice lo %.12e hi %.12e indep %.12e (lo/indep-1 %.3e, hi/indep-1 %.3e)",
					tc.eps0, tc.n, e, h, b.lo, b.hi, fwd, b.lo/fwd-1, b.hi/fwd-1)
				if b.lo > fwd*(1+1e-10) || b.hi < fwd*(1-1e-10) {
					t.Errorf("eps0 %v n %d eps %v hRel %v: lattice bracket [%v, %v] misses %v", tc.eps0, tc.n, e, h, b.lo, b.hi, fwd)
				}
			}
		}
	}
}
