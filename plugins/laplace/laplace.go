// Package laplace is the Laplace mechanism for bounded real values, sampled
// by Google's differential-privacy library
// (github.com/google/differential-privacy/go/v3/noise). It implements
// sdk.Randomizer.
//
// A value x in the configured range [Lo, Hi] (finite values outside are
// clamped to it) is mapped to s = (x - Lo)/(Hi - Lo) in [0, 1] and released
// as y = noise.Laplace().AddNoiseFloat64(s, 1, 1, eps0, 0): sensitivity 1,
// pure eps0-LDP. A float Laplace sample leaks through floating-point
// artefacts (Mironov 2012); the library instead samples a two-sided
// geometric on a power-of-two grid, whose output law is exact (up to the
// sampler's own floating-point search, relative errors near 1e-15 per
// output, far inside the ratio margin lam):
//
//	g   = 2^ceil(log2(1/(eps0·2^40)))      the grid step (Grid)
//	lam = g·eps0/(1 + g)                   the geometric's rate
//	y   = g·(round(s/g) + Z),   P(Z = j) = tanh(lam/2)·e^(-lam|j|)
//
// (round half away from zero). With m = 1/g grid steps across [0, 1] the
// input is a centre c = round(s·m) in {0..m} and P(y = g·k | c) =
// tanh(lam/2) e^(-lam|k - c|); lam·m < eps0, so every likelihood ratio is
// within e^eps0 (declaration.go derives the accountant's declaration from
// this law).
//
//	r, err := laplace.New(laplace.Options{Lo: 0, Hi: 3600})
//	reports, err := r.Randomize(ctx, eps0, sdk.Inputs{Reals: seconds})
//	est, err := r.Estimate(ctx, stat) // items "sum" and "mean"
//
// Reports are the noisy values y as 8-byte big-endian IEEE 754 doubles,
// in [0, 1] units. The estimator is unbiased for the sum of the rounded
// values g·round(s/g); the rounding moves each value by at most g/2, so the
// sum of the inputs is estimated with a bias of at most n·(Hi-Lo)·g/2
// (about 4.5e-13·(Hi-Lo) per report at eps0 = 1), far below the noise.
//
// The library's randomness (crypto/rand) cannot be seeded; this package is
// tested statistically against its declared law.
package laplace

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"

	"github.com/google/differential-privacy/go/v3/noise"

	"github.com/blanket-dp/blanket/accountant/declare"
	"github.com/blanket-dp/blanket/sdk"
	"github.com/blanket-dp/blanket/sdk/ldp"
)

// Plugin identity and limits.
const (
	// Name is the plugin name.
	Name = "laplace"
	// Version is the report format version.
	Version = "1"
	// ReportBytes is the length of a report.
	ReportBytes = 8
	// MaxSteps bounds the grid index |y/g| of a valid report: 2^52, so that
	// every index is an exact double. A report of the library exceeds it
	// with probability below e^-4000 at any supported eps0.
	MaxSteps = 1 << 52
)

// Options configures the Laplace randomizer.
type Options struct {
	// Lo and Hi are the range of the inputs, finite with Lo < Hi. Required.
	// Finite inputs outside are clamped to it.
	Lo, Hi float64
	// Confidence is the level of the confidence intervals. Defaults to 0.95.
	Confidence float64
}

// Randomizer is the Laplace mechanism. It is safe for concurrent use.
type Randomizer struct {
	lo, hi float64
	conf   float64
	desc   sdk.Description
}

var _ sdk.OutputMapper = (*Randomizer)(nil)

// New returns the Laplace randomizer. Errors wrap sdk.ErrBadConfig.
func New(opts Options) (*Randomizer, error) {
	conf, err := ldp.Confidence(opts.Confidence)
	if err != nil {
		return nil, err
	}
	lo, hi := opts.Lo, opts.Hi
	if math.IsNaN(lo) || math.IsInf(lo, 0) || math.IsNaN(hi) || math.IsInf(hi, 0) || !(lo < hi) || math.IsInf(hi-lo, 0) {
		return nil, fmt.Errorf("%w: range [%v, %v], must be finite with lo < hi", sdk.ErrBadConfig, lo, hi)
	}
	r := &Randomizer{lo: lo, hi: hi, conf: conf}
	r.desc = sdk.Description{
		Name:        Name,
		Version:     Version,
		Input:       sdk.InputReal,
		Lo:          lo,
		Hi:          hi,
		Encoding:    "8-byte big-endian IEEE 754 double: the noisy value in [0,1] units, (x-lo)/(hi-lo) plus Laplace noise of scale 1/eps0 from Google's differential-privacy library (a multiple of its grid step)",
		ReportBytes: ReportBytes,
		Eps0Min:     ldp.MinEps0,
		Eps0Max:     ldp.MaxEps0,
	}
	r.desc.Digest = ldp.Digest(r.desc)
	return r, nil
}

// FromConfig returns the randomizer of a plugin-independent configuration:
// Lo, Hi and Confidence; no categories, no parameters. Errors wrap
// sdk.ErrBadConfig.
func FromConfig(cfg sdk.Config) (*Randomizer, error) {
	if len(cfg.Categories) > 0 || cfg.Other != "" {
		return nil, fmt.Errorf("%w: laplace takes a range, not categories", sdk.ErrBadConfig)
	}
	if err := ldp.CheckParams(Name, cfg.Params); err != nil {
		return nil, err
	}
	return New(Options{Lo: cfg.Lo, Hi: cfg.Hi, Confidence: cfg.Confidence})
}

// Describe implements sdk.Randomizer.
func (r *Randomizer) Describe(ctx context.Context) (*sdk.Description, error) {
	return ldp.CopyDescription(&r.desc), nil
}

// Grid returns the library's grid step g at eps0 for sensitivity 1: the
// smallest power of two at least 1/(eps0·2^40) (noise.addLaplaceFloat64:
// ceilPowerOfTwo((l1/eps)/2^40)).
func Grid(eps0 float64) float64 {
	x := 1 / eps0 / (1 << 40)
	frac, exp := math.Frexp(x) // x = frac·2^exp, frac in [0.5, 1)
	if frac == 0.5 {
		return x
	}
	return math.Ldexp(1, exp)
}

// Rate returns the library's geometric rate lam = g·eps0/(1 + g) at eps0.
func Rate(eps0 float64) float64 {
	g := Grid(eps0)
	return g * eps0 / (1 + g)
}

// Randomize implements sdk.Randomizer. NaN and infinite inputs are
// rejected; finite inputs outside [Lo, Hi] are clamped. Each report is
// ReportBytes long.
func (r *Randomizer) Randomize(ctx context.Context, eps0 float64, in sdk.Inputs) ([][]byte, error) {
	if err := ldp.CheckEps0(eps0); err != nil {
		return nil, err
	}
	if len(in.Categories) > 0 {
		return nil, fmt.Errorf("%w: laplace takes real inputs, got %d categories", sdk.ErrBadInput, len(in.Categories))
	}
	for i, x := range in.Reals {
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return nil, fmt.Errorf("%w: input %d is %v, must be finite", sdk.ErrBadInput, i, x)
		}
	}
	lap := noise.Laplace()
	out := make([][]byte, len(in.Reals))
	for i, x := range in.Reals {
		if err := ldp.Canceled(ctx, i); err != nil {
			return nil, err
		}
		y, err := lap.AddNoiseFloat64(r.Scale(x), 1, 1, eps0, 0)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", sdk.ErrBadEps0, err)
		}
		out[i] = binary.BigEndian.AppendUint64(make([]byte, 0, ReportBytes), math.Float64bits(y))
	}
	return out, nil
}

// Scale returns x clamped to the range and mapped to [0, 1].
func (r *Randomizer) Scale(x float64) float64 {
	return min(max((x-r.lo)/(r.hi-r.lo), 0), 1)
}

// Decode returns the grid index k = y/g of a report produced at eps0.
// Errors wrap sdk.ErrBadReport: a report of the wrong length, not a finite
// multiple of the grid step, or beyond MaxSteps.
func Decode(report []byte, eps0 float64) (int64, error) {
	if len(report) != ReportBytes {
		return 0, fmt.Errorf("%w: %d bytes, want %d", sdk.ErrBadReport, len(report), ReportBytes)
	}
	y := math.Float64frombits(binary.BigEndian.Uint64(report))
	k := y / Grid(eps0) // exact: the step is a power of two
	if math.IsNaN(k) || math.Abs(k) > MaxSteps || k != math.Trunc(k) {
		return 0, fmt.Errorf("%w: %v is not a multiple of the grid step %v within %d steps", sdk.ErrBadReport, y, Grid(eps0), int64(MaxSteps))
	}
	return int64(k), nil
}

// Accumulate implements sdk.Randomizer. The statistic's two counts hold
// the exact sum of the reports' grid indices k, split as
// sum(k >> 32)·2^32 + sum(k & (2^32-1)) so that neither overflows below
// 2^31 reports.
func (r *Randomizer) Accumulate(ctx context.Context, eps0 float64, reports [][]byte) (*sdk.Statistic, error) {
	return ldp.Accumulate(ctx, &r.desc, eps0, 2, reports, func(counts []int64, rep []byte) bool {
		k, err := Decode(rep, eps0)
		if err != nil {
			return false
		}
		counts[0] += k >> 32
		counts[1] += k & (1<<32 - 1)
		return true
	})
}

// Outputs implements sdk.OutputMapper: the index of each report's bin in
// the declaration's pair (Bins), so that the conformance kit can test the
// library's sampler against the declared masses.
func (r *Randomizer) Outputs(ctx context.Context, eps0 float64, reports [][]byte) ([]int, error) {
	if err := ldp.CheckEps0(eps0); err != nil {
		return nil, err
	}
	b := newBinning(eps0, Bins)
	out := make([]int, len(reports))
	for i, rep := range reports {
		k, err := Decode(rep, eps0)
		if err != nil {
			return nil, fmt.Errorf("report %d: %w", i, err)
		}
		out[i] = b.binOf(k)
	}
	return out, nil
}

// Declare implements sdk.Randomizer: the segments declaration of
// declaration.go.
func (r *Randomizer) Declare(ctx context.Context, eps0 float64) (*declare.Declaration, error) {
	if err := ldp.CheckEps0(eps0); err != nil {
		return nil, err
	}
	d := Declaration(eps0, Bins)
	d.Pairs[0].Inputs = []float64{r.lo, r.hi}
	d.Triples[0].Inputs = []float64{r.lo, r.hi, r.lo}
	return d, nil
}

// Estimate implements sdk.Randomizer with two items, "sum" and "mean" of
// the inputs (clamped to the range).
//
// With K = sum k the reports' grid indices, g·K is an unbiased estimate of
// sum s_i (rounded to the grid; see the package documentation for the
// bias bound), since E[Z] = 0. The sum is n·Lo + (Hi-Lo)·g·K, the mean
// Lo + (Hi-Lo)·g·K/n. Z's variance is exactly 2u/(1-u)² with u = e^-lam,
// whatever the inputs, so Var(sum) = n·(Hi-Lo)²·g²·2u/(1-u)² (close to
// 2n(Hi-Lo)²/eps0²). Post-processing clips the estimates and their
// intervals to the range ([n·Lo, n·Hi] for the sum).
func (r *Randomizer) Estimate(ctx context.Context, stat *sdk.Statistic) (*sdk.Estimate, error) {
	if err := r.checkStatistic(stat); err != nil {
		return nil, err
	}
	return ldp.NewEstimate(Name, stat, r.conf, r.items(stat, 0)), nil
}

// items returns the sum and mean items of st's N reports of which draws
// are blanket draws, reports of the middle of the range (0 in Estimate;
// floor.go).
func (r *Randomizer) items(st *sdk.Statistic, draws int64) []sdk.Item {
	g, lam := Grid(st.Eps0), Rate(st.Eps0)
	nf := float64(st.N)
	k := float64(st.Counts[0])*(1<<32) + float64(st.Counts[1])
	width := r.hi - r.lo
	sd := g * math.Sqrt(2*math.Exp(-lam)) / -math.Expm1(-lam) // standard deviation of g·Z
	varSum := nf * width * width * sd * sd
	na := float64(st.N - draws) // the apps' reports
	sum := na*r.lo + width*(g*k-float64(draws)/2)
	z := ldp.ZScore(r.conf)
	item := func(label string, v, variance, lo, hi float64) sdk.Item {
		return ldp.ClippedItem(z, label, v, variance, lo, hi)
	}
	return []sdk.Item{
		item("sum", sum, varSum, na*r.lo, na*r.hi),
		item("mean", sum/na, varSum/(na*na), r.lo, r.hi),
	}
}

// checkStatistic validates a statistic of this randomizer: compatible,
// N >= 1, no draws (ldp.CheckNoDraws: Estimate refuses them), and counts
// that N reports within MaxSteps could have summed to. Errors wrap
// sdk.ErrBadStatistic.
func (r *Randomizer) checkStatistic(s *sdk.Statistic) error {
	if s == nil {
		return fmt.Errorf("%w: nil statistic", sdk.ErrBadStatistic)
	}
	ref := sdk.Statistic{Plugin: r.desc.Name, Digest: r.desc.Digest, Eps0: s.Eps0, Counts: make([]int64, 2)}
	if err := ref.Compatible(s); err != nil {
		return err
	}
	if err := ldp.CheckEps0(s.Eps0); err != nil {
		return fmt.Errorf("%w: %v", sdk.ErrBadStatistic, err)
	}
	switch {
	case s.N < 1:
		return fmt.Errorf("%w: N = %d, need at least one valid report", sdk.ErrBadStatistic, s.N)
	case s.Malformed < 0:
		return fmt.Errorf("%w: Malformed = %d, must be >= 0", sdk.ErrBadStatistic, s.Malformed)
	case s.Draws != 0:
		return ldp.CheckNoDraws(s)
	case s.N > 1<<31:
		return fmt.Errorf("%w: N = %d, more than the 2^31 reports a statistic holds", sdk.ErrBadStatistic, s.N)
	case math.Abs(float64(s.Counts[0])) > float64(s.N)*(MaxSteps>>32):
		return fmt.Errorf("%w: count 0 = %d is beyond what %d reports sum to", sdk.ErrBadStatistic, s.Counts[0], s.N)
	case s.Counts[1] < 0 || float64(s.Counts[1]) > float64(s.N)*(1<<32-1):
		return fmt.Errorf("%w: count 1 = %d is beyond what %d reports sum to", sdk.ErrBadStatistic, s.Counts[1], s.N)
	}
	return nil
}
