package ldptest

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"

	"github.com/blanket-dp/blanket/accountant"
	"github.com/blanket-dp/blanket/sdk"
	"github.com/blanket-dp/blanket/sdk/ldp"
)

// Alpha is the false-failure rate of each statistical check of the
// randomizer tests: every chi-square and z statistic is compared with the
// (1 - Alpha) quantile of its null distribution (chi-square with the
// test's degrees of freedom, or |N(0,1)|, with a Bonferroni split Alpha/k
// when k buckets are tested at once), so a correct randomizer fails a check
// with probability at most Alpha over the choice of seed. Seeds are fixed,
// so runs are reproducible.
const Alpha = 1e-6

// Seeded returns a reproducible ChaCha8 source keyed by the low 16 bits of
// seed.
func Seeded(seed uint64) ldp.Source {
	var s [32]byte
	s[0], s[1] = byte(seed), byte(seed>>8)
	return rand.NewChaCha8(s)
}

// Labels returns k category labels "c0", ..., "c<k-1>".
func Labels(k int) []string {
	out := make([]string, k)
	for i := range out {
		out[i] = fmt.Sprintf("c%d", i)
	}
	return out
}

// Cycle returns n values cycling through values.
func Cycle[T any](values []T, n int) []T {
	out := make([]T, n)
	for i := range out {
		out[i] = values[i%len(values)]
	}
	return out
}

// Must returns newFn(opts), stopping the test when it fails.
func Must[O, R any](t testing.TB, newFn func(O) (R, error), opts O) R {
	t.Helper()
	r, err := newFn(opts)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// Options configures a categorical randomizer in the shared checks: the
// fields every built-in categorical plugin's options have.
type Options struct {
	// Categories are the category labels.
	Categories []string
	// Other is the label of the other bucket, "" for none.
	Other string
	// Confidence is the confidence level, 0 for the default.
	Confidence float64
	// Rand is the randomness source, nil for crypto/rand.
	Rand ldp.Source
}

// NewFunc builds the categorical randomizer under test from Options (and
// the plugin's defaults for anything else).
type NewFunc func(Options) (sdk.Randomizer, error)

// Randomizer returns r as an sdk.Randomizer, or nil and err: it adapts a
// plugin's New to a NewFunc without wrapping a nil pointer in a non-nil
// interface.
func Randomizer[R sdk.Randomizer](r R, err error) (sdk.Randomizer, error) {
	if err != nil {
		return nil, err
	}
	return r, nil
}

// CheckCategoricalConfig checks the configuration rules of every
// categorical randomizer: New fails with sdk.ErrBadConfig without
// categories, with fewer than 2 buckets, duplicate labels, an other bucket
// named like a category, or a confidence level outside (0, 1); one category
// plus the other bucket is enough.
func CheckCategoricalConfig(t testing.TB, newFn NewFunc) {
	t.Helper()
	ab := []string{"a", "b"}
	tests := map[string]Options{
		"no categories":       {},
		"one bucket":          {Categories: []string{"a"}},
		"duplicate":           {Categories: []string{"a", "b", "a"}},
		"other is category":   {Categories: ab, Other: "a"},
		"confidence 1":        {Categories: ab, Confidence: 1},
		"confidence NaN":      {Categories: ab, Confidence: math.NaN()},
		"confidence negative": {Categories: ab, Confidence: -0.5},
	}
	for name, opts := range tests {
		if _, err := newFn(opts); !errors.Is(err, sdk.ErrBadConfig) {
			t.Errorf("%s: error = %v, want ErrBadConfig", name, err)
		}
	}
	if _, err := newFn(Options{Categories: []string{"a"}, Other: "rest"}); err != nil {
		t.Errorf("one category plus other: %v", err)
	}
}

// CheckCategoricalFromConfig checks that fromConfig (a categorical plugin's
// FromConfig) rejects a range, an unknown parameter "k" and the configs in
// bad with sdk.ErrBadConfig.
func CheckCategoricalFromConfig(t testing.TB, fromConfig func(sdk.Config) error, bad map[string]sdk.Config) {
	t.Helper()
	ab := []string{"a", "b"}
	tests := map[string]sdk.Config{
		"range": {Categories: ab, Hi: 1},
		"param": {Categories: ab, Params: map[string]string{"k": "3"}},
	}
	for name, cfg := range bad {
		tests[name] = cfg
	}
	for name, cfg := range tests {
		if err := fromConfig(cfg); !errors.Is(err, sdk.ErrBadConfig) {
			t.Errorf("%s: error = %v, want ErrBadConfig", name, err)
		}
	}
}

// CheckCategoricalDescribe checks the description of the randomizer over
// Labels(300) plus the other bucket "other": plugin name, categorical input,
// the 301 buckets with the other bucket last, reportBytes bytes per report,
// the eps0 range [ldp.MinEps0, ldp.MaxEps0] and a digest; that Describe
// returns a copy; and that the randomizer without the other bucket has
// another digest.
func CheckCategoricalDescribe(t testing.TB, newFn NewFunc, name string, reportBytes int) {
	t.Helper()
	ctx := context.Background()
	r := Must(t, newFn, Options{Categories: Labels(300), Other: "other"})
	d, err := r.Describe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if d.Name != name || d.Input != sdk.InputCategorical || len(d.Categories) != 301 || d.Categories[300] != "other" ||
		d.Other != "other" || d.ReportBytes != reportBytes || d.Eps0Min != ldp.MinEps0 || d.Eps0Max != ldp.MaxEps0 || d.Digest == "" {
		t.Errorf("Describe = %+v", d)
	}
	d.Categories[0] = "mutated"
	if d2, _ := r.Describe(ctx); d2.Categories[0] != "c0" {
		t.Error("Describe returns shared slices")
	}
	other := Must(t, newFn, Options{Categories: Labels(300)})
	if d3, _ := other.Describe(ctx); d3.Digest == d.Digest {
		t.Error("different configurations share a digest")
	}
}

// CheckFormsAgree checks, in a subtest name/eps0=… for eps0 in 0.01, 1, 5
// and 20, that declaration (a plugin's Declaration method) gives a matrix
// and atoms that decompose identically (CheckSameDecomposition).
func CheckFormsAgree(t *testing.T, name string, declaration func(float64, accountant.Form) (*accountant.Declaration, error)) {
	t.Helper()
	for _, eps0 := range []float64{0.01, 1, 5, 20} {
		m, err := declaration(eps0, accountant.FormMatrix)
		if err != nil {
			t.Fatal(err)
		}
		a, err := declaration(eps0, accountant.FormAtoms)
		if err != nil {
			t.Fatal(err)
		}
		t.Run(fmt.Sprintf("%s/eps0=%g", name, eps0), func(t *testing.T) {
			CheckSameDecomposition(t, m, a)
		})
	}
}

// CheckDeclare checks that r.Declare at eps0 returns a valid declaration of
// form want.
func CheckDeclare(t testing.TB, name string, r sdk.Randomizer, eps0 float64, want accountant.Form) {
	t.Helper()
	d, err := r.Declare(context.Background(), eps0)
	if err != nil {
		t.Fatal(err)
	}
	if d.Form != want {
		t.Errorf("%s: form %q, want %q", name, d.Form, want)
	}
	if err := accountant.Validate(d); err != nil {
		t.Errorf("%s: %v", name, err)
	}
}

// CheckBadDeclarations checks that r.Declare rejects eps0 just above
// ldp.MaxEps0 with sdk.ErrBadEps0, and that declaration (r's Declaration
// method) rejects the generic form with sdk.ErrBadConfig.
func CheckBadDeclarations(t testing.TB, r sdk.Randomizer, declaration func(float64, accountant.Form) (*accountant.Declaration, error)) {
	t.Helper()
	if _, err := r.Declare(context.Background(), ldp.MaxEps0+1); !errors.Is(err, sdk.ErrBadEps0) {
		t.Errorf("Declare(%v) error = %v, want ErrBadEps0", ldp.MaxEps0+1, err)
	}
	if _, err := declaration(1, accountant.FormGeneric); !errors.Is(err, sdk.ErrBadConfig) {
		t.Errorf("generic form: error = %v", err)
	}
}

// MatrixRow returns row x of m.
func MatrixRow(m *accountant.Matrix, x int) []float64 {
	row := make([]float64, m.NumOutputs())
	for y := range row {
		row[y] = m.At(x, y)
	}
	return row
}

// CheckOutputs decodes every report to an output in [0, len(probs)) and
// checks the output counts against probs by Pearson's chi-square test at
// false-failure rate Alpha. It stops the test when a report does not
// decode.
func CheckOutputs(t testing.TB, name string, reports [][]byte, decode func([]byte) (int, error), probs []float64) {
	t.Helper()
	obs := make([]int64, len(probs))
	for _, rep := range reports {
		y, err := decode(rep)
		if err != nil {
			t.Fatal(err)
		}
		obs[y]++
	}
	CheckChiSquare(t, name, obs, probs, Alpha)
}

// Statistic randomizes and accumulates one batch at eps0, stopping the
// test on any error.
func Statistic(t testing.TB, r sdk.Randomizer, eps0 float64, in sdk.Inputs) *sdk.Statistic {
	t.Helper()
	ctx := context.Background()
	reports, err := r.Randomize(ctx, eps0, in)
	if err != nil {
		t.Fatal(err)
	}
	stat, err := r.Accumulate(ctx, eps0, reports)
	if err != nil {
		t.Fatal(err)
	}
	return stat
}

// run randomizes, accumulates and estimates one batch, stopping the test
// on any error.
func run(t testing.TB, r sdk.Randomizer, eps0 float64, in sdk.Inputs) *sdk.Estimate {
	t.Helper()
	e, err := r.Estimate(context.Background(), Statistic(t, r, eps0, in))
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// CheckEstimateUnbiased simulates 400 batches (100 with -short) of known
// true counts on the randomizer over categories a, b, c, d plus the other
// bucket "other", seeded, at eps0 = 1.5: a 500, b 250, c 100, d 0, and 150
// in the other bucket (100 unknown labels and 50 "other"). For every bucket
// it checks that the mean estimate is the truth (z-test, CheckMean) and
// that the spread of the estimates is the variance of the randomizer's
// ldp.Pure at the true count (chi-square test on the sample variance,
// CheckVariance), each at Alpha split over the buckets. The randomizer
// must have a method Pure(eps0 float64) ldp.Pure; name prefixes the
// failure messages.
func CheckEstimateUnbiased(t testing.TB, newFn NewFunc, name string) {
	t.Helper()
	truth := map[string]int{"a": 500, "b": 250, "c": 100, "d": 0, "zzz": 100, "other": 50} // zzz and other go to the other bucket
	var in []string
	for _, v := range []string{"a", "b", "c", "d", "zzz", "other"} {
		in = append(in, slices.Repeat([]string{v}, truth[v])...)
	}
	trueCounts := []float64{500, 250, 100, 0, 150}
	n := len(in)
	batches := 400
	if testing.Short() {
		batches = 100
	}
	const eps0 = 1.5
	r := Must(t, newFn, Options{Categories: []string{"a", "b", "c", "d"}, Other: "other", Rand: Seeded(42)})
	p, ok := r.(interface{ Pure(float64) ldp.Pure })
	if !ok {
		t.Fatalf("%T has no method Pure(eps0 float64) ldp.Pure", r)
	}
	est := make([][]float64, len(trueCounts))
	for range batches {
		for i, it := range run(t, r, eps0, sdk.Inputs{Categories: in}).Items {
			est[i] = append(est[i], it.Value)
		}
	}
	pure := p.Pure(eps0)
	a := Alpha / float64(len(trueCounts))
	for i, want := range trueCounts {
		v := pure.Variance(float64(n), want)
		label := fmt.Sprintf("bucket %d", i)
		if name != "" {
			label = name + " " + label
		}
		CheckMean(t, label, est[i], want, v, a)
		CheckVariance(t, label, est[i], v, a)
	}
}

// CheckEstimateItems estimates 3000 inputs "a" randomized at eps0 = 2 by
// the seeded randomizer over a, b, c with the default confidence, checks
// the estimate's N, eps0, confidence 0.95 and three items, each with
// Lo < Value < Hi, a non-negative post-processed value inside its interval,
// and post-processed values summing to 3000, and returns the estimate.
func CheckEstimateItems(t testing.TB, newFn NewFunc) *sdk.Estimate {
	t.Helper()
	r := Must(t, newFn, Options{Categories: []string{"a", "b", "c"}, Rand: Seeded(3)})
	e := run(t, r, 2, sdk.Inputs{Categories: slices.Repeat([]string{"a"}, 3000)})
	if e.N != 3000 || e.Confidence != 0.95 || e.Eps0 != 2 || len(e.Items) != 3 {
		t.Fatalf("estimate = %+v", e)
	}
	var postSum float64
	for _, it := range e.Items {
		postSum += it.Post
		if !(it.Lo < it.Value && it.Value < it.Hi) || it.Post < 0 || !(it.PostLo <= it.Post && it.Post <= it.PostHi) {
			t.Errorf("item %+v", it)
		}
	}
	const tol = 1e-9 // a few roundings of values of order 3000
	if math.Abs(postSum-3000) > tol {
		t.Errorf("post-processed estimates sum to %v, want 3000", postSum)
	}
	return e
}

// CheckMalformed accumulates the valid and the malformed reports together
// at eps0 = 1 and checks that the valid ones are counted in N, with counts
// (by counter index) where given, the malformed ones in Malformed; that
// the statistic can be estimated; and that decode (the plugin's Decode)
// accepts every valid report and rejects every malformed one with
// sdk.ErrBadReport.
func CheckMalformed(t testing.TB, r sdk.Randomizer, decode func([]byte) error, valid, malformed [][]byte, counts map[int]int64) {
	t.Helper()
	ctx := context.Background()
	stat, err := r.Accumulate(ctx, 1, slices.Concat(valid, malformed))
	if err != nil {
		t.Fatal(err)
	}
	ok := stat.N == int64(len(valid)) && stat.Malformed == int64(len(malformed))
	for i, c := range counts {
		ok = ok && stat.Counts[i] == c
	}
	if !ok {
		t.Errorf("stat N=%d Malformed=%d counts %v, want N=%d Malformed=%d counts %v", stat.N, stat.Malformed, stat.Counts, len(valid), len(malformed), counts)
	}
	if _, err := r.Estimate(ctx, stat); err != nil {
		t.Errorf("Estimate after malformed reports: %v", err)
	}
	for _, rep := range valid {
		if err := decode(rep); err != nil {
			t.Errorf("Decode(%v) error = %v", rep, err)
		}
	}
	for _, rep := range malformed {
		if err := decode(rep); !errors.Is(err, sdk.ErrBadReport) {
			t.Errorf("Decode(%v) error = %v, want ErrBadReport", rep, err)
		}
	}
}

// CheckMerge randomizes in at eps0 = 1, appends the malformed report and
// checks that the statistics of the first 377 reports and of the rest
// merge into the statistic of the whole (len(in) valid reports and one
// malformed), and that a statistic at eps0 = 2 does not merge into it.
func CheckMerge(t testing.TB, r sdk.Randomizer, in sdk.Inputs, malformed []byte) {
	t.Helper()
	ctx := context.Background()
	reports, err := r.Randomize(ctx, 1, in)
	if err != nil {
		t.Fatal(err)
	}
	reports = append(reports, malformed)
	whole, err := r.Accumulate(ctx, 1, reports)
	if err != nil {
		t.Fatal(err)
	}
	if whole.N != int64(in.Len()) || whole.Malformed != 1 {
		t.Errorf("whole: N = %d, Malformed = %d, want %d and 1", whole.N, whole.Malformed, in.Len())
	}
	a, _ := r.Accumulate(ctx, 1, reports[:377])
	b, _ := r.Accumulate(ctx, 1, reports[377:])
	if err := a.Merge(b); err != nil {
		t.Fatal(err)
	}
	if a.N != whole.N || a.Malformed != whole.Malformed || !slices.Equal(a.Counts, whole.Counts) {
		t.Errorf("merged %+v, whole %+v", a, whole)
	}
	c, _ := r.Accumulate(ctx, 2, reports)
	if err := a.Merge(c); !errors.Is(err, sdk.ErrBadStatistic) {
		t.Errorf("merging eps0 1 and 2: error = %v", err)
	}
}

// CheckCanceled checks that Randomize of in and Accumulate under a
// canceled context fail with context.Canceled. (Accumulate checks the
// context before it reads a report, so the report's content is
// irrelevant.)
func CheckCanceled(t testing.TB, r sdk.Randomizer, in sdk.Inputs) {
	t.Helper()
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := r.Randomize(canceled, 1, in); !errors.Is(err, context.Canceled) {
		t.Errorf("canceled Randomize: error = %v", err)
	}
	if _, err := r.Accumulate(canceled, 1, [][]byte{{0}}); !errors.Is(err, context.Canceled) {
		t.Errorf("canceled Accumulate: error = %v", err)
	}
}

// CheckConcurrentUse runs Randomize of in and Accumulate at eps0 = 1 from
// 16 goroutines on r, released together by a barrier, merges their
// statistics and checks the totals against the sequential count: N is 16
// times len(in), nothing is malformed, every count is in [0, N], and, when
// oneCountPerReport, the counts sum to N.
func CheckConcurrentUse(t testing.TB, r sdk.Randomizer, in sdk.Inputs, oneCountPerReport bool) {
	t.Helper()
	ctx := context.Background()
	const workers = 16
	start := make(chan struct{})
	stats := make([]*sdk.Statistic, workers)
	errs := make([]error, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			<-start
			reports, err := r.Randomize(ctx, 1, in)
			if err != nil {
				errs[w] = err
				return
			}
			stats[w], errs[w] = r.Accumulate(ctx, 1, reports)
		})
	}
	close(start)
	wg.Wait()
	total := stats[0]
	for w := range workers {
		if errs[w] != nil {
			t.Fatal(errs[w])
		}
		if w > 0 {
			if err := total.Merge(stats[w]); err != nil {
				t.Fatal(err)
			}
		}
	}
	want := int64(workers * in.Len())
	if total.N != want || total.Malformed != 0 {
		t.Errorf("N = %d, Malformed = %d, want %d and 0", total.N, total.Malformed, want)
	}
	var sum int64
	for j, c := range total.Counts {
		if c < 0 || c > total.N {
			t.Errorf("counter %d counted %d times in %d reports", j, c, total.N)
		}
		sum += c
	}
	if oneCountPerReport && sum != want {
		t.Errorf("counts sum to %d, want %d", sum, want)
	}
}

// FuzzIndexDecode fuzzes decode (the Decode of r, a plugin whose reports
// hold one index in [0, n) in the encoding of ldp.EncodeIndices), with the
// seeds added to the corpus: decode must never panic, must reject with
// sdk.ErrBadReport, and every accepted report must be in range, re-encode
// to the same bytes and accumulate as one valid report.
func FuzzIndexDecode(f *testing.F, r sdk.Randomizer, n int, decode func([]byte) (int, error), seeds ...[]byte) {
	for _, s := range seeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, report []byte) {
		y, err := decode(report)
		if err != nil {
			if !errors.Is(err, sdk.ErrBadReport) {
				t.Fatalf("error %v does not wrap ErrBadReport", err)
			}
			return
		}
		if y < 0 || y >= n {
			t.Fatalf("Decode = %d outside [0, %d)", y, n)
		}
		if re := ldp.EncodeIndices([]int{y}, n)[0]; !slices.Equal(re, report) {
			t.Fatalf("re-encoded %v as %v", report, re)
		}
		stat, err := r.Accumulate(context.Background(), 1, [][]byte{report})
		if err != nil || stat.N != 1 {
			t.Fatalf("Accumulate of a decodable report: %+v, %v", stat, err)
		}
	})
}

// Pack dictionary-encodes in, as the plugin protocol carries it: each
// distinct label once, in order of first appearance.
func Pack(in sdk.Inputs) sdk.PackedInputs {
	p := sdk.PackedInputs{Reals: in.Reals}
	index := map[string]uint32{}
	for _, c := range in.Categories {
		j, ok := index[c]
		if !ok {
			j = uint32(len(p.Labels))
			index[c] = j
			p.Labels = append(p.Labels, c)
		}
		p.Index = append(p.Index, j)
	}
	return p
}

// CategoricalBatches are CheckPacked's batches for a categorical
// randomizer over labels (which must include "c0" and "c1") with no
// category "zzz": a long cycle, an unknown label, one input, none, and
// batches of the wrong kind.
func CategoricalBatches(labels []string) map[string]sdk.Inputs {
	return map[string]sdk.Inputs{
		"cycle":   {Categories: Cycle(labels, 1000)},
		"unknown": {Categories: []string{"c0", "c1", "zzz", "c0"}},
		"one":     {Categories: []string{"c1"}},
		"empty":   {},
		"reals":   {Reals: []float64{1}},
		"both":    {Categories: []string{"c0"}, Reals: []float64{1}},
	}
}

// CheckPacked checks that RandomizePacked agrees with Randomize: on each
// batch at eps0, two randomizers with the same seed (newR(seed)) give the
// same reports, concatenated, or the same error. It also checks that an
// index outside the labels fails with sdk.ErrBadInput (at eps0 = 1) rather
// than panicking.
func CheckPacked(t testing.TB, newR func(seed uint64) sdk.PackedRandomizer, eps0 float64, batches map[string]sdk.Inputs) {
	t.Helper()
	ctx := context.Background()
	for name, in := range batches {
		want, wantErr := newR(1).Randomize(ctx, eps0, in)
		got, err := newR(1).RandomizePacked(ctx, eps0, Pack(in))
		switch {
		case wantErr != nil || err != nil:
			if wantErr == nil || err == nil || err.Error() != wantErr.Error() {
				t.Errorf("%s: RandomizePacked error %v, Randomize error %v", name, err, wantErr)
			}
		case !slices.Equal(got, slices.Concat(want...)):
			t.Errorf("%s: RandomizePacked reports differ from Randomize's", name)
		}
	}
	bad := []sdk.PackedInputs{
		{Labels: []string{"c0"}, Index: []uint32{0, 1}},
		{Index: []uint32{0}},
		{Labels: []string{"c0"}, Index: []uint32{0, math.MaxUint32}},
	}
	for _, in := range bad {
		if _, err := newR(1).RandomizePacked(ctx, 1, in); !errors.Is(err, sdk.ErrBadInput) {
			t.Errorf("RandomizePacked(%+v): error = %v, want ErrBadInput", in, err)
		}
	}
}
