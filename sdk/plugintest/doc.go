// Package plugintest is the conformance kit for Blanket randomizers: any
// plugin author runs it on a configured sdk.Randomizer, in process from a
// Go test or against a plugin binary through the host, and gets a report
// that says which requirements of the plugin contract hold.
//
//	func TestConformance(t *testing.T) {
//		r, err := myplugin.New(myplugin.Options{Categories: []string{"a", "b", "c"}})
//		if err != nil {
//			t.Fatal(err)
//		}
//		plugintest.Run(t, r, plugintest.Options{})
//	}
//
// Verify returns the same checks as a Report (per check and test: status,
// statistic, threshold, p-value, message) for tools such as
// `blanket plugin verify`.
//
// # What is checked
//
//   - describe: the Description is complete and consistent (name, version,
//     digest, encoding, ReportBytes >= 1, 0 < Eps0Min <= Eps0Max <= 30,
//     distinct categories with the other bucket last, or a finite range).
//   - declaration: at each tested eps0 the declaration is accepted by the
//     accountant (accountant.Decompose: rows sum to 1, pure LDP,
//     ratios within e^eps0) and the kit's own exact bound holds: the largest
//     likelihood ratio max_x R[x][y] / min_x R[x][y] over the columns of a
//     matrix, or over the atoms of a declared pair p/q, q/p, p/r, q/r, is at
//     most e^eps0 (relative tolerance 1e-12), and every pair atom has
//     r <= min(p, q), which the accountant does not check (an inflated
//     blanket mass claims more amplification than the randomizer gives);
//     and, on a randomizer that declares two forms (sdk.FormDeclarer), that
//     its atoms claim no more privacy than its matrix, whose probabilities
//     the frequency check tests (forms.go).
//   - frequencies: the randomizer's own sampler, on chosen inputs, draws
//     outputs with the declared probabilities (Pearson's chi-square against
//     the declared matrix row). For an atoms declaration, at any size, the
//     sampler's atoms (sdk.AtomMapper) at each declared set's inputs
//     against the declared masses, and each pair's blanket at two other
//     inputs (atoms.go). Skipped for generic declarations, and for atoms
//     when the randomizer does not map reports to atoms.
//   - privacy: an empirical lower bound on the sampler's local eps, by a
//     distinguishing attack with split samples and Clopper-Pearson bounds,
//     must not exceed the declared eps0; each pair's bound is reported
//     ("samples behave like eps0 >= 1.93 at confidence 1-4e-8, declared
//     2"). See privacy.go.
//   - blanket: a randomizer that draws from its blanket distribution
//     (sdk.BlanketSampler, for a shuffler's privacy floor) draws Samples
//     reports at each eps0, tested by chi-square against the blanket of
//     its declaration: each output's smallest probability over the
//     inputs, normalized, for a matrix; each declared pair's blanket
//     masses R over their sum, through sdk.AtomMapper, for atoms; the
//     first pair's bins for segments (blanketdraws.go). A randomizer
//     without the interface has the check skipped with a message: the
//     floor is unavailable for it, and nothing else is affected.
//   - estimator: on a ground-truth batch randomized, accumulated and
//     estimated many times, the mean estimate equals the truth (t-test)
//     and the reported variance matches the spread of the estimates
//     (chi-square on their ratio; overstating it up to VarianceSlack times
//     is allowed).
//   - floor: for a randomizer that draws from its blanket, the estimator
//     check with BatchSize draws added to every batch, estimated by
//     sdk.FloorEstimator.EstimateFloor (floorestimate.go): the means are
//     the truth of the apps' inputs and the variances those of the
//     estimates. Before them, its contract on one batch: without draws
//     EstimateFloor is Estimate; with them it estimates N - Draws reports
//     with valid items; Estimate of a statistic with draws, and Draws
//     -1, N and N + 1, fail with sdk.ErrBadStatistic. A sampler without
//     EstimateFloor fails it.
//   - inputs: inputs of the wrong kind, unknown categories without an other
//     bucket, NaN and infinite reals fail with errors wrapping
//     sdk.ErrBadInput that name the bad index; budgets outside the range
//     fail Randomize, Accumulate and Declare with sdk.ErrBadEps0; nothing
//     panics; empty batches, unknown categories with an other bucket and
//     out-of-range finite reals are accepted.
//   - reports: malformed reports (nil, empty, truncated, extended,
//     oversized) are counted in Statistic.Malformed, never fatal; random
//     bytes of the right length are counted once; a batch's statistic is
//     the merge of its reports' statistics whatever their order, so valid
//     reports among malformed ones still count and halves merge into the
//     whole; Accumulate does not modify the reports.
//   - statistics: Estimate's items follow the contract (one per bucket, or
//     "sum" and "mean"; intervals Value ± z·sqrt(Variance); post-processed
//     values feasible and inside their intervals); Estimate does not modify
//     the statistic; foreign or corrupt statistics fail with
//     sdk.ErrBadStatistic.
//
// # Stateful randomizers
//
// A randomizer whose Description says Stateful reports through
// sdk.Stateful.Step, not Randomize (which must fail with
// errors.ErrUnsupported). The kit knows one stateful protocol, the
// longitudinal tree protocol of Erlingsson et al. (2019,
// plugins/longitudinal): a declaration with Tree > 0, whose matrix is
// the law of one node's report (rows the node values -1, 0, +1, columns
// the report's outputs, read with sdk.OutputMapper) and whose Changes is
// k, over two states (two categories: off, on). For it the checks become:
//
//   - declaration: the accountant refuses to decompose a tree declaration
//     (accountant.ErrLongitudinal), so the kit validates Declaration.Node
//     and bounds the node law's ratios by e^Eps0; Tree is a power of two,
//     Changes in [1, Tree], Description.Span = Tree; and, on a tree of at
//     most MaxEnumeratedTree periods, the whole transcript's level by
//     exact enumeration: from the declaration alone the kit derives the
//     law of a tree's transcript (the level and its nodes' outputs) under
//     each of the 2^Tree state sequences, and the largest ratio of two
//     sequences' probabilities of a transcript must be at most e^Eps0
//     (relative tolerance 1e-12), the level the accountant assumes.
//   - frequencies: Step drives Samples users per state sequence over a
//     whole tree from a period that starts one (sequences with more
//     changes than k and one on from the start among them); each user's
//     level is read from the periods that carried its reports, which must
//     be exactly the ends of its level's nodes, and the transcripts'
//     counts are tested against the derived law (chi-square). States must
//     be non-empty.
//   - estimator: BatchSize users stepped over (up to MaxEnumeratedTree
//     periods of) a tree, Batches times; after each period the statistics
//     of the span so far (Description.Span) are merged and estimated, and
//     the single item is tested as above against the users in the on
//     state (as far as each user's first k changes go).
//   - inputs: through Step, plus states: a replayed or earlier period and
//     a state one byte short or long fail with sdk.ErrBadState; other
//     corrupt states are refused with it or taken, never a panic.
//   - reports, statistics: on reports drawn through Step; the estimate
//     has one item, the on state.
//
// On a larger tree the enumeration and the chi-square test are skipped
// with a message (the structure of the reports is still checked): run
// the kit on a small configuration too, e.g. a tree of 8 periods and
// k = 2, as for atoms declarations below. A stateful randomizer that
// declares no tree fails the declaration check: per-period accounting of
// reports correlated by a kept state would be unsound.
//
// # Seeing outputs through the interface
//
// The kit drives the randomizer only through sdk.Randomizer, so it tests
// frequencies with the randomizer's own randomness and must map each report
// to a column of the declared matrix. By default it reads the report as the
// column index in the SDK's index encoding (ldp.EncodeIndices: big-endian,
// ldp.IndexWidth(outputs) bytes), which holds for every built-in randomizer
// that declares a matrix (a RAPPOR report of d <= 6 bits is one byte whose
// value is the output index). A randomizer with another encoding
// implements sdk.OutputMapper, which the plugin protocol carries (RPC
// Outputs), so that the check runs in process and through a plugin binary
// (blanket plugin verify) alike; Options.Output, when set, takes
// precedence. Rows are buckets for categorical randomizers; for real
// ones row i of m is taken to be the input Lo + i(Hi-Lo)/(m-1) (randomized
// rounding to evenly spaced levels) unless Options.Cases says otherwise.
//
// Atoms declarations (large domains: k-RR over thousands of categories,
// RAPPOR over 2^d outputs) do not say which output has which probability.
// A randomizer that implements sdk.AtomMapper says which atom of a
// declared set each report is in, and the kit tests the atoms' masses and
// the blanket at the production configuration (atoms.go). Without it the
// sampler is unchecked there: the frequency check is skipped, and
// `blanket plugin verify` says so in its summary (and fails under
// --strict). Either way, run the kit on a small configuration of the same
// plugin too, where it declares a matrix and its sampler is tested
// exactly.
//
// # False failures
//
// The statistical tests compare a statistic with the (1 - alpha) quantile
// of its null distribution, so a correct randomizer fails each with
// probability alpha over its randomness. Options.FalseFailureRate (default
// 1e-6) is split evenly between the five families (frequencies, means,
// variances, the privacy audit, the blanket draws) and within each evenly
// between its tests;
// by the union bound a correct randomizer fails a whole run with
// probability at most FalseFailureRate. The null distributions are
// asymptotic (Pearson's statistic with cells of expected count >= 5;
// estimates that are sums of many reports, close to normal), except the
// blanket and privacy tests', which are exact (Clopper-Pearson), which is why the defaults draw tens of
// thousands of reports per test. Deterministic tests never fail a correct
// randomizer.
package plugintest
