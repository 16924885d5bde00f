package summation_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/blanket-dp/blanket/accountant"
	"github.com/blanket-dp/blanket/plugins/summation"
	"github.com/blanket-dp/blanket/sdk"
	"github.com/blanket-dp/blanket/sdk/ldp/ldptest"
)

// The checks of the plugin contract that the conformance kit performs on
// summation (sdk/plugintest, run on every built-in plugin in its own tests)
// are not repeated here: categories, NaN and infinite inputs, budgets
// outside the range, statistics of another configuration.

func mustNew(t testing.TB, opts summation.Options) *summation.Randomizer {
	return ldptest.Must(t, summation.New, opts)
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
		r := mustNew(t, summation.Options{Lo: 0, Hi: 1, K: k})
		ldptest.CheckFormsAgree(t, fmt.Sprintf("k=%d", k), r.Declaration)
	}
	for _, tt := range []struct {
		k    int
		form accountant.Form
	}{{63, accountant.FormMatrix}, {64, accountant.FormAtoms}} {
		ldptest.CheckDeclare(t, fmt.Sprintf("k=%d", tt.k), mustNew(t, summation.Options{Lo: 0, Hi: 1, K: tt.k}), 3, tt.form)
	}
	r := mustNew(t, summation.Options{Lo: 0, Hi: 1, K: 3})
	ldptest.CheckBadDeclarations(t, r, r.Declaration)
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
			r := mustNew(t, summation.Options{Lo: -10, Hi: 10, K: k, Rand: ldptest.Seeded(uint64(k))})
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
				probs := exactDist(k, -10, 10, x, eps0)
				if x == -10+step { // a level: the declared row itself
					probs = ldptest.MatrixRow(decl.Matrix, 1)
				}
				ldptest.CheckOutputs(t, fmt.Sprintf("k=%d eps0=%g x=%g", k, eps0, x), reports, r.Decode, probs)
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
	r := mustNew(t, summation.Options{Lo: lo, Hi: hi, K: k, Rand: ldptest.Seeded(11)})
	var sums, means, vars []float64
	for range batches {
		e, err := r.Estimate(ctx, ldptest.Statistic(t, r, eps0, sdk.Inputs{Reals: in}))
		if err != nil {
			t.Fatal(err)
		}
		sums = append(sums, e.Items[0].Value)
		means = append(means, e.Items[1].Value)
		vars = append(vars, e.Items[0].Variance)
	}
	const alpha = ldptest.Alpha / 4 // four checks
	ldptest.CheckMean(t, "sum", sums, truth, exactVar, alpha)
	ldptest.CheckVariance(t, "sum", sums, exactVar, alpha)
	ldptest.CheckMean(t, "mean", means, truth/n, exactVar/(n*n), alpha)
	var m, ss float64
	for _, v := range vars {
		m += v / float64(len(vars))
	}
	for _, v := range vars {
		ss += (v - m) * (v - m)
	}
	ldptest.CheckMean(t, "reported variance", vars, eVarHat, ss/float64(len(vars)-1), alpha)
}

func TestLevelClamps(t *testing.T) {
	r := mustNew(t, summation.Options{Lo: 0, Hi: 10, K: 5})
	src := ldptest.Seeded(1)
	for _, tt := range []struct {
		x    float64
		want int
	}{{-1e300, 0}, {0, 0}, {10, 5}, {1e300, 5}, {4, 2}} {
		if got := r.Level(src, tt.x); got != tt.want {
			t.Errorf("Level(%v) = %d, want %d", tt.x, got, tt.want)
		}
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
	r := mustNew(t, summation.Options{Lo: 0, Hi: 1, K: 299}) // 300 levels, 2-byte reports
	ldptest.CheckMalformed(t, r, func(rep []byte) error { _, err := r.Decode(rep); return err },
		[][]byte{{0, 5}, {1, 43}},
		[][]byte{nil, {0}, {0, 0, 1}, {1, 44}, {255, 255}},
		map[int]int64{5: 1, 299: 1})
}

func TestMerge(t *testing.T) {
	r := mustNew(t, summation.Options{Lo: 0, Hi: 1, K: 7, Rand: ldptest.Seeded(9)})
	in := make([]float64, 1000)
	for i := range in {
		in[i] = float64(i) / 1000
	}
	ldptest.CheckMerge(t, r, sdk.Inputs{Reals: in}, []byte{8})
}

func TestBadCalls(t *testing.T) {
	ldptest.CheckCanceled(t, mustNew(t, summation.Options{Lo: 0, Hi: 1, K: 7}), sdk.Inputs{Reals: []float64{0.5}})
}

// TestConcurrentUse runs Randomize and Accumulate from many goroutines on
// one randomizer with its default crypto source.
func TestConcurrentUse(t *testing.T) {
	r := mustNew(t, summation.Options{Lo: 0, Hi: 1, K: 10})
	ldptest.CheckConcurrentUse(t, r, sdk.Inputs{Reals: slices.Repeat([]float64{0.25}, 500)}, true)
}

// FuzzDecode feeds arbitrary bytes to the report decoder: it must never
// panic, and every accepted report must re-encode to the same bytes.
func FuzzDecode(f *testing.F) {
	r := mustNew(f, summation.Options{Lo: 0, Hi: 1, K: 299})
	ldptest.FuzzIndexDecode(f, r, r.K()+1, r.Decode, []byte{0, 0}, []byte{1, 43})
}

// TestRandomizePacked checks that the packed form of Randomize, which the
// plugin server calls, gives the same reports and errors.
func TestRandomizePacked(t *testing.T) {
	newR := func(seed uint64) sdk.PackedRandomizer {
		return mustNew(t, summation.Options{Lo: -1, Hi: 3, K: 10, Rand: ldptest.Seeded(seed)})
	}
	for _, eps0 := range []float64{0.5, 2, -1} {
		ldptest.CheckPacked(t, newR, eps0, map[string]sdk.Inputs{
			"reals":      {Reals: []float64{-5, -1, 0, 0.3, 2.9, 3, 7}},
			"many":       {Reals: ldptest.Cycle([]float64{-1, 0.25, 1.5, 3}, 1000)},
			"NaN":        {Reals: []float64{0, math.NaN()}},
			"infinite":   {Reals: []float64{math.Inf(-1)}},
			"empty":      {},
			"categories": {Categories: []string{"a"}},
		})
	}
}

// TestAtomsAgainstMatrix: for k = 1, 3 and 6 (2, 4 and 7 levels), every
// output level y mapped by Atoms at the atoms' declared inputs lands in an
// atom whose declared r, p and q are the sums, over the outputs mapped to
// it, of min_z R[z][y], R[x][y] and R[x'][y] (R[x3][y] for a triple's r)
// from the matrix form; inputs that are not levels and a third set fail.
func TestAtomsAgainstMatrix(t *testing.T) {
	ctx := context.Background()
	for _, k := range []int{1, 3, 6} {
		r := mustNew(t, summation.Options{Lo: -1, Hi: 5, K: k})
		const eps0 = 1.3
		m, err := r.Declaration(eps0, accountant.FormMatrix)
		if err != nil {
			t.Fatal(err)
		}
		a, err := r.Declaration(eps0, accountant.FormAtoms)
		if err != nil {
			t.Fatal(err)
		}
		levels := k + 1
		reports := make([][]byte, levels)
		for y := range reports {
			reports[y] = []byte{byte(y)}
		}
		row := func(x float64) int { return int(math.Round((x + 1) / 6 * float64(k))) }
		sets := append(slices.Clone(a.Pairs), a.Triples...)
		for set, s := range sets {
			got, err := r.Atoms(ctx, eps0, set, s.Inputs, reports)
			if err != nil {
				t.Fatalf("k=%d set %d: %v", k, set, err)
			}
			sums := make([]accountant.Atom, len(s.Atoms))
			for y, j := range got {
				blanket := math.Inf(1)
				for z := range levels {
					blanket = min(blanket, m.Matrix.At(z, y))
				}
				if set >= len(a.Pairs) {
					blanket = m.Matrix.At(row(s.Inputs[2]), y)
				}
				sums[j].R += blanket
				sums[j].P += m.Matrix.At(row(s.Inputs[0]), y)
				sums[j].Q += m.Matrix.At(row(s.Inputs[1]), y)
			}
			for j, want := range s.Atoms {
				g := sums[j]
				if math.Abs(g.R-want.R) > 1e-12 || math.Abs(g.P-want.P) > 1e-12 || math.Abs(g.Q-want.Q) > 1e-12 {
					t.Errorf("k=%d set %d atom %d: the matrix gives %+v over its outputs, declared %+v", k, set, j, g, want)
				}
			}
		}
		if _, err := r.Atoms(ctx, eps0, 0, []float64{-1, 0.1}, reports); !errors.Is(err, sdk.ErrBadInput) {
			t.Errorf("k=%d: an input between levels: %v, want ErrBadInput", k, err)
		}
		if _, err := r.Atoms(ctx, eps0, 2, []float64{-1, 5}, reports); !errors.Is(err, sdk.ErrBadInput) {
			t.Errorf("k=%d: set 2: %v, want ErrBadInput", k, err)
		}
	}
}
