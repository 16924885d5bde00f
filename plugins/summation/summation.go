// Package summation is the single-message real summation protocol of Balle,
// Bell, Gascón, Nissim, "The Privacy Blanket of the Shuffle Model" (CRYPTO
// 2019), Algorithms 2 and 3. It implements sdk.Randomizer.
//
// A value x in the configured range [Lo, Hi] is scaled to s in [0, 1] and
// rounded at random to one of the k+1 levels {0, 1/k, ..., 1}: to
// floor(sk)/k, or one level up with probability sk - floor(sk), so that the
// level is s on average (Algorithm 2's fixed-point encoding). With
// probability gamma the report is instead a level drawn uniformly from all
// k+1 (the blanket). The analyzer (Algorithm 3) debiases the sum of levels.
//
//	k, err := summation.SuggestK(n, eps, delta)
//	r, err := summation.New(summation.Options{Lo: 0, Hi: 1 << 20, K: k})
//	reports, err := r.Randomize(ctx, eps0, sdk.Inputs{Reals: bytesSynced})
//	est, err := r.Estimate(ctx, stat) // items "sum" and "mean"
//
// Relation between gamma and eps0. The report is (k+1)-ary randomized
// response on the level (Algorithm 1): the true level with probability
// 1 - gamma + gamma/(k+1), each other level with gamma/(k+1). That is
// eps0-LDP with gamma/(k+1) = 1/(e^eps0 + k), i.e.
//
//	gamma = (k+1)/(e^eps0 + k),   eps0 = ln((k+1)/gamma - k),
//
// which is Lemma 5.1 (1) of the paper with k+1 values. The paper
// parameterizes gamma = c(k+1)/n; here eps0 is the parameter (fixed by the
// plan and the accountant) and gamma follows.
package summation

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
	Name = "summation"
	// Version is the report format version.
	Version = "1"
	// MaxK is the largest number of rounding intervals k (k+1 levels).
	MaxK = 1<<24 - 1
	// MatrixMaxLevels is the largest number of levels k+1 for which Declare
	// returns the matrix; above it Declare returns the exact atoms.
	MatrixMaxLevels = 64
)

// Options configures the summation randomizer.
type Options struct {
	// Lo and Hi are the range of the inputs, finite with Lo < Hi. Required.
	// Finite inputs outside are clamped to it.
	Lo, Hi float64
	// K is the number of rounding intervals: reports are levels 0..K.
	// Required, in [1, MaxK]; SuggestK gives the paper's choice for n users.
	K int
	// Confidence is the level of the confidence intervals. Defaults to 0.95.
	Confidence float64
	// Rand is the randomness source. Defaults to crypto/rand (a new
	// ldp.CryptoSource per call). An injected source is shared by all calls,
	// which then must not run concurrently.
	Rand ldp.Source
}

// Randomizer is the summation protocol. It is safe for concurrent use
// unless Options.Rand was set.
type Randomizer struct {
	lo, hi float64
	k      int
	conf   float64
	src    ldp.Source
	desc   sdk.Description
}

var _ sdk.PackedRandomizer = (*Randomizer)(nil)

// New returns the summation randomizer. Errors wrap sdk.ErrBadConfig.
func New(opts Options) (*Randomizer, error) {
	conf, err := ldp.Confidence(opts.Confidence)
	if err != nil {
		return nil, err
	}
	lo, hi := opts.Lo, opts.Hi
	if math.IsNaN(lo) || math.IsInf(lo, 0) || math.IsNaN(hi) || math.IsInf(hi, 0) || !(lo < hi) || math.IsInf(hi-lo, 0) {
		return nil, fmt.Errorf("%w: range [%v, %v], must be finite with lo < hi", sdk.ErrBadConfig, lo, hi)
	}
	if opts.K < 1 || opts.K > MaxK {
		return nil, fmt.Errorf("%w: k = %d, must be in [1, %d]", sdk.ErrBadConfig, opts.K, MaxK)
	}
	w := ldp.IndexWidth(opts.K + 1)
	r := &Randomizer{lo: lo, hi: hi, k: opts.K, conf: conf, src: opts.Rand}
	r.desc = sdk.Description{
		Name:        Name,
		Version:     Version,
		Input:       sdk.InputReal,
		Lo:          lo,
		Hi:          hi,
		Encoding:    fmt.Sprintf("level in [0,%d], %d-byte big-endian unsigned integer; level j stands for lo + j(hi-lo)/k", opts.K, w),
		ReportBytes: w,
		Params:      []sdk.Param{{Name: "k", Value: strconv.Itoa(opts.K), Doc: "number of rounding intervals; reports are levels 0..k"}},
		Eps0Min:     ldp.MinEps0,
		Eps0Max:     ldp.MaxEps0,
	}
	r.desc.Digest = ldp.Digest(r.desc)
	return r, nil
}

// FromConfig returns the randomizer of a plugin-independent configuration:
// Lo, Hi, Confidence and the parameter "k"; no categories. Errors wrap
// sdk.ErrBadConfig.
func FromConfig(cfg sdk.Config) (*Randomizer, error) {
	if len(cfg.Categories) > 0 || cfg.Other != "" {
		return nil, fmt.Errorf("%w: summation takes a range, not categories", sdk.ErrBadConfig)
	}
	if err := ldp.CheckParams(Name, cfg.Params, "k"); err != nil {
		return nil, err
	}
	opts := Options{Lo: cfg.Lo, Hi: cfg.Hi, Confidence: cfg.Confidence}
	if v, ok := cfg.Params["k"]; ok {
		k, err := strconv.Atoi(v)
		if err != nil {
			return nil, fmt.Errorf("%w: k = %q, must be an integer", sdk.ErrBadConfig, v)
		}
		opts.K = k
	}
	return New(opts)
}

// K returns the number of rounding intervals.
func (r *Randomizer) K() int { return r.k }

// Describe implements sdk.Randomizer.
func (r *Randomizer) Describe(ctx context.Context) (*sdk.Description, error) {
	return ldp.CopyDescription(&r.desc), nil
}

// Gamma returns the blanket probability gamma = (k+1)/(e^eps0 + k) of k
// rounding intervals at eps0 (see the package documentation).
func Gamma(k int, eps0 float64) float64 {
	return float64(k+1) / (math.Exp(eps0) + float64(k))
}

// Eps0 returns the local budget ln((k+1)/gamma - k) at which k rounding
// intervals have blanket probability gamma in (0, 1]; the inverse of Gamma.
func Eps0(k int, gamma float64) float64 {
	return math.Log(float64(k+1)/gamma - float64(k))
}

// SuggestK returns the number of rounding intervals the paper chooses for n
// users and a central (eps, delta) target (proof of Theorem 4.1):
// k = (n/c)^(1/3) rounded, with c = n/(n-1)·max(14 ln(2/delta)/eps²,
// 27/eps) from Theorem 3.1 applied to the k+1 levels (gamma = c(k+1)/n).
// This balances the rounding variance 1/(4k²) against the blanket variance
// of order gamma. Theorem 3.1 assumes eps <= 1; for larger eps the choice is
// the same formula without that guarantee. Errors wrap sdk.ErrBadConfig,
// including when n is too small for the target (gamma >= 1).
func SuggestK(n int, eps, delta float64) (int, error) {
	switch {
	case n < 2:
		return 0, fmt.Errorf("%w: n = %d, must be >= 2", sdk.ErrBadConfig, n)
	case math.IsNaN(eps) || math.IsInf(eps, 0) || !(eps > 0):
		return 0, fmt.Errorf("%w: eps = %v, must be finite and > 0", sdk.ErrBadConfig, eps)
	case math.IsNaN(delta) || !(delta > 0 && delta < 1):
		return 0, fmt.Errorf("%w: delta = %v, must be in (0,1)", sdk.ErrBadConfig, delta)
	}
	nf := float64(n)
	c := nf / (nf - 1) * math.Max(14*math.Log(2/delta)/(eps*eps), 27/eps)
	k := int(math.Round(math.Cbrt(nf / c)))
	k = min(max(k, 1), MaxK)
	if gamma := c * float64(k+1) / nf; !(gamma < 1) {
		return 0, fmt.Errorf("%w: n = %d is too small for eps = %v, delta = %v: the blanket probability c(k+1)/n = %.3g is not below 1", sdk.ErrBadConfig, n, eps, delta, gamma)
	}
	return k, nil
}

// Declare implements sdk.Randomizer: the matrix when k+1 <= MatrixMaxLevels,
// else the exact atoms.
func (r *Randomizer) Declare(ctx context.Context, eps0 float64) (*declare.Declaration, error) {
	return r.Declaration(eps0, ldp.FormFor(r.k+1, MatrixMaxLevels))
}

// DeclareForm implements sdk.FormDeclarer: Declaration.
func (r *Randomizer) DeclareForm(ctx context.Context, eps0 float64, form declare.Form) (*declare.Declaration, error) {
	return r.Declaration(eps0, form)
}

// Declaration returns the declaration at eps0 in the given form: (k+1)-ary
// randomized response on the levels (ldp.RRDeclaration). It is exact for
// inputs on the levels, and valid for every real input: a real input's
// output distribution is a mixture of two levels' rows, so its blanket is
// the same, and the hockey-stick divergence of the shuffled outputs is
// jointly convex, so a pair of mixtures is bounded by the worst pair of
// levels.
//
// The atoms name their inputs (DeclaredSet.Inputs): the pair holds for any
// two levels and is named at the first two, lo and lo + (hi-lo)/k, the
// triple at the first three (with k = 1 its x3 is x', the second level).
func (r *Randomizer) Declaration(eps0 float64, form declare.Form) (*declare.Declaration, error) {
	if err := ldp.CheckEps0(eps0); err != nil {
		return nil, err
	}
	d, err := ldp.RRDeclaration(r.k+1, eps0, form, nil)
	if err == nil && form == declare.FormAtoms {
		d.Pairs[0].Inputs = []float64{r.levelValue(0), r.levelValue(1)}
		d.Triples[0].Inputs = []float64{r.levelValue(0), r.levelValue(1), r.levelValue(min(2, r.k))}
	}
	return d, err
}

// levelValue returns the input at level i: lo + i(hi-lo)/k, hi at i = k.
func (r *Randomizer) levelValue(i int) float64 {
	if i == r.k {
		return r.hi
	}
	return r.lo + (r.hi-r.lo)*float64(i)/float64(r.k)
}

// Atoms implements sdk.AtomMapper: each report's level among the atoms of
// the (k+1)-ary randomized response's pair or triple (ldp.RRAtoms), the
// inputs being levels (an input that is not a level fails with
// sdk.ErrBadInput: the atoms are exact for levels only).
func (r *Randomizer) Atoms(ctx context.Context, eps0 float64, set int, inputs []float64, reports [][]byte) ([]int, error) {
	if err := ldp.CheckEps0(eps0); err != nil {
		return nil, err
	}
	levels := make([]float64, len(inputs))
	for i, x := range inputs {
		t := (x - r.lo) / (r.hi - r.lo) * float64(r.k)
		l := math.Round(t)
		if math.IsNaN(t) || math.Abs(t-l) > 1e-9*float64(r.k) || l < 0 || l > float64(r.k) {
			return nil, fmt.Errorf("%w: input %d of the set is %v, not one of the %d levels", sdk.ErrBadInput, i, x, r.k+1)
		}
		levels[i] = l
	}
	ys, err := ldp.DecodeAll(reports, r.Decode)
	if err != nil {
		return nil, err
	}
	return ldp.RRAtoms(r.k+1, set, levels, ys)
}

// blanket returns gamma and 1 - gamma = (e^eps0 - 1)/(e^eps0 + k), each in
// closed form.
func (r *Randomizer) blanket(eps0 float64) (gamma, notGamma float64) {
	den := math.Exp(eps0) + float64(r.k)
	return float64(r.k+1) / den, math.Expm1(eps0) / den
}

// Level returns the randomized-rounding level of x (clamped to the range):
// floor(sk) or floor(sk)+1 with probability sk - floor(sk), s the scaled
// value. It is the encoding step of Algorithm 2.
func (r *Randomizer) Level(src ldp.Source, x float64) int {
	s := (x - r.lo) / (r.hi - r.lo)
	s = min(max(s, 0), 1)
	t := s * float64(r.k)
	fl := math.Floor(t)
	level := int(fl)
	if level < r.k && ldp.Bernoulli(src, t-fl) {
		level++
	}
	return level
}

// Randomize implements sdk.Randomizer (Algorithm 2). NaN and infinite
// inputs are rejected; finite inputs outside [Lo, Hi] are clamped. Each
// report is a level, ReportBytes long.
func (r *Randomizer) Randomize(ctx context.Context, eps0 float64, in sdk.Inputs) ([][]byte, error) {
	idx, err := r.randomize(ctx, eps0, len(in.Categories), in.Reals)
	if err != nil {
		return nil, err
	}
	return ldp.EncodeIndices(idx, r.k+1), nil
}

// RandomizePacked implements sdk.PackedRandomizer: Randomize with the
// reports concatenated.
func (r *Randomizer) RandomizePacked(ctx context.Context, eps0 float64, in sdk.PackedInputs) ([]byte, error) {
	idx, err := r.randomize(ctx, eps0, len(in.Index), in.Reals)
	if err != nil {
		return nil, err
	}
	return ldp.PackIndices(idx, r.k+1), nil
}

// randomize returns the randomized level of each real input; a batch with
// categorical inputs (cats of them) is rejected.
func (r *Randomizer) randomize(ctx context.Context, eps0 float64, cats int, reals []float64) ([]int, error) {
	if err := ldp.CheckEps0(eps0); err != nil {
		return nil, err
	}
	if cats > 0 {
		return nil, fmt.Errorf("%w: summation takes real inputs, got %d categories", sdk.ErrBadInput, cats)
	}
	for i, x := range reals {
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return nil, fmt.Errorf("%w: input %d is %v, must be finite", sdk.ErrBadInput, i, x)
		}
	}
	gamma, notGamma := r.blanket(eps0)
	src := ldp.DefaultSource(r.src)
	idx := make([]int, len(reals))
	for i, x := range reals {
		if err := ldp.Canceled(ctx, i); err != nil {
			return nil, err
		}
		if ldp.Choose(src, gamma, notGamma) {
			idx[i] = ldp.Intn(src, r.k+1)
		} else {
			idx[i] = r.Level(src, x)
		}
	}
	return idx, nil
}

// Decode returns the level of a report. Errors wrap sdk.ErrBadReport.
func (r *Randomizer) Decode(report []byte) (int, error) {
	return ldp.ReadIndex(report, r.k+1)
}

// Accumulate implements sdk.Randomizer. The statistic's Counts are the
// number of reports per level (k+1 counts).
func (r *Randomizer) Accumulate(ctx context.Context, eps0 float64, reports [][]byte) (*sdk.Statistic, error) {
	return ldp.AccumulateIndices(ctx, &r.desc, eps0, r.k+1, reports)
}

// Estimate implements sdk.Randomizer (Algorithm 3) with two items, "sum"
// and "mean" of the inputs (clamped to the range).
//
// With Z_i = y_i/k the reported level scaled to [0, 1], each
// T_i = (Z_i - gamma/2)/(1 - gamma) has mean s_i (randomized rounding is
// unbiased and the blanket adds gamma/2 on average), so S = sum T_i is an
// unbiased estimate of sum s_i: the paper's DeBias. The sum is
// n·Lo + (Hi - Lo)·S, the mean Lo + (Hi - Lo)·S/n.
//
// Variance. For one user, Var(Z) = (1-gamma) rho + gamma(1-gamma)(s² - s) +
// gamma·U2 - gamma²/4 with U2 = (2k+1)/(6k) the second moment of a uniform
// level and rho = f(1-f)/k² <= 1/(4k²) the rounding variance (f the
// fractional part of sk). Substituting the unbiased estimates of sum Z² and
// sum s gives
//
//	Var(S) ≈ [gamma·sum(Z² - Z) + n·gamma((1-gamma)U2 + gamma/4)]/(1-gamma)² + n/(4k²),
//
// unbiased except that the unknown rounding term sum rho is replaced by its
// bound n/(4k²): conservative by at most that. Post-processing clips the
// estimates and their intervals to the range ([n·Lo, n·Hi] for the sum).
func (r *Randomizer) Estimate(ctx context.Context, stat *sdk.Statistic) (*sdk.Estimate, error) {
	if err := ldp.CheckStatistic(stat, &r.desc, r.k+1, true); err != nil {
		return nil, err
	}
	return ldp.NewEstimate(Name, stat, r.conf, r.items(stat, 0)), nil
}
