package accountant

import (
	"fmt"
	"math"
	"math/big"
	"testing"
)

// twoPointExactBig returns (1/n) E[((n - M) zA + M zB)_+], M ~
// Binomial(n, pB), by exact enumeration of every m in 256-bit arithmetic
// (the masses by the ratio recurrence from (1 - pB)^n, 256 bits keeping
// their relative error below 1e-60 over 10^5 steps).
func twoPointExactBig(zA, zB, pB float64, n int) float64 {
	const prec = 256
	f := func(x float64) *big.Float { return new(big.Float).SetPrec(prec).SetFloat64(x) }
	p := f(pB)
	q := new(big.Float).SetPrec(prec).Sub(f(1), p)
	// q^n by squaring.
	pm := f(1)
	base := new(big.Float).SetPrec(prec).Set(q)
	for e := n; e > 0; e >>= 1 {
		if e&1 == 1 {
			pm.Mul(pm, base)
		}
		base.Mul(base, base)
	}
	ratio := new(big.Float).SetPrec(prec).Quo(p, q)
	sum := new(big.Float).SetPrec(prec)
	a, b := f(zA), f(zB)
	for m := 0; m <= n; m++ {
		// x = (n - m) zA + m zB, exactly (53-bit operands, 256-bit products).
		x := new(big.Float).SetPrec(prec).Mul(a, f(float64(n-m)))
		x.Add(x, new(big.Float).SetPrec(prec).Mul(b, f(float64(m))))
		if x.Sign() > 0 {
			sum.Add(sum, x.Mul(x, pm))
		}
		pm.Mul(pm, ratio)
		pm.Mul(pm, f(float64(n-m)))
		pm.Quo(pm, f(float64(m+1)))
	}
	sum.Quo(sum, f(float64(n)))
	v, _ := sum.Float64()
	return v
}

// TestTwoPointSumBracketsExactEnumeration checks twoPointSum, the exact
// path of two-point sets, against exact enumeration in 256-bit arithmetic
// (twoPointExactBig) at n up to 10^5, with the positive part starting
// below, at and far above the mean of M, and with both atoms positive:
// lo <= exact <= hi, and hi - lo within 3e-9 of the exact value (the
// bracket's margins are sparseRel = 1e-9 on each side plus a few u; the
// tails beyond 40 sd are below 1e-300 of it) or hi at DeltaFloor (the
// positive part beyond the window: [0, DeltaFloor]).
func TestTwoPointSumBracketsExactEnumeration(t *testing.T) {
	for _, tc := range []struct {
		zA, zB, pB float64
		n          int
	}{
		{-1.0421906109874948, 1.4703356702728422e-16, 0.3775406687981454, 1000},
		{-0.526617793354193, 0.515572817633302, 0.3775406687981454, 1000},
		{-0.526617793354193, 0.515572817633302, 0.3775406687981454, 100_000},
		{-0.6774947569751082, 0.36469585401238686, 0.6224593312018546, 30_000},
		{-1, 3, 0.25, 30},
		{-1, 3, 0.25, 30_000},   // mean of f exactly 0
		{-1, 1, 0.48, 30_000},   // positive part 6.9 sd above the mean of M
		{-1, 1, 0.45, 30_000},   // 17 sd
		{-1, 1, 0.2, 30_000},    // 130 sd: nothing summed, [0, tail bound]
		{-2, 1e-3, 0.5, 20_000}, // 141 sd: likewise
		{0.5, 2, 0.3, 2000},     // every term positive
		{-1e-9, 1, 1e-3, 30_000},
	} {
		name := fmt.Sprintf("zA %v zB %v pB %v n %d", tc.zA, tc.zB, tc.pB, tc.n)
		b, ok := twoPointSum(tc.zA, tc.zB, tc.pB, tc.n)
		exact := twoPointExactBig(tc.zA, tc.zB, tc.pB, tc.n)
		if !ok {
			t.Errorf("%s: declined", name)
			continue
		}
		if !(b.lo <= exact && exact <= b.hi) {
			t.Errorf("%s: bracket [%v, %v] misses the exact %v", name, b.lo, b.hi, exact)
		}
		if w := b.hi - b.lo; w > 3e-9*exact && b.hi > DeltaFloor {
			t.Errorf("%s: bracket [%v, %v] of the exact %v is %g wide (relative %g)", name, b.lo, b.hi, exact, w, w/exact)
		}
	}
}

// TestTwoPointExactWithinLattice checks twoPointExact against the lattice
// path, an independent computation, on k-RR's k = 2 lower-bound set at
// eps0 = 0.5 and n = 10^7 and 10^8 over a few eps (the set the path was
// made for): the two brackets overlap, and the exact one lies within
// the lattice's up to the lattice's own rounding (the lattice's is the
// looser: its width is its discretisation).
func TestTwoPointExactWithinLattice(t *testing.T) {
	e0 := math.Exp(0.5)
	pHi, pLo := e0/(e0+1), 1/(e0+1) // k-RR k = 2 at eps0 = 0.5
	set := AtomSet{{P: pHi, Q: pLo, R: pHi}, {P: pLo, Q: pHi, R: pLo}}
	for _, n := range []int{10_000_000, 100_000_000} {
		for _, eps := range []float64{2e-4, 1e-4, 8e-5, 5e-5} {
			if n == 10_000_000 {
				eps *= math.Sqrt(10)
			}
			p := prepare(set, eps)
			b, ok := twoPointExact(p, n)
			if !ok {
				t.Fatalf("n %d eps %v: twoPointExact declined k-RR's k = 2 set", n, eps)
			}
			l := latticeEval(p, n, hRelStart, true)
			if b.lo > l.hi || l.lo > b.hi {
				t.Errorf("n %d eps %v: exact [%v, %v] and lattice [%v, %v] do not overlap", n, eps, b.lo, b.hi, l.lo, l.hi)
			}
			if b.lo < l.lo*(1-2e-9) || b.hi > l.hi*(1+2e-9) {
				t.Errorf("n %d eps %v: exact [%v, %v] not inside the lattice's [%v, %v]", n, eps, b.lo, b.hi, l.lo, l.hi)
			}
			if b.hi-b.lo > 3e-9*b.hi {
				t.Errorf("n %d eps %v: exact bracket [%v, %v] is wide", n, eps, b.lo, b.hi)
			}
		}
	}
}
