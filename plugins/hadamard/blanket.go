package hadamard

// The blanket of Hadamard response and its sampler.
//
// Law. With hi = 2e^eps0/((e^eps0+1)K) and lo = 2/((e^eps0+1)K), input x
// gives output y the mass hi when y is in C_x and lo otherwise
// (Declaration). Output 0 lies in every C_x, so r_0 = hi; every y != 0 is
// outside some C_x (for a set bit b of y, bucket 2^b - 1 < k has
// popcount((x+1)&y) = 1), so r_y = lo. Hence gamma = hi + (K-1) lo and
//
//	omega(0) = e^eps0/(e^eps0 + K - 1),   omega(y) = 1/(e^eps0 + K - 1) for y != 0:
//
// K-ary randomized response around output 0, not a uniform law.
//
// Sampler. SampleBlanket draws y = 0 with probability e^eps0/(e^eps0+K-1)
// (ldp.Choose against its complement (K-1)/(e^eps0+K-1), both in closed
// form), else y = 1 + ldp.Intn(K-1), uniform on the other K-1 outputs;
// from Randomize's source, encoded as Randomize encodes an output.
// TestSampleBlanket checks the draws against the column minima of the
// declared matrix and, over 1,000 buckets, against the declared atoms of
// the pair through Atoms.

import (
	"context"
	"math"

	"github.com/blanket-dp/blanket/sdk"
	"github.com/blanket-dp/blanket/sdk/ldp"
)

var _ sdk.BlanketSampler = (*Randomizer)(nil)

// SampleBlanket implements sdk.BlanketSampler: n outputs of K-ary
// randomized response around output 0, encoded as reports.
func (r *Randomizer) SampleBlanket(ctx context.Context, eps0 float64, n int) ([][]byte, error) {
	if err := ldp.CheckEps0(eps0); err != nil {
		return nil, err
	}
	e := math.Exp(eps0)
	den := e + float64(r.kk-1)
	zero, other := e/den, float64(r.kk-1)/den
	src := ldp.DefaultSource(r.src)
	return ldp.DrawIndices(ctx, eps0, n, r.kk, func() int {
		if ldp.Choose(src, zero, other) {
			return 0
		}
		return 1 + ldp.Intn(src, r.kk-1)
	})
}
