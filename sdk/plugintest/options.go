package plugintest

import (
	"errors"
	"fmt"
	"math"

	"github.com/blanket-dp/blanket/sdk"
)

// Defaults of Options.
const (
	// DefaultSamples is the default number of reports per input and eps0 in
	// the frequency check. A sampler that runs k-RR (k = 4) at eps0 = 2.25
	// while declaring 2 gives a chi-square statistic with noncentrality
	// 20 000·sum (p1-p0)²/p0 = 230, against a threshold of 39.1 (3 degrees
	// of freedom at alpha = 1e-6/60, the default split: five families,
	// three eps0, four inputs).
	DefaultSamples = 20_000
	// DefaultBatches is the default number of repetitions of the estimator
	// check.
	DefaultBatches = 200
	// DefaultBatchSize is the default number of inputs in the estimator
	// check's ground-truth batch.
	DefaultBatchSize = 1000
	// DefaultFalseFailureRate is the default probability that a correct
	// randomizer fails a run.
	DefaultFalseFailureRate = 1e-6
	// DefaultVarianceSlack is the default factor by which a reported
	// variance may exceed the empirical one.
	DefaultVarianceSlack = 4
	// MaxCases is the number of matrix rows the default frequency cases
	// cover (plus an unknown label for the other bucket, and two
	// out-of-range values for real inputs).
	MaxCases = 4
	// MaxItems is the number of estimated items the estimator check tests
	// one by one when there are more: the items with positive truth, the
	// rest are tested together as one sum.
	MaxItems = 16
)

// defaultEps0s are the budgets tested by default, those inside the
// randomizer's range.
var defaultEps0s = []float64{0.5, 2, 5}

// Options configures a verification run. The zero value runs every check
// with the defaults below.
type Options struct {
	// Eps0s are the local budgets to test, each in the randomizer's
	// [Eps0Min, Eps0Max]. Defaults to those of 0.5, 2 and 5 inside the range,
	// or the range's midpoint when none is.
	Eps0s []float64

	// Samples is the number of reports drawn per input and eps0 in the
	// frequency check (for a stateful randomizer: users stepped over a
	// tree per state sequence and eps0), and of blanket draws per eps0 in
	// the blanket check. Defaults to DefaultSamples.
	Samples int
	// Cases are the inputs of the frequency check, each with the row of the
	// declared matrix its reports must follow. Defaults to up to MaxCases
	// rows spread over the matrix: for a categorical randomizer bucket i is
	// the input Categories[i] (and, with an other bucket, an unknown label
	// is tested against the last row); for a real randomizer row i of an
	// m-row matrix is the input Lo + i(Hi-Lo)/(m-1), the convention of
	// randomized rounding to m evenly spaced levels, and Lo - (Hi-Lo) and
	// Hi + (Hi-Lo) are tested against the first and last rows (clamping).
	// Set Cases when the rows of a real randomizer mean something else.
	Cases []Case
	// Output maps a report produced at eps0 to its output index (column) in
	// the declared matrix. Defaults to the randomizer's own mapping when it
	// is an sdk.OutputMapper that does not answer errors.ErrUnsupported,
	// else to the SDK's index encoding: the report is the output index as a
	// big-endian unsigned integer of ldp.IndexWidth(outputs) bytes
	// (ldp.EncodeIndices). A randomizer with neither whose ReportBytes
	// differs from that width has its frequency check skipped.
	Output func(eps0 float64, report []byte) (int, error)

	// Truth is the ground-truth batch of the estimator check, randomized,
	// accumulated and estimated Batches times. Defaults to BatchSize inputs:
	// for a categorical randomizer positive counts on up to 8 buckets (all
	// but one when there are at most MaxItems buckets), half of the other
	// bucket's inputs given as unknown labels; for a real randomizer values
	// spread over [Lo - 0.1(Hi-Lo), Lo + 1.15(Hi-Lo)], some clamped. A
	// stateful randomizer's estimator check steps its own population of
	// BatchSize users over state sequences and ignores Truth (and Cases).
	Truth sdk.Inputs
	// Batches is the number of repetitions of the estimator check. Defaults
	// to DefaultBatches; at least 20.
	Batches int
	// BatchSize is the size of the default Truth. Defaults to
	// DefaultBatchSize. Ignored when Truth is set.
	BatchSize int
	// VarianceSlack is the factor by which a randomizer may overstate the
	// variance of its estimates (conservative intervals) before the
	// estimator check fails. Understating it always fails. Defaults to
	// DefaultVarianceSlack; at least 1.
	VarianceSlack float64

	// FalseFailureRate is the probability, over the randomizer's
	// randomness, that a correct randomizer fails the run. It is split
	// evenly between the five statistical families (frequencies, means,
	// variances, the privacy audit, the blanket draws) and within each
	// evenly between its tests (Bonferroni), so that by the union bound
	// the whole run fails falsely with at most this probability. Deterministic tests never fail a correct randomizer.
	// Defaults to DefaultFalseFailureRate; must be in (0, 0.5].
	FalseFailureRate float64

	// Seed seeds the kit's own random choices (random report bytes, the
	// order of inputs), so that a run against a seeded randomizer is
	// reproducible. The randomizer's randomness is its own: configure it
	// with a seeded source (krr.Options.Rand) for a reproducible run.
	// Defaults to 1.
	Seed uint64

	// Strict fails the run when the sampler goes unchecked at some tested
	// eps0 (Report.Unchecked: for example an atoms declaration from a
	// randomizer that does not implement sdk.AtomMapper), with a failed
	// test "strict" in the frequency check.
	Strict bool

	// Skip lists checks (Check* names) not to run; they are reported as
	// skipped.
	Skip []string
}

// Case is one input of the frequency check. Set Category for a categorical
// randomizer, Real for a real one.
type Case struct {
	// Category is a category label (or an unknown label, which goes to the
	// other bucket).
	Category string
	// Real is a real value.
	Real float64
	// Row is the row of the declared matrix that the input's reports
	// follow.
	Row int
}

// errOptions reports invalid Options.
var errOptions = errors.New("plugintest: invalid options")

// withDefaults validates o against the randomizer's description and fills in
// defaults.
func (o Options) withDefaults(desc *sdk.Description) (Options, error) {
	if len(o.Eps0s) == 0 {
		for _, e := range defaultEps0s {
			if e >= desc.Eps0Min && e <= desc.Eps0Max {
				o.Eps0s = append(o.Eps0s, e)
			}
		}
		if len(o.Eps0s) == 0 {
			o.Eps0s = []float64{(desc.Eps0Min + desc.Eps0Max) / 2}
		}
	}
	for _, e := range o.Eps0s {
		if math.IsNaN(e) || e < desc.Eps0Min || e > desc.Eps0Max {
			return o, fmt.Errorf("%w: eps0 %v outside the randomizer's range [%v, %v]", errOptions, e, desc.Eps0Min, desc.Eps0Max)
		}
	}
	if o.Samples == 0 {
		o.Samples = DefaultSamples
	}
	if o.Batches == 0 {
		o.Batches = DefaultBatches
	}
	if o.BatchSize == 0 {
		o.BatchSize = DefaultBatchSize
	}
	if o.FalseFailureRate == 0 {
		o.FalseFailureRate = DefaultFalseFailureRate
	}
	if o.VarianceSlack == 0 {
		o.VarianceSlack = DefaultVarianceSlack
	}
	if o.Seed == 0 {
		o.Seed = 1
	}
	switch {
	case o.Samples < 1:
		return o, fmt.Errorf("%w: Samples = %d, must be >= 1", errOptions, o.Samples)
	case o.Batches < 20:
		return o, fmt.Errorf("%w: Batches = %d, must be >= 20", errOptions, o.Batches)
	case o.BatchSize < 1:
		return o, fmt.Errorf("%w: BatchSize = %d, must be >= 1", errOptions, o.BatchSize)
	case math.IsNaN(o.FalseFailureRate) || !(o.FalseFailureRate > 0 && o.FalseFailureRate <= 0.5):
		return o, fmt.Errorf("%w: FalseFailureRate = %v, must be in (0, 0.5]", errOptions, o.FalseFailureRate)
	case math.IsNaN(o.VarianceSlack) || math.IsInf(o.VarianceSlack, 0) || o.VarianceSlack < 1:
		return o, fmt.Errorf("%w: VarianceSlack = %v, must be finite and >= 1", errOptions, o.VarianceSlack)
	}
	return o, nil
}

func (o Options) skipped(check string) bool {
	for _, s := range o.Skip {
		if s == check {
			return true
		}
	}
	return false
}
