package accountant

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestTermsUpToClosedForms checks termsUpTo's closed forms for one and two
// non-dominant atoms against the running sum they replace, and that with
// more atoms it exceeds a limit exactly when the running sum does.
func TestTermsUpToClosedForms(t *testing.T) {
	for _, a := range []int{1, 2, 3} {
		for _, r := range [][2]int{{0, 0}, {0, 9}, {5, 17}, {1000, 250_000}, {0, 1_000_000}} {
			want := 7.0
			for m := r[0]; m <= r[1]; m++ {
				want += binom(m+a-1, a-1)
			}
			if got := termsUpTo(a, r[0], r[1], 7, math.Inf(1)); got != want {
				t.Errorf("a %d m in %v: %v, running sum %v", a, r, got, want)
			}
		}
	}
	// With a limit, all a caller reads is whether the sum exceeds it: the
	// same answer as the full running sum, for every a and range.
	for a := 3; a <= 80; a += 7 {
		for _, m1 := range []int{0, 3, 17, 40, 200} {
			for _, limit := range []float64{10, 1e3, 3e6, 1.2e7} {
				full := 0.0
				for m := 0; m <= m1; m++ {
					full += binom(m+a-1, a-1)
				}
				if got := termsUpTo(a, 0, m1, 0, limit); (got > limit) != (full > limit) {
					t.Errorf("a %d m1 %d limit %g: %v, running sum %v", a, m1, limit, got, full)
				}
			}
		}
	}
}

// TestRootCountsPrunesOnlyDeadM checks rootCounts' interval on random
// dominant and largest atoms at n up to 1e10: at every m outside it, the
// tests sparseExact prunes with, bandSum.counts on the computed sum
// (n - m) z_0 + m zmax (one non-dominant atom) and mayCount at the root
// (more), with their eps_m, fail.
func TestRootCountsPrunesOnlyDeadM(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for trial := range 400 {
		n := int(math.Pow(10, 1+9*rng.Float64()))
		nf := float64(n)
		z0 := (rng.Float64() - 0.5) * math.Pow(10, -3*rng.Float64())
		zmax := z0 + (rng.Float64()-0.3)*math.Pow(10, 2-4*rng.Float64())
		if trial%7 == 0 {
			zmax = z0
		}
		first, last := rootCounts(nf, z0, zmax)
		var b bandSum
		dead := func(m int) bool {
			mf := float64(m)
			base := dd{}.addProd(float64(n-m), z0)
			b.eps = float64(8*(1+2)) * ulp * ulp * (math.Abs(base.hi) + mf*math.Max(math.Abs(z0), math.Abs(zmax)))
			x := base.addProd(mf, zmax).val()
			return !b.counts(x) && !b.mayCount(base, m, zmax)
		}
		check := func(m int) {
			if m < 0 || m > n {
				return
			}
			if (float64(m) < first || float64(m) > last) && !dead(m) {
				t.Fatalf("n %d z0 %v zmax %v: m %d outside [%v, %v] but its root counts", n, z0, zmax, m, first, last)
			}
		}
		for _, e := range []float64{first, last} {
			if math.IsInf(e, 0) || e < -5 || e > nf+5 {
				continue
			}
			for d := -4; d <= 4; d++ {
				check(int(e) + d)
			}
		}
		for range 20 {
			check(rng.IntN(n + 1))
		}
	}
}

// TestAliveLeavesOnlyDropsZeroMasses checks aliveLeaves on random pair sums:
// every leaf outside [cl, cr] has a mass that exp computes as exactly 0
// (the pair walk's direct formula), and when it reports none alive, every
// leaf's is.
func TestAliveLeavesOnlyDropsZeroMasses(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 1))
	lf := logFactorials(20_000)
	var cut int
	for trial := range 300 {
		left := rng.IntN(20_000)
		lx := -20 * rng.Float64()
		ly := -20 * rng.Float64()
		lm := -1000 * rng.Float64()
		lp := -50 * rng.Float64()
		if trial%2 == 0 { // masses that cross exp's underflow gently
			lx, ly = -3*rng.Float64(), -3*rng.Float64()
			lm, lp = -600-190*rng.Float64(), 0
		}
		E := func(c int) float64 {
			e := lp + float64(c)*lx - lf[c]
			e += float64(left-c)*ly - lf[left-c]
			return lm + e
		}
		cl, cr, ok := aliveLeaves(E, left, lx-ly)
		for c := 0; c <= left; c++ {
			if ok && c >= cl && c <= cr {
				continue
			}
			cut++
			if v := math.Exp(E(c)); v != 0 {
				t.Fatalf("left %d lx %v ly %v lm %v lp %v: leaf %d outside [%d, %d] (alive %v) has mass %v", left, lx, ly, lm, lp, c, cl, cr, ok, v)
			}
		}
	}
	if cut < 100_000 {
		t.Fatalf("only %d leaves cut: the cases do not exercise aliveLeaves", cut)
	}
}
