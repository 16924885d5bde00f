package olh

// The blanket of OLH and its sampler.
//
// Law. With S seeds and keep = e^eps0/(e^eps0+g-1), other =
// 1/(e^eps0+g-1), input x gives the output (seed s, y) the mass keep/S
// when y = H_s(x) and other/S otherwise (Declaration). No H_s is constant
// on the buckets (Family, property 3), so for every output some input
// hashes elsewhere: r_(s,y) = other/S for all S·g outputs, gamma =
// g·other, and the blanket omega = r/gamma is uniform on the outputs: a
// uniform seed and, independently, a uniform y in [0, g), whatever eps0
// (the family, and so g and S, depend on eps0).
//
// Sampler. SampleBlanket draws the seed with ldp.Uintn over [0, S) and y
// with ldp.Intn over [0, g) (both exactly uniform), from Randomize's
// source, encoded as Randomize encodes (seed, y). TestSampleBlanket checks
// the draws against the column minima of the declared matrix and, over
// 1,000 buckets, against the declared atoms of the pair through Atoms.

import (
	"context"

	"github.com/blanket-dp/blanket/sdk"
	"github.com/blanket-dp/blanket/sdk/ldp"
)

var _ sdk.BlanketSampler = (*Randomizer)(nil)

// SampleBlanket implements sdk.BlanketSampler: n reports (seed, y) with
// the seed and y uniform, independent.
func (r *Randomizer) SampleBlanket(ctx context.Context, eps0 float64, n int) ([][]byte, error) {
	if err := ldp.CheckDraws(eps0, n); err != nil {
		return nil, err
	}
	f := familyAt(r.d, r.gMax, eps0)
	src := r.source()
	w := r.desc.ReportBytes
	buf := make([]byte, w*n)
	out := make([][]byte, n)
	for i := range out {
		if err := ldp.Canceled(ctx, i); err != nil {
			return nil, err
		}
		rep := buf[i*w : (i+1)*w : (i+1)*w]
		putUint(rep[:r.seedW], ldp.Uintn(src, f.Seeds()))
		putUint(rep[r.seedW:], uint64(ldp.Intn(src, f.G())))
		out[i] = rep
	}
	return out, nil
}
