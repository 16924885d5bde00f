package krr

// The blanket of k-RR and its sampler.
//
// Law. With c = 1/(e^eps0 + k - 1), input x gives output y the mass
// e^eps0 c when y = x and c otherwise. For every y some input differs from
// it (k >= 2), so r_y = min_x R[x][y] = c, gamma = k c, and the blanket
// omega = r/gamma is uniform on the k buckets, whatever eps0.
//
// Sampler. SampleBlanket draws each report's bucket with ldp.Intn over
// [0, k) (rejection sampling, exactly uniform) from Randomize's source,
// and encodes it as Randomize does (ldp.EncodeIndices). TestSampleBlanket
// checks the draws against the column minima of the declared matrix
// (ldptest.Blanket) and, over 1,000 buckets, against the declared atoms
// of the pair through Atoms.

import (
	"context"

	"github.com/blanket-dp/blanket/sdk"
	"github.com/blanket-dp/blanket/sdk/ldp"
)

var _ sdk.BlanketSampler = (*Randomizer)(nil)

// SampleBlanket implements sdk.BlanketSampler: n buckets drawn uniformly,
// encoded as reports.
func (r *Randomizer) SampleBlanket(ctx context.Context, eps0 float64, n int) ([][]byte, error) {
	src := ldp.DefaultSource(r.src)
	return ldp.DrawIndices(ctx, eps0, n, r.k, func() int { return ldp.Intn(src, r.k) })
}
