package hadamard_test

import (
	"context"
	"errors"
	"fmt"
	"math/bits"
	"slices"
	"testing"

	"github.com/blanket-dp/blanket/accountant"
	"github.com/blanket-dp/blanket/plugins/hadamard"
	"github.com/blanket-dp/blanket/sdk"
	"github.com/blanket-dp/blanket/sdk/ldp"
	"github.com/blanket-dp/blanket/sdk/ldp/ldptest"
)

// The checks of the plugin contract that the conformance kit performs on
// hadamard (sdk/plugintest, run on every built-in plugin in its own tests)
// are not repeated here: inputs of the wrong kind, budgets outside the range
// for Randomize, Accumulate and Declare, foreign and empty statistics.

func mustNew(t testing.TB, opts hadamard.Options) *hadamard.Randomizer {
	return ldptest.Must(t, hadamard.New, opts)
}

// newHadamard adapts hadamard.New to the shared checks.
func newHadamard(o ldptest.Options) (sdk.Randomizer, error) {
	return ldptest.Randomizer(hadamard.New(hadamard.Options{Categories: o.Categories, Other: o.Other, Confidence: o.Confidence, Rand: o.Rand}))
}

func TestNewRejectsBadConfig(t *testing.T) {
	ldptest.CheckCategoricalConfig(t, newHadamard)
}

func TestFromConfig(t *testing.T) {
	r, err := hadamard.FromConfig(sdk.Config{Categories: []string{"a", "b"}, Other: "o"})
	if err != nil {
		t.Fatal(err)
	}
	if r.K() != 3 {
		t.Errorf("K = %d, want 3", r.K())
	}
	ldptest.CheckCategoricalFromConfig(t, func(cfg sdk.Config) error { _, err := hadamard.FromConfig(cfg); return err }, nil)
}

func TestDescribe(t *testing.T) {
	ldptest.CheckCategoricalDescribe(t, newHadamard, hadamard.Name, 2)
}

func TestDeclarationFormsAgree(t *testing.T) {
	for _, k := range []int{2, 3, 4, 10, 64} {
		r := mustNew(t, hadamard.Options{Categories: ldptest.Labels(k)})
		ldptest.CheckFormsAgree(t, fmt.Sprintf("k=%d", k), r.Declaration)
	}
}

func TestDeclareForm(t *testing.T) {
	for _, tt := range []struct {
		k    int
		form accountant.Form
	}{{2, accountant.FormMatrix}, {hadamard.MatrixMaxK, accountant.FormMatrix}, {hadamard.MatrixMaxK + 1, accountant.FormAtoms}, {10_000, accountant.FormAtoms}} {
		ldptest.CheckDeclare(t, fmt.Sprintf("k=%d", tt.k), mustNew(t, hadamard.Options{Categories: ldptest.Labels(tt.k)}), 2, tt.form)
	}
	r := mustNew(t, hadamard.Options{Categories: ldptest.Labels(3)})
	ldptest.CheckBadDeclarations(t, r, r.Declaration)
}

// TestRandomizeMatchesDeclaration checks the sampler against its own
// declared matrix row by Pearson's chi-square test over all K outputs.
func TestRandomizeMatchesDeclaration(t *testing.T) {
	ctx := context.Background()
	const draws = 40_000 // the smallest expected cell below is 40 000·2/((e^3+1)·32) ≈ 120
	for _, k := range []int{2, 3, 7, 20} {
		for _, eps0 := range []float64{0.5, 3} {
			r := mustNew(t, hadamard.Options{Categories: ldptest.Labels(k), Rand: ldptest.Seeded(uint64(k) * 100)})
			d, err := r.Declaration(eps0, accountant.FormMatrix)
			if err != nil {
				t.Fatal(err)
			}
			for _, x := range []int{0, k - 1} {
				in := slices.Repeat([]string{ldptest.Labels(k)[x]}, draws)
				reports, err := r.Randomize(ctx, eps0, sdk.Inputs{Categories: in})
				if err != nil {
					t.Fatal(err)
				}
				ldptest.CheckOutputs(t, fmt.Sprintf("k=%d eps0=%g x=%d", k, eps0, x), reports, r.Decode, ldptest.MatrixRow(d.Matrix, x))
			}
		}
	}
}

// TestFWHT compares the fast transform with the direct O(K^2) sum
// a'[u] = sum_j (-1)^popcount(u&j) a[j]; integer arithmetic, so exactly.
func TestFWHT(t *testing.T) {
	src := ldptest.Seeded(5)
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
		r := mustNew(t, hadamard.Options{Categories: ldptest.Labels(k)})
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

// TestEstimateUnbiased checks the mean and the spread of the estimates of
// every bucket against the truth and the variance formula.
func TestEstimateUnbiased(t *testing.T) {
	ldptest.CheckEstimateUnbiased(t, newHadamard, "")
}

func TestEstimateItems(t *testing.T) {
	ldptest.CheckEstimateItems(t, newHadamard)
}

func TestMalformedReportsCounted(t *testing.T) {
	r := mustNew(t, hadamard.Options{Categories: ldptest.Labels(300)}) // 2-byte reports, K = 512
	ldptest.CheckMalformed(t, r, func(rep []byte) error { _, err := r.Decode(rep); return err },
		[][]byte{{0, 5}, {1, 43}},
		[][]byte{nil, {0}, {0, 0, 1}, {2, 0}, {255, 255}},
		map[int]int64{5: 1, 299: 1})
}

func TestMergeEqualsWhole(t *testing.T) {
	r := mustNew(t, hadamard.Options{Categories: ldptest.Labels(5), Rand: ldptest.Seeded(9)})
	ldptest.CheckMerge(t, r, sdk.Inputs{Categories: slices.Repeat(ldptest.Labels(5), 200)}, []byte{200})
}

// TestBadCalls checks what the conformance kit does not: an unknown
// category without an other bucket (the kit's configurations of hadamard
// all have one) and canceled contexts.
func TestBadCalls(t *testing.T) {
	r := mustNew(t, hadamard.Options{Categories: ldptest.Labels(3)})
	if _, err := r.Randomize(context.Background(), 1, sdk.Inputs{Categories: []string{"c0", "nope"}}); !errors.Is(err, sdk.ErrBadInput) {
		t.Errorf("unknown category: error = %v", err)
	}
	ldptest.CheckCanceled(t, r, sdk.Inputs{Categories: []string{"c0"}})
}

// TestConcurrentUse runs Randomize and Accumulate from many goroutines on
// one randomizer with its default crypto source.
func TestConcurrentUse(t *testing.T) {
	r := mustNew(t, hadamard.Options{Categories: ldptest.Labels(8)})
	ldptest.CheckConcurrentUse(t, r, sdk.Inputs{Categories: slices.Repeat([]string{"c1"}, 500)}, true)
}

// FuzzDecode feeds arbitrary bytes to the report decoder: it must never
// panic, and every accepted report must re-encode to the same bytes.
func FuzzDecode(f *testing.F) {
	r := mustNew(f, hadamard.Options{Categories: ldptest.Labels(300), Other: "other"})
	ldptest.FuzzIndexDecode(f, r, r.Outputs(), r.Decode, []byte{0, 0}, []byte{1, 44})
}

// TestRandomizePacked checks that the packed form of Randomize, which the
// plugin server calls, gives the same reports and errors.
func TestRandomizePacked(t *testing.T) {
	newR := func(seed uint64) sdk.PackedRandomizer {
		return mustNew(t, hadamard.Options{Categories: ldptest.Labels(5), Rand: ldptest.Seeded(seed)})
	}
	for _, eps0 := range []float64{0.5, 2, -1} {
		ldptest.CheckPacked(t, newR, eps0, ldptest.CategoricalBatches(ldptest.Labels(5)))
	}
}
