package ksubset

// The blanket of k-subset randomized response and its sampler.
//
// Law (mechanism.go). Input x gives the s-subset Y the mass e^eps0/D when
// x ∈ Y and 1/D when not, D = C(k-1, s-1) e^eps0 + C(k-1, s). Since
// s <= k-1, every Y misses some bucket z, so r_Y = min_z R[z][Y] = 1/D for
// all C(k, s) subsets, gamma = C(k, s)/D = k c with c = 1/(s e^eps0 + k - s),
// and the blanket omega = r/gamma is uniform on the s-subsets, whatever
// eps0: a report's subset drawn without regard to any bucket.
//
// Sampler. SampleBlanket draws each subset with ldp.SampleSubset (Floyd's
// algorithm on rejection-sampled integers, exactly uniform on the
// s-subsets of [0, k); proof at the top of sdk/ldp/subset.go), excluding
// nothing, from Randomize's source, as the k-bit bitmap Randomize reports.
// TestSampleBlanket checks the draws against the column minima of the
// declared matrix (colex ranks through Outputs) and, over 100 buckets,
// against the declared atoms of the pair through Atoms.

import (
	"context"

	"github.com/blanket-dp/blanket/sdk"
	"github.com/blanket-dp/blanket/sdk/ldp"
)

var _ sdk.BlanketSampler = (*Randomizer)(nil)

// SampleBlanket implements sdk.BlanketSampler: n uniform s-subsets of the
// k buckets, as bitmaps.
func (r *Randomizer) SampleBlanket(ctx context.Context, eps0 float64, n int) ([][]byte, error) {
	if err := ldp.CheckDraws(eps0, n); err != nil {
		return nil, err
	}
	src := ldp.DefaultSource(r.src)
	w := r.desc.ReportBytes
	buf := make([]byte, w*n)
	out := make([][]byte, n)
	for i := range out {
		if err := ldp.Canceled(ctx, i); err != nil {
			return nil, err
		}
		rep := buf[i*w : (i+1)*w : (i+1)*w]
		ldp.SampleSubset(src, rep, r.k, r.s, -1)
		out[i] = rep
	}
	return out, nil
}
