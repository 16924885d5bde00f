package rappor

// The blanket of unary encoding and its sampler.
//
// Law. With alpha = p/q > 1 > beta = (1-p)/(1-q) and, for a d-bit output
// y with s set bits, A(s) = q^s (1-q)^(d-s), input v gives y the mass
// A(s) alpha when bit v of y is set and A(s) beta when not (Declaration).
// An output with a clear bit has r_y = A(s) beta (the input at that bit);
// the all-ones output has r = A(d) alpha = q^d alpha (every input's bit
// is set). So the blanket is not a product law: with Q(y) = A(s), the law
// of d independent Bernoulli(q) bits (a product law, summing to 1),
//
//	r_y = beta Q(y) + (alpha - beta) q^d [y = all ones],
//	gamma = beta + (alpha - beta) q^d,
//	omega = (beta/gamma) Q + ((alpha - beta) q^d/gamma) δ_(all ones),
//
// a mixture: with probability (alpha - beta) q^d/gamma the all-ones output,
// else d independent Bernoulli(q) bits (which may also be all ones). The
// two weights sum to 1 and alpha > beta, so both are probabilities. In
// symmetric mode alpha = e^(eps0/2), beta = e^(-eps0/2); in optimized mode
// alpha = (e^eps0+1)/2, beta = alpha/e^eps0. For large d the all-ones
// weight underflows to 0, as it does in the declaration (its r).
//
// Sampler. SampleBlanket chooses the all-ones output with ldp.Choose
// (both weights in closed form, the rarer drawn exactly), else draws the
// d bits at rate q 64 at a time with ldp.Bits64, each exactly
// Bernoulli(q), as Randomize draws the bits other than the sender's; from
// Randomize's source, in Randomize's encoding (padding bits zero).
// TestBlanketMixtureExact checks the mixture's law against the column
// minima of the declared matrix exactly (d = 2..6, both modes);
// TestSampleBlanket the draws by chi-square against them, and over 300
// buckets against the declared atoms of the pair through Atoms.

import (
	"context"
	"math"

	"github.com/blanket-dp/blanket/sdk"
	"github.com/blanket-dp/blanket/sdk/ldp"
)

var _ sdk.BlanketSampler = (*Randomizer)(nil)

// blanketWeights returns the weights of the blanket's two parts at eps0:
// the all-ones output, (alpha - beta) q^d/gamma, and the product law of
// d Bernoulli(q) bits, beta/gamma (see the top of this file).
func (r *Randomizer) blanketWeights(eps0 float64) (allOnes, product float64) {
	b := r.probs(eps0)
	alpha, beta := b.p/b.q, b.notP/b.notQ
	qd := math.Pow(b.q, float64(r.d))
	gamma := beta + (alpha-beta)*qd
	return (alpha - beta) * qd / gamma, beta / gamma
}

// SampleBlanket implements sdk.BlanketSampler: n d-bit reports, each all
// ones with probability (alpha - beta) q^d/gamma and else d independent
// Bernoulli(q) bits.
func (r *Randomizer) SampleBlanket(ctx context.Context, eps0 float64, n int) ([][]byte, error) {
	if err := ldp.CheckDraws(eps0, n); err != nil {
		return nil, err
	}
	q := r.probs(eps0).q
	allOnes, product := r.blanketWeights(eps0)
	src := ldp.DefaultSource(r.src)
	buf := make([]byte, r.width*n)
	out := make([][]byte, n)
	for i := range out {
		if err := ldp.Canceled(ctx, i); err != nil {
			return nil, err
		}
		rep := buf[i*r.width : (i+1)*r.width : (i+1)*r.width]
		if ldp.Choose(src, allOnes, product) {
			for k := range rep {
				rep[k] = 0xff
			}
		} else {
			for w := 0; w < r.d; w += 64 {
				v := ldp.Bits64(src, q)
				for k := w / 8; k < min(w/8+8, r.width); k++ {
					rep[k] = byte(v)
					v >>= 8
				}
			}
		}
		if tail := r.d & 7; tail != 0 {
			rep[r.width-1] &= 1<<tail - 1
		}
		out[i] = rep
	}
	return out, nil
}
