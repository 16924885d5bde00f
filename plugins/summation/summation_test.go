package summation_test

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
	"github.com/blanket-dp/blanket/plugins/summation"
	"github.com/blanket-dp/blanket/sdk"
	"github.com/blanket-dp/blanket/sdk/ldp"
	"github.com/blanket-dp/blanket/sdk/ldp/ldptest"
)

// alpha is the false-failure rate of each statistical check: every
// chi-square and z statistic is compared with the (1 - alpha) quantile of its
// null distribution (chi-square with the test's degrees of freedom, or
// |N(0,1)|), so a correct randomizer fails a check with probability at most
// alpha over the choice of seed. Seeds are fixed, so runs are reproducible.
const alpha = 1e-6

func seeded(seed uint64) ldp.Source {
	var s [32]byte
	s[0], s[1] = byte(seed), byte(seed>>8)
	return rand.NewChaCha8(s)
}

func mustNew(t testing.TB, opts summation.Options) *summation.Randomizer {
	t.Helper()
	r, err := summation.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestNewRejectsBadConfig(t *testing.T) {
	tests := map[string]summation.Options{
		"empty range":    {Lo: 1, Hi: 1, K: 4},
		"reversed range": {Lo: 2, Hi: 1, K: 4},
		"NaN":            {Lo: math.NaN(), Hi: 1, K: 4},
		"Inf":            {Lo: 0, Hi: math.Inf(1), K: 4},
		"width overflow": {Lo: -math.MaxFloat64, Hi: math.MaxFloat64, K: 4},
		"k = 0":          {Lo: 0, Hi: 1},
		"k too large":    {Lo: 0, Hi: 1, K: summation.MaxK + 1},
		"confidence":     {Lo: 0, Hi: 1, K: 4, Confidence: 2},
	}
	for name, opts := range tests {
		if _, err := summation.New(opts); !errors.Is(err, sdk.ErrBadConfig) {
			t.Errorf("%s: error = %v, want ErrBadConfig", name, err)
		}
	}
}

func TestFromConfig(t *testing.T) {
	r, err := summation.FromConfig(sdk.Config{Lo: -1, Hi: 1, Params: map[string]string{"k": "12"}})
	if err != nil {
		t.Fatal(err)
	}
	d, _ := r.Describe(context.Background())
	if r.K() != 12 || d.Lo != -1 || d.Hi != 1 || d.Input != sdk.InputReal || d.ReportBytes != 1 {
		t.Errorf("k = %d, description %+v", r.K(), d)
	}
	for name, cfg := range map[string]sdk.Config{
		"categories": {Lo: 0, Hi: 1, Categories: []string{"a"}, Params: map[string]string{"k": "2"}},
		"param":      {Lo: 0, Hi: 1, Params: map[string]string{"k": "2", "mode": "x"}},
		"bad k":      {Lo: 0, Hi: 1, Params: map[string]string{"k": "two"}},
		"no k":       {Lo: 0, Hi: 1},
	} {
		if _, err := summation.FromConfig(cfg); !errors.Is(err, sdk.ErrBadConfig) {
			t.Errorf("%s: error = %v, want ErrBadConfig", name, err)
		}
	}
}

func TestGammaEps0(t *testing.T) {
	const tol = 1e-12 // a log and an exp of moderate values
	for _, k := range []int{1, 4, 100, 10_000} {
		for _, eps0 := range []float64{0.01, 1, 5, 20} {
			g := summation.Gamma(k, eps0)
			if !(g > 0 && g <= 1) {
				t.Errorf("Gamma(%d, %v) = %v", k, eps0, g)
			}
			if e := summation.Eps0(k, g); math.Abs(e-eps0) > tol*math.Max(1, eps0) {
				t.Errorf("Eps0(%d, Gamma(%d, %v)) = %v", k, k, eps0, e)
			}
		}
		// Lemma 5.1 (1): gamma = K/(e^eps0 + K - 1) for K-ary RR, K = k+1.
		if g, want := summation.Gamma(k, 1), float64(k+1)/(math.E+float64(k)); math.Abs(g-want) > tol {
			t.Errorf("Gamma(%d, 1) = %v, want %v", k, g, want)
		}
	}
}

func TestSuggestK(t *testing.T) {
	// Hand computation: n = 10^6, eps = 1, delta = 1e-6:
	// c = (10^6/(10^6-1))·14·ln(2·10^6) = 203.12, (n/c)^(1/3) = 17.01.
	tests := []struct {
		n          int
		eps, delta float64
		want       int
	}{
		{1_000_000, 1, 1e-6, 17},
		{1_000_000_000, 1, 1e-6, 170}, // 1000^(1/3) = 10 times larger
		{1_000_000, 1, 1e-12, 14},     // c = 14·ln(2e12) = 395.4
	}
	for _, tt := range tests {
		k, err := summation.SuggestK(tt.n, tt.eps, tt.delta)
		if err != nil || k != tt.want {
			t.Errorf("SuggestK(%d, %v, %v) = %d, %v, want %d", tt.n, tt.eps, tt.delta, k, err, tt.want)
		}
	}
	prev := 0
	for n := 10_000; n <= 100_000_000; n *= 10 {
		k, err := summation.SuggestK(n, 0.5, 1e-8)
		if err != nil || k < prev {
			t.Errorf("SuggestK(%d) = %d, %v; not non-decreasing in n (previous %d)", n, k, err, prev)
		}
		prev = k
	}
	for _, tt := range []struct {
		n          int
		eps, delta float64
	}{{1, 1, 1e-6}, {1000, 0, 1e-6}, {1000, math.NaN(), 1e-6}, {1000, 1, 0}, {1000, 1, 1}, {100, 0.1, 1e-6}} {
		if _, err := summation.SuggestK(tt.n, tt.eps, tt.delta); !errors.Is(err, sdk.ErrBadConfig) {
			t.Errorf("SuggestK(%d, %v, %v) error = %v, want ErrBadConfig", tt.n, tt.eps, tt.delta, err)
		}
	}
}

func TestDeclarationFormsAgree(t *testing.T) {
	for _, k := range []int{1, 2, 3, 10, 63} {
		for _, eps0 := range []float64{0.01, 1, 5, 20} {
			r := mustNew(t, summation.Options{Lo: 0, Hi: 1, K: k})
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
	ctx := context.Background()
	for _, tt := range []struct {
		k    int
		form accountant.Form
	}{{63, accountant.FormMatrix}, {64, accountant.FormAtoms}} {
		d, err := mustNew(t, summation.Options{Lo: 0, Hi: 1, K: tt.k}).Declare(ctx, 3)
		if err != nil || d.Form != tt.form || d.Validate() != nil {
			t.Errorf("k=%d: Declare = %v, %v; want a valid %s declaration", tt.k, d, err, tt.form)
		}
	}
}

// exactDist returns the exact output distribution of input x: the mixture
// of the two neighbouring levels' randomized-response rows.
func exactDist(k int, lo, hi, x, eps0 float64) []float64 {
	g := summation.Gamma(k, eps0)
	s := min(max((x-lo)/(hi-lo), 0), 1)
	t := s * float64(k)
	fl := math.Floor(t)
	f := t - fl
	out := make([]float64, k+1)
	for y := range out {
		out[y] = g / float64(k+1)
	}
	out[int(fl)] += (1 - g) * (1 - f)
	if f > 0 {
		out[int(fl)+1] += (1 - g) * f
	}
	return out
}

// TestRandomizeMatchesDeclaration checks the sampler by Pearson's
// chi-square test: on a level its output is the declared row, between
// levels the mixture of the two neighbouring rows.
func TestRandomizeMatchesDeclaration(t *testing.T) {
	ctx := context.Background()
	const draws = 40_000 // smallest expected cell: 40 000/(e^3+20) ≈ 1000
	for _, k := range []int{1, 4, 20} {
		for _, eps0 := range []float64{0.5, 3} {
			r := mustNew(t, summation.Options{Lo: -10, Hi: 10, K: k, Rand: seeded(uint64(k))})
			decl, err := r.Declaration(eps0, accountant.FormMatrix)
			if err != nil {
				t.Fatal(err)
			}
			step := 20 / float64(k)
			for _, x := range []float64{-10, -10 + step, 10, -10 + 0.3*step, 10 - 0.5*step, 1e9} {
				reports, err := r.Randomize(ctx, eps0, sdk.Inputs{Reals: slices.Repeat([]float64{x}, draws)})
				if err != nil {
					t.Fatal(err)
				}
				obs := make([]int64, k+1)
				for _, rep := range reports {
					y, err := r.Decode(rep)
					if err != nil {
						t.Fatal(err)
					}
					obs[y]++
				}
				probs := exactDist(k, -10, 10, x, eps0)
				if x == -10+step {
					for y := range probs { // a level: the declared row itself
						probs[y] = decl.Matrix.At(1, y)
					}
				}
				ldptest.CheckChiSquare(t, fmt.Sprintf("k=%d eps0=%g x=%g", k, eps0, x), obs, probs, alpha)
			}
		}
	}
}

// TestEstimateUnbiased simulates many batches with known inputs and checks
// the sum estimate's mean (z-test) and spread (chi-square test on the sample
// variance) against the exact variance computed from the exact output
// distributions, and that the reported variance is, on average, the exact
// one plus the stated conservative rounding term n/(4k²) - sum rho (z-test
// on the reported variances, with their own sample variance).
func TestEstimateUnbiased(t *testing.T) {
	ctx := context.Background()
	const lo, hi, k, eps0 = -5.0, 15.0, 8, 2.0
	var in []float64
	for i := range 500 {
		in = append(in, lo+(hi-lo)*float64(i*i%97)/96) // spread, many fractional parts
	}
	in = append(in, slices.Repeat([]float64{lo}, 200)...)
	in = append(in, slices.Repeat([]float64{hi}, 100)...)
	in = append(in, slices.Repeat([]float64{hi + 100}, 50)...) // clamped to hi
	n := float64(len(in))
	var truth, exactVar, sumRho, eVarHat float64
	g := summation.Gamma(k, eps0)
	u2 := (2.0*k + 1) / (6 * k)
	for _, x := range in {
		c := min(max(x, lo), hi)
		truth += c
		dist := exactDist(k, lo, hi, x, eps0)
		var ez, ez2 float64
		for y, p := range dist {
			z := float64(y) / k
			ez += p * z
			ez2 += p * z * z
		}
		exactVar += ez2 - ez*ez
		eVarHat += g * (ez2 - ez)
		f := (c-lo)/(hi-lo)*k - math.Floor((c-lo)/(hi-lo)*k)
		sumRho += f * (1 - f) / (k * k)
	}
	w2 := (hi - lo) * (hi - lo)
	exactVar *= w2 / ((1 - g) * (1 - g)) // Var of the sum estimate
	eVarHat = w2 * ((eVarHat+n*g*((1-g)*u2+g/4))/((1-g)*(1-g)) + n/(4*k*k))
	// The derivation in Estimate says E[reported] = exact + (n/(4k²) - sum rho)(hi-lo)².
	const tol = 1e-9 // relative; the two routes sum the same ~1000 terms differently
	if want := exactVar + w2*(n/(4*k*k)-sumRho); math.Abs(eVarHat-want) > tol*want {
		t.Fatalf("expected reported variance %v, derivation says %v", eVarHat, want)
	}
	batches := 400
	if testing.Short() {
		batches = 100
	}
	r := mustNew(t, summation.Options{Lo: lo, Hi: hi, K: k, Rand: seeded(11)})
	var sums, means, vars []float64
	for range batches {
		reports, err := r.Randomize(ctx, eps0, sdk.Inputs{Reals: in})
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
		sums = append(sums, e.Items[0].Value)
		means = append(means, e.Items[1].Value)
		vars = append(vars, e.Items[0].Variance)
	}
	ldptest.CheckMean(t, "sum", sums, truth, exactVar, alpha/4)
	ldptest.CheckVariance(t, "sum", sums, exactVar, alpha/4)
	ldptest.CheckMean(t, "mean", means, truth/n, exactVar/(n*n), alpha/4)
	var m, ss float64
	for _, v := range vars {
		m += v / float64(len(vars))
	}
	for _, v := range vars {
		ss += (v - m) * (v - m)
	}
	ldptest.CheckMean(t, "reported variance", vars, eVarHat, ss/float64(len(vars)-1), alpha/4)
}

func TestLevelClampsAndRejects(t *testing.T) {
	ctx := context.Background()
	r := mustNew(t, summation.Options{Lo: 0, Hi: 10, K: 5})
	src := seeded(1)
	for _, tt := range []struct {
		x    float64
		want int
	}{{-1e300, 0}, {0, 0}, {10, 5}, {1e300, 5}, {4, 2}} {
		if got := r.Level(src, tt.x); got != tt.want {
			t.Errorf("Level(%v) = %d, want %d", tt.x, got, tt.want)
		}
	}
	for _, x := range []float64{math.NaN(), math.Inf(1), math.Inf(-1)} {
		if _, err := r.Randomize(ctx, 1, sdk.Inputs{Reals: []float64{1, x}}); !errors.Is(err, sdk.ErrBadInput) {
			t.Errorf("Randomize(%v) error = %v, want ErrBadInput", x, err)
		}
	}
	if _, err := r.Randomize(ctx, 1, sdk.Inputs{Categories: []string{"a"}}); !errors.Is(err, sdk.ErrBadInput) {
		t.Errorf("categories: error = %v", err)
	}
}

func TestEstimatePostProcessing(t *testing.T) {
	ctx := context.Background()
	r := mustNew(t, summation.Options{Lo: 0, Hi: 10, K: 4})
	// Every report at level 0: the raw sum is below n·Lo (the blanket's
	// expected gamma/2 is subtracted), the clipped one is n·Lo = 0.
	stat, err := r.Accumulate(ctx, 1, slices.Repeat([][]byte{{0}}, 100))
	if err != nil {
		t.Fatal(err)
	}
	e, err := r.Estimate(ctx, stat)
	if err != nil {
		t.Fatal(err)
	}
	sum, mean := e.Items[0], e.Items[1]
	if sum.Label != "sum" || mean.Label != "mean" || !(sum.Value < 0) || sum.Post != 0 || sum.PostLo != 0 || sum.PostHi != 0 /* the whole raw interval is below 0 */ {
		t.Errorf("sum = %+v", sum)
	}
	if mean.Post != 0 || !(mean.Variance > 0) || math.Abs(mean.Value*100-sum.Value) > 1e-9 {
		t.Errorf("mean = %+v", mean)
	}
	one, _ := r.Accumulate(ctx, 1, [][]byte{{2}})
	e, err = r.Estimate(ctx, one)
	if err != nil {
		t.Fatal(err)
	}
	if it := e.Items[1]; it.PostLo < 0 || it.PostHi > 10 || !(it.PostLo <= it.Post && it.Post <= it.PostHi) {
		t.Errorf("one report: mean item %+v", it)
	}
}

func TestMalformedReportsCounted(t *testing.T) {
	ctx := context.Background()
	r := mustNew(t, summation.Options{Lo: 0, Hi: 1, K: 299}) // 300 levels, 2-byte reports
	reports := [][]byte{{0, 5}, nil, {0}, {0, 0, 1}, {1, 44}, {255, 255}, {1, 43}}
	stat, err := r.Accumulate(ctx, 1, reports)
	if err != nil {
		t.Fatal(err)
	}
	if stat.N != 2 || stat.Malformed != 5 || stat.Counts[5] != 1 || stat.Counts[299] != 1 {
		t.Errorf("stat N=%d Malformed=%d", stat.N, stat.Malformed)
	}
	if _, err := r.Estimate(ctx, stat); err != nil {
		t.Errorf("Estimate after malformed reports: %v", err)
	}
}

func TestMergeAndBadCalls(t *testing.T) {
	ctx := context.Background()
	r := mustNew(t, summation.Options{Lo: 0, Hi: 1, K: 7, Rand: seeded(9)})
	in := make([]float64, 1000)
	for i := range in {
		in[i] = float64(i) / 1000
	}
	reports, err := r.Randomize(ctx, 1, sdk.Inputs{Reals: in})
	if err != nil {
		t.Fatal(err)
	}
	reports = append(reports, []byte{8})
	whole, _ := r.Accumulate(ctx, 1, reports)
	a, _ := r.Accumulate(ctx, 1, reports[:377])
	b, _ := r.Accumulate(ctx, 1, reports[377:])
	if err := a.Merge(b); err != nil {
		t.Fatal(err)
	}
	if a.N != whole.N || a.Malformed != 1 || !slices.Equal(a.Counts, whole.Counts) {
		t.Errorf("merged %+v, whole %+v", a, whole)
	}
	other := mustNew(t, summation.Options{Lo: 0, Hi: 2, K: 7})
	if _, err := other.Estimate(ctx, whole); !errors.Is(err, sdk.ErrBadStatistic) {
		t.Errorf("statistic of another range: error = %v", err)
	}
	if _, err := r.Randomize(ctx, 0, sdk.Inputs{Reals: in}); !errors.Is(err, sdk.ErrBadEps0) {
		t.Errorf("eps0 0: error = %v", err)
	}
	canceled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := r.Randomize(canceled, 1, sdk.Inputs{Reals: in}); !errors.Is(err, context.Canceled) {
		t.Errorf("canceled: error = %v", err)
	}
}

// TestConcurrentUse runs Randomize and Accumulate from many goroutines on
// one randomizer with its default crypto source, released together by a
// barrier, and checks the merged totals against the sequential count.
func TestConcurrentUse(t *testing.T) {
	ctx := context.Background()
	r := mustNew(t, summation.Options{Lo: 0, Hi: 1, K: 10})
	const workers, per = 16, 500
	in := slices.Repeat([]float64{0.25}, per)
	start := make(chan struct{})
	stats := make([]*sdk.Statistic, workers)
	errs := make([]error, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			<-start
			reports, err := r.Randomize(ctx, 1, sdk.Inputs{Reals: in})
			if err != nil {
				errs[w] = err
				return
			}
			stats[w], errs[w] = r.Accumulate(ctx, 1, reports)
		})
	}
	close(start)
	wg.Wait()
	for w := range workers {
		if errs[w] != nil {
			t.Fatal(errs[w])
		}
		if w > 0 {
			if err := stats[0].Merge(stats[w]); err != nil {
				t.Fatal(err)
			}
		}
	}
	if stats[0].N != workers*per {
		t.Errorf("N = %d, want %d", stats[0].N, workers*per)
	}
}

// FuzzDecode feeds arbitrary bytes to the report decoder: it must never
// panic, and every accepted report must re-encode to the same bytes.
func FuzzDecode(f *testing.F) {
	r, err := summation.New(summation.Options{Lo: 0, Hi: 1, K: 299})
	if err != nil {
		f.Fatal(err)
	}
	f.Add([]byte{0, 0})
	f.Add([]byte{1, 43})
	f.Fuzz(func(t *testing.T, report []byte) {
		y, err := r.Decode(report)
		if err != nil {
			if !errors.Is(err, sdk.ErrBadReport) {
				t.Fatalf("error %v does not wrap ErrBadReport", err)
			}
			return
		}
		if y < 0 || y > r.K() {
			t.Fatalf("Decode = %d outside [0, %d]", y, r.K())
		}
		if re := ldp.EncodeIndices([]int{y}, r.K()+1)[0]; !slices.Equal(re, report) {
			t.Fatalf("re-encoded %v as %v", report, re)
		}
	})
}
