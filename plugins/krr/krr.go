// Package krr is k-ary randomized response (also called direct encoding or
// generalized randomized response) over a declared list of categories plus
// an optional "other" bucket: a report is the sender's bucket with
// probability e^eps0/(e^eps0+k-1), else one of the other k-1 buckets
// uniformly at random. It implements sdk.Randomizer.
//
//	r, err := krr.New(krr.Options{Categories: []string{"home", "search"}, Other: "other"})
//	reports, err := r.Randomize(ctx, eps0, sdk.Inputs{Categories: values})
//	stat, err := r.Accumulate(ctx, eps0, shuffled)
//	est, err := r.Estimate(ctx, stat)
package krr

import (
	"context"
	"fmt"
	"math"
	"strconv"

	"github.com/blanket-dp/blanket/accountant/declare"
	"github.com/blanket-dp/blanket/sdk"
	"github.com/blanket-dp/blanket/sdk/ldp"
)

// Plugin identity and limits.
const (
	// Name is the plugin name.
	Name = "krr"
	// Version is the report format version.
	Version = "1"
	// MaxBuckets is the largest number of buckets (categories plus other).
	MaxBuckets = 1 << 24
	// MatrixMaxK is the largest number of buckets for which Declare returns
	// the full matrix; above it Declare returns the exact atoms.
	MatrixMaxK = 64
)

// Options configures a k-RR randomizer.
type Options struct {
	// Categories are the category labels, distinct. Required; with Other at
	// least 1, else at least 2.
	Categories []string
	// Other is the label of a catch-all bucket for inputs not in Categories.
	// Defaults to "" (no bucket: such inputs are rejected).
	Other string
	// Confidence is the level of the confidence intervals. Defaults to 0.95.
	Confidence float64
	// Rand is the randomness source. Defaults to crypto/rand (a new
	// ldp.CryptoSource per call). An injected source is shared by all calls,
	// which then must not run concurrently.
	Rand ldp.Source
}

// Randomizer is k-ary randomized response. It is safe for concurrent use
// unless Options.Rand was set.
type Randomizer struct {
	dom  *ldp.Domain
	k    int
	conf float64
	src  ldp.Source
	desc sdk.Description
}

var _ sdk.PackedRandomizer = (*Randomizer)(nil)

// New returns a k-RR randomizer. Errors wrap sdk.ErrBadConfig.
func New(opts Options) (*Randomizer, error) {
	conf, err := ldp.Confidence(opts.Confidence)
	if err != nil {
		return nil, err
	}
	dom, err := ldp.NewDomain(opts.Categories, opts.Other, MaxBuckets)
	if err != nil {
		return nil, err
	}
	k := dom.Size()
	w := ldp.IndexWidth(k)
	r := &Randomizer{dom: dom, k: k, conf: conf, src: opts.Rand}
	r.desc = sdk.Description{
		Name:        Name,
		Version:     Version,
		Input:       sdk.InputCategorical,
		Categories:  dom.Labels(),
		Other:       dom.Other(),
		Encoding:    fmt.Sprintf("bucket index in [0,%d), %d-byte big-endian unsigned integer", k, w),
		ReportBytes: w,
		Params:      []sdk.Param{{Name: "k", Value: strconv.Itoa(k), Doc: "number of buckets: the categories plus the other bucket (derived)"}},
		Eps0Min:     ldp.MinEps0,
		Eps0Max:     ldp.MaxEps0,
	}
	r.desc.Digest = ldp.Digest(r.desc)
	return r, nil
}

// FromConfig returns the randomizer of a plugin-independent configuration:
// Categories, Other and Confidence; no range and no parameters. Errors wrap
// sdk.ErrBadConfig.
func FromConfig(cfg sdk.Config) (*Randomizer, error) {
	if err := ldp.CategoricalConfig(Name, cfg); err != nil {
		return nil, err
	}
	return New(Options{Categories: cfg.Categories, Other: cfg.Other, Confidence: cfg.Confidence})
}

// K returns the number of buckets.
func (r *Randomizer) K() int { return r.k }

// Describe implements sdk.Randomizer.
func (r *Randomizer) Describe(ctx context.Context) (*sdk.Description, error) {
	return ldp.CopyDescription(&r.desc), nil
}

// probs returns the probability of reporting the true bucket, of reporting
// any other bucket, and of each single other bucket, at eps0.
func (r *Randomizer) probs(eps0 float64) (keep, flip, c float64) {
	e := math.Exp(eps0)
	den := e + float64(r.k-1)
	return e / den, float64(r.k-1) / den, 1 / den
}

// Pure returns the estimator parameters at eps0: a report supports only
// its own bucket, p* = e^eps0/(e^eps0+k-1), q* = 1/(e^eps0+k-1).
func (r *Randomizer) Pure(eps0 float64) ldp.Pure {
	keep, _, c := r.probs(eps0)
	return ldp.Pure{P: keep, Q: c, Diff: math.Expm1(eps0) / (math.Exp(eps0) + float64(r.k-1))}
}

// Declare implements sdk.Randomizer: the matrix when k <= MatrixMaxK, else
// the exact atoms.
func (r *Randomizer) Declare(ctx context.Context, eps0 float64) (*declare.Declaration, error) {
	return r.Declaration(eps0, ldp.FormFor(r.k, MatrixMaxK))
}

// DeclareForm implements sdk.FormDeclarer: Declaration.
func (r *Randomizer) DeclareForm(ctx context.Context, eps0 float64, form declare.Form) (*declare.Declaration, error) {
	return r.Declaration(eps0, form)
}

// Declaration returns the declaration at eps0 in the given form (matrix or
// atoms); both decompose identically. See ldp.RRDeclaration for the matrix
// and the exact atoms.
func (r *Randomizer) Declaration(eps0 float64, form declare.Form) (*declare.Declaration, error) {
	if err := ldp.CheckEps0(eps0); err != nil {
		return nil, err
	}
	return ldp.RRDeclaration(r.k, eps0, form, r.desc.Categories)
}

// Randomize implements sdk.Randomizer. Each report is a bucket index,
// ReportBytes long.
func (r *Randomizer) Randomize(ctx context.Context, eps0 float64, in sdk.Inputs) ([][]byte, error) {
	if err := ldp.CheckEps0(eps0); err != nil {
		return nil, err
	}
	idx, err := r.dom.Batch(Name, in)
	if err != nil {
		return nil, err
	}
	if err := r.randomize(ctx, eps0, idx); err != nil {
		return nil, err
	}
	return ldp.EncodeIndices(idx, r.k), nil
}

// RandomizePacked implements sdk.PackedRandomizer: Randomize with the
// reports concatenated.
func (r *Randomizer) RandomizePacked(ctx context.Context, eps0 float64, in sdk.PackedInputs) ([]byte, error) {
	return ldp.RandomizePackedIndices(ctx, eps0, r.dom, Name, in, r.k, r.randomize)
}

// randomize replaces each bucket in idx by its randomized bucket.
func (r *Randomizer) randomize(ctx context.Context, eps0 float64, idx []int) error {
	keep, flip, _ := r.probs(eps0)
	src := ldp.DefaultSource(r.src)
	for i, x := range idx {
		if err := ldp.Canceled(ctx, i); err != nil {
			return err
		}
		if !ldp.Choose(src, keep, flip) {
			y := ldp.Intn(src, r.k-1)
			if y >= x {
				y++
			}
			idx[i] = y
		}
	}
	return nil
}

// Decode returns the bucket of a report. Errors wrap sdk.ErrBadReport.
func (r *Randomizer) Decode(report []byte) (int, error) {
	return ldp.ReadIndex(report, r.k)
}

// Atoms implements sdk.AtomMapper: the atoms of the declared pair and
// triple (ldp.RRAtoms) of each report's bucket.
func (r *Randomizer) Atoms(ctx context.Context, eps0 float64, set int, inputs []float64, reports [][]byte) ([]int, error) {
	if err := ldp.CheckEps0(eps0); err != nil {
		return nil, err
	}
	ys, err := ldp.DecodeAll(reports, r.Decode)
	if err != nil {
		return nil, err
	}
	return ldp.RRAtoms(r.k, set, inputs, ys)
}

// Accumulate implements sdk.Randomizer. The statistic's Counts are the
// number of reports per bucket.
func (r *Randomizer) Accumulate(ctx context.Context, eps0 float64, reports [][]byte) (*sdk.Statistic, error) {
	return ldp.AccumulateIndices(ctx, &r.desc, eps0, r.k, reports)
}

// Estimate implements sdk.Randomizer: one item per bucket, the estimated
// number of senders in it, (C(v) - n q*)/(p* - q*) (Wang et al. 2017) with
// variance n q*(1-q*)/(p*-q*)² + n_v (1-p*-q*)/(p*-q*), n_v the clamped
// estimate, and post-processing by Norm-Sub (see ldp.Pure.Items).
func (r *Randomizer) Estimate(ctx context.Context, stat *sdk.Statistic) (*sdk.Estimate, error) {
	if err := ldp.CheckStatistic(stat, &r.desc, r.k, true); err != nil {
		return nil, err
	}
	return ldp.NewEstimate(Name, stat, r.conf, r.Pure(stat.Eps0).Items(r.desc.Categories, stat.Counts, stat.N, r.conf)), nil
}
