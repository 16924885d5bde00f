package hadamard_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"

	"github.com/blanket-dp/blanket/accountant"
	"github.com/blanket-dp/blanket/plugins/hadamard"
	"github.com/blanket-dp/blanket/sdk"
	"github.com/blanket-dp/blanket/sdk/ldp"
	"github.com/blanket-dp/blanket/sdk/ldp/ldptest"
)

// alpha is the false-failure rate of each statistical check: every
// chi-square and z statistic is compared with the (1 - alpha) quantile of its
// null distribution (chi-square with the test's degrees of freedom, |N(0,1)|,
// with a Bonferroni split alpha/k when k categories are tested at once), so
// a correct randomizer fails a check with probability at most alpha over the
// choice of seed. Seeds are fixed, so runs are reproducible.
const alpha = 1e-6

func seeded(seed uint64) ldp.Source {
	var s [32]byte
	s[0], s[1] = byte(seed), byte(seed>>8)
	return rand.NewChaCha8(s)
}

func labels(k int) []string {
	out := make([]string, k)
	for i := range out {
		out[i] = fmt.Sprintf("c%d", i)
	}
	return out
}

func mustNew(t testing.TB, opts hadamard.Options) *hadamard.Randomizer {
	t.Helper()
	r, err := hadamard.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestNewRejectsBadConfig(t *testing.T) {
	tests := map[string]hadamard.Options{
		"no categories":       {},
		"one bucket":          {Categories: []string{"a"}},
		"duplicate":           {Categories: []string{"a", "b", "a"}},
		"other is category":   {Categories: []string{"a", "b"}, Other: "a"},
		"confidence 1":        {Categories: []string{"a", "b"}, Confidence: 1},
		"confidence NaN":      {Categories: []string{"a", "b"}, Confidence: math.NaN()},
		"confidence negative": {Categories: []string{"a", "b"}, Confidence: -0.5},
	}
	for name, opts := range tests {
		if _, err := hadamard.New(opts); !errors.Is(err, sdk.ErrBadConfig) {
			t.Errorf("%s: error = %v, want ErrBadConfig", name, err)
		}
	}
	if _, err := hadamard.New(hadamard.Options{Categories: []string{"a"}, Other: "rest"}); err != nil {
		t.Errorf("one category plus other: %v", err)
	}
}

func TestFromConfig(t *testing.T) {
	r, err := hadamard.FromConfig(sdk.Config{Categories: []string{"a", "b"}, Other: "o"})
	if err != nil {
		t.Fatal(err)
	}
	if r.K() != 3 {
		t.Errorf("K = %d, want 3", r.K())
	}
	for name, cfg := range map[string]sdk.Config{
		"range": {Categories: []string{"a", "b"}, Hi: 1},
		"param": {Categories: []string{"a", "b"}, Params: map[string]string{"k": "3"}},
	} {
		if _, err := hadamard.FromConfig(cfg); !errors.Is(err, sdk.ErrBadConfig) {
			t.Errorf("%s: error = %v, want ErrBadConfig", name, err)
		}
	}
}

func TestDescribe(t *testing.T) {
	ctx := context.Background()
	r := mustNew(t, hadamard.Options{Categories: labels(300), Other: "other"})
	d, err := r.Describe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if d.Name != hadamard.Name || d.Input != sdk.InputCategorical || len(d.Categories) != 301 || d.Categories[300] != "other" ||
		d.Other != "other" || d.ReportBytes != 2 || d.Eps0Min != ldp.MinEps0 || d.Eps0Max != ldp.MaxEps0 || d.Digest == "" {
		t.Errorf("Describe = %+v", d)
	}
	d.Categories[0] = "mutated"
	if d2, _ := r.Describe(ctx); d2.Categories[0] != "c0" {
		t.Error("Describe returns shared slices")
	}
	other := mustNew(t, hadamard.Options{Categories: labels(300)})
	if d3, _ := other.Describe(ctx); d3.Digest == d.Digest {
		t.Error("different configurations share a digest")
	}
}

func TestDeclarationFormsAgree(t *testing.T) {
	for _, k := range []int{2, 3, 4, 10, 64} {
		for _, eps0 := range []float64{0.01, 1, 5, 20} {
			r := mustNew(t, hadamard.Options{Categories: labels(k)})
			m, err := r.Declaration(eps0, accountant.FormMatrix)
			if err != nil {
				t.Fatal(err)
			}
			a, err := r.Declaration(eps0, accountant.FormAtoms)
			if err != nil {
				t.Fatal(err)
			}
			t.Run(fmt.Sprintf("k=%d/eps0=%g", k, eps0), func(t *testing.T) {
				ldptest.CheckSameDecomposition(t, m, a)
			})
		}
	}
}

func TestDeclareForm(t *testing.T) {
	ctx := context.Background()
	for _, tt := range []struct {
		k    int
		form accountant.Form
	}{{2, accountant.FormMatrix}, {hadamard.MatrixMaxK, accountant.FormMatrix}, {hadamard.MatrixMaxK + 1, accountant.FormAtoms}, {10_000, accountant.FormAtoms}} {
		r := mustNew(t, hadamard.Options{Categories: labels(tt.k)})
		d, err := r.Declare(ctx, 2)
		if err != nil {
			t.Fatal(err)
		}
		if d.Form != tt.form {
			t.Errorf("k=%d: form %q, want %q", tt.k, d.Form, tt.form)
		}
		if err := d.Validate(); err != nil {
			t.Errorf("k=%d: %v", tt.k, err)
		}
	}
	r := mustNew(t, hadamard.Options{Categories: labels(3)})
	for _, eps0 := range []float64{0, -1, math.NaN(), math.Inf(1), 31} {
		if _, err := r.Declare(ctx, eps0); !errors.Is(err, sdk.ErrBadEps0) {
			t.Errorf("Declare(%v) error = %v, want ErrBadEps0", eps0, err)
		}
	}
	if _, err := r.Declaration(1, accountant.FormGeneric); !errors.Is(err, sdk.ErrBadConfig) {
		t.Errorf("generic form: error = %v", err)
	}
}

// TestRandomizeMatchesDeclaration checks the sampler against its own
// declared matrix row by Pearson's chi-square test over all K outputs.
func TestRandomizeMatchesDeclaration(t *testing.T) {
	ctx := context.Background()
	const draws = 40_000 // the smallest expected cell below is 40 000·2/((e^3+1)·32) ≈ 120
	for _, k := range []int{2, 3, 7, 20} {
		for _, eps0 := range []float64{0.5, 3} {
			r := mustNew(t, hadamard.Options{Categories: labels(k), Rand: seeded(uint64(k) * 100)})
			d, err := r.Declaration(eps0, accountant.FormMatrix)
			if err != nil {
				t.Fatal(err)
			}
			for _, x := range []int{0, k - 1} {
				in := slices.Repeat([]string{labels(k)[x]}, draws)
				reports, err := r.Randomize(ctx, eps0, sdk.Inputs{Categories: in})
				if err != nil {
					t.Fatal(err)
				}
				obs := make([]int64, r.Outputs())
				for _, rep := range reports {
					y, err := r.Decode(rep)
					if err != nil {
						t.Fatal(err)
					}
					obs[y]++
				}
				probs := make([]float64, r.Outputs())
				for y := range probs {
					probs[y] = d.Matrix.At(x, y)
				}
				ldptest.CheckChiSquare(t, fmt.Sprintf("k=%d eps0=%g x=%d", k, eps0, x), obs, probs, alpha)
			}
		}
	}
}

// TestFWHT compares the fast transform with the direct O(K^2) sum
// a'[u] = sum_j (-1)^popcount(u&j) a[j]; integer arithmetic, so exactly.
func TestFWHT(t *testing.T) {
	src := seeded(5)
	for _, n := range []int{1, 2, 4, 8, 64, 256} {
		a := make([]int64, n)
		for i := range a {
			a[i] = int64(ldp.Intn(src, 2001)) - 1000
		}
		want := make([]int64, n)
		for u := range want {
			for j, v := range a {
				if bits.OnesCount(uint(u&j))%2 == 0 {
					want[u] += v
				} else {
					want[u] -= v
				}
			}
		}
		got := slices.Clone(a)
		hadamard.FWHT(got)
		if !slices.Equal(got, want) {
			t.Errorf("n=%d: FWHT = %v, want %v", n, got, want)
		}
		hadamard.FWHT(got) // H·H = n·I
		for i := range got {
			if got[i] != int64(n)*a[i] {
				t.Fatalf("n=%d: FWHT twice [%d] = %d, want %d", n, i, got[i], int64(n)*a[i])
			}
		}
	}
	defer func() {
		if recover() == nil {
			t.Error("FWHT of length 3 did not panic")
		}
	}()
	hadamard.FWHT(make([]int64, 3))
}

// TestSetSizes checks the combinatorics the declaration relies on:
// |C_x| = K/2, |C_x ∩ C_x'| = K/4 for x != x', and 0 in every C_x.
func TestSetSizes(t *testing.T) {
	for _, k := range []int{2, 3, 4, 7, 8, 30} {
		r := mustNew(t, hadamard.Options{Categories: labels(k)})
		kk := r.Outputs()
		if kk < k+1 || kk/2 >= k+1 || kk&(kk-1) != 0 {
			t.Errorf("k=%d: K = %d, want the smallest power of two >= k+1", k, kk)
		}
		for x := range k {
			if !hadamard.InSet(x, 0) {
				t.Errorf("k=%d: 0 not in C_%d", k, x)
			}
			for x2 := range k {
				var size, both int
				for y := range kk {
					if hadamard.InSet(x, y) {
						size++
						if hadamard.InSet(x2, y) {
							both++
						}
					}
				}
				if size != kk/2 || (x != x2 && both != kk/4) {
					t.Errorf("k=%d: |C_%d| = %d, |C_%d ∩ C_%d| = %d", k, x, size, x, x2, both)
				}
			}
		}
	}
}

// TestEstimateUnbiased simulates many batches with known true counts and
// checks that the mean estimate is the truth (z-test) and that the spread
// of the estimates matches the variance formula (chi-square test on the
// sample variance), for every bucket.
func TestEstimateUnbiased(t *testing.T) {
	ctx := context.Background()
	cats := []string{"a", "b", "c", "d"}
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
	r := mustNew(t, hadamard.Options{Categories: cats, Other: "other", Rand: seeded(42)})
	est := make([][]float64, len(trueCounts))
	for range batches {
		reports, err := r.Randomize(ctx, eps0, sdk.Inputs{Categories: in})
		if err != nil {
			t.Fatal(err)
		}
		stat, err := r.Accumulate(ctx, eps0, reports)
		if err != nil {
			t.Fatal(err)
		}
		e, err := r.Estimate(ctx, stat)
		if err != nil {
			t.Fatal(err)
		}
		for i, it := range e.Items {
			est[i] = append(est[i], it.Value)
		}
	}
	pure := r.Pure(eps0)
	a := alpha / float64(len(trueCounts))
	for i, want := range trueCounts {
		v := pure.Variance(float64(n), want)
		ldptest.CheckMean(t, fmt.Sprintf("bucket %d", i), est[i], want, v, a)
		ldptest.CheckVariance(t, fmt.Sprintf("bucket %d", i), est[i], v, a)
	}
}

func TestEstimateItems(t *testing.T) {
	ctx := context.Background()
	r := mustNew(t, hadamard.Options{Categories: []string{"a", "b", "c"}, Rand: seeded(3)})
	in := slices.Repeat([]string{"a"}, 3000)
	reports, err := r.Randomize(ctx, 2, sdk.Inputs{Categories: in})
	if err != nil {
		t.Fatal(err)
	}
	stat, err := r.Accumulate(ctx, 2, reports)
	if err != nil {
		t.Fatal(err)
	}
	e, err := r.Estimate(ctx, stat)
	if err != nil {
		t.Fatal(err)
	}
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
}

func TestMalformedReportsCounted(t *testing.T) {
	ctx := context.Background()
	r := mustNew(t, hadamard.Options{Categories: labels(300)})                    // 2-byte reports
	reports := [][]byte{{0, 5}, nil, {0}, {0, 0, 1}, {2, 0}, {255, 255}, {1, 43}} // K = 512
	stat, err := r.Accumulate(ctx, 1, reports)
	if err != nil {
		t.Fatal(err)
	}
	if stat.N != 2 || stat.Malformed != 5 || stat.Counts[5] != 1 || stat.Counts[299] != 1 {
		t.Errorf("stat N=%d Malformed=%d counts[5]=%d counts[299]=%d", stat.N, stat.Malformed, stat.Counts[5], stat.Counts[299])
	}
	if _, err := r.Estimate(ctx, stat); err != nil {
		t.Errorf("Estimate after malformed reports: %v", err)
	}
	for _, rep := range reports[1:6] {
		if _, err := r.Decode(rep); !errors.Is(err, sdk.ErrBadReport) {
			t.Errorf("Decode(%v) error = %v, want ErrBadReport", rep, err)
		}
	}
}

func TestMergeEqualsWhole(t *testing.T) {
	ctx := context.Background()
	r := mustNew(t, hadamard.Options{Categories: labels(5), Rand: seeded(9)})
	in := slices.Repeat(labels(5), 200)
	reports, err := r.Randomize(ctx, 1, sdk.Inputs{Categories: in})
	if err != nil {
		t.Fatal(err)
	}
	reports = append(reports, []byte{200})
	whole, err := r.Accumulate(ctx, 1, reports)
	if err != nil {
		t.Fatal(err)
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

func TestBadCalls(t *testing.T) {
	ctx := context.Background()
	r := mustNew(t, hadamard.Options{Categories: labels(3)})
	if _, err := r.Randomize(ctx, 1, sdk.Inputs{Categories: []string{"c0", "nope"}}); !errors.Is(err, sdk.ErrBadInput) {
		t.Errorf("unknown category: error = %v", err)
	}
	if _, err := r.Randomize(ctx, 1, sdk.Inputs{Reals: []float64{1}}); !errors.Is(err, sdk.ErrBadInput) {
		t.Errorf("reals: error = %v", err)
	}
	if _, err := r.Randomize(ctx, math.NaN(), sdk.Inputs{}); !errors.Is(err, sdk.ErrBadEps0) {
		t.Errorf("NaN eps0: error = %v", err)
	}
	if _, err := r.Accumulate(ctx, 0, nil); !errors.Is(err, sdk.ErrBadEps0) {
		t.Errorf("Accumulate eps0 0: error = %v", err)
	}
	other := mustNew(t, hadamard.Options{Categories: labels(4)})
	stat, _ := other.Accumulate(ctx, 1, [][]byte{{1}})
	if _, err := r.Estimate(ctx, stat); !errors.Is(err, sdk.ErrBadStatistic) {
		t.Errorf("foreign statistic: error = %v", err)
	}
	empty, _ := r.Accumulate(ctx, 1, nil)
	if _, err := r.Estimate(ctx, empty); !errors.Is(err, sdk.ErrBadStatistic) {
		t.Errorf("empty statistic: error = %v", err)
	}
	canceled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := r.Randomize(canceled, 1, sdk.Inputs{Categories: []string{"c0"}}); !errors.Is(err, context.Canceled) {
		t.Errorf("canceled Randomize: error = %v", err)
	}
	if _, err := r.Accumulate(canceled, 1, [][]byte{{0}}); !errors.Is(err, context.Canceled) {
		t.Errorf("canceled Accumulate: error = %v", err)
	}
}

// TestConcurrentUse runs Randomize and Accumulate from many goroutines on
// one randomizer with its default crypto source, released together by a
// barrier, and checks the merged totals against the sequential count.
func TestConcurrentUse(t *testing.T) {
	ctx := context.Background()
	r := mustNew(t, hadamard.Options{Categories: labels(8)})
	const workers, per = 16, 500
	in := slices.Repeat([]string{"c1"}, per)
	start := make(chan struct{})
	stats := make([]*sdk.Statistic, workers)
	errs := make([]error, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			<-start
			reports, err := r.Randomize(ctx, 1, sdk.Inputs{Categories: in})
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
	var sum int64
	for _, c := range total.Counts {
		sum += c
	}
	if total.N != workers*per || sum != workers*per {
		t.Errorf("N = %d, counts sum to %d, want %d", total.N, sum, workers*per)
	}
}

// FuzzDecode feeds arbitrary bytes to the report decoder: it must never
// panic, and every accepted report must re-encode to the same bytes.
func FuzzDecode(f *testing.F) {
	r, err := hadamard.New(hadamard.Options{Categories: labels(300), Other: "other"})
	if err != nil {
		f.Fatal(err)
	}
	f.Add([]byte{0, 0})
	f.Add([]byte{1, 44})
	f.Fuzz(func(t *testing.T, report []byte) {
		y, err := r.Decode(report)
		if err != nil {
			if !errors.Is(err, sdk.ErrBadReport) {
				t.Fatalf("error %v does not wrap ErrBadReport", err)
			}
			return
		}
		if y < 0 || y >= r.Outputs() {
			t.Fatalf("Decode = %d outside [0, %d)", y, r.Outputs())
		}
		if re := ldp.EncodeIndices([]int{y}, r.Outputs())[0]; !slices.Equal(re, report) {
			t.Fatalf("re-encoded %v as %v", report, re)
		}
		stat, err := r.Accumulate(context.Background(), 1, [][]byte{report})
		if err != nil || stat.N != 1 {
			t.Fatalf("Accumulate of a decodable report: %+v, %v", stat, err)
		}
	})
}
