package accountant

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestReview66SparseRandomSameBits: on random sparse-regime sets built so
// that rootCounts' interval cuts [0, m_max] inside (z_0 < 0 with a large
// zmax, or z_0 > 0 with the others below it), sparseExactCut gives the
// same bracket, ok and tight bits (cut on and off) whether sumRange walks
// every m or only the counting ones; n up to 1e10, pi down to 1e-12, one
// to four non-dominant atoms.
func TestReview66SparseRandomSameBits(t *testing.T) { review66SparseRandomSameBits(t, 80) }

// review66SparseRandomSameBits compares that many random sets (make
// audit: 300).
func review66SparseRandomSameBits(t *testing.T, sets int) {
	defer func() { sparseWalkEveryCount = false }()
	rng := rand.New(rand.NewPCG(66, 1))
	ns := []int{1, 2, 7, 40, 1000, 100000, 10000000, 10000000000}
	compared, cutInside, declined := 0, 0, 0
	for i := range sets {
		n := ns[rng.IntN(len(ns))]
		a := 1 + rng.IntN(4)
		nf := float64(n)
		// Mean number of non-dominant draws up to ~120 (fewer for more atoms).
		meanMax := []float64{0, 150, 120, 40, 15}[a]
		pi := math.Min(0.45*float64(a)/float64(a+1), math.Exp(rng.Float64()*math.Log(meanMax/nf+1e-300))*(0.5+rng.Float64()))
		if i%17 == 0 {
			pi = math.Min(0.45, 1e-12*(1+rng.Float64()))
		}
		if !(pi > 0) || pi >= 0.5 {
			pi = 0.3
		}
		mean := nf * pi
		target := math.Max(0, mean*(0.2+2*rng.Float64())+float64(rng.IntN(5)-2))
		// Non-dominant weights summing to pi.
		w := make([]float64, a)
		s := 0.0
		for j := range w {
			w[j] = 0.1 + rng.Float64()
			s += w[j]
		}
		for j := range w {
			w[j] *= pi / s
		}
		z := make([]float64, a)
		var z0 float64
		switch rng.IntN(3) {
		case 0: // mFirst inside: z0 < 0, zmax > 0 with X(target) ~ 0
			c := math.Exp(-rng.Float64() * 8)
			z0 = -c
			zmax := c * 5
			if target > 0 {
				zmax = c * (nf - target) / target
			}
			zmax = math.Min(zmax, 1e6)
			for j := range z {
				z[j] = zmax * (1 - 3*rng.Float64())
			}
			z[rng.IntN(a)] = zmax
		case 1: // mLast inside: z0 > 0, others below with X(target) ~ 0
			c := math.Exp(-rng.Float64() * 8)
			z0 = c
			zmin := -c * 5
			if target > 0 {
				zmin = -c * (nf - target) / target
			}
			zmin = math.Max(zmin, -1e6)
			for j := range z {
				z[j] = zmin * (0.2 + rng.Float64())
			}
		default: // generic
			z0 = rng.NormFloat64()
			for j := range z {
				z[j] = rng.NormFloat64() * 3
			}
		}
		if rng.IntN(8) == 0 {
			// Two equal values, an exact zero.
			z[0] = z0
		}
		p := prepared{z: append([]float64{z0}, z...), w: append([]float64{1 - pi}, w...)}
		// rootCounts as sparseExactCut sees it (dominant first: 1 - pi >= 0.55).
		zm := math.Inf(-1)
		for _, v := range z {
			zm = math.Max(zm, v)
		}
		mFirst, mLast := rootCounts(nf, z0, zm)
		mMax := math.Min(nf, math.Ceil(mean+6*math.Sqrt(mean)+10))
		if mFirst > 0 || mLast < mMax {
			cutInside++
		}
		for _, cut := range []bool{true, false} {
			// The skipping walk first, on empty tables: the reference
			// would fill every mass of the law's table (shared), hiding
			// an entry the skipping walk forgot to compute.
			forgetSparseTables()
			sparseWalkEveryCount = false
			got, ok, tight := sparseExactCut(p, n, cut)
			sparseWalkEveryCount = true
			want, okW, tightW := sparseExactCut(p, n, cut)
			sparseWalkEveryCount = false
			if ok != okW || tight != tightW || math.Float64bits(got.lo) != math.Float64bits(want.lo) || math.Float64bits(got.hi) != math.Float64bits(want.hi) {
				t.Fatalf("case %d n %d pi %g z0 %g z %v w %v cut %v: %+v ok %v tight %v; walking every m %+v ok %v tight %v",
					i, n, pi, z0, z, w, cut, got, ok, tight, want, okW, tightW)
			}
			if ok {
				compared++
			} else {
				declined++
			}
		}
	}
	t.Logf("%d brackets compared, %d declines compared, %d sets with rootCounts cutting inside [0, m_max]", compared, declined, cutInside)
	// Thresholds scale with the sets (at 300: 200 compared, 60 cut).
	if compared < 2*sets/3 || cutInside < sets/5 {
		t.Errorf("too few cases exercised: %d compared, %d cut inside", compared, cutInside)
	}
}

// TestReview66EmBelowExtremes: where emBelow holds, every m of [0, m1]
// has sumRange's exponent error (a = 1's formula and the general one) at
// most 0.01, computed from logBinomPMF, at extreme pi (subnormal, tiny,
// near 1/2 and near 1) and n up to 1e10, with m1 near the mean and at n
// when n is small.
func TestReview66EmBelowExtremes(t *testing.T) {
	review66EmBelowExtremes(t, []int{1, 2, 3, 10, 100, 5000, 1000000})
}

// review66EmBelowExtremes checks at the ns given (make audit adds 1e8
// and 1e10).
func review66EmBelowExtremes(t *testing.T, ns []int) {
	rng := rand.New(rand.NewPCG(66, 2))
	pis := []float64{5e-324, 1e-320, 1e-300, 1e-200, 1e-30, 1e-12, 1e-6, 0.01, 0.3, 0.5, 0.9, 1 - 1e-9, 1 - 0x1p-53}
	held := 0
	for _, n := range ns {
		for _, pi := range pis {
			for _, a := range []int{1, 2, 5, 1000} {
				for _, maxL := range []float64{0, 1, 30, 745} {
					mean := float64(n) * pi
					m1 := int(math.Min(float64(n), math.Ceil(mean+6*math.Sqrt(mean)+10)))
					if m1 > 200000 {
						m1 = 200000 + rng.IntN(1000)
					}
					lf := logFactorials(m1)
					if !emBelow(a, n, pi, lf[m1], m1, maxL) {
						continue
					}
					held++
					for m := 0; m <= m1; m++ {
						lpm := logBinomPMF(m, n, pi)
						if math.IsInf(lpm, -1) {
							continue
						}
						mf := float64(m)
						em := float64(2*a+10) * ulp * (math.Abs(lpm) + 2*lf[m] + mf*(maxL+1))
						if a == 1 {
							em = 4 * ulp * (math.Abs(lpm) + mf*(maxL+1))
						}
						if em > 0.01 {
							t.Fatalf("n %d pi %g a %d maxL %g m %d: emBelow holds but E_m = %g (lpm %g)", n, pi, a, maxL, m, em, lpm)
						}
					}
				}
			}
		}
	}
	t.Logf("emBelow held in %d cases", held)
}

// TestReview66CountingCountsWide: countingCounts against the brute force
// on larger strides and ranges, ends near m0 and m1, huge ends, ends at
// m0 + 1/2, and m0 far from 0.
func TestReview66CountingCountsWide(t *testing.T) {
	rng := rand.New(rand.NewPCG(66, 3))
	for range 40000 {
		m0 := rng.IntN(3)
		if rng.IntN(3) == 0 {
			m0 = 1<<33 + rng.IntN(1000)
		}
		m1 := m0 + rng.IntN(200)
		if rng.IntN(5) == 0 {
			m1 = m0 - 1 - rng.IntN(2) // empty range
		}
		stride := 1 + rng.IntN(300)
		end := func() float64 {
			switch rng.IntN(10) {
			case 0:
				return math.MaxFloat64
			case 1:
				return -math.MaxFloat64
			case 2:
				return float64(m0) + float64(rng.IntN(3)-1)
			case 3:
				return float64(m1) + float64(rng.IntN(3)-1)
			case 4:
				return float64(m0) + 0.5 + float64(rng.IntN(5)*stride)
			case 5:
				return math.Nextafter(float64(m0+rng.IntN(3)*stride), math.Inf(rng.IntN(2)*2-1))
			case 6:
				return math.NaN()
			}
			return float64(m0) - 5 + rng.Float64()*float64(m1-m0+10)
		}
		mFirst, mLast := end(), end()
		var want []int
		for m := m0; m <= m1; m += stride {
			if !(float64(m) < mFirst || float64(m) > mLast) {
				want = append(want, m)
			}
		}
		first, last := countingCounts(m0, m1, stride, mFirst, mLast)
		var got []int
		for m := first; m <= last; m += stride {
			got = append(got, m)
		}
		if len(got) != len(want) {
			t.Fatalf("m0 %d m1 %d stride %d mFirst %v mLast %v: walk %v, want %v", m0, m1, stride, mFirst, mLast, got, want)
		}
		for i := range got {
			if got[i] != want[i] {
				t.Fatalf("m0 %d m1 %d stride %d mFirst %v mLast %v: walk %v, want %v", m0, m1, stride, mFirst, mLast, got, want)
			}
		}
	}
}

// TestReview66LogFactorialsMonotone: emBelow bounds 2 log m! over [0, m1]
// by 2 lf[m1]; the table (a compensated running sum) never decreases.
func TestReview66LogFactorialsMonotone(t *testing.T) {
	lf := logFactorials(3_000_000)
	for m := 1; m < len(lf); m++ {
		if lf[m] < lf[m-1] || lf[m] < 0 {
			t.Fatalf("lf[%d] = %v after lf[%d] = %v", m, lf[m], m-1, lf[m-1])
		}
	}
}
