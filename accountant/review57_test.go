package accountant

import (
	"math"
	"testing"
)

// A dominant atom z=1 (mass ~1) plus 20 atoms of mass 1e-18 each: the
// enumeration exceeds sparseMaxTerms, the merged set is a single atom whose
// bracket is exact (lo = hi = 1), and W ~ 1e-17 is below half an ulp of 1,
// so lo - W and hi + W round back to 1.
func review57Set(zTiny float64) (prepared, float64) {
	p := prepared{z: []float64{1}, w: []float64{1}}
	sum := 0.0 // D - 1 = sum w_j (z_j - 1), exactly (all values positive: D = E[Z])
	for j := 0; j < 20; j++ {
		z := zTiny + 0.001*float64(j)
		p.z = append(p.z, z)
		p.w = append(p.w, 1e-18)
		sum += 1e-18 * (z - 1)
	}
	p.maxZ = 2
	return p, sum
}

func TestReview57LoAboveExact(t *testing.T) {
	p, dev := review57Set(0.5) // exact = 1 + dev, dev ~ -1e-17
	b, ok := sparseExact(p, 100)
	t.Logf("ok %v lo %.17g hi %.17g exact-1 = %g", ok, b.lo, b.hi, dev)
	if ok && b.lo >= 1 {
		t.Errorf("lo %.17g >= 1 but exact value is 1 + %g", b.lo, dev)
	}
}

func TestReview57HiBelowExact(t *testing.T) {
	p, dev := review57Set(1.5)
	b, ok := sparseExact(p, 100)
	t.Logf("ok %v lo %.17g hi %.17g exact-1 = %g", ok, b.lo, b.hi, dev)
	if ok && b.hi <= 1 {
		t.Errorf("hi %.17g <= 1 but exact value is 1 + %g", b.hi, dev)
	}
}

// NaN/Inf handling: W = Inf or NaN must decline; b.lo = 0 with W > 0 declines.
func TestReview57NonFinite(t *testing.T) {
	for _, zt := range []float64{math.Inf(1), math.Inf(-1), math.NaN(), 1e300} {
		p := prepared{z: []float64{-1e300, 7, 3, zt}, w: []float64{0.8, 0.15, 0.05 - 1e-19, 1e-19}, maxZ: 7}
		b, ok, _ := sparseMerged(p, 0, 12, false)
		if ok {
			t.Errorf("z %g: taken [%g, %g]", zt, b.lo, b.hi)
		}
	}
	// lo = 0: merged set has D' = 0 (all values negative).
	p := prepared{z: []float64{-1, -2, -3, 5}, w: []float64{0.8, 0.15, 0.05 - 1e-19, 1e-19}, maxZ: 5}
	b, ok, _ := sparseMerged(p, 0, 12, false)
	t.Logf("lo=0 case: ok %v %v", ok, b)
	if ok && b.lo > 0 {
		t.Errorf("lo %g", b.lo)
	}
	// w_j = 0 with infinite distance: 0*Inf = NaN -> declined.
	p = prepared{z: []float64{-1, 7, math.Inf(1)}, w: []float64{0.8, 0.2, 0}, maxZ: 7}
	if b, ok, _ := sparseMerged(p, 0, 12, false); ok {
		t.Errorf("w=0 z=Inf taken %v", b)
	}
}

// The same single-atom exact bracket reached from an AtomSet via compute:
// confirms the merged path is what produces lo = hi = 1 (terms > limit).
func TestReview57ViaMergedPath(t *testing.T) {
	p, _ := review57Set(0.5)
	mean := 100 * 20e-18
	mMax := int(math.Min(100, math.Ceil(mean+6*math.Sqrt(mean)+10)))
	terms := termsUpTo(20, 0, mMax, 0, sparseMaxTerms)
	b, ok, _ := sparseMerged(p, 0, 100, false)
	t.Logf("terms %g > %d: %v; sparseMerged ok %v [%.17g, %.17g]", terms, sparseMaxTerms, terms > sparseMaxTerms, ok, b.lo, b.hi)
}
