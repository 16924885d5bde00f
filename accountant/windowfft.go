package accountant

import (
	"math"
	"math/bits"
)

// The window's main sum by an inverse FFT, for windows that keep most of
// their coefficients.
//
// Near eps0 the tilted lattice law can be nearly a point mass: then
// |phi(k)| stays near 1 for every k, all L/2 coefficients survive the n-th
// power, and rampsum.go's sums (about 2 log2(L) steps per coefficient)
// cost more than one inverse FFT of length L and a pass over the window's
// points. fftMain is that computation, as the window made it before
// rampsum.go:
//
//	M = sum_{i=i0}^{i1} f(i) p(i),  p = the inverse real DFT of the kept
//	coefficients (the others set to 0), f(i) = h i e^{-theta h i}.
//
// Its floating-point error, by Cauchy-Schwarz and Parseval: |sum f dp| <=
// ||f||_2 ||dp||_2, where ||dp||_2 is at most ||dY||_2/sqrt(L) (the
// coefficients' errors e_k through the normalised inverse DFT) plus
// 5 u log2(L) ||p||_2 (the inverse FFT's normwise rounding error, with
// ||p||_2 = ||Y||_2/sqrt(L)). ||f||_2 is summed in units of maxSU (an
// upper bound on every f(i), rampsum.go's maxF), so that its squares do
// not underflow where every weight is below 1e-154; weights that are
// themselves subnormal (theta h i near 745) carry absolute errors, which
// rampsum.go's subnormal term 2^-900 max(1, h) covers. The skipped
// coefficients (below e^{-745}), the compensated sum's rounding over at
// most L points and each weight's own rounding (exp's argument: up to
// (2 theta h i + 10) u, at most about 1500 u, inside the 1e-12) are left
// to the window's final relative margin (4 L u + 1e-12), as before.

// useFFTMain reports whether K kept coefficients of a window of length L
// whose positive part has c points are cheaper by the inverse FFT.
func useFFTMain(K, L int, c int64) bool {
	return float64(K)*float64(2*bits.Len64(uint64(c))) > 8*float64(L)
}

// fftMain returns the main sum over [i0, i1] (i0 >= 1) and its error bound,
// from the kept coefficients coefN with error bounds errNk.
func fftMain(coefN []halfCoef, errNk []float64, L int, i0, i1 int64, h, theta, maxSU float64) (main, fpErr float64) {
	fft, putFFT := getFFT(L)
	defer putFFT()
	Y := complexPool.get(L/2 + 1)[:L/2+1]
	clear(Y)
	pn := floatPool.get(L)[:L]
	defer func() { complexPool.put(Y); floatPool.put(pn) }()
	var err2N, l2N float64
	for j, c := range coefN {
		Y[c.k] = c.y
		err2N += c.mult * errNk[j] * errNk[j]
		l2N += c.mult * real(c.y*complex(real(c.y), -imag(c.y)))
	}
	pn = fft.Sequence(pn, Y)
	Lf := float64(L)
	logL := math.Log2(Lf) + 1
	l2ErrN := math.Sqrt(err2N/Lf) + 5*ulp*logL*math.Sqrt(l2N/Lf)
	var acc kahan
	var sumSU2 float64
	pos := int(i0 % int64(L))
	for i := i0; i <= i1; i++ {
		sv := h * float64(i)
		u := 1.0
		if theta != 0 {
			u = math.Exp(-theta * sv)
		}
		pv := pn[pos] / Lf
		if pos++; pos == L {
			pos = 0
		}
		acc.add(sv * pv * u)
		su := sv * u / maxSU
		sumSU2 += su * su
		if u == 0 {
			break
		}
	}
	return acc.sum, l2ErrN*maxSU*math.Sqrt(sumSU2)*(1+1e-10) + math.Ldexp(math.Max(1, h), -900)
}
