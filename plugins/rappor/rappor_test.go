package rappor_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"testing"

	"github.com/blanket-dp/blanket/accountant"
	"github.com/blanket-dp/blanket/plugins/rappor"
	"github.com/blanket-dp/blanket/sdk"
	"github.com/blanket-dp/blanket/sdk/ldp"
	"github.com/blanket-dp/blanket/sdk/ldp/ldptest"
	"github.com/blanket-dp/blanket/sdk/plugintest"
)

// The checks of the plugin contract that the conformance kit performs on
// rappor (sdk/plugintest, run on every built-in plugin in its own tests) are
// not repeated here: inputs of the wrong kind, unknown categories without
// an other bucket, budgets outside the range for Randomize, Accumulate and
// Declare, foreign and empty statistics.

func mustNew(t testing.TB, opts rappor.Options) *rappor.Randomizer {
	return ldptest.Must(t, rappor.New, opts)
}

// newRAPPOR adapts rappor.New in the given mode to the shared checks.
func newRAPPOR(mode rappor.Mode) ldptest.NewFunc {
	return func(o ldptest.Options) (sdk.Randomizer, error) {
		return ldptest.Randomizer(rappor.New(rappor.Options{Categories: o.Categories, Other: o.Other, Mode: mode, Confidence: o.Confidence, Rand: o.Rand}))
	}
}

func TestNewRejectsBadConfig(t *testing.T) {
	ldptest.CheckCategoricalConfig(t, newRAPPOR(""))
	if _, err := rappor.New(rappor.Options{Categories: []string{"a", "b"}, Mode: "basic"}); !errors.Is(err, sdk.ErrBadConfig) {
		t.Errorf("mode: error = %v, want ErrBadConfig", err)
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
	ldptest.CheckCategoricalFromConfig(t, func(cfg sdk.Config) error { _, err := rappor.FromConfig(cfg); return err }, map[string]sdk.Config{
		"mode": {Categories: []string{"a", "b"}, Params: map[string]string{"mode": "basic"}},
	})
}

func TestDescribe(t *testing.T) {
	ldptest.CheckCategoricalDescribe(t, newRAPPOR(""), rappor.Name, 38)
}

var modes = []rappor.Mode{rappor.Symmetric, rappor.Optimized}

func TestDeclarationFormsAgree(t *testing.T) {
	for _, mode := range modes {
		for d := 2; d <= rappor.MatrixMaxD; d++ {
			r := mustNew(t, rappor.Options{Categories: ldptest.Labels(d), Mode: mode})
			ldptest.CheckFormsAgree(t, fmt.Sprintf("%s/d=%d", mode, d), r.Declaration)
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
			r := mustNew(t, rappor.Options{Categories: ldptest.Labels(d), Mode: mode})
			a, err := r.Declaration(1.5, accountant.FormAtoms)
			if err != nil {
				t.Fatal(err)
			}
			dec, err := accountant.Decompose(a)
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
	for _, tt := range []struct {
		k    int
		form accountant.Form
	}{{2, accountant.FormMatrix}, {rappor.MatrixMaxD, accountant.FormMatrix}, {rappor.MatrixMaxD + 1, accountant.FormAtoms}, {10_000, accountant.FormAtoms}} {
		ldptest.CheckDeclare(t, fmt.Sprintf("k=%d", tt.k), mustNew(t, rappor.Options{Categories: ldptest.Labels(tt.k)}), 2, tt.form)
	}
	r := mustNew(t, rappor.Options{Categories: ldptest.Labels(3)})
	ldptest.CheckBadDeclarations(t, r, r.Declaration)
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
				r := mustNew(t, rappor.Options{Categories: ldptest.Labels(d), Mode: mode, Rand: ldptest.Seeded(uint64(d) * 100)})
				decl, err := r.Declaration(eps0, accountant.FormMatrix)
				if err != nil {
					t.Fatal(err)
				}
				x := d / 2
				in := slices.Repeat([]string{ldptest.Labels(d)[x]}, draws)
				reports, err := r.Randomize(ctx, eps0, sdk.Inputs{Categories: in})
				if err != nil {
					t.Fatal(err)
				}
				ldptest.CheckOutputs(t, fmt.Sprintf("%s d=%d eps0=%g", mode, d, eps0), reports, outputOf(r), ldptest.MatrixRow(decl.Matrix, x))
			}
		}
	}
}

// outputOf returns the decoder of r's reports to output indices: bit j of
// the report is bit j of the index.
func outputOf(r *rappor.Randomizer) func([]byte) (int, error) {
	return func(rep []byte) (int, error) {
		v, err := r.Decode(rep)
		y := 0
		for j, one := range v {
			if one {
				y |= 1 << j
			}
		}
		return y, err
	}
}

// TestRandomizeBitRates checks every bit's rate for a large d (too many
// outputs for a joint test): bit x at p, the others at q, by z-tests with a
// Bonferroni split of ldptest.Alpha over the d bits.
func TestRandomizeBitRates(t *testing.T) {
	const d, draws, eps0 = 100, 20_000, 2.0
	for _, mode := range modes {
		r := mustNew(t, rappor.Options{Categories: ldptest.Labels(d), Mode: mode, Rand: ldptest.Seeded(77)})
		stat := ldptest.Statistic(t, r, eps0, sdk.Inputs{Categories: slices.Repeat([]string{"c7"}, draws)})
		pure := r.Pure(eps0)
		zc := ldptest.ZCritical(ldptest.Alpha / d)
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

// TestEstimateUnbiased checks the mean and the spread of the estimates of
// every bucket against the truth and the variance formula, in both modes.
func TestEstimateUnbiased(t *testing.T) {
	for _, mode := range modes {
		ldptest.CheckEstimateUnbiased(t, newRAPPOR(mode), string(mode))
	}
}

func TestEstimateItems(t *testing.T) {
	ldptest.CheckEstimateItems(t, newRAPPOR(""))
}

func TestMalformedReportsCounted(t *testing.T) {
	r := mustNew(t, rappor.Options{Categories: ldptest.Labels(12)}) // 2 bytes, 4 padding bits
	ldptest.CheckMalformed(t, r, func(rep []byte) error { _, err := r.Decode(rep); return err },
		[][]byte{{0x01, 0x00}, {0xff, 0x0f}},
		[][]byte{nil, {0}, {0, 0, 0}, {0, 0x10}, {0xff, 0xff}},
		map[int]int64{0: 2, 11: 1, 1: 1})
}

func TestMergeEqualsWhole(t *testing.T) {
	r := mustNew(t, rappor.Options{Categories: ldptest.Labels(5), Rand: ldptest.Seeded(9)})
	ldptest.CheckMerge(t, r, sdk.Inputs{Categories: slices.Repeat(ldptest.Labels(5), 200)}, []byte{0xe0})
}

func TestBadCalls(t *testing.T) {
	ldptest.CheckCanceled(t, mustNew(t, rappor.Options{Categories: ldptest.Labels(3)}), sdk.Inputs{Categories: []string{"c0"}})
}

// TestConcurrentUse runs Randomize and Accumulate from many goroutines on
// one randomizer with its default crypto source.
func TestConcurrentUse(t *testing.T) {
	r := mustNew(t, rappor.Options{Categories: ldptest.Labels(8)})
	ldptest.CheckConcurrentUse(t, r, sdk.Inputs{Categories: slices.Repeat([]string{"c1"}, 500)}, false)
}

// FuzzDecode feeds arbitrary bytes to the report decoder: it must never
// panic, and every accepted report must re-encode to the same bytes and
// count the same bits in Accumulate.
func FuzzDecode(f *testing.F) {
	r := mustNew(f, rappor.Options{Categories: ldptest.Labels(12), Other: "other"}) // d = 13
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

// TestRandomizePacked checks that the packed form of Randomize, which the
// plugin server calls, gives the same reports and errors.
func TestRandomizePacked(t *testing.T) {
	newR := func(seed uint64) sdk.PackedRandomizer {
		return mustNew(t, rappor.Options{Categories: ldptest.Labels(20), Rand: ldptest.Seeded(seed)})
	}
	for _, eps0 := range []float64{0.5, 2, -1} {
		ldptest.CheckPacked(t, newR, eps0, ldptest.CategoricalBatches(ldptest.Labels(20)))
	}
}

// TestAtomsAgainstMatrix checks Atoms against the matrix form, derived
// independently of the atoms: for d = 2 to 6 in both modes, every output
// (all 2^d bit vectors) is mapped by Atoms for each declared set at every
// choice of inputs Atoms accepts, and each declared atom's r, p and q must
// be the sums over the outputs mapped to it of the blanket min_z R[z][y]
// (for a triple R[x3][y]), R[x][y] and R[x'][y]. Atoms must accept the
// set's declared inputs (0, 1 and 2 when it names none) and exactly the
// tuples of distinct buckets (x3 = x' for the triple with d = 2).
func TestAtomsAgainstMatrix(t *testing.T) {
	ctx := context.Background()
	for _, mode := range modes {
		for d := 2; d <= rappor.MatrixMaxD; d++ {
			for _, eps0 := range []float64{0.5, 2, 6} {
				r := mustNew(t, rappor.Options{Categories: ldptest.Labels(d), Mode: mode})
				m, err := r.Declaration(eps0, accountant.FormMatrix)
				if err != nil {
					t.Fatal(err)
				}
				a, err := r.Declaration(eps0, accountant.FormAtoms)
				if err != nil {
					t.Fatal(err)
				}
				reports := make([][]byte, 1<<d)
				for y := range reports {
					v := make([]bool, d)
					for j := range v {
						v[j] = y>>j&1 == 1
					}
					reports[y] = r.Encode(v)
				}
				name := fmt.Sprintf("%s d=%d eps0=%g", mode, d, eps0)
				sets := append(slices.Clone(a.Pairs), a.Triples...)
				for set, s := range sets {
					triple := set >= len(a.Pairs)
					accepted := 0
					for _, xs := range ldptest.InputTuples(d, triple) {
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
					want := d * (d - 1)
					if triple && d > 2 {
						want *= d - 2
					}
					if accepted != want {
						t.Errorf("%s set %d: Atoms accepted %d input tuples, want %d", name, set, accepted, want)
					}
					declared := s.Inputs
					if declared == nil { // the kit's choice
						declared = []float64{0, 1}
						if triple {
							declared = append(declared, 2)
						}
					}
					if _, err := r.Atoms(ctx, eps0, set, declared, reports); err != nil {
						t.Errorf("%s set %d at its inputs %v: %v", name, set, declared, err)
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
	r := mustNew(t, rappor.Options{Categories: ldptest.Labels(12)}) // 2 bytes, 4 padding bits
	good := [][]byte{{0x01, 0x00}}
	for _, tt := range []struct {
		name    string
		eps0    float64
		set     int
		inputs  []float64
		reports [][]byte
		want    error
	}{
		{"eps0", ldp.MaxEps0 + 1, 0, []float64{0, 1}, good, sdk.ErrBadEps0},
		{"set 2", 1, 2, []float64{0, 1}, good, sdk.ErrBadInput},
		{"set -1", 1, -1, []float64{0, 1}, good, sdk.ErrBadInput},
		{"pair of 3", 1, 0, []float64{0, 1, 2}, good, sdk.ErrBadInput},
		{"equal", 1, 0, []float64{3, 3}, good, sdk.ErrBadInput},
		{"out of range", 1, 0, []float64{0, 12}, good, sdk.ErrBadInput},
		{"fraction", 1, 0, []float64{0, 0.5}, good, sdk.ErrBadInput},
		{"NaN", 1, 0, []float64{0, math.NaN()}, good, sdk.ErrBadInput},
		{"triple of 2", 1, 1, []float64{0, 1}, good, sdk.ErrBadInput},
		{"triple x3 = x'", 1, 1, []float64{0, 1, 1}, good, sdk.ErrBadInput},
		{"short report", 1, 0, []float64{0, 1}, [][]byte{{0x01, 0x00}, {0x01}}, sdk.ErrBadReport},
		{"padding", 1, 1, []float64{0, 1, 2}, [][]byte{{0, 0x10}}, sdk.ErrBadReport},
	} {
		if _, err := r.Atoms(ctx, tt.eps0, tt.set, tt.inputs, tt.reports); !errors.Is(err, tt.want) {
			t.Errorf("%s: error = %v, want %v", tt.name, err, tt.want)
		}
	}
	two := mustNew(t, rappor.Options{Categories: ldptest.Labels(2)})
	if _, err := two.Atoms(ctx, 1, 1, []float64{0, 1, 0}, [][]byte{{0}}); !errors.Is(err, sdk.ErrBadInput) {
		t.Errorf("d = 2, triple with x3 = x: error = %v, want ErrBadInput", err)
	}
	if got, err := two.Atoms(ctx, 1, 1, []float64{1, 0, 0}, [][]byte{{0}, {1}, {2}, {3}}); err != nil || !slices.Equal(got, []int{0, 1, 2, 3}) {
		t.Errorf("d = 2, triple at 1, 0, 0: atoms %v, %v; want [0 1 2 3] (a is bit 1, b bit 0)", got, err)
	}
}

// TestAtomInputsLeaveAccountingUnchanged checks that the inputs the atoms
// name (DeclaredSet.Inputs, for the kit) do not change what the accountant
// computes: the decomposition with them is the one without.
func TestAtomInputsLeaveAccountingUnchanged(t *testing.T) {
	for _, d := range []int{2, 3, 1000} {
		r := mustNew(t, rappor.Options{Categories: ldptest.Labels(d)})
		a, err := r.Declaration(2, accountant.FormAtoms)
		if err != nil {
			t.Fatal(err)
		}
		with, err := accountant.Decompose(a)
		if err != nil {
			t.Fatal(err)
		}
		for i := range a.Pairs {
			a.Pairs[i].Inputs = nil
		}
		for i := range a.Triples {
			a.Triples[i].Inputs = nil
		}
		without, err := accountant.Decompose(a)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(with, without) {
			t.Errorf("d=%d: the decomposition with the declared inputs differs from the one without:\n%+v\n%+v", d, with, without)
		}
	}
}

// TestConformanceAtSize runs the conformance kit at shipped sizes, where
// rappor declares atoms: the sampler must be checked through Atoms at
// every default eps0 (no frequency test skipped), the chi-square tests of
// the pair and the triple and the blanket tests must pass, and so must the
// privacy audit. The estimator check is left to the kit's own tests (it
// is the slow part at this size and does not involve atoms).
func TestConformanceAtSize(t *testing.T) {
	conformanceAtSize(t, atSize{rappor.Symmetric, 100})
}

// atSize is a mode and a number of buckets.
type atSize struct {
	mode rappor.Mode
	d    int
}

// conformanceAtSize runs TestConformanceAtSize's checks at each size.
// Only the checks that involve atoms run: the others are the same at any
// size and TestBuiltins (sdk/plugintest) runs them.
func conformanceAtSize(t *testing.T, sizes ...atSize) {
	for _, tt := range sizes {
		t.Run(fmt.Sprintf("%s/d=%d", tt.mode, tt.d), func(t *testing.T) {
			r := mustNew(t, rappor.Options{Categories: ldptest.Labels(tt.d), Mode: tt.mode, Rand: ldptest.Seeded(uint64(tt.d))})
			rep, err := plugintest.Verify(context.Background(), r, plugintest.Options{Skip: []string{plugintest.CheckEstimator, plugintest.CheckInputs, plugintest.CheckReports, plugintest.CheckStatistics}})
			if err != nil {
				t.Fatal(err)
			}
			atoms := rep.AtomTests()
			// Per default eps0 (3): the pair at x and x', the triple at
			// x, x' and x3, and the pair's blanket at two other inputs.
			if !rep.Passed() || len(rep.Unchecked()) != 0 || atoms != 3*7 ||
				rep.Check(plugintest.CheckFrequencies).Status != plugintest.Pass || rep.Check(plugintest.CheckPrivacy).Status != plugintest.Pass {
				t.Errorf("%d atom tests (want 21), unchecked %q:\n%s", atoms, rep.Unchecked(), rep)
			}
			if testing.Verbose() {
				t.Logf("%s", rep)
			}
		})
	}
}
