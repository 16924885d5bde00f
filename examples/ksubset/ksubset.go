// Package ksubset is k-subset randomized response (Wang, Wu, Hu,
// "Mutual information optimally local private discrete distribution
// estimation", 2016; Ye and Barg, "Optimal schemes for discrete
// distribution estimation under locally differential privacy", IEEE
// Trans. Inf. Theory 2018) over a declared list of categories plus an
// optional "other" bucket: a third-party Blanket plugin written from
// nothing against the public SDK (sdk, sdk/ldp, accountant/declare), the
// worked example of docs/plugins.md ("Writing a plugin: k-subset from
// nothing to blanket serve"). It implements sdk.Randomizer,
// sdk.FormDeclarer, sdk.OutputMapper, sdk.AtomMapper and
// sdk.BlanketSampler.
//
// A device with bucket x in [0, k) reports a subset Y of the buckets of
// size s, each subset that contains x with probability e^eps0/D and each
// other with 1/D, D = C(k-1, s-1) e^eps0 + C(k-1, s). With s = 1 it is
// k-ary randomized response; larger s spreads a report over more buckets
// and, for large k, lowers the estimator's variance (Wang et al.'s optimum
// is s ≈ k/(e^eps0+1)). A report is the k-bit bitmap of Y; the collector
// counts, for every bucket v, the reports whose subset holds v, and
// debiases the counts (Pure; the formulas and their proofs are at the top
// of mechanism.go).
//
//	r, err := ksubset.New(ksubset.Options{Categories: browsers, S: 3})
//	reports, err := r.Randomize(ctx, eps0, sdk.Inputs{Categories: values})
//	stat, err := r.Accumulate(ctx, eps0, shuffled)
//	est, err := r.Estimate(ctx, stat)
//
// Its binary, cmd/blanket-ksubset, serves it with plugin.Serve.
package ksubset

import (
	"context"
	"fmt"
	"math"
	"strconv"

	"github.com/blanket-dp/blanket/sdk"
	"github.com/blanket-dp/blanket/sdk/ldp"
)

// Plugin identity and limits.
const (
	// Name is the plugin name: the binary is blanket-ksubset, the --mech
	// and plan name ksubset.
	Name = "ksubset"
	// Version is the report format version.
	Version = "1"
	// MaxBuckets is the largest number of buckets k (bits per report, so
	// that a report is at most 8 KiB).
	MaxBuckets = 1 << 16
	// MatrixMaxOutputs is the largest number of outputs C(k, s) for which
	// Declare returns the full matrix; above it Declare returns the exact
	// atoms. The matrix adds nothing for the accountant (the atoms are
	// exact); it is there so that the conformance kit tests the sampler's
	// every output probability on small configurations. At this size the
	// kit's default 20,000 reports per input still expect more than 5 of
	// every output at eps0 <= 5 (Pearson's test keeps each as a cell).
	MatrixMaxOutputs = 1024
)

// Options configures a k-subset randomizer.
type Options struct {
	// Categories are the category labels, distinct. Required; with Other at
	// least 1, else at least 2.
	Categories []string
	// Other is the label of a catch-all bucket for inputs not in Categories.
	// Defaults to "" (no bucket: such inputs are rejected).
	Other string
	// S is the size of a reported subset, in [1, k-1] for k buckets.
	// Defaults to DefaultS(k).
	S int
	// Confidence is the level of the confidence intervals. Defaults to 0.95.
	Confidence float64
	// Rand is the randomness source. Defaults to crypto/rand (a new
	// ldp.CryptoSource per call). An injected source is shared by all calls,
	// which then must not run concurrently.
	Rand ldp.Source
}

// DefaultS returns the default subset size over k buckets, k/8 rounded
// down and at least 1: Wang et al.'s optimum k/(e^eps0+1) at eps0 = 2
// (e^2+1 ≈ 8.4). s is part of the configuration while eps0 is only known
// once a plan is calibrated, so no default is right everywhere: for
// k = 100 its estimator variance is within 6% of the best s's at eps0 in
// [1.5, 2], 26% above at eps0 = 1 and 35% at 3, and from eps0 ≈ 4 on
// s = 1 (k-RR) is best. Choose s with OptimalS at the eps0 your plan
// calibrates (TestDefaultS has these numbers).
func DefaultS(k int) int { return max(1, k/8) }

// OptimalS returns the s in [1, k-1] whose estimator has the smallest
// variance per report for a rare bucket, q*(1-q*)/(p*-q*)² (Pure), at
// eps0 over k >= 2 buckets; the smaller s on a tie.
func OptimalS(k int, eps0 float64) int {
	best, bestV := 1, math.Inf(1)
	for s := 1; s < k; s++ {
		p := (&Randomizer{k: k, s: s}).Pure(eps0)
		if v := p.Q * (1 - p.Q) / (p.Diff * p.Diff); v < bestV {
			best, bestV = s, v
		}
	}
	return best
}

// Randomizer is k-subset randomized response. It is safe for concurrent
// use unless Options.Rand was set.
type Randomizer struct {
	dom  *ldp.Domain
	k, s int
	conf float64
	src  ldp.Source
	desc sdk.Description
}

var (
	_ sdk.Randomizer   = (*Randomizer)(nil)
	_ sdk.FormDeclarer = (*Randomizer)(nil)
	_ sdk.OutputMapper = (*Randomizer)(nil)
	_ sdk.AtomMapper   = (*Randomizer)(nil)
)

// New returns a k-subset randomizer. Errors wrap sdk.ErrBadConfig.
func New(opts Options) (*Randomizer, error) {
	conf, err := ldp.Confidence(opts.Confidence)
	if err != nil {
		return nil, err
	}
	dom, err := ldp.NewDomain(opts.Categories, opts.Other, MaxBuckets)
	if err != nil {
		return nil, err
	}
	k, s := dom.Size(), opts.S
	if s == 0 {
		s = DefaultS(k)
	}
	if s < 1 || s > k-1 {
		return nil, fmt.Errorf("%w: ksubset s = %d, must be in [1, %d] for %d buckets (a subset of all k says nothing)", sdk.ErrBadConfig, s, k-1, k)
	}
	r := &Randomizer{dom: dom, k: k, s: s, conf: conf, src: opts.Rand}
	r.desc = sdk.Description{
		Name:       Name,
		Version:    Version,
		Input:      sdk.InputCategorical,
		Categories: dom.Labels(),
		Other:      dom.Other(),
		Encoding: fmt.Sprintf("%d-bit bitmap of the reported subset of the buckets, exactly %d bits set: bucket i is bit i%%8 (least significant first) of byte i/8, %d bytes, padding bits zero",
			k, s, ldp.BitmapBytes(k)),
		ReportBytes: ldp.BitmapBytes(k),
		Params: []sdk.Param{
			{Name: "k", Value: strconv.Itoa(k), Doc: "number of buckets: the categories plus the other bucket (derived)"},
			{Name: "s", Value: strconv.Itoa(s), Doc: "size of a reported subset, in [1, k-1]; default max(1, k/8)"},
		},
		Eps0Min: ldp.MinEps0,
		Eps0Max: ldp.MaxEps0,
	}
	r.desc.Digest = ldp.Digest(r.desc)
	return r, nil
}

// FromConfig returns the randomizer of a plugin-independent configuration:
// Categories, Other, Confidence and the parameter s (an integer; see
// Options.S); no range and no other parameter. Errors wrap
// sdk.ErrBadConfig.
func FromConfig(cfg sdk.Config) (*Randomizer, error) {
	if err := ldp.CategoricalConfig(Name, cfg, "s"); err != nil {
		return nil, err
	}
	var s int
	if v, ok := cfg.Params["s"]; ok {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return nil, fmt.Errorf("%w: ksubset parameter s = %q, must be a whole number >= 1", sdk.ErrBadConfig, v)
		}
		s = n
	}
	return New(Options{Categories: cfg.Categories, Other: cfg.Other, S: s, Confidence: cfg.Confidence})
}

// K returns the number of buckets.
func (r *Randomizer) K() int { return r.k }

// S returns the size of a reported subset.
func (r *Randomizer) S() int { return r.s }

// Describe implements sdk.Randomizer.
func (r *Randomizer) Describe(ctx context.Context) (*sdk.Description, error) {
	return ldp.CopyDescription(&r.desc), nil
}

// Randomize implements sdk.Randomizer. Each report is the bitmap of a
// subset of s buckets: with probability P(x ∈ Y) (see probs) the sender's
// bucket x and s-1 others drawn uniformly, else s buckets drawn uniformly
// among the others (ldp.SampleSubset); ReportBytes long.
func (r *Randomizer) Randomize(ctx context.Context, eps0 float64, in sdk.Inputs) ([][]byte, error) {
	if err := ldp.CheckEps0(eps0); err != nil {
		return nil, err
	}
	idx, err := r.dom.Batch(Name, in)
	if err != nil {
		return nil, err
	}
	in1, out1 := r.probs(eps0)
	src := ldp.DefaultSource(r.src)
	w := r.desc.ReportBytes
	buf := make([]byte, w*len(idx))
	out := make([][]byte, len(idx))
	for i, x := range idx {
		if err := ldp.Canceled(ctx, i); err != nil {
			return nil, err
		}
		rep := buf[i*w : (i+1)*w : (i+1)*w]
		if ldp.Choose(src, in1, out1) {
			ldp.SetBit(rep, x)
			ldp.SampleSubset(src, rep, r.k, r.s-1, x)
		} else {
			ldp.SampleSubset(src, rep, r.k, r.s, x)
		}
		out[i] = rep
	}
	return out, nil
}

// Decode returns the buckets of a report's subset, in increasing order.
// Errors wrap sdk.ErrBadReport: a report of the wrong length, with bits
// set beyond k, or with other than s bits set.
func (r *Randomizer) Decode(report []byte) ([]int, error) {
	return ldp.DecodeBitmap(report, r.k, r.s)
}

// Accumulate implements sdk.Randomizer. The statistic's Counts are the
// number of reports whose subset holds each bucket (k counts summing to
// s·N); a report that Decode rejects is malformed.
func (r *Randomizer) Accumulate(ctx context.Context, eps0 float64, reports [][]byte) (*sdk.Statistic, error) {
	return ldp.AccumulateBitmaps(ctx, &r.desc, eps0, r.k, r.s, reports)
}

// checkStatistic validates a statistic before estimation
// (ldp.CheckStatistic), its counts summing to s·N: every report holds s
// buckets. Errors wrap sdk.ErrBadStatistic.
func (r *Randomizer) checkStatistic(stat *sdk.Statistic) error {
	if err := ldp.CheckStatistic(stat, &r.desc, r.k, false); err != nil {
		return err
	}
	var sum int64
	for _, c := range stat.Counts {
		sum += c // each count is at most N, checked: no overflow below 2^47 reports
	}
	if sum != int64(r.s)*stat.N {
		return fmt.Errorf("%w: counts sum to %d, want s·N = %d·%d (every report holds s buckets)", sdk.ErrBadStatistic, sum, r.s, stat.N)
	}
	return nil
}

// Estimate implements sdk.Randomizer: one item per bucket, the estimated
// number of senders in it, (C(v) - n q*)/(p* - q*) with C(v) the reports
// whose subset holds v (p*, q* in Pure), variance
// n q*(1-q*)/(p*-q*)² + n_v (1-p*-q*)/(p*-q*) with n_v the clamped
// estimate, and Norm-Sub post-processing (see ldp.Pure.Items).
func (r *Randomizer) Estimate(ctx context.Context, stat *sdk.Statistic) (*sdk.Estimate, error) {
	if err := r.checkStatistic(stat); err != nil {
		return nil, err
	}
	return ldp.NewEstimate(Name, stat, r.conf, r.Pure(stat.Eps0).Items(r.desc.Categories, stat.Counts, stat.N, r.conf)), nil
}
