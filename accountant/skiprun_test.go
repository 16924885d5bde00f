package accountant

import (
	"math"
	"math/cmplx"
	"math/rand/v2"
	"testing"
)

// TestSkipRunSkipsOnlySkipped checks skipRun's claim on random lattice
// laws: every coefficient it passes over after a skipped one would have
// been skipped by the window's test a + phiErr < skipBelow, where a is
// |phi(k)| computed as the window computes it (here from its own table
// lookups, k pos mod L taken directly rather than advanced). Laws from
// near point masses (|phi| close to 1 everywhere, short runs) to spread
// ones, n from 1e2 to 1e8.
func TestSkipRunSkipsOnlySkipped(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 8))
	var runs, passed int
	for trial := range 60 {
		L := []int{360, 1024, 4374, 20000}[trial%4]
		npts := 2 + rng.IntN(12)
		nf := math.Pow(10, 2+6*rng.Float64())
		idx := make([]int64, npts)
		w := make([]float64, npts)
		x := int64(-rng.IntN(40))
		var W float64
		for i := range idx {
			x += 1 + int64(rng.IntN(3))
			idx[i] = x
			w[i] = math.Pow(rng.Float64(), 1+8*rng.Float64())
			W += w[i]
		}
		if trial%3 == 0 { // nearly a point mass
			w[rng.IntN(npts)] += 50 * W
		}
		W = 0
		for _, v := range w {
			W += v
		}
		for i := range w {
			w[i] /= W
		}
		tab := twiddleTable(L)
		phiErr := (2*20 + 12 + 2*float64(npts) + 4) * ulp
		skipBelow := math.Exp(-745/nf) * (1 - 1e-9)
		a := func(k int) float64 {
			var re, im float64
			for i, ix := range idx {
				pos := int(((ix % int64(L)) + int64(L)) % int64(L))
				m := int(int64(k) * int64(pos) % int64(L))
				if m <= L/2 {
					re += w[i] * real(tab[m])
					im += w[i] * imag(tab[m])
				} else {
					re += w[i] * real(tab[L-m])
					im -= w[i] * imag(tab[L-m])
				}
			}
			return cmplx.Abs(complex(re, im))
		}
		lip := lipschitzPhi(w, idx, L)
		for k := 0; k <= L/2; k++ {
			ak := a(k)
			if !(ak == 0 || ak+phiErr < skipBelow) {
				continue
			}
			d := skipRun(ak, phiErr, lip, skipBelow)
			if d > 0 {
				runs++
			}
			for j := k + 1; j <= min(k+d, L/2); j++ {
				passed++
				if aj := a(j); !(aj == 0 || aj+phiErr < skipBelow) {
					t.Fatalf("trial %d (L %d, n %.3g): skipRun at k %d (a %.17g) passes over %d, which the test keeps (a %.17g, skipBelow %.17g)", trial, L, nf, k, ak, j, aj, skipBelow)
				}
			}
		}
	}
	if runs < 100 || passed < 10000 {
		t.Fatalf("only %d runs passing over %d coefficients: the laws do not exercise skipRun", runs, passed)
	}
}
