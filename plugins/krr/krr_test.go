package krr_test

import (
	"context"
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/blanket-dp/blanket/accountant"
	"github.com/blanket-dp/blanket/plugins/krr"
	"github.com/blanket-dp/blanket/sdk"
	"github.com/blanket-dp/blanket/sdk/ldp/ldptest"
)

// The checks of the plugin contract that the conformance kit performs on
// krr (sdk/plugintest, run on every built-in plugin in its own tests) are
// not repeated here: inputs of the wrong kind, unknown categories without
// an other bucket, budgets outside the range for Randomize, Accumulate and
// Declare, foreign and empty statistics.

func mustNew(t testing.TB, opts krr.Options) *krr.Randomizer { return ldptest.Must(t, krr.New, opts) }

// newKRR adapts krr.New to the shared checks.
func newKRR(o ldptest.Options) (sdk.Randomizer, error) {
	return ldptest.Randomizer(krr.New(krr.Options{Categories: o.Categories, Other: o.Other, Confidence: o.Confidence, Rand: o.Rand}))
}

func TestNewRejectsBadConfig(t *testing.T) {
	ldptest.CheckCategoricalConfig(t, newKRR)
}

func TestFromConfig(t *testing.T) {
	r, err := krr.FromConfig(sdk.Config{Categories: []string{"a", "b"}, Other: "o"})
	if err != nil {
		t.Fatal(err)
	}
	if r.K() != 3 {
		t.Errorf("K = %d, want 3", r.K())
	}
	ldptest.CheckCategoricalFromConfig(t, func(cfg sdk.Config) error { _, err := krr.FromConfig(cfg); return err }, nil)
}

func TestDescribe(t *testing.T) {
	ldptest.CheckCategoricalDescribe(t, newKRR, krr.Name, 2)
}

func TestDeclarationFormsAgree(t *testing.T) {
	for _, k := range []int{2, 3, 4, 10, 64} {
		r := mustNew(t, krr.Options{Categories: ldptest.Labels(k)})
		ldptest.CheckFormsAgree(t, fmt.Sprintf("k=%d", k), r.Declaration)
	}
}

func TestDeclareForm(t *testing.T) {
	for _, tt := range []struct {
		k    int
		form accountant.Form
	}{{2, accountant.FormMatrix}, {krr.MatrixMaxK, accountant.FormMatrix}, {krr.MatrixMaxK + 1, accountant.FormAtoms}, {10_000, accountant.FormAtoms}} {
		ldptest.CheckDeclare(t, fmt.Sprintf("k=%d", tt.k), mustNew(t, krr.Options{Categories: ldptest.Labels(tt.k)}), 2, tt.form)
	}
	r := mustNew(t, krr.Options{Categories: ldptest.Labels(3)})
	ldptest.CheckBadDeclarations(t, r, r.Declaration)
}

// TestRandomizeMatchesDeclaration checks the sampler against its own
// declared matrix row by Pearson's chi-square test.
func TestRandomizeMatchesDeclaration(t *testing.T) {
	ctx := context.Background()
	const draws = 40_000 // the smallest expected cell below is about 40 000/(e^3+19) ≈ 1000
	for _, k := range []int{2, 5, 20} {
		for _, eps0 := range []float64{0.5, 3} {
			r := mustNew(t, krr.Options{Categories: ldptest.Labels(k), Rand: ldptest.Seeded(uint64(k) * 100)})
			d, err := r.Declaration(eps0, accountant.FormMatrix)
			if err != nil {
				t.Fatal(err)
			}
			x := k / 2
			in := slices.Repeat([]string{ldptest.Labels(k)[x]}, draws)
			reports, err := r.Randomize(ctx, eps0, sdk.Inputs{Categories: in})
			if err != nil {
				t.Fatal(err)
			}
			ldptest.CheckOutputs(t, fmt.Sprintf("k=%d eps0=%g", k, eps0), reports, r.Decode, ldptest.MatrixRow(d.Matrix, x))
		}
	}
}

// TestEstimateUnbiased checks the mean and the spread of the estimates of
// every bucket against the truth and the variance formula.
func TestEstimateUnbiased(t *testing.T) {
	ldptest.CheckEstimateUnbiased(t, newKRR, "")
}

func TestEstimateItems(t *testing.T) {
	e := ldptest.CheckEstimateItems(t, newKRR)
	var sum float64
	for _, it := range e.Items {
		sum += it.Value
	}
	// k-RR estimates sum to n exactly: sum_v C(v) = n and p* + (k-1) q* = 1.
	const tol = 1e-9 // a few roundings of values of order 3000
	if math.Abs(sum-3000) > tol {
		t.Errorf("estimates sum to %v, want 3000", sum)
	}
}

func TestMalformedReportsCounted(t *testing.T) {
	r := mustNew(t, krr.Options{Categories: ldptest.Labels(300)}) // 2-byte reports
	ldptest.CheckMalformed(t, r, decodeErr(r),
		[][]byte{{0, 5}, {1, 43}},
		[][]byte{nil, {0}, {0, 0, 1}, {1, 44}, {255, 255}},
		map[int]int64{5: 1, 299: 1})
}

func decodeErr(r *krr.Randomizer) func([]byte) error {
	return func(rep []byte) error { _, err := r.Decode(rep); return err }
}

func TestMergeEqualsWhole(t *testing.T) {
	r := mustNew(t, krr.Options{Categories: ldptest.Labels(5), Rand: ldptest.Seeded(9)})
	ldptest.CheckMerge(t, r, sdk.Inputs{Categories: slices.Repeat(ldptest.Labels(5), 200)}, []byte{200})
}

func TestBadCalls(t *testing.T) {
	ldptest.CheckCanceled(t, mustNew(t, krr.Options{Categories: ldptest.Labels(3)}), sdk.Inputs{Categories: []string{"c0"}})
}

// TestConcurrentUse runs Randomize and Accumulate from many goroutines on
// one randomizer with its default crypto source.
func TestConcurrentUse(t *testing.T) {
	r := mustNew(t, krr.Options{Categories: ldptest.Labels(8)})
	ldptest.CheckConcurrentUse(t, r, sdk.Inputs{Categories: slices.Repeat([]string{"c1"}, 500)}, true)
}

// FuzzDecode feeds arbitrary bytes to the report decoder: it must never
// panic, and every accepted report must re-encode to the same bytes.
func FuzzDecode(f *testing.F) {
	r := mustNew(f, krr.Options{Categories: ldptest.Labels(300), Other: "other"})
	ldptest.FuzzIndexDecode(f, r, r.K(), r.Decode, []byte{0, 0}, []byte{1, 44})
}

// TestRandomizePacked checks that the packed form of Randomize, which the
// plugin server calls, gives the same reports and errors.
func TestRandomizePacked(t *testing.T) {
	newR := func(seed uint64) sdk.PackedRandomizer {
		return mustNew(t, krr.Options{Categories: ldptest.Labels(5), Other: "other", Rand: ldptest.Seeded(seed)})
	}
	for _, eps0 := range []float64{0.5, 2, -1} {
		ldptest.CheckPacked(t, newR, eps0, ldptest.CategoricalBatches(ldptest.Labels(5)))
	}
}
