package sdk

import (
	"context"

	"github.com/blanket-dp/blanket/accountant/declare"
)

// Randomizer is a local randomizer: the device side (Randomize), the
// collector side (Accumulate, Estimate) and the privacy declaration the
// accountant needs (Declare), at the configuration it was built with.
//
// Each method is one RPC of the plugin protocol. Implementations must be safe
// for concurrent use when they use their default randomness source.
type Randomizer interface {
	// Describe returns the randomizer's name, version, input domain, report
	// encoding, parameters and supported eps0 range.
	Describe(ctx context.Context) (*Description, error)

	// Declare returns the randomizer's output distributions at local budget
	// eps0 for the accountant (a matrix, atoms or generic declaration; see
	// declare.Declaration). Errors wrap ErrBadEps0.
	Declare(ctx context.Context, eps0 float64) (*declare.Declaration, error)

	// Randomize returns one encoded report per input, in input order, each
	// satisfying eps0-local differential privacy. Inputs must be of the
	// randomizer's kind (Description.Input). A bad input fails the whole
	// batch with an error wrapping ErrBadInput that names its index.
	Randomize(ctx context.Context, eps0 float64, in Inputs) ([][]byte, error)

	// Accumulate decodes reports produced at eps0 and returns their
	// sufficient statistic. Malformed reports are counted in
	// Statistic.Malformed, never fatal. Statistics of two batches at the same
	// eps0 combine with Statistic.Merge.
	Accumulate(ctx context.Context, eps0 float64, reports [][]byte) (*Statistic, error)

	// Estimate returns unbiased estimates, their variances and confidence
	// intervals, raw and post-processed, from a statistic produced by
	// Accumulate (possibly merged). Errors wrap ErrBadStatistic.
	Estimate(ctx context.Context, stat *Statistic) (*Estimate, error)
}

// OutputMapper is an optional interface of a Randomizer whose reports are
// not output indices in the SDK's index encoding (ldp.EncodeIndices): it
// maps reports to their outputs, the columns of its matrix declaration, so
// that the conformance kit (sdk/plugintest, blanket plugin verify) can test
// the output frequencies against the declaration. The plugin protocol
// carries it (RPC Outputs); a plugin that does not implement it makes the
// host's Outputs fail with an error wrapping errors.ErrUnsupported.
type OutputMapper interface {
	// Outputs returns the output index of each report produced at eps0, in
	// report order. A report that is not an output of the randomizer
	// fails the call with an error wrapping ErrBadReport.
	Outputs(ctx context.Context, eps0 float64, reports [][]byte) ([]int, error)
}

// FormDeclarer is an optional interface of a Randomizer that declares
// itself in more than one form (declare.Form: a matrix on small domains,
// atoms on large ones): DeclareForm returns the declaration at eps0 in
// the given form, which must decompose as the randomizer's Declare does
// or claim less privacy. The conformance kit asks for both forms of one
// configuration and checks that the atoms claim no more privacy than the
// matrix, whose every probability it tests against the sampler. The
// plugin protocol carries it (DeclareRequest.form). A form the randomizer
// does not declare fails with an error wrapping ErrBadConfig; eps0 out of
// range with one wrapping ErrBadEps0.
type FormDeclarer interface {
	DeclareForm(ctx context.Context, eps0 float64, form declare.Form) (*declare.Declaration, error)
}

// AtomMapper is an optional interface of a Randomizer that declares atoms
// or segments (large output spaces): it maps reports to the atoms of a
// declared set, so that the conformance kit (sdk/plugintest, blanket
// plugin verify) can test the declared masses against the sampler at the
// configuration the randomizer runs at, not only on a configuration small
// enough for a matrix. The plugin protocol carries it (RPC Atoms); a
// plugin that does not implement it makes the host's Atoms fail with an
// error wrapping errors.ErrUnsupported.
type AtomMapper interface {
	// Atoms returns, for each report produced at eps0, the index of its
	// atom in declared set set of the declaration at eps0 (set indexes
	// Pairs, then Triples), the set taken at inputs: x, x' and, for a
	// triple, x3, each a bucket index of a categorical randomizer or a
	// value of a real one (declare.DeclaredSet.Inputs). Index j <
	// len(Atoms) is atom j; len(Atoms)+b is bin b of a segments
	// declaration. Every output lies in some atom (a set's p and q each
	// sum to 1). A report that is not an output fails the call with an
	// error wrapping ErrBadReport; inputs the set does not hold for (a set
	// with declared Inputs asked at others, equal inputs, a bucket out of
	// range) with one wrapping ErrBadInput.
	Atoms(ctx context.Context, eps0 float64, set int, inputs []float64, reports [][]byte) ([]int, error)
}

// MaxBlanketDraws bounds the draws of one SampleBlanket call: 2^22, the
// largest batch of reports a shuffler releases or a collector takes
// (report.MaxBatchReports), so that one call can fill any batch.
const MaxBlanketDraws = 1 << 22

// BlanketSampler is an optional interface of a Randomizer that draws from
// its blanket distribution: for each output y, r_y = min_x R[x][y] is the
// mass every input gives y, gamma = sum_y r_y, and omega = r/gamma is the
// blanket (docs/accounting.md §3). Every report of the randomizer is, with
// probability gamma, a draw of omega whatever its input; a shuffler that
// adds draws of omega to a batch gives each user a privacy floor that holds
// whatever the other reports are. The conformance kit (sdk/plugintest,
// blanket plugin verify) tests the draws against the blanket of the
// randomizer's declaration. The plugin protocol carries it (RPC
// SampleBlanket); a plugin that does not implement it makes the host's
// SampleBlanket fail with an error wrapping errors.ErrUnsupported.
type BlanketSampler interface {
	// SampleBlanket returns n independent draws of omega, the blanket
	// distribution at eps0 of the randomizer's configuration, each a report
	// in exactly the format of Randomize's (ReportBytes long, accepted by
	// Accumulate as a report of eps0), so that a batch holding draws cannot
	// be told from one holding reports of real inputs by their form. The
	// draws depend on no input. They use the randomizer's own randomness
	// source, Randomize's (crypto-backed by default). n must be in
	// [0, MaxBlanketDraws], else the error wraps ErrBadInput; eps0 out of
	// range fails with an error wrapping ErrBadEps0.
	SampleBlanket(ctx context.Context, eps0 float64, n int) ([][]byte, error)
}

// FloorEstimator is an optional interface of a BlanketSampler whose
// estimates can take the shuffler's blanket draws out: a batch to which a
// shuffler added draws (a plan's floor, docs/accounting.md §13) holds
// reports of apps and draws of the blanket, and a collector estimates what
// the apps sent. The conformance kit (sdk/plugintest, blanket plugin
// verify) checks it against SampleBlanket, Randomize and Accumulate. The
// plugin protocol carries it (RPC EstimateFloor); a plugin that does not
// implement it makes the host's EstimateFloor fail with an error wrapping
// errors.ErrUnsupported.
type FloorEstimator interface {
	// EstimateFloor is Estimate for a statistic stat.Draws of whose stat.N
	// valid reports are draws of the blanket at stat.Eps0 (SampleBlanket),
	// 0 <= Draws <= N - 1: at least one report of an app, as Estimate
	// needs N >= 1 (draws alone estimate nothing, and a mean of no report
	// has no value). Every item's Value is unbiased for the other N -
	// Draws reports alone (the draws' expected contribution subtracted),
	// its Variance is that of this estimate (the draws' own variance
	// included), Lo and Hi follow from them as in Estimate, and Post is
	// post-processed for N - Draws reports. Estimate.N is N - Draws. With
	// Draws = 0 it equals Estimate. Errors wrap ErrBadStatistic, among
	// them Draws < 0 and Draws >= N.
	EstimateFloor(ctx context.Context, stat *Statistic) (*Estimate, error)
}

// InputKind is the kind of values a randomizer takes.
type InputKind int

// The input kinds. The zero value is unspecified, as in protobuf enums.
const (
	// InputUnspecified is the zero value; no randomizer has it.
	InputUnspecified InputKind = iota
	// InputCategorical is a string from a declared list of categories.
	InputCategorical
	// InputReal is a real number in a declared range [Lo, Hi].
	InputReal
)

// String returns "categorical", "real" or "unspecified".
func (k InputKind) String() string {
	switch k {
	case InputCategorical:
		return "categorical"
	case InputReal:
		return "real"
	default:
		return "unspecified"
	}
}

// Description is what a configured randomizer says about itself.
type Description struct {
	// Name is the plugin name, e.g. "krr".
	Name string
	// Version is the plugin's report-format version; reports and statistics
	// of different versions do not mix.
	Version string
	// Input is the kind of input values.
	Input InputKind
	// Categories are the output buckets of a categorical randomizer, in
	// index order; when Other is set it is the last bucket.
	Categories []string
	// Other is the label of the catch-all bucket that receives every input
	// not in Categories, or "" when there is none.
	Other string
	// Lo and Hi bound the inputs of a real randomizer; values outside are
	// clamped.
	Lo, Hi float64
	// Encoding describes the report bytes.
	Encoding string
	// ReportBytes is the length of every report. Fixed, so that a report's
	// length reveals nothing about its content.
	ReportBytes int
	// Params lists the randomizer's parameters with their values.
	Params []Param
	// Eps0Min and Eps0Max bound the supported local budgets: eps0 must be in
	// [Eps0Min, Eps0Max].
	Eps0Min, Eps0Max float64
	// Digest identifies the configuration (name, version, domain and
	// parameters); statistics carry it so that they are only merged and
	// estimated under the configuration that produced them.
	Digest string
	// Stateful is set for a randomizer that keeps per-user state across
	// periods (it implements Stateful, and its reports come from Step).
	Stateful bool
	// Span is the number of consecutive periods whose statistics one
	// estimate combines, aligned to multiples of Span in the period index
	// (see Stateful.Step): the estimate for period p comes from the merged
	// statistics of periods floor(p/Span)*Span through p. 0 or 1: each
	// period is estimated from its own statistic.
	Span int64
}

// Param is one named parameter of a randomizer.
type Param struct {
	// Name is the parameter's name, as in Config.Params.
	Name string
	// Value is its value, formatted.
	Value string
	// Doc says what it means.
	Doc string
}

// Inputs is a batch of input values of one kind: Categories for a
// categorical randomizer, Reals for a real one. The other field must be
// empty.
type Inputs struct {
	// Categories are category labels. A label outside the randomizer's
	// categories goes to its Other bucket, or is rejected when there is none.
	Categories []string
	// Reals are real values. NaN and infinities are rejected; finite values
	// outside the randomizer's range are clamped to it.
	Reals []float64
}

// Len returns the number of values in the batch.
func (in Inputs) Len() int { return len(in.Categories) + len(in.Reals) }

// Config is the plugin-independent form of a randomizer's configuration, as
// the host reads it from a metric definition and passes it to a plugin.
// Each plugin package's FromConfig turns it into a Randomizer and rejects
// fields and parameters it does not use with ErrBadConfig.
type Config struct {
	// Categories are the categories of a categorical randomizer.
	Categories []string
	// Other is the label of a catch-all bucket for inputs not in Categories.
	// Defaults to "" (no bucket: such inputs are rejected).
	Other string
	// Lo and Hi are the range of a real randomizer.
	Lo, Hi float64
	// Confidence is the level of the confidence intervals Estimate returns.
	// Defaults to 0.95.
	Confidence float64
	// Params are plugin-specific parameters by name (see Description.Params).
	Params map[string]string
}
