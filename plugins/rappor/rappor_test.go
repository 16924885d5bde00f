package rappor_test

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
	"github.com/blanket-dp/blanket/plugins/rappor"
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

func mustNew(t testing.TB, opts rappor.Options) *rappor.Randomizer {
	t.Helper()
	r, err := rappor.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestNewRejectsBadConfig(t *testing.T) {
	tests := map[string]rappor.Options{
		"no categories":       {},
		"one bucket":          {Categories: []string{"a"}},
		"duplicate":           {Categories: []string{"a", "b", "a"}},
		"other is category":   {Categories: []string{"a", "b"}, Other: "a"},
		"confidence 1":        {Categories: []string{"a", "b"}, Confidence: 1},
		"confidence NaN":      {Categories: []string{"a", "b"}, Confidence: math.NaN()},
		"confidence negative": {Categories: []string{"a", "b"}, Confidence: -0.5},
		"mode":                {Categories: []string{"a", "b"}, Mode: "basic"},
	}
	for name, opts := range tests {
		if _, err := rappor.New(opts); !errors.Is(err, sdk.ErrBadConfig) {
			t.Errorf("%s: error = %v, want ErrBadConfig", name, err)
		}
	}
	if _, err := rappor.New(rappor.Options{Categories: []string{"a"}, Other: "rest"}); err != nil {
		t.Errorf("one category plus other: %v", err)
	}
}

func TestFromConfig(t *testing.T) {
	r, err := rappor.FromConfig(sdk.Config{Categories: []string{"a", "b"}, Other: "o", Params: map[string]string{"mode": "symmetric"}})
	if err != nil {
		t.Fatal(err)
	}
	if r.D() != 3 || r.Mode() != rappor.Symmetric {
		t.Errorf("D = %d, mode %q", r.D(), r.Mode())
	}
	if r, _ := rappor.FromConfig(sdk.Config{Categories: []string{"a", "b"}}); r.Mode() != rappor.Optimized {
		t.Errorf("default mode %q", r.Mode())
	}
	for name, cfg := range map[string]sdk.Config{
		"range": {Categories: []string{"a", "b"}, Hi: 1},
		"param": {Categories: []string{"a", "b"}, Params: map[string]string{"k": "3"}},
		"mode":  {Categories: []string{"a", "b"}, Params: map[string]string{"mode": "basic"}},
	} {
		if _, err := rappor.FromConfig(cfg); !errors.Is(err, sdk.ErrBadConfig) {
			t.Errorf("%s: error = %v, want ErrBadConfig", name, err)
		}
	}
}

func TestDescribe(t *testing.T) {
	ctx := context.Background()
	r := mustNew(t, rappor.Options{Categories: labels(300), Other: "other"})
	d, err := r.Describe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if d.Name != rappor.Name || d.Input != sdk.InputCategorical || len(d.Categories) != 301 || d.Categories[300] != "other" ||
		d.Other != "other" || d.ReportBytes != 38 || d.Eps0Min != ldp.MinEps0 || d.Eps0Max != ldp.MaxEps0 || d.Digest == "" {
		t.Errorf("Describe = %+v", d)
	}
	d.Categories[0] = "mutated"
	if d2, _ := r.Describe(ctx); d2.Categories[0] != "c0" {
		t.Error("Describe returns shared slices")
	}
	other := mustNew(t, rappor.Options{Categories: labels(300)})
	if d3, _ := other.Describe(ctx); d3.Digest == d.Digest {
		t.Error("different configurations share a digest")
	}
}

var modes = []rappor.Mode{rappor.Symmetric, rappor.Optimized}

func TestDeclarationFormsAgree(t *testing.T) {
	for _, mode := range modes {
		for d := 2; d <= rappor.MatrixMaxD; d++ {
			for _, eps0 := range []float64{0.01, 1, 5, 20} {
				r := mustNew(t, rappor.Options{Categories: labels(d), Mode: mode})
				m, err := r.Declaration(eps0, accountant.FormMatrix)
				if err != nil {
					t.Fatal(err)
				}
				a, err := r.Declaration(eps0, accountant.FormAtoms)
				if err != nil {
					t.Fatal(err)
				}
				t.Run(fmt.Sprintf("%s/d=%d/eps0=%g", mode, d, eps0), func(t *testing.T) {
					ldptest.CheckSameDecomposition(t, m, a)
				})
			}
		}
	}
}

// TestBlanketMass checks the closed form gamma = beta(1 - q^d) + alpha q^d
// of the atoms against the matrix for every d up to MatrixMaxD, and that
// large d declarations validate.
func TestBlanketMass(t *testing.T) {
	const tol = 1e-12 // sums of at most 2^6 products of closed forms
	for _, mode := range modes {
		for _, d := range []int{2, 3, 6, 7, 100, 10_000} {
			r := mustNew(t, rappor.Options{Categories: labels(d), Mode: mode})
			a, err := r.Declaration(1.5, accountant.FormAtoms)
			if err != nil {
				t.Fatal(err)
			}
			dec, err := a.Decompose()
			if err != nil {
				t.Fatalf("%s d=%d: %v", mode, d, err)
			}
			if d > rappor.MatrixMaxD {
				if _, err := r.Declaration(1.5, accountant.FormMatrix); !errors.Is(err, sdk.ErrBadConfig) {
					t.Errorf("%s d=%d: matrix form error = %v", mode, d, err)
				}
				continue
			}
			m, _ := r.Declaration(1.5, accountant.FormMatrix)
			var g float64
			for y := range m.Matrix.NumOutputs() {
				lo := 1.0
				for x := range d {
					lo = math.Min(lo, m.Matrix.At(x, y))
				}
				g += lo
			}
			if math.Abs(g-dec.Gamma()) > tol {
				t.Errorf("%s d=%d: blanket mass %v from the matrix, %v from the atoms", mode, d, g, dec.Gamma())
			}
		}
	}
}

func TestDeclareForm(t *testing.T) {
	ctx := context.Background()
	for _, tt := range []struct {
		k    int
		form accountant.Form
	}{{2, accountant.FormMatrix}, {rappor.MatrixMaxD, accountant.FormMatrix}, {rappor.MatrixMaxD + 1, accountant.FormAtoms}, {10_000, accountant.FormAtoms}} {
		r := mustNew(t, rappor.Options{Categories: labels(tt.k)})
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
	r := mustNew(t, rappor.Options{Categories: labels(3)})
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
// declared matrix row over all 2^d outputs by Pearson's chi-square test
// (which also tests that the bits are independent).
func TestRandomizeMatchesDeclaration(t *testing.T) {
	ctx := context.Background()
	const draws = 40_000
	for _, mode := range modes {
		for _, d := range []int{2, 3, 5} {
			for _, eps0 := range []float64{0.5, 3} {
				r := mustNew(t, rappor.Options{Categories: labels(d), Mode: mode, Rand: seeded(uint64(d) * 100)})
				decl, err := r.Declaration(eps0, accountant.FormMatrix)
				if err != nil {
					t.Fatal(err)
				}
				x := d / 2
				in := slices.Repeat([]string{labels(d)[x]}, draws)
				reports, err := r.Randomize(ctx, eps0, sdk.Inputs{Categories: in})
				if err != nil {
					t.Fatal(err)
				}
				obs := make([]int64, 1<<d)
				for _, rep := range reports {
					v, err := r.Decode(rep)
					if err != nil {
						t.Fatal(err)
					}
					y := 0
					for j, one := range v {
						if one {
							y |= 1 << j
						}
					}
					obs[y]++
				}
				probs := make([]float64, 1<<d)
				for y := range probs {
					probs[y] = decl.Matrix.At(x, y)
				}
				ldptest.CheckChiSquare(t, fmt.Sprintf("%s d=%d eps0=%g", mode, d, eps0), obs, probs, alpha)
			}
		}
	}
}

// TestRandomizeBitRates checks every bit's rate for a large d (too many
// outputs for a joint test): bit x at p, the others at q, by z-tests with a
// Bonferroni split of alpha over the d bits.
func TestRandomizeBitRates(t *testing.T) {
	ctx := context.Background()
	const d, draws, eps0 = 100, 20_000, 2.0
	for _, mode := range modes {
		r := mustNew(t, rappor.Options{Categories: labels(d), Mode: mode, Rand: seeded(77)})
		in := slices.Repeat([]string{"c7"}, draws)
		reports, err := r.Randomize(ctx, eps0, sdk.Inputs{Categories: in})
		if err != nil {
			t.Fatal(err)
		}
		stat, err := r.Accumulate(ctx, eps0, reports)
		if err != nil {
			t.Fatal(err)
		}
		pure := r.Pure(eps0)
		zc := ldptest.ZCritical(alpha / d)
		for j, c := range stat.Counts {
			p := pure.Q
			if j == 7 {
				p = pure.P
			}
			if z := (float64(c) - draws*p) / math.Sqrt(draws*p*(1-p)); math.Abs(z) > zc {
				t.Errorf("%s bit %d: %d of %d set, rate %v, z = %.2f", mode, j, c, draws, p, z)
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
	for _, mode := range modes {
		r := mustNew(t, rappor.Options{Categories: cats, Other: "other", Mode: mode, Rand: seeded(42)})
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
			ldptest.CheckMean(t, fmt.Sprintf("%s bucket %d", mode, i), est[i], want, v, a)
			ldptest.CheckVariance(t, fmt.Sprintf("%s bucket %d", mode, i), est[i], v, a)
		}
	}
}

func TestEstimateItems(t *testing.T) {
	ctx := context.Background()
	r := mustNew(t, rappor.Options{Categories: []string{"a", "b", "c"}, Rand: seeded(3)})
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
	r := mustNew(t, rappor.Options{Categories: labels(12)}) // 2 bytes, 4 padding bits
	reports := [][]byte{{0x01, 0x00}, nil, {0}, {0, 0, 0}, {0, 0x10}, {0xff, 0xff}, {0xff, 0x0f}}
	stat, err := r.Accumulate(ctx, 1, reports)
	if err != nil {
		t.Fatal(err)
	}
	if stat.N != 2 || stat.Malformed != 5 || stat.Counts[0] != 2 || stat.Counts[11] != 1 || stat.Counts[1] != 1 {
		t.Errorf("stat = %+v", stat)
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
	r := mustNew(t, rappor.Options{Categories: labels(5), Rand: seeded(9)})
	in := slices.Repeat(labels(5), 200)
	reports, err := r.Randomize(ctx, 1, sdk.Inputs{Categories: in})
	if err != nil {
		t.Fatal(err)
	}
	reports = append(reports, []byte{0xe0})
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
	r := mustNew(t, rappor.Options{Categories: labels(3)})
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
	other := mustNew(t, rappor.Options{Categories: labels(4)})
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
	r := mustNew(t, rappor.Options{Categories: labels(8)})
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
	if total.N != workers*per || total.Malformed != 0 {
		t.Errorf("N = %d, Malformed = %d, want %d and 0", total.N, total.Malformed, workers*per)
	}
	for j, c := range total.Counts {
		if c < 0 || c > total.N {
			t.Errorf("bit %d counted %d times in %d reports", j, c, total.N)
		}
	}
}

// FuzzDecode feeds arbitrary bytes to the report decoder: it must never
// panic, and every accepted report must re-encode to the same bytes and
// count the same bits in Accumulate.
func FuzzDecode(f *testing.F) {
	r, err := rappor.New(rappor.Options{Categories: labels(12), Other: "other"}) // d = 13
	if err != nil {
		f.Fatal(err)
	}
	f.Add([]byte{0, 0})
	f.Add([]byte{0xff, 0x1f})
	f.Fuzz(func(t *testing.T, report []byte) {
		v, err := r.Decode(report)
		if err != nil {
			if !errors.Is(err, sdk.ErrBadReport) {
				t.Fatalf("error %v does not wrap ErrBadReport", err)
			}
			return
		}
		if re := r.Encode(v); !slices.Equal(re, report) {
			t.Fatalf("re-encoded %v as %v", report, re)
		}
		stat, err := r.Accumulate(context.Background(), 1, [][]byte{report})
		if err != nil || stat.N != 1 {
			t.Fatalf("Accumulate of a decodable report: %+v, %v", stat, err)
		}
		for j, one := range v {
			if (stat.Counts[j] == 1) != one {
				t.Fatalf("bit %d: decoded %v, counted %d", j, one, stat.Counts[j])
			}
		}
	})
}
