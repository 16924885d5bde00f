package accountant

import (
	"math"
	"math/rand/v2"
	"testing"
)

// pairDirect is pairWalk.sum's result by a second derivation: each leaf's
// mass from math.Lgamma (not the walk's log-factorial table), summed in
// order.
func pairDirect(lm, lp float64, left int, s, zx, zy, lx, ly float64) float64 {
	lgf := func(k int) float64 { v, _ := math.Lgamma(float64(k) + 1); return v }
	total := 0.0
	for c := 0; c <= left; c++ {
		t := s + float64(c)*zx + float64(left-c)*zy
		if t <= 0 {
			continue
		}
		total += math.Exp(lm+lp+float64(c)*lx-lgf(c)+float64(left-c)*ly-lgf(left-c)) * t
	}
	return total
}

// TestPairWalkMatchesDirect checks the walk against the per-leaf sum on
// random pairs: counts up to the walk's limit and past it (the exp per
// term), log-mass gaps up to 700 (rho overflowing its range), and sums
// of masses from 1 down to below 2^-900 (where the walk hands over to
// the exp per term). The tolerance is the walk's own bound, walkRel, plus
// the second derivation's rounding (Lgamma's, about 1e-15 relative on
// log-factorials below 10^5, times exponents below 10^6: 1e-9 absolute in
// the exponent at worst); a walk with a wrong step factor (off by one in
// c, or rho for its inverse) is off by far more.
func TestPairWalkMatchesDirect(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 5))
	var w pairWalk
	lf := logFactorials(40_000)
	walked := 0
	for i := range 3000 {
		left := r.IntN(200)
		switch i % 5 {
		case 0:
			left = r.IntN(30_000)
		case 1:
			left = r.IntN(4)
		}
		px := r.Float64()
		lx := math.Log(px)
		ly := math.Log1p(-px)
		if i%7 == 0 {
			ly = -700 * r.Float64() // a gap of up to 700 nats
		}
		if i%2 == 0 {
			lx, ly = ly, lx
		}
		lm := -50 * r.Float64()
		if i%3 == 0 {
			lm = -2000 * r.Float64() // masses down to e^-2000
		}
		zx := 4*r.Float64() - 1
		zy := zx - 3*r.Float64()
		s := float64(left) * (2*r.Float64() - 1)
		var b bandSum
		w.sum(lm, 0, left, dd{hi: s}, zx, zy, lx, ly, lf, &b)
		got := b.hi.sum
		if b.lo.sum != got {
			t.Fatalf("case %d: with no error allowances the lower sum %g differs from the upper %g", i, b.lo.sum, got)
		}
		want := pairDirect(lm, 0, left, s, zx, zy, lx, ly)
		tol := 1e-10*want + 1e-300
		if math.Abs(got-want) > tol || math.IsNaN(got) {
			t.Fatalf("case %d: left %d lx %g ly %g lm %g s %g zx %g zy %g: walk %.17g, direct %.17g", i, left, lx, ly, lm, s, zx, zy, got, want)
		}
		if float64(left)*(math.Abs(lx-ly)+5)*ulp*1.01 <= walkRel && left > 0 && want > 0 {
			walked++
		}
	}
	if walked < 1000 {
		t.Fatalf("only %d cases took the walk", walked)
	}
}

// TestPairWalkLeaves checks the walk's terms on a pair where only the
// leaves c = 31..60 of 60 have a positive sum (s(c) = c - 30): their sum by
// the binomial law, and nothing of the others.
func TestPairWalkLeaves(t *testing.T) {
	var w pairWalk
	lf := logFactorials(100)
	var b bandSum
	w.sum(lf[60], 0, 60, dd{hi: -30}, 1, 0, math.Log(0.3), math.Log(0.7), lf, &b)
	want := 0.0
	for c := 31; c <= 60; c++ {
		want += math.Exp(lf[60]-lf[c]-lf[60-c]+float64(c)*math.Log(0.3)+float64(60-c)*math.Log(0.7)) * float64(c-30)
	}
	if math.Abs(b.hi.sum-want) > 1e-12*want {
		t.Fatalf("sum %.17g, want %.17g", b.hi.sum, want)
	}
}
