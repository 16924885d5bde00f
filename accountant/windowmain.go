package accountant

import (
	"math"
	"math/cmplx"
)

// windowMain returns the window's main sum over its positive points,
// sum_{i=max(A,1)}^{A+L-1} h i e^{-theta h i} p(i) in the scaled unit, from
// the n-fold law's kept coefficients coefN (error bounds errNk), with its
// floating-point error bound and an upper bound on the weights
// h i e^{-theta h i} (for the alias term). The sum is taken in the
// frequency domain (rampsum.go), or by one inverse FFT where most
// coefficients are kept (windowfft.go).
func windowMain(coefN []halfCoef, errNk []float64, L int, A int64, h, theta float64, t []complex128) (main, fpErr, maxSU float64) {
	i0, i1 := max(A, 1), A+int64(L)-1
	if i1 < i0 {
		return 0, 0, 0
	}
	maxSU = rampMaxF(h, theta, i0, i1)
	if useFFTMain(len(coefN), L, i1-i0+1) {
		main, fpErr = fftMain(coefN, errNk, L, i0, i1, h, theta, maxSU)
	} else {
		main, fpErr = rampMain(coefN, errNk, newRampSum(h, theta, i0, i1, L, t))
	}
	return main, fpErr, maxSU
}

// windowMaxSU is the maxSU that windowMain returns for the window, from
// the window alone (no coefficients).
func windowMaxSU(L int, A int64, h, theta float64) float64 {
	i0, i1 := max(A, 1), A+int64(L)-1
	if i1 < i0 {
		return 0
	}
	return rampMaxF(h, theta, i0, i1)
}

// rampMain is windowMain's sum in the frequency domain, over the window rs
// describes (rampsum.go).
func rampMain(coefN []halfCoef, errNk []float64, rs *rampSum) (main, fpErr float64) {
	Lf := float64(rs.L)
	var sum, mag, bound float64
	for j, c := range coefN {
		g := rs.at(c.k)
		term := c.mult * (real(c.y)*real(g) - imag(c.y)*imag(g))
		sum += term
		ay, ag := cmplx.Abs(c.y), cmplx.Abs(g)
		mag += c.mult * ay * ag
		bound += c.mult * (ay*rs.errG + (ag+rs.errG)*errNk[j])
	}
	// The skipped coefficients (|Y_k| < e^{-745}, at most L/2 + 1 of
	// them) add at most 2 (L/2 + 1) e^{-745} F / L < 1e-300 F. The sums
	// bound and mag carry their own rounding, at most (K + 4) u of them
	// (with the 1e-10 for the rest); the last term is rampsum.go's
	// subnormal clause.
	K := float64(len(coefN))
	fpErr = (bound+(K+4)*ulp*mag)/Lf*(1+(K+4)*ulp+1e-10) + 1e-300*rs.total + math.Ldexp(math.Max(1, rs.h), -900)
	return sum / Lf, fpErr
}
