package accountant

import (
	"sync"

	"gonum.org/v1/gonum/dsp/fourier"
)

// fftPools keeps, per length, a pool of gonum FFT plans for the PLD
// convolutions (convolve.go): a plan's factorisation and twiddle factors
// cost about as much as a transform, and a composition transforms many
// grids of the same length. A plan is not safe for concurrent use (its
// work array), hence a pool rather than one plan per length. The pools of
// at most maxTables lengths are kept, like the twiddle tables; a plan's
// arithmetic does not depend on where it came from, so results are bit for
// bit those of a fresh plan.
var fftPools struct {
	sync.Mutex
	pools map[int]*sync.Pool
	order []int
}

// fftPlan is a pooled plan of length L.
type fftPlan struct {
	*fourier.FFT
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
			return &fftPlan{FFT: fourier.NewFFT(L)}
		}}
		c.pools[L] = p
		c.order = append(c.order, L)
	}
	c.Unlock()
	f := p.Get().(*fftPlan)
	return f, func() { p.Put(f) }
}
