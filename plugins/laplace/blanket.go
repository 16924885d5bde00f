package laplace

// The blanket of the library's Laplace law and its sampler.
//
// Law (laplace.go). At eps0 the grid step is g = 1/m, m a power of two
// (2^30 or more, so m is even), and an input at centre c in {0..m}
// outputs the grid index k with P(k | c) = t·u^|k-c|, t = tanh(lam/2),
// u = e^-lam. Every centre is some input's (s = c/m), so the blanket is
// the mass of the farther end,
//
//	r_k = min_c t·u^|k-c| = t·u^max(|k|, |k-m|) = t·u^(m/2 + |k - m/2|),
//
// since max(|k|, |k-m|) = m/2 + |k - m/2| for every integer k (the
// farther of 0 and m is at distance m/2 from their midpoint plus the
// distance to it). Summing the two-sided geometric, sum_k t·u^|k - m/2|
// = 1, so gamma = u^(m/2) = e^(-lam·m/2) (just above e^(-eps0/2)) and
//
//	omega(k) = r_k/gamma = t·u^|k - m/2| = P(k | c = m/2):
//
// the blanket is exactly the law of the library's output at the middle of
// the range, s = 1/2. It is not an approximation of a continuous
// piecewise-exponential density: the declared law is the grid's, and so
// is its blanket.
//
// Sampler. SampleBlanket returns noise.Laplace().AddNoiseFloat64(1/2, 1,
// 1, eps0, 0), the library's own exact sampler (its crypto/rand, the
// source of Randomize) at s = 1/2, whose centre is round((1/2)/g) = m/2
// exactly; encoded as Randomize encodes a value. The middle of [Lo, Hi]
// is not passed through Scale, whose floating-point division need not
// give exactly 1/2. The conformance kit tests the draws against the
// blanket masses R of the declared pair's bins (TestBuiltins);
// TestBlanketIsMiddleLaw checks that those R are gamma times the middle
// law's bin masses, and TestSampleBlanket the draws against the bins'
// R/gamma at two eps0.

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"

	"github.com/google/differential-privacy/go/v3/noise"

	"github.com/blanket-dp/blanket/sdk"
	"github.com/blanket-dp/blanket/sdk/ldp"
)

var _ sdk.BlanketSampler = (*Randomizer)(nil)

// SampleBlanket implements sdk.BlanketSampler: n outputs of the library's
// sampler at the middle of the range (s = 1/2), encoded as reports.
func (r *Randomizer) SampleBlanket(ctx context.Context, eps0 float64, n int) ([][]byte, error) {
	if err := ldp.CheckDraws(eps0, n); err != nil {
		return nil, err
	}
	lap := noise.Laplace()
	buf := make([]byte, ReportBytes*n)
	out := make([][]byte, n)
	for i := range out {
		if err := ldp.Canceled(ctx, i); err != nil {
			return nil, err
		}
		y, err := lap.AddNoiseFloat64(0.5, 1, 1, eps0, 0)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", sdk.ErrBadEps0, err)
		}
		rep := buf[i*ReportBytes : (i+1)*ReportBytes : (i+1)*ReportBytes]
		binary.BigEndian.PutUint64(rep, math.Float64bits(y))
		out[i] = rep
	}
	return out, nil
}
