package summation

// The blanket of the summation protocol and its sampler.
//
// Law. The declaration is (k+1)-ary randomized response on the levels
// (Declaration): with c = 1/(e^eps0 + k), level i gives level j the mass
// e^eps0 c when j = i and c otherwise. Every level j is missed by some
// other level (k >= 1), so r_j = c, gamma = (k+1) c (the package's Gamma),
// and the blanket omega = r/gamma is uniform on the k+1 levels. A real
// input's law is a mixture of two adjacent levels' rows, so its minimum
// over all inputs is the same. This is Algorithm 2's own blanket branch:
// with probability gamma a report is a level drawn uniformly.
//
// Sampler. SampleBlanket draws each report's level with ldp.Intn over
// [0, k] (exactly uniform), from Randomize's source, encoded as Randomize
// encodes a level. TestSampleBlanket checks the draws against the column
// minima of the declared matrix and, over 1,001 levels, against the
// declared atoms of the pair through Atoms.

import (
	"context"

	"github.com/blanket-dp/blanket/sdk"
	"github.com/blanket-dp/blanket/sdk/ldp"
)

var _ sdk.BlanketSampler = (*Randomizer)(nil)

// SampleBlanket implements sdk.BlanketSampler: n levels drawn uniformly
// from the k+1, encoded as reports.
func (r *Randomizer) SampleBlanket(ctx context.Context, eps0 float64, n int) ([][]byte, error) {
	src := ldp.DefaultSource(r.src)
	return ldp.DrawIndices(ctx, eps0, n, r.k+1, func() int { return ldp.Intn(src, r.k+1) })
}
