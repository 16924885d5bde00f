package accountant

import (
	"math"
	"math/cmplx"
	"math/rand/v2"
	"testing"
)

// TestFFTMainAgreesWithRampMain computes the window's main sum both ways
// on the same kept coefficients, the n-th powers of random lattice laws
// (near point masses among them, where every coefficient is kept and the
// window takes the FFT): the two must agree within the sum of their error
// bounds (and the window's final margin, 4 L u + 1e-12 relative, which the
// FFT's compensated sum leans on). A coefficient or an angle misplaced in
// either moves them apart by far more.
func TestFFTMainAgreesWithRampMain(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	var fftCases int
	for trial := range 40 {
		L := []int{240, 1024, 4374, 20000}[trial%4]
		nf := float64(2 + rng.IntN(500))
		npts := 2 + rng.IntN(8)
		idx := make([]int64, npts)
		w := make([]float64, npts)
		x := int64(-rng.IntN(20))
		var W float64
		for i := range idx {
			x += 1 + int64(rng.IntN(5))
			idx[i] = x
			w[i] = rng.Float64()
			W += w[i]
		}
		if trial%2 == 0 { // nearly a point mass at 0
			idx[0], w[0] = 0, 1e3*W
			W += w[0]
		}
		tab := twiddleTable(L)
		var coefN []halfCoef
		var errNk []float64
		for k := 0; k <= L/2; k++ {
			var phi complex128
			for i, ix := range idx {
				m := int(((int64(k)*ix)%int64(L) + int64(L)) % int64(L))
				e := tab[min(m, L-m)] // e^{-2 pi i m/L}
				if m > L/2 {
					e = cmplx.Conj(e)
				}
				phi += complex(w[i]/W, 0) * e
			}
			y := cmplx.Pow(phi, complex(nf, 0))
			mult := 2.0
			if k == 0 || (L%2 == 0 && k == L/2) {
				mult = 1
			}
			if cmplx.Abs(y) < 1e-300 {
				continue
			}
			coefN = append(coefN, halfCoef{k: k, y: y, mult: mult})
			errNk = append(errNk, 1e-12*cmplx.Abs(y))
		}
		h, theta := 0.01+rng.Float64(), math.Abs(rng.NormFloat64())*0.05
		A := -int64(L / 2)
		i0, i1 := int64(1), A+int64(L)-1
		r, er := rampMain(coefN, errNk, newRampSum(h, theta, i0, i1, L, tab))
		f, ef := fftMain(coefN, errNk, L, i0, i1, h, theta, newRampSum(h, theta, i0, i1, L, tab).maxF())
		if useFFTMain(len(coefN), L, i1-i0+1) {
			fftCases++
		}
		tol := er + ef + (4*float64(L)*ulp+1e-12)*math.Abs(f)
		if !(math.Abs(r-f) <= tol) {
			t.Errorf("trial %d (L %d, n %g, %d kept): ramp %.17g, fft %.17g, apart %.3g > %.3g", trial, L, nf, len(coefN), r, f, math.Abs(r-f), tol)
		}
	}
	if fftCases < 5 {
		t.Errorf("only %d cases where the window would take the FFT", fftCases)
	}
}
