package accountant

// Independent checks (a second engineer's review) of windowMain's two
// paths (fftMain, rampMain) against a 400-bit direct evaluation of
// M = sum_{i=max(A,1)}^{A+L-1} f(i) p(i), f(i) = h i e^{-theta h i},
// p(i) = (1/L) sum_k mult_k Re(Y_k w^{k i}) from the given half spectrum
// (imaginary parts of Y_0 and Y_{L/2} dropped, as the real inverse DFT
// does), with the coefficients handed to the code perturbed within their
// stated bounds errNk. Helpers r50* are rampsum_indep_test.go's.

import (
	"math"
	"math/big"
	"math/cmplx"
	"math/rand/v2"
	"testing"
)

type r52Case struct {
	L      int
	A      int64
	h, th  float64 // th = theta h
	kind   int     // 0 point mass, 1 narrow bump, 2 random, 3 sparse random spectrum
	relErr float64 // perturbation of the coefficients, relative
}

// r52Spectrum returns the exact half spectrum (as floats) and a perturbed
// copy with its per-coefficient bounds.
func r52Spectrum(rng *rand.Rand, c r52Case) (exact, given []halfCoef, errNk []float64) {
	L := c.L
	p := make([]float64, L)
	switch c.kind {
	case 0:
		p[rng.IntN(L)] = 1
	case 1:
		m := rng.IntN(L)
		for d := -3; d <= 3; d++ {
			p[((m+d)%L+L)%L] = math.Exp(-float64(d*d) / 2)
		}
	default:
		for j := range p {
			p[j] = rng.Float64()
		}
	}
	for k := 0; k <= L/2; k++ {
		var re, im float64
		for j, v := range p {
			if v == 0 {
				continue
			}
			s, co := math.Sincos(-2 * math.Pi * float64(int64(k)*int64(j)%int64(L)) / float64(L))
			re += v * co
			im += v * s
		}
		y := complex(re, im)
		if k == 0 || (L%2 == 0 && k == L/2) {
			y = complex(re, 0)
		}
		if c.kind == 3 && k > 0 && rng.IntN(3) > 0 {
			continue // a skipped coefficient: exactly 0 in M's definition
		}
		mult := 2.0
		if k == 0 || (L%2 == 0 && k == L/2) {
			mult = 1
		}
		e := c.relErr * cmplx.Abs(y)
		d := complex(rng.Float64()*2-1, rng.Float64()*2-1) * complex(e/math.Sqrt2, 0)
		if k == 0 || (L%2 == 0 && k == L/2) {
			d = complex(real(d), 0)
		}
		exact = append(exact, halfCoef{k: k, y: y, mult: mult})
		given = append(given, halfCoef{k: k, y: y + d, mult: mult})
		errNk = append(errNk, e)
	}
	return exact, given, errNk
}

// r52Exact returns M at 400 bits (as a float64) and the exact max of f.
func r52Exact(exact []halfCoef, c r52Case) (M, fmax float64) {
	L := int64(c.L)
	i0, i1 := max(c.A, 1), c.A+L-1
	if i1 < i0 {
		return 0, 0
	}
	cs := make([]*big.Float, L)
	sn := make([]*big.Float, L)
	for m := range L {
		cs[m], sn[m] = r50Cis(m, L)
	}
	theta := c.th / c.h
	sum := r50F(0)
	bmax := r50F(0)
	for i := i0; i <= i1; i++ {
		s := new(big.Float).SetPrec(r50Prec).Mul(r50F(c.h), r50F(float64(i)))
		arg := new(big.Float).SetPrec(r50Prec).Mul(r50F(theta), s)
		f := new(big.Float).SetPrec(r50Prec).Mul(s, r50Exp(arg.Neg(arg)))
		if f.Cmp(bmax) > 0 {
			bmax = f
		}
		p := r50F(0)
		for _, co := range exact {
			m := int64(co.k) * (i % L) % L
			t := new(big.Float).SetPrec(r50Prec).Mul(r50F(real(co.y)), cs[m])
			if !(co.k == 0 || (L%2 == 0 && int64(co.k) == L/2)) {
				t.Sub(t, new(big.Float).SetPrec(r50Prec).Mul(r50F(imag(co.y)), sn[m]))
			}
			t.Mul(t, r50F(co.mult))
			p.Add(p, t)
		}
		sum.Add(sum, p.Mul(p, f))
	}
	sum.Quo(sum, r50F(float64(L)))
	M, _ = sum.Float64()
	fmax, _ = bmax.Float64()
	return M, fmax
}

// r52Check compares fftMain, rampMain and windowMain with M; it returns
// the FFT path's |main - M| / fpErr (without the margin).
func r52Check(t *testing.T, rng *rand.Rand, c r52Case) float64 {
	t.Helper()
	exact, given, errNk := r52Spectrum(rng, c)
	M, fmax := r52Exact(exact, c)
	L := c.L
	tab := twiddleTable(L)
	theta := c.th / c.h
	margin := 4*float64(L)*ulp + 1e-12
	ok := func(name string, v, e float64) {
		if !(math.Abs(v-M) <= e+margin*(math.Abs(v)+e)) {
			t.Errorf("%s %+v (K %d): main %.17g, exact %.17g, apart %.3g > fpErr %.3g (+margin)", name, c, len(given), v, M, math.Abs(v-M), e)
		}
	}
	i0, i1 := max(c.A, 1), c.A+int64(L)-1
	m, e, maxSU := windowMain(given, errNk, L, c.A, c.h, theta, tab)
	ok("windowMain", m, e)
	if !(maxSU >= fmax) {
		t.Errorf("%+v: maxSU %.17g below the exact max %.17g", c, maxSU, fmax)
	}
	if i1 < i0 {
		return 0
	}
	fm, fe := fftMain(given, errNk, L, i0, i1, c.h, theta, newRampSum(c.h, theta, i0, i1, L, twiddleTable(L)).maxF())
	ok("fftMain", fm, fe)
	rm, re := rampMain(given, errNk, newRampSum(c.h, theta, i0, i1, L, tab))
	ok("rampMain", rm, re)
	if fe > 0 {
		return math.Abs(fm-M) / fe
	}
	return 0
}

func TestWindowMainSumsAgainstExact(t *testing.T) {
	rng := rand.New(rand.NewPCG(52, 1))
	var worst float64
	n := 150
	if testing.Short() {
		n = 20
	}
	for trial := range n {
		L := []int{128, 135, 240, 256, 243}[trial%5]
		var A int64
		switch trial % 4 {
		case 0:
			A = -int64(L / 2)
		case 1:
			A = int64(rng.IntN(3*L)) - int64(L)
		case 2:
			A = 1 + int64(rng.IntN(1e6)) // far from 0: f nearly flat if theta h small
		case 3:
			A = 0
		}
		h := math.Pow(10, -3+4*rng.Float64())
		i1 := float64(A + int64(L) - 1)
		var th float64
		switch rng.IntN(4) {
		case 0:
			th = 0
		case 1:
			th = rng.Float64() * 5 / math.Max(i1, 1)
		default: // theta h i up to 745 over the window, f(i0) above 1e-150
			// (below it see TestFFTMainSumSU2Underflow)
			th = (1 + 744*rng.Float64()) / math.Max(i1, 1)
			th = math.Min(th, 300/float64(max(A, 1)))
		}
		c := r52Case{L: L, A: A, h: h, th: th, kind: trial % 4, relErr: []float64{0, 1e-13, 1e-9}[rng.IntN(3)]}
		worst = math.Max(worst, r52Check(t, rng, c))
	}
	t.Logf("fftMain: worst |main - M| / fpErr = %.3g", worst)
}

// Windows at the switch between the two paths (K 2 bits.Len(c) vs 8 L),
// empty and one-point windows, and theta h i near exp's underflow.
func TestWindowMainPathSwitchAndEdges(t *testing.T) {
	rng := rand.New(rand.NewPCG(52, 2))
	L := 128
	for _, tc := range []struct {
		A    int64
		want int // 1 FFT, 0 ramp, -1 empty
	}{{0, 0}, {1, 1}, {-int64(L), -1}, {-int64(L) + 1, -1}, {-int64(L) + 2, 0}} {
		c := r52Case{L: L, A: tc.A, h: 0.37, th: 0.01, kind: 0}
		i0, i1 := max(c.A, 1), c.A+int64(L)-1
		got := -1
		if i1 >= i0 {
			got = 0
			if useFFTMain(L/2+1, L, i1-i0+1) {
				got = 1
			}
		}
		if got != tc.want {
			t.Errorf("A %d: path %d, want %d", tc.A, got, tc.want)
		}
		r52Check(t, rng, c)
	}
	// f flat across the window, theta h i in [700, 700.1].
	for _, kind := range []int{0, 1, 2} {
		A := int64(1_000_000)
		c := r52Case{L: L, A: A, h: 1.2345678901234567e-3, th: 700 / float64(A), kind: kind}
		r52Check(t, rng, c)
	}
}

// Reproducer (fails at 09d8457, as the pre-98ab9d7 FFT sum would have):
// where the window's weights f(i) and the products f(i) p(i) are
// subnormal (theta h i from 730 to exp's underflow, the u == 0 break),
// fftMain's fpErr underflows to 0 while its sum is off by up to 1.6e-319
// absolute; the relative margin is 0 there too. rampMain carries the
// clause 2^-900 max(1, h) for exactly this; fftMain does not.
func TestFFTMainSubnormalWeights(t *testing.T) {
	rng := rand.New(rand.NewPCG(52, 3))
	L := 128
	tab := twiddleTable(L)
	for _, x := range []float64{730, 740, 742, 744, 745} {
		for _, kind := range []int{0, 1, 2} {
			A := int64(1_000_000)
			c := r52Case{L: L, A: A, h: 1.2345678901234567e-3, th: x / float64(A), kind: kind}
			exact, given, errNk := r52Spectrum(rng, c)
			M, _ := r52Exact(exact, c)
			theta := c.th / c.h
			i0, i1 := c.A, c.A+int64(L)-1
			margin := 4*float64(L)*ulp + 1e-12
			fm, fe := fftMain(given, errNk, L, i0, i1, c.h, theta, newRampSum(c.h, theta, i0, i1, L, twiddleTable(L)).maxF())
			if d := math.Abs(fm - M); !(d <= fe+margin*(math.Abs(fm)+fe)) {
				t.Errorf("theta h A %g kind %d: fftMain %.17g, exact %.17g, apart %.3g > fpErr %.3g (with 2^-900 max(1,h): %v)",
					x, kind, fm, M, d, fe, d <= fe+math.Ldexp(math.Max(1, c.h), -900))
			}
			rm, re := rampMain(given, errNk, newRampSum(c.h, theta, i0, i1, L, tab))
			if d := math.Abs(rm - M); !(d <= re+margin*(math.Abs(rm)+re)) {
				t.Errorf("theta h A %g kind %d: rampMain apart %.3g > %.3g", x, kind, d, re)
			}
		}
	}
}

// Reproducer (fails at 09d8457; the pre-98ab9d7 loop had the same sum):
// fftMain's fpErr is l2ErrN sqrt(sum f(i)^2), and the squares underflow
// to 0 once every f(i) in the window is below ~1.5e-154 (theta h i0 >
// ~354 + log(h i0)), though f(i) p(i) and the FFT's rounding (~1e-16
// ||p||_2 ||f||_2) are still normal numbers: the bound is 0 and the sum is
// off by 8.5e-186 (exact 2.9e-192). rampMain bounds the same window. The
// bound with ||f||_2 taken scaled (sum (f/maxF)^2, times maxF) covers it.
func TestFFTMainSumSU2Underflow(t *testing.T) {
	rng := rand.New(rand.NewPCG(52, 4))
	for _, c := range []r52Case{
		{L: 256, A: 336, h: 3.0742684337315676, th: 1.2168616553785307, kind: 1, relErr: 1e-9},
		{L: 256, A: 336, h: 3.0742684337315676, th: 1.2168616553785307, kind: 2, relErr: 1e-9},
		{L: 240, A: 161635, h: 0.0011813461228877744, th: 0.002712686044440972, kind: 2, relErr: 1e-9},
		{L: 135, A: 176640, h: 1.618433593559762, th: 0.002880997053193646, kind: 2, relErr: 1e-9},
	} {
		exact, given, errNk := r52Spectrum(rng, c)
		M, _ := r52Exact(exact, c)
		L := c.L
		theta := c.th / c.h
		i0, i1 := c.A, c.A+int64(L)-1
		if !useFFTMain(len(given), L, i1-i0+1) {
			t.Fatalf("%+v: not the FFT path", c)
		}
		margin := 4*float64(L)*ulp + 1e-12
		fm, fe := fftMain(given, errNk, L, i0, i1, c.h, theta, newRampSum(c.h, theta, i0, i1, L, twiddleTable(L)).maxF())
		rm, re := rampMain(given, errNk, newRampSum(c.h, theta, i0, i1, L, twiddleTable(L)))
		// fftMain's l2ErrN, and ||f||_2 scaled by its largest term.
		var err2N, l2N float64
		for j, co := range given {
			err2N += co.mult * errNk[j] * errNk[j]
			l2N += co.mult * real(co.y*cmplx.Conj(co.y))
		}
		Lf := float64(L)
		l2ErrN := math.Sqrt(err2N/Lf) + 5*ulp*(math.Log2(Lf)+1)*math.Sqrt(l2N/Lf)
		fs := make([]float64, 0, L)
		var fmax float64
		for i := i0; i <= i1; i++ {
			sv := c.h * float64(i)
			fs = append(fs, sv*math.Exp(-theta*sv))
			fmax = math.Max(fmax, fs[len(fs)-1])
		}
		var s2 float64
		for _, f := range fs {
			s2 += (f / fmax) * (f / fmax)
		}
		scaled := l2ErrN * fmax * math.Sqrt(s2) * (1 + 1e-12)
		d := math.Abs(fm - M)
		if !(d <= fe+margin*(math.Abs(fm)+fe)) {
			t.Errorf("%+v: fftMain %.17g, exact %.17g, apart %.3g > fpErr %.3g; with ||f||_2 scaled the bound is %.3g (covers: %v); rampMain apart %.3g <= %.3g: %v",
				c, fm, M, d, fe, scaled, d <= scaled, math.Abs(rm-M), re, math.Abs(rm-M) <= re)
		}
	}
}

// The exact reference is sharp enough to catch the faults
// windowfft_test.go names: a conjugated spectrum or a start shifted by one.
func TestWindowMainReferenceCatchesFaults(t *testing.T) {
	rng := rand.New(rand.NewPCG(52, 5))
	var conjCaught, shiftCaught, n int
	for trial := range 10 {
		L := []int{128, 135, 240}[trial%3]
		c := r52Case{L: L, A: -int64(L / 3), h: 0.05 + rng.Float64(), th: 0.02 * rng.Float64(), kind: 2}
		exact, given, errNk := r52Spectrum(rng, c)
		M, _ := r52Exact(exact, c)
		i0, i1 := int64(1), c.A+int64(L)-1
		margin := 4*float64(L)*ulp + 1e-12
		theta := c.th / c.h
		conj := make([]halfCoef, len(given))
		for j, co := range given {
			conj[j] = halfCoef{k: co.k, y: cmplx.Conj(co.y), mult: co.mult}
		}
		n++
		if m, e := fftMain(conj, errNk, L, i0, i1, c.h, theta, newRampSum(c.h, theta, i0, i1, L, twiddleTable(L)).maxF()); math.Abs(m-M) > e+margin*(math.Abs(m)+e) {
			conjCaught++
		}
		// shifted start: the same weights read against p one position on
		rot := make([]halfCoef, len(given))
		for j, co := range given {
			s, cs := math.Sincos(2 * math.Pi * float64(co.k) / float64(L))
			rot[j] = halfCoef{k: co.k, y: co.y * complex(cs, s), mult: co.mult}
		}
		if m, e := fftMain(rot, errNk, L, i0, i1, c.h, theta, newRampSum(c.h, theta, i0, i1, L, twiddleTable(L)).maxF()); math.Abs(m-M) > e+margin*(math.Abs(m)+e) {
			shiftCaught++
		}
	}
	if conjCaught < n-1 || shiftCaught < n-1 {
		t.Errorf("of %d: conjugated caught %d, shifted caught %d", n, conjCaught, shiftCaught)
	}
}
