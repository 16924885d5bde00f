package hadamard_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"reflect"
	"slices"
	"testing"

	"github.com/blanket-dp/blanket/accountant"
	"github.com/blanket-dp/blanket/plugins/hadamard"
	"github.com/blanket-dp/blanket/sdk"
	"github.com/blanket-dp/blanket/sdk/ldp"
	"github.com/blanket-dp/blanket/sdk/ldp/ldptest"
	"github.com/blanket-dp/blanket/sdk/plugintest"
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

// TestAtomsAgainstMatrix checks Atoms against the matrix form, derived
// independently of the atoms: for k = 2, 3, 4, 5, 7, 8 and 15 (K = 4, 8
// and 16), every output y in [0, K) is mapped by Atoms for each declared
// set at every choice of inputs Atoms accepts, and each declared atom's
// r, p and q must be the sums over the outputs mapped to it of the blanket
// min_z R[z][y] (for a triple R[x3][y]), R[x][y] and R[x'][y]. Atoms must
// accept every pair of distinct buckets and each triple's declared inputs,
// which must be whole and distinct buckets but x3 = x' for k = 2.
func TestAtomsAgainstMatrix(t *testing.T) {
	ctx := context.Background()
	for _, k := range []int{2, 3, 4, 5, 7, 8, 15} {
		for _, eps0 := range []float64{0.5, 2, 6} {
			r := mustNew(t, hadamard.Options{Categories: ldptest.Labels(k)})
			m, err := r.Declaration(eps0, accountant.FormMatrix)
			if err != nil {
				t.Fatal(err)
			}
			a, err := r.Declaration(eps0, accountant.FormAtoms)
			if err != nil {
				t.Fatal(err)
			}
			ys := make([]int, r.Outputs())
			for y := range ys {
				ys[y] = y
			}
			reports := ldp.EncodeIndices(ys, r.Outputs())
			name := fmt.Sprintf("k=%d eps0=%g", k, eps0)
			sets := append(slices.Clone(a.Pairs), a.Triples...)
			if want := map[int]int{2: 2, 3: 2, 4: 3}[min(k, 4)]; len(sets) != want {
				t.Fatalf("%s: %d sets, want %d", name, len(sets), want)
			}
			for set, s := range sets {
				triple := set >= len(a.Pairs)
				accepted := 0
				for _, xs := range ldptest.InputTuples(k, triple) {
					got, err := r.Atoms(ctx, eps0, set, xs, reports)
					if err != nil {
						if !errors.Is(err, sdk.ErrBadInput) {
							t.Errorf("%s set %d at %v: %v, want ErrBadInput", name, set, xs, err)
						}
						continue
					}
					accepted++
					ldptest.CheckAtomSums(t, fmt.Sprintf("%s set %d at %v", name, set, xs), m.Matrix, ldptest.Blanket(m.Matrix), s, triple, xs, got)
				}
				if !triple && accepted != k*(k-1) {
					t.Errorf("%s pair: Atoms accepted %d input pairs, want %d", name, accepted, k*(k-1))
				}
				if !triple && s.Inputs != nil {
					t.Errorf("%s pair: declared inputs %v, want none (any two buckets)", name, s.Inputs)
				}
				if triple {
					in := s.Inputs
					if len(in) != 3 || in[0] == in[1] || (in[2] == in[1]) != (k == 2) || in[2] == in[0] {
						t.Errorf("%s set %d (%s): declared inputs %v", name, set, s.Label, in)
					}
					if _, err := r.Atoms(ctx, eps0, set, in, reports); err != nil {
						t.Errorf("%s set %d at its declared inputs %v: %v", name, set, in, err)
					}
				}
			}
		}
	}
}

// TestAtomsErrors checks Atoms' errors: a budget out of range, a set it
// does not declare, inputs the set does not hold for, a malformed report.
func TestAtomsErrors(t *testing.T) {
	ctx := context.Background()
	r := mustNew(t, hadamard.Options{Categories: ldptest.Labels(300)}) // K = 512, 2-byte reports
	good := [][]byte{{0, 5}}
	for _, tt := range []struct {
		name    string
		eps0    float64
		set     int
		inputs  []float64
		reports [][]byte
		want    error
	}{
		{"eps0", ldp.MaxEps0 + 1, 0, []float64{0, 1}, good, sdk.ErrBadEps0},
		{"set 3", 1, 3, []float64{0, 1}, good, sdk.ErrBadInput},
		{"set -1", 1, -1, []float64{0, 1}, good, sdk.ErrBadInput},
		{"pair of 3", 1, 0, []float64{0, 1, 2}, good, sdk.ErrBadInput},
		{"equal", 1, 0, []float64{3, 3}, good, sdk.ErrBadInput},
		{"out of range", 1, 0, []float64{0, 300}, good, sdk.ErrBadInput},
		{"negative", 1, 0, []float64{-1, 0}, good, sdk.ErrBadInput},
		{"infinite", 1, 0, []float64{0, math.Inf(1)}, good, sdk.ErrBadInput},
		{"xor of 2", 1, 1, []float64{0, 1}, good, sdk.ErrBadInput},
		{"xor not holding", 1, 1, []float64{0, 1, 3}, good, sdk.ErrBadInput},
		{"independent not holding", 1, 2, []float64{0, 1, 2}, good, sdk.ErrBadInput},
		{"independent repeated", 1, 2, []float64{0, 1, 1}, good, sdk.ErrBadInput},
		{"report too long", 1, 0, []float64{0, 1}, [][]byte{{0, 5}, {0, 0, 1}}, sdk.ErrBadReport},
		{"report out of range", 1, 1, []float64{0, 1, 2}, [][]byte{{2, 0}}, sdk.ErrBadReport},
	} {
		if _, err := r.Atoms(ctx, tt.eps0, tt.set, tt.inputs, tt.reports); !errors.Is(err, tt.want) {
			t.Errorf("%s: error = %v, want %v", tt.name, err, tt.want)
		}
	}
	// Other inputs satisfying a triple's relation are accepted: x = 4,
	// x' = 9 (u = 5, u' = 10) give u3 = 15, x3 = 14.
	if _, err := r.Atoms(ctx, 1, 1, []float64{4, 9, 14}, good); err != nil {
		t.Errorf("xor triple at 4, 9, 14: %v", err)
	}
	two := mustNew(t, hadamard.Options{Categories: ldptest.Labels(2)})
	if _, err := two.Atoms(ctx, 1, 1, []float64{0, 1, 0}, [][]byte{{0}}); !errors.Is(err, sdk.ErrBadInput) {
		t.Errorf("k = 2, triple with x3 = x: error = %v, want ErrBadInput", err)
	}
	if _, err := two.Atoms(ctx, 1, 2, []float64{0, 1, 1}, [][]byte{{0}}); !errors.Is(err, sdk.ErrBadInput) {
		t.Errorf("k = 2, set 2: error = %v, want ErrBadInput", err)
	}
}

// TestAtomInputsLeaveAccountingUnchanged checks that the inputs the
// triples name (DeclaredSet.Inputs, for the kit) do not change what the
// accountant computes: the decomposition with them is the one without.
func TestAtomInputsLeaveAccountingUnchanged(t *testing.T) {
	for _, k := range []int{2, 3, 4, 1000} {
		r := mustNew(t, hadamard.Options{Categories: ldptest.Labels(k)})
		a, err := r.Declaration(2, accountant.FormAtoms)
		if err != nil {
			t.Fatal(err)
		}
		with, err := accountant.Decompose(a)
		if err != nil {
			t.Fatal(err)
		}
		for i := range a.Triples {
			a.Triples[i].Inputs = nil
		}
		without, err := accountant.Decompose(a)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(with, without) {
			t.Errorf("k=%d: the decomposition with the declared inputs differs from the one without:\n%+v\n%+v", k, with, without)
		}
	}
}

// TestConformanceAtSize runs the conformance kit at shipped sizes, where
// hadamard declares atoms: the sampler must be checked through Atoms at
// every default eps0 (no frequency test skipped), the chi-square tests of
// the pair and both triples at their declared inputs and the blanket
// tests must pass, and so must the privacy audit. The estimator check is
// left to the kit's own tests (it does not involve atoms).
func TestConformanceAtSize(t *testing.T) {
	conformanceAtSize(t, 100)
}

// conformanceAtSize runs TestConformanceAtSize's checks at k buckets for
// each k of ks. Only the checks that involve atoms run: the others are the
// same at any size and TestBuiltins (sdk/plugintest) runs them.
func conformanceAtSize(t *testing.T, ks ...int) {
	for _, k := range ks {
		t.Run(fmt.Sprintf("k=%d", k), func(t *testing.T) {
			r := mustNew(t, hadamard.Options{Categories: ldptest.Labels(k), Rand: ldptest.Seeded(uint64(k))})
			rep, err := plugintest.Verify(context.Background(), r, plugintest.Options{Skip: []string{plugintest.CheckEstimator, plugintest.CheckInputs, plugintest.CheckReports, plugintest.CheckStatistics}})
			if err != nil {
				t.Fatal(err)
			}
			atoms := rep.AtomTests()
			// Per default eps0 (3): the pair at x and x', each triple at
			// x, x' and x3, and the pair's blanket at two other inputs.
			if !rep.Passed() || len(rep.Unchecked()) != 0 || atoms != 3*10 ||
				rep.Check(plugintest.CheckFrequencies).Status != plugintest.Pass || rep.Check(plugintest.CheckPrivacy).Status != plugintest.Pass {
				t.Errorf("%d atom tests (want 30), unchecked %q:\n%s", atoms, rep.Unchecked(), rep)
			}
			if testing.Verbose() {
				t.Logf("%s", rep)
			}
		})
	}
}
