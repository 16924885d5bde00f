package accountant

import (
	"sync"

	"gonum.org/v1/gonum/dsp/fourier"
)

// fftPools keeps, per length, a pool of gonum FFT plans, with the buffers of a window (lattice.window): a plan's
// factorisation and twiddle factors cost about as much as a transform
// (NewFFT was a tenth of the accountant's tests' CPU), and a calibration
// or an eps search transforms many windows of the same length. A plan is
// not safe for concurrent use (its work array), hence a pool rather than
// one plan per length. The pools of at most maxTables lengths are kept,
// like the twiddle tables; a plan's arithmetic does not depend on where
// it came from, so results are bit for bit those of a fresh plan.
var fftPools struct {
	sync.Mutex
	pools map[int]*sync.Pool
	order []int
}

// fftPlan is a pooled plan of length L with the window's buffers: the
// half spectrum coefN (L/2+1), the sequence pn (L) and room for the
// (n-1)-fold law's non-zero coefficients coefM (capacity L/2+1: a
// near-periodic lattice law keeps many). Whoever takes one overwrites
// what it reads (window zeroes the spectrum and empties coefM first).
type fftPlan struct {
	*fourier.FFT
	coefN []complex128
	pn    []float64
	coefM []halfCoef
}

// getFFT returns a plan of length L and the function that gives it back.
func getFFT(L int) (*fftPlan, func()) {
	c := &fftPools
	c.Lock()
	p, ok := c.pools[L]
	if !ok {
		if c.pools == nil {
			c.pools = map[int]*sync.Pool{}
		}
		if len(c.order) >= maxTables {
			delete(c.pools, c.order[0])
			c.order = c.order[1:]
		}
		p = &sync.Pool{New: func() any {
			return &fftPlan{FFT: fourier.NewFFT(L), coefN: make([]complex128, L/2+1), pn: make([]float64, L), coefM: make([]halfCoef, 0, L/2+1)}
		}}
		c.pools[L] = p
		c.order = append(c.order, L)
	}
	c.Unlock()
	f := p.Get().(*fftPlan)
	return f, func() { p.Put(f) }
}
