package accountant

import (
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
// imaginary part): against the same sum in 256-bit arithmetic on the same
// table entries it is within the rounding bound window charges,
// (K + 32) u sum mult |y| (less the table's own 12 u per entry, which is
// the table's, not pmAt's); and against gonum's inverse real FFT, which
// it replaces, within that bound plus the FFT's 5 u log2(L) ||y||_2
// sqrt(L) (the bound window charged before, unnormalised; lengths of the
// form 2^a 3^b 5^c, odd ones included, as fastSize gives).
func TestPmAtWithinItsBound(t *testing.T) {
	r := rand.New(rand.NewPCG(28, 2))
	for _, L := range []int{3645, 7290, 36450, 37500, 118098, 78125, 4096} {
		tab := twiddleTable(L)
		fft := fourier.NewFFT(L)
		for trial := range 3 {
			half := make([]complex128, L/2+1)
			var c []halfCoef
			sigma := 20 + 200*r.Float64()
			for k := range half {
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
				half[k] = y
				c = append(c, halfCoef{k: k, y: y, mult: mult})
			}
			if L%2 == 0 && trial == 0 {
				y := complex(1e-3, 1e-19)
				half[L/2] = y
				c = append(c, halfCoef{k: L / 2, y: y, mult: 1})
			}
			var absY, l2 float64
			for _, h := range c {
				absY += h.mult * cmplx.Abs(h.y)
				l2 += h.mult * real(h.y*cmplx.Conj(h.y))
			}
			bound := float64(len(c)+32) * ulp * absY
			seq := fft.Sequence(nil, half)
			fftBound := 5 * ulp * (math.Log2(float64(L)) + 1) * math.Sqrt(l2*float64(L))
			for range 20 {
				pos := r.IntN(L)
				got := pmAt(c, tab, L, pos)
				exact := new(big.Float).SetPrec(256)
				for _, h := range c {
					m := int(int64(h.k) * int64(pos) % int64(L))
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
				if d := math.Abs(got - e); d > bound {
					t.Fatalf("L %d pos %d: pmAt %v, exact sum %v: off by %g, above its bound %g", L, pos, got, e, d, bound)
				}
				if d := math.Abs(got - seq[pos]); d > bound+fftBound {
					t.Fatalf("L %d pos %d: pmAt %v, gonum's inverse FFT %v: apart by %g, above %g", L, pos, got, seq[pos], d, bound+fftBound)
				}
			}
		}
	}
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
			if a := cmplx.Abs(complex(re, im)); !(a+phiErr < skipBelow) {
				t.Fatalf("trial %d (L %d, n %.3g, %d points): bandEnd %d, but coefficient %d has |phi| %v, not below %v", trial, L, n, npts, k1, k, a, skipBelow-phiErr)
			}
		}
	}
	if cut < 100 {
		t.Fatalf("bandEnd cut only %d of 300 laws: the test checks too little", cut)
	}
}
