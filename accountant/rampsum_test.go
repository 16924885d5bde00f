package accountant

import (
	"fmt"
	"math"
	"math/big"
	"math/cmplx"
	"testing"

	"gonum.org/v1/gonum/dsp/fourier"
)

// The frequency-domain sums G_k of rampsum.go against a 400-bit evaluation
// that shares nothing with them: the exact z = e^{-theta h} e^{2 pi i k/L}
// from series in big.Float (r50Exp, r50Cis in rampsum_indep_test.go; theta
// and h taken as the exact binary numbers they are), its powers by
// repeated multiplication, and the sum term by term. Each computed G_k must be within the bound errG of that value, the
// bound must not be vacuous, and total and maxF must bound what they claim.

// piRef is pi to 100 digits.
const piRef = "3.141592653589793238462643383279502884197169399375105820974944592307816406286208998628034825342117068"

// refRamp returns G_k = sum_{i=i0}^{i1} h i e^{-theta h i} e^{2 pi i k i/L}
// (real and imaginary parts), F = sum_i h i e^{-theta h i} and max_i of its
// terms, at 400 bits.
func refRamp(h, theta float64, i0, i1 int64, L, k int) (re, im, F, fmax float64) {
	th := new(big.Float).SetPrec(r50Prec).Mul(r50F(theta), r50F(h))
	rho := r50Exp(new(big.Float).SetPrec(r50Prec).Neg(th))
	c, s := r50Cis(int64(k), int64(L))
	zr := new(big.Float).SetPrec(r50Prec).Mul(rho, c)
	zi := new(big.Float).SetPrec(r50Prec).Mul(rho, s)
	// z^{i0} by binary powering.
	pr, pim := r50F(1), r50F(0)
	br, bi := new(big.Float).Copy(zr), new(big.Float).Copy(zi)
	mul := func(ar, ai, cr, ci *big.Float) (*big.Float, *big.Float) {
		t1 := new(big.Float).SetPrec(r50Prec).Mul(ar, cr)
		t2 := new(big.Float).SetPrec(r50Prec).Mul(ai, ci)
		t3 := new(big.Float).SetPrec(r50Prec).Mul(ar, ci)
		t4 := new(big.Float).SetPrec(r50Prec).Mul(ai, cr)
		return t1.Sub(t1, t2), t3.Add(t3, t4)
	}
	for e := i0; e > 0; e >>= 1 {
		if e&1 == 1 {
			pr, pim = mul(pr, pim, br, bi)
		}
		br, bi = mul(br, bi, br, bi)
	}
	// |z|^{i0} alike, for F.
	ar := r50F(1)
	rb := new(big.Float).Copy(rho)
	for e := i0; e > 0; e >>= 1 {
		if e&1 == 1 {
			ar.Mul(ar, rb)
		}
		rb.Mul(rb, rb)
	}
	sr, si, sF := r50F(0), r50F(0), r50F(0)
	hb := r50F(h)
	for i := i0; i <= i1; i++ {
		fi := new(big.Float).SetPrec(r50Prec).Mul(hb, r50F(float64(i)))
		sr.Add(sr, new(big.Float).SetPrec(r50Prec).Mul(fi, pr))
		si.Add(si, new(big.Float).SetPrec(r50Prec).Mul(fi, pim))
		fa := new(big.Float).SetPrec(r50Prec).Mul(fi, ar)
		sF.Add(sF, fa)
		if v, _ := fa.Float64(); v > fmax {
			fmax = v
		}
		pr, pim = mul(pr, pim, zr, zi)
		ar.Mul(ar, rho)
	}
	re, _ = sr.Float64()
	im, _ = si.Float64()
	F, _ = sF.Float64()
	return re, im, F, fmax
}

type rampCase struct {
	h, theta float64
	i0, i1   int64
	L        int
}

func rampCases() []rampCase {
	return []rampCase{
		{h: 0.01, theta: 0, i0: 1, i1: 700, L: 1500},            // z = 1 at k = 0
		{h: 0.37, theta: 1e-13, i0: 1, i1: 2999, L: 6000},       // theta h tiny: the closed forms cancel here
		{h: 0.05, theta: 0.8, i0: 1, i1: 1023, L: 2048},         // c a power of two minus one
		{h: 0.05, theta: 0.8, i0: 1, i1: 1024, L: 2048},         // and a power of two
		{h: 2.5, theta: 300, i0: 1, i1: 400, L: 800},            // e^{-theta h i} underflows after a few terms
		{h: 1e-3, theta: 2.1, i0: 1, i1: 4000, L: 6561},         // L = 3^8
		{h: 0.02, theta: 0, i0: 3000, i1: 3000 + 1999, L: 2000}, // a window far right of 0, c = L
		{h: 0.3, theta: 0.01, i0: 1, i1: 1, L: 9},               // one term
		{h: 0.7, theta: 1e-4, i0: 17, i1: 17 + 4373, L: 4374},   // L = 2 3^7, i0 > 1
	}
}

func TestRampSumAgainstBigFloat(t *testing.T) {
	for _, tc := range rampCases() {
		tab := twiddleTable(tc.L)
		rs := newRampSum(tc.h, tc.theta, tc.i0, tc.i1, tc.L, tab)
		ks := []int{0, 1, 2, 7, tc.L / 3, tc.L/2 - 1, tc.L / 2}
		var F, fmax float64
		for _, k := range ks {
			if k < 0 || k > tc.L/2 {
				continue
			}
			name := fmt.Sprintf("h %g theta %g [%d,%d] L %d k %d", tc.h, tc.theta, tc.i0, tc.i1, tc.L, k)
			re, im, f, fm := refRamp(tc.h, tc.theta, tc.i0, tc.i1, tc.L, k)
			F, fmax = f, fm
			g := rs.at(k)
			d := math.Hypot(real(g)-re, imag(g)-im)
			if !(d <= rs.errG) {
				t.Errorf("%s: G = %v, exact %v%+vi: off by %.3g > bound %.3g", name, g, re, im, d, rs.errG)
			}
			// The bound is a bound on rounding, not a loose estimate: at most
			// a few thousand u of F.
			if rs.errG > 1e-11*F {
				t.Errorf("%s: bound %.3g is above 1e-11 F = %.3g", name, rs.errG, 1e-11*F)
			}
		}
		if !(rs.total >= F) || rs.total > F*(1+1e-11) {
			t.Errorf("h %g theta %g: total %.17g, exact F %.17g", tc.h, tc.theta, rs.total, F)
		}
		if !(rs.maxF() >= fmax) || rs.maxF() > fmax*(1+1e-12)+1e-300 {
			t.Errorf("h %g theta %g: maxF %.17g, exact max %.17g", tc.h, tc.theta, rs.maxF(), fmax)
		}
	}
}

// TestWindowMainAgainstFFT recomputes the window's main sum the way it
// was computed before rampsum.go, by an FFT: the tilted lattice weights
// are transformed forward (gonum), raised to the n-th power, transformed
// back to the wrapped n-fold law, and summed point by point against
// s e^{-theta s}. The window's upper bound (main, its error bound and a
// tail term below 1e-6 of it, far smaller here) must be at least that sum
// and within 1e-6 of it (the coefficients' error bound is 1e-7 of it at
// n = 1e6 with the k = 50 case's steep tilt):
// an off-by-one position, a wrong sign of the angle or a lost factor moves
// it by far more (1/sd of the lattice, about 1e-3).
func TestWindowMainAgainstFFT(t *testing.T) {
	for _, tc := range []struct {
		set   AtomSet
		n     int
		eps   float64
		hRel  float64
		label string
	}{
		{audKRRUpper(2, 1), 20_000, 0.02, 0.5, "krr k=2"},
		{audKRRUpper(10, 2), 100_000, 0.01, 0.25, "krr k=10"},
		{audKRRUpper(10, 2), 3_000, 0.3, 0.125, "krr k=10 small n"},
		{audKRRUpper(50, 4), 1_000_000, 0.001, 0.5, "krr k=50 eps 1e-3"},
	} {
		p := prepare(tc.set.Merge(), tc.eps)
		nf := float64(tc.n)
		l := newLattice(p, tc.hRel*tiltedSD(p))
		theta := l.tilt()
		k0, _, _ := l.logMGF(theta)
		// The window latticeEval takes first: 9 tilted sd either side of
		// the tilted mean, 0 (theta > 0 in every case here).
		_, _, k2 := l.logMGF(theta)
		half := math.Ceil(windowSD*math.Sqrt(nf*k2)/l.h) + 2
		if theta == 0 {
			t.Fatalf("%s: untilted", tc.label)
		}
		A, B := math.Max(nf*float64(l.imin), -half), math.Min(nf*float64(l.imax), half)
		L := fastSize(int(B - A + 1))
		r := l.window(nf, theta, k0, int64(A), L, false, false)
		if !r.tailOK {
			t.Fatalf("%s: tails not negligible", tc.label)
		}
		// The reference, by FFT.
		fft := fourier.NewFFT(L)
		x := make([]float64, L)
		for i, ix := range l.idx {
			pos := int(((ix % int64(L)) + int64(L)) % int64(L))
			x[pos] += math.Exp(l.logw[i] + theta*l.h*float64(ix) - k0)
		}
		c := fft.Coefficients(nil, x)
		for k, y := range c {
			c[k] = cmplx.Pow(y, complex(nf, 0))
		}
		pn := fft.Sequence(nil, c)
		var ref float64
		for i := max(int64(A), 1); i < int64(A)+int64(L); i++ {
			s := l.h * float64(i)
			ref += s * math.Exp(-theta*s) * pn[int(((i%int64(L))+int64(L))%int64(L))] / float64(L)
		}
		ref = math.Exp(math.Log(ref) + nf*k0 - math.Log(nf))
		if !(r.hi >= ref*(1-1e-9)) || r.hi > ref*(1+1e-6) {
			t.Errorf("%s n %d eps %g: window hi %.12g, FFT sum %.12g (rel %.3g)", tc.label, tc.n, tc.eps, r.hi, ref, r.hi/ref-1)
		}
	}
}
