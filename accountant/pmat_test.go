package accountant

import (
	"fmt"
	"math"
	"math/big"
	"math/cmplx"
	"math/rand/v2"
	"testing"

	"gonum.org/v1/gonum/dsp/fourier"
)

// TestPmAtWithinItsBound checks pmAt, the direct inverse DFT the window's
// convexity correction reads the (n-1)-fold law with, on half spectra
// shaped like the window's (a Gaussian envelope |phi|^n that underflows
// past a few hundred coefficients, random phases, a few stray
// coefficients further out, a Nyquist coefficient with a rounding-sized
// imaginary part; lengths of the form 2^a 3^b 5^c, odd ones included, as
// fastSize gives) and on the comb-shaped spectra of two-point laws
// (pmAtCombSpectrum), with checkPmAt.
func TestPmAtWithinItsBound(t *testing.T) {
	r := rand.New(rand.NewPCG(28, 2))
	for _, L := range []int{3645, 7290, 36450, 37500, 118098, 78125, 4096} {
		tab := twiddleTable(L)
		fft := fourier.NewFFT(L)
		for trial := range 3 {
			var c []halfCoef
			sigma := 20 + 200*r.Float64()
			for k := range L/2 + 1 {
				a := math.Exp(-0.5 * float64(k*k) / (sigma * sigma))
				if k > 0 && r.IntN(L/4+1) == 0 {
					a = 1e-3 * r.Float64() // a stray coefficient (near-periodicity)
				}
				if a < 1e-300 {
					continue
				}
				y := cmplx.Rect(a, 2*math.Pi*r.Float64())
				mult := 2.0
				if k == 0 || (L%2 == 0 && k == L/2) {
					mult = 1
					y = complex(real(y), 1e-17*r.NormFloat64())
				}
				c = append(c, halfCoef{k: k, y: y, mult: mult})
			}
			if L%2 == 0 && trial == 0 && c[len(c)-1].k != L/2 {
				c = append(c, halfCoef{k: L / 2, y: complex(1e-3, 1e-19), mult: 1})
			}
			pos := make([]int, 20)
			for i := range pos {
				pos[i] = r.IntN(L)
			}
			checkPmAt(t, fmt.Sprintf("L %d, Gaussian envelope %d", L, trial), c, tab, fft, L, pos)
		}
	}
	for _, tc := range []struct {
		L     int
		d     int64
		w1, m float64
	}{
		{3645, 2, 0.5, 1e6}, {7290, 3, 0.3, 1e8}, {78125, 3, 0.5, 1e8}, {4096, 5, 0.9, 3e7},
		{36450, 7, 0.5, 1e5}, {118098, 4, 0.2, 1e8}, {15, 2, 0.5, 30}, {3645, 1, 0.5, 1e6},
	} {
		tab := twiddleTable(tc.L)
		c, centre, sd := pmAtCombSpectrum(tc.L, tab, tc.d, tc.w1, tc.m)
		var pos []int
		for j := -20; j <= 20; j++ { // the teeth near the centre, and between them
			pos = append(pos, int(((centre+int64(math.Round(float64(j)*sd/8)))%int64(tc.L)+int64(tc.L))%int64(tc.L)))
		}
		for range 20 {
			pos = append(pos, r.IntN(tc.L))
		}
		checkPmAt(t, fmt.Sprintf("L %d, two points %d apart, w1 %v, m %g", tc.L, tc.d, tc.w1, tc.m), c, tab, fourier.NewFFT(tc.L), tc.L, pos)
	}
}

// checkPmAt checks pmAt on the half spectrum c at the positions pos (unnormalised
// units, as pmAt returns):
//
//   - against the same sum in 256-bit arithmetic on the same table entries,
//     within the bound window charges for it, P = (K + 32) u sum mult |y|
//     (the table's own 12 u per entry is the table's, not pmAt's: the
//     reference uses the same entries);
//   - against gonum's inverse real FFT, which it replaced, within P plus
//     the FFT's F = 5 u log2(L) ||y||_2 sqrt(L) (the bound window charged
//     before, unnormalised), and the FFT against the 256-bit sum within F;
//   - that the bound window reads now, pmAt + P + 2F, is at least the one
//     it read from the FFT, FFT + F (engine.go step 5: no lower figure
//     rises).
func checkPmAt(t *testing.T, name string, c []halfCoef, tab []complex128, fft *fourier.FFT, L int, pos []int) {
	t.Helper()
	half := make([]complex128, L/2+1)
	var absY, l2 float64
	for _, h := range c {
		half[h.k] = h.y
		absY += h.mult * cmplx.Abs(h.y)
		l2 += h.mult * real(h.y*cmplx.Conj(h.y))
	}
	P := float64(len(c)+32) * ulp * absY
	F := 5 * ulp * (math.Log2(float64(L)) + 1) * math.Sqrt(l2*float64(L))
	seq := fft.Sequence(nil, half)
	for _, p := range pos {
		got := pmAt(c, tab, L, p)
		exact := new(big.Float).SetPrec(256)
		for _, h := range c {
			m := int(int64(h.k) * int64(p) % int64(L))
			co, si := real(tab[min(m, L-m)]), -imag(tab[min(m, L-m)])
			if m > L/2 {
				si = -si
			}
			term := new(big.Float).SetPrec(256).Mul(big.NewFloat(real(h.y)), big.NewFloat(co))
			if h.mult != 1 {
				im := new(big.Float).SetPrec(256).Mul(big.NewFloat(imag(h.y)), big.NewFloat(si))
				term.Sub(term, im)
				term.Mul(term, big.NewFloat(h.mult))
			}
			exact.Add(exact, term)
		}
		e, _ := exact.Float64()
		if d := math.Abs(got - e); d > P {
			t.Fatalf("%s, pos %d: pmAt %v, exact sum %v: off by %g, above its bound %g", name, p, got, e, d, P)
		}
		if d := math.Abs(seq[p] - e); d > F {
			t.Fatalf("%s, pos %d: gonum's inverse FFT %v, exact sum %v: off by %g, above its bound %g", name, p, seq[p], e, d, F)
		}
		if d := math.Abs(got - seq[p]); d > P+F {
			t.Fatalf("%s, pos %d: pmAt %v, gonum's inverse FFT %v: apart by %g, above %g", name, p, got, seq[p], d, P+F)
		}
		if got+P+2*F < seq[p]+F {
			t.Fatalf("%s, pos %d: pmAt's bound %v is below the FFT's %v", name, p, got+P+2*F, seq[p]+F)
		}
	}
}

// pmAtCombSpectrum returns the non-zero half spectrum of the m-fold law
// of a two-point lattice law (w1 at 0, 1 - w1 at d) of length L as window
// computes it (phi from the twiddle table, |phi|^m and its phase through
// exp and Rect, coefficients whose magnitude underflows left out), and
// the m-fold law's centre and standard deviation in lattice steps. For
// d > 1 the law lives on every d-th point only (a comb, as the lower
// side's two-point sets give at small eps0): its spectrum has d peaks, and
// the points between the teeth are sums that cancel to 0.
func pmAtCombSpectrum(L int, tab []complex128, d int64, w1, m float64) (c []halfCoef, centre int64, sd float64) {
	w := []float64{w1, 1 - w1}
	idx := []int64{0, d}
	for k := range L/2 + 1 {
		var re, im float64
		for i, ix := range idx {
			j := int((int64(k) * ix) % int64(L))
			if j <= L/2 {
				re += w[i] * real(tab[j])
				im += w[i] * imag(tab[j])
			} else {
				re += w[i] * real(tab[L-j])
				im -= w[i] * imag(tab[L-j])
			}
		}
		phi := complex(re, im)
		a := cmplx.Abs(phi)
		if a == 0 || m*math.Log(a) < -745 {
			continue
		}
		y := cmplx.Rect(math.Exp(m*math.Log(a)), m*cmplx.Phase(phi))
		mult := 2.0
		if k == 0 || (L%2 == 0 && k == L/2) {
			mult = 1
		}
		c = append(c, halfCoef{k: k, y: y, mult: mult})
	}
	mean := m * (1 - w1) * float64(d)
	return c, int64(math.Round(mean)), math.Sqrt(m*w1*(1-w1)) * float64(d)
}

// TestBandEndSkipsOnlySkippedCoefficients checks bandEnd on random
// lattice laws (2 to 40 points, some adjacent, weights summing to 1 up to
// rounding) at lengths and n where it cuts: every coefficient from its
// k1 to L/2, computed as the window computes it, fails the window's test
// a + phiErr < skipBelow, so that skipping them changes nothing. A
// bandEnd that ignored the factor 2 or the margins, or took
// non-adjacent points, fails it.
func TestBandEndSkipsOnlySkippedCoefficients(t *testing.T) {
	r := rand.New(rand.NewPCG(28, 3))
	cut := 0
	for trial := range 300 {
		L := []int{3645, 7290, 36450, 4096, 78125}[trial%5]
		tab := twiddleTable(L)
		npts := 2 + r.IntN(39)
		idx := make([]int64, 0, npts)
		x := int64(r.IntN(50)) - 25
		for len(idx) < npts {
			idx = append(idx, x)
			x += 1 + int64(r.IntN(3)) // adjacent about a third of the time
		}
		w := make([]float64, npts)
		var sum float64
		for i := range w {
			w[i] = math.Exp(-8 * r.Float64())
			sum += w[i]
		}
		for i := range w {
			w[i] /= sum
		}
		n := math.Pow(10, 2+6*r.Float64())
		phiErr := float64(2*(30+2)+12+2*npts+4) * ulp
		skipBelow := math.Exp(-745/n) * (1 - 1e-9)
		k1 := bandEnd(w, idx, L, tab, phiErr, skipBelow)
		if k1 < L/2+1 {
			cut++
		}
		for k := k1; k <= L/2; k++ {
			if a := windowPhiAbs(w, idx, L, tab, k); !(a+phiErr < skipBelow) {
				t.Fatalf("trial %d (L %d, n %.3g, %d points): bandEnd %d, but coefficient %d has |phi| %v, not below %v", trial, L, n, npts, k1, k, a, skipBelow-phiErr)
			}
		}
	}
	if cut < 100 {
		t.Fatalf("bandEnd cut only %d of 300 laws: the test checks too little", cut)
	}
}

// TestBandEndAdversarialLaws runs checkBandEndAdversarial's laws (tiny
// and odd lengths, indices that wrap past L, two nearly equal heavy atoms,
// weights down to e^-700, weights that do not sum to 1, n from 1 to
// 3e8); TestBandEndAdversarialGrid (audit) runs ten times as many.
func TestBandEndAdversarialLaws(t *testing.T) {
	checkBandEndAdversarial(t, rand.New(rand.NewPCG(28, 4)), 4000)
}

// checkBandEndAdversarial checks bandEnd on trials random lattice laws
// chosen to break it: lengths from 2 to 78125 (odd ones, and L = 2 where
// L/2 is the only coefficient past 0), 2 to 6 points with steps that
// wrap past L (a point's index modulo L then lands anywhere, and the
// adjacent pair bandEnd relies on is adjacent in index, not in position),
// two heavy atoms of nearly equal weight (W^2 - 2 w_i w_j (1 - cos) then
// cancels down to (w_i - w_j)^2 at k = L/2), weights from e^-700 up,
// normalised or not (bandEnd's argument does not need W = 1), phiErr as
// window computes it for small and large exponents, and n from 1 to 3e8.
// Every coefficient from bandEnd's k1 to L/2, computed as window computes
// it, must fail both of window's tests: a + phiErr < skipBelow, and the
// logarithmic test n log(a + phiErr) < -745 it stands for (the one
// window had before skipBelow), so that skipping them changes nothing
// either way. It fails the test too if bandEnd cuts fewer than a tenth of
// the laws (the check would then check little).
func checkBandEndAdversarial(t *testing.T, r *rand.Rand, trials int) {
	t.Helper()
	cut, checked := 0, 0
	Ls := []int{2, 3, 4, 5, 6, 7, 9, 10, 15, 16, 64, 81, 125, 3645, 4096, 78125}
	ns := []float64{1, 2, 3, 5, 10, 100, 1e4, 1e6, 1e8, 3e8}
	for trial := range trials {
		L := Ls[r.IntN(len(Ls))]
		tab := twiddleTable(L)
		npts := 2 + r.IntN(5)
		idx := make([]int64, 0, npts)
		x := int64(r.IntN(2*L+3)) - int64(L)
		for len(idx) < npts {
			idx = append(idx, x)
			if r.IntN(4) == 0 {
				x += int64(1 + r.IntN(3*L+1)) // may wrap past L
			} else {
				x++
			}
		}
		w := make([]float64, npts)
		mode := r.IntN(4)
		for i := range w {
			switch mode {
			case 0: // two heavy atoms of nearly equal weight
				w[i] = 1e-12 * r.Float64()
				if i < 2 {
					w[i] = 0.5 + 1e-9*(r.Float64()-0.5)
				}
			case 1:
				w[i] = math.Exp(-40 * r.Float64())
			case 2:
				w[i] = r.Float64()
			default:
				w[i] = math.Exp(-700 * r.Float64())
			}
		}
		if r.IntN(2) == 0 {
			var s float64
			for _, v := range w {
				s += v
			}
			for i := range w {
				w[i] /= s
			}
		}
		n := ns[r.IntN(len(ns))]
		if r.IntN(2) == 0 {
			n = math.Pow(10, 8*r.Float64())
		}
		// window's phiErr, (2 (maxArg + 2) + 12 + 2 len + 4) u, for
		// exponents up to 700 and for the smallest.
		phiErr := float64(2*(r.IntN(700)+2)+12+2*npts+4) * ulp
		if r.IntN(3) == 0 {
			phiErr = float64(2*2+12+2*npts+4) * ulp
		}
		skipBelow := math.Exp(-745/n) * (1 - 1e-9)
		k1 := bandEnd(w, idx, L, tab, phiErr, skipBelow)
		if k1 < L/2+1 {
			cut++
		}
		for k := k1; k <= L/2; k++ {
			a := windowPhiAbs(w, idx, L, tab, k)
			checked++
			magnitudeSkips := a == 0 || a+phiErr < skipBelow
			logSkips := a == 0 || n*math.Log(a+phiErr) < -745
			if !magnitudeSkips || !logSkips {
				t.Fatalf("trial %d (L %d, n %g, idx %v, w %v): bandEnd %d, but coefficient %d has |phi| %v (skipped by the magnitude test %v, by the log test %v)", trial, L, n, idx, w, k1, k, a, magnitudeSkips, logSkips)
			}
		}
	}
	if cut < trials/10 {
		t.Fatalf("bandEnd cut only %d of %d laws: the test checks too little", cut, trials)
	}
	t.Logf("bandEnd cut %d of %d laws; %d coefficients past k1 checked", cut, trials, checked)
}

// windowPhiAbs returns |phi(k)| of the lattice law with weights w at
// indices idx as window computes it (the same table entries, the same
// order of the sums, the same modulus).
func windowPhiAbs(w []float64, idx []int64, L int, tab []complex128, k int) float64 {
	var re, im float64
	for i, ix := range idx {
		m := int(((int64(k)*ix)%int64(L) + int64(L)) % int64(L))
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
