package olh

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"strconv"
	"testing"

	"github.com/blanket-dp/blanket/accountant"
	"github.com/blanket-dp/blanket/sdk"
	"github.com/blanket-dp/blanket/sdk/ldp"
	"github.com/blanket-dp/blanket/sdk/ldp/ldptest"
	"github.com/blanket-dp/blanket/sdk/plugintest"
)

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

func mustNew(t testing.TB, opts Options) *Randomizer {
	t.Helper()
	r, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// naiveMatrix is the declaration of OLH built from its definition: every
// seed s (probability 1/S) and value y, probability e^eps0/(e^eps0+g-1)
// when y = H_s(x) and 1/(e^eps0+g-1) otherwise, with H from naiveHash.
func naiveMatrix(t *testing.T, d, g int, eps0 float64) *accountant.Declaration {
	t.Helper()
	f := NewFamily(d, g)
	S := int(f.Seeds())
	e := math.Exp(eps0)
	rows := make([][]float64, d)
	for x := range rows {
		rows[x] = make([]float64, S*g)
		for s := range S {
			h := naiveHash(d, g, uint64(s), x)
			for y := range g {
				p := 1 / (e + float64(g-1))
				if y == h {
					p = e / (e + float64(g-1))
				}
				rows[x][s*g+y] = p / float64(S)
			}
		}
	}
	m, err := accountant.NewMatrix(rows)
	if err != nil {
		t.Fatal(err)
	}
	return &accountant.Declaration{Eps0: eps0, Form: accountant.FormMatrix, Matrix: m}
}

// TestDeclarationMatchesEnumeration checks the atoms derived in Declaration
// against the accountant's decomposition of the explicit matrix of every
// small configuration, and the plugin's own matrix against the explicit one
// entry by entry. The eps0 values give g = 2, 3, 5, 7 and g = gmax.
func TestDeclarationMatchesEnumeration(t *testing.T) {
	for _, d := range []int{2, 3, 4, 5, 9, 10, 12} {
		for _, eps0 := range []float64{0.05, 0.7, 1.5, 2, 3} {
			r := mustNew(t, Options{Categories: labels(d)})
			f, err := r.Family(eps0)
			if err != nil {
				t.Fatal(err)
			}
			if f.Seeds()*f.g > 5000 {
				continue
			}
			t.Run(fmt.Sprintf("d=%d/eps0=%g/g=%d", d, eps0, f.G()), func(t *testing.T) {
				naive := naiveMatrix(t, d, f.G(), eps0)
				atoms, err := r.Declaration(eps0, accountant.FormAtoms)
				if err != nil {
					t.Fatal(err)
				}
				checkSameDecomposition(t, naive, atoms)
				if f.Seeds()*f.g > MatrixMaxOutputs {
					return
				}
				m, err := r.Declaration(eps0, accountant.FormMatrix)
				if err != nil {
					t.Fatal(err)
				}
				for x := range d {
					for y := range m.Matrix.NumOutputs() {
						if a, b := m.Matrix.At(x, y), naive.Matrix.At(x, y); a != b {
							t.Fatalf("R[%d][%d] = %v, explicit %v", x, y, a, b)
						}
					}
				}
			})
		}
	}
}

// mergeTol is the relative tolerance under which two likelihood ratios are
// merged when comparing decompositions. The accountant merges within four
// ulps, but the atoms of an explicit matrix are sums over thousands of
// outputs whose ratios (keep/S over other/S, summed in different orders)
// can differ by a few more; the atoms themselves are compared within
// declTol.
const mergeTol = 1e-9

// declTol is the relative tolerance on the atoms of two decompositions:
// sums of up to a few thousand terms.
const declTol = 1e-12

// canonical merges a set's atoms with equal ratio pairs (p/r, q/r) within
// mergeTol and sorts them.
func canonical(s accountant.AtomSet) []accountant.Atom {
	near := func(a, b, tol float64) bool { return a == b || math.Abs(a-b) <= tol*math.Max(math.Abs(a), math.Abs(b)) }
	var out []accountant.Atom
	for _, a := range s {
		merged := false
		for i, b := range out {
			if near(a.P/a.R, b.P/b.R, mergeTol) && near(a.Q/a.R, b.Q/b.R, mergeTol) {
				out[i] = accountant.Atom{R: a.R + b.R, P: a.P + b.P, Q: a.Q + b.Q}
				merged = true
				break
			}
		}
		if !merged {
			out = append(out, a)
		}
	}
	slices.SortFunc(out, func(a, b accountant.Atom) int {
		if c := cmpTol(a.P/a.R, b.P/b.R); c != 0 {
			return c
		}
		return cmpTol(a.Q/a.R, b.Q/b.R)
	})
	return out
}

func cmpTol(a, b float64) int {
	switch {
	case math.Abs(a-b) <= mergeTol*math.Max(math.Abs(a), math.Abs(b)):
		return 0
	case a < b:
		return -1
	}
	return 1
}

// sameSet reports whether two sets agree within declTol, possibly after
// swapping the pair.
func sameSet(a, b accountant.AtomSet) bool {
	ca := canonical(a)
	for _, swap := range []bool{false, true} {
		u := slices.Clone(b)
		if swap {
			for i := range u {
				u[i].P, u[i].Q = u[i].Q, u[i].P
			}
		}
		cb := canonical(u)
		if len(ca) != len(cb) {
			continue
		}
		ok := true
		for i := range ca {
			for _, v := range [][2]float64{{ca[i].R, cb[i].R}, {ca[i].P, cb[i].P}, {ca[i].Q, cb[i].Q}} {
				if math.Abs(v[0]-v[1]) > declTol*math.Max(math.Abs(v[0]), math.Abs(v[1])) {
					ok = false
				}
			}
		}
		if ok {
			return true
		}
	}
	return false
}

// checkSameDecomposition fails t unless both declarations validate and
// have the same upper-bound pair sets and lower-bound triple sets, each
// compared up to swapping the pair and up to merging equal ratios.
func checkSameDecomposition(t *testing.T, a, b *accountant.Declaration) {
	t.Helper()
	da, err := accountant.Decompose(a)
	if err != nil {
		t.Fatal(err)
	}
	db, err := accountant.Decompose(b)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		what string
		x, y []accountant.AtomSet
	}{{"upper", da.Upper, db.Upper}, {"lower", da.Lower, db.Lower}} {
		for _, pair := range [][2][]accountant.AtomSet{{c.x, c.y}, {c.y, c.x}} {
			for i, s := range pair[0] {
				if !slices.ContainsFunc(pair[1], func(u accountant.AtomSet) bool { return sameSet(s, u) }) {
					t.Errorf("%s set %d %v has no match among %d sets", c.what, i, canonical(s), len(pair[1]))
				}
			}
		}
	}
}

// TestPureExact computes p* and q* by summing the explicit matrix over the
// outputs that support a bucket, and compares them with the estimator's.
func TestPureExact(t *testing.T) {
	for _, tt := range []struct {
		d    int
		eps0 float64
	}{{3, 0.05}, {5, 0.7}, {10, 1.5}, {4, 3}, {12, 0.7}} {
		r := mustNew(t, Options{Categories: labels(tt.d)})
		f, _ := r.Family(tt.eps0)
		p, err := r.Pure(tt.eps0)
		if err != nil {
			t.Fatal(err)
		}
		m := naiveMatrix(t, tt.d, f.G(), tt.eps0).Matrix
		support := func(x, v int) (s float64) {
			for seed := range f.Seeds() {
				s += m.At(x, int(seed)*f.G()+f.Hash(seed, v))
			}
			return s
		}
		// Sums of a few thousand probabilities: a few ulps each.
		const tol = 1e-12
		if got := support(0, 0); math.Abs(got-p.P) > tol {
			t.Errorf("d=%d eps0=%g: p* = %v, enumeration %v", tt.d, tt.eps0, p.P, got)
		}
		for v := 1; v < tt.d; v++ {
			if got := support(0, v); math.Abs(got-p.Q) > tol {
				t.Errorf("d=%d eps0=%g: q* = %v, enumeration for bucket %d %v", tt.d, tt.eps0, p.Q, v, got)
			}
		}
		if math.Abs(p.Diff-(p.P-p.Q)) > tol {
			t.Errorf("d=%d eps0=%g: Diff = %v, P - Q = %v", tt.d, tt.eps0, p.Diff, p.P-p.Q)
		}
	}
}

// TestFamilyChoice checks that g is a prime next to e^eps0 + 1, or gmax,
// non-decreasing in eps0, that every seed and y fits the report, and that
// the accountant accepts every declaration, over the whole eps0 range. The
// largest domain is checked without building its randomizer.
func TestFamilyChoice(t *testing.T) {
	ctx := context.Background()
	for _, d := range []int{2, 3, 10, 50, 1000, MaxBuckets} {
		gMax := primeAtLeast(d)
		seedW, yW := widths(d, gMax)
		prev := 0
		for _, eps0 := range []float64{ldp.MinEps0, 0.1, 0.5, 1, 1.1, 2, 3, 5, 8, 12, 16, 20, ldp.MaxEps0} {
			f := familyAt(d, gMax, eps0)
			g, x := f.G(), math.Exp(eps0)+1
			next := g == primeAtMost(int(x)) || g == primeAtLeast(int(math.Ceil(x)))
			if !isPrime(g) || g > gMax || (!next && g != gMax) || g < prev {
				t.Errorf("d=%d eps0=%g: g = %d (e^eps0+1 = %.3g, gmax %d, previous %d)", d, eps0, g, x, gMax, prev)
			}
			prev = g
			fits := func(n uint64, w int) bool { return w >= 8 || n < 1<<(8*w) }
			if !fits(f.Seeds()-1, seedW) || !fits(uint64(g-1), yW) {
				t.Errorf("d=%d eps0=%g: %d seeds and g = %d do not fit %d + %d bytes", d, eps0, f.Seeds(), g, seedW, yW)
			}
			if d > 1000 {
				continue
			}
			r := mustNew(t, Options{Categories: labels(d)})
			decl, err := r.Declare(ctx, eps0)
			if err != nil {
				t.Fatal(err)
			}
			if err := accountant.Validate(decl); err != nil {
				t.Errorf("d=%d eps0=%g: %v", d, eps0, err)
			}
		}
	}
	r := mustNew(t, Options{Categories: labels(10)})
	if d, _ := r.Describe(ctx); d.ReportBytes != 3 {
		t.Errorf("d = 10: %d-byte reports, want 3 (seeds < 10·11² need 2 bytes, y < 11 one)", d.ReportBytes)
	}
}

// TestConformance runs the conformance kit on a configuration small enough
// for a matrix declaration at every default eps0 (its frequency check tests
// the joint distribution of seed and y), on d = 2, and on larger ones
// declared by atoms, whose sampler the kit checks through Atoms: Strict
// fails a run that leaves the sampler unchecked at some eps0.
func TestConformance(t *testing.T) {
	// A medium configuration (20 buckets) runs in
	// TestConformanceMediumDeep (make audit).
	tests := []struct {
		name string
		r    *Randomizer
	}{
		{"small", mustNew(t, Options{Categories: labels(3), Other: "other", Rand: seeded(1)})},
		{"two", mustNew(t, Options{Categories: []string{"yes", "no"}, Rand: seeded(2)})},
		{"large", must(FromConfig(sdk.Config{Categories: labels(99), Other: "other"}))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			plugintest.Run(t, tt.r, plugintest.Options{Output: tt.r.Output, Strict: true})
		})
	}
	// The small configuration declares a matrix at every default eps0.
	ctx := context.Background()
	for _, eps0 := range []float64{0.5, 2, 5} {
		if d, _ := tests[0].r.Declare(ctx, eps0); d.Form != accountant.FormMatrix {
			t.Errorf("small configuration at eps0 %g declares %s", eps0, d.Form)
		}
	}
}

func must[R any](r R, err error) R {
	if err != nil {
		panic(err)
	}
	return r
}

func TestNewRejectsBadConfig(t *testing.T) {
	for name, opts := range map[string]Options{
		"no categories": {},
		"one bucket":    {Categories: []string{"a"}},
		"duplicate":     {Categories: []string{"a", "a"}},
		"confidence":    {Categories: []string{"a", "b"}, Confidence: 1},
	} {
		if _, err := New(opts); !errors.Is(err, sdk.ErrBadConfig) {
			t.Errorf("%s: error = %v, want ErrBadConfig", name, err)
		}
	}
	// One bucket too many: the bound that keeps every seed within 63 bits.
	many := make([]string, MaxBuckets+1)
	for i := range many {
		many[i] = strconv.Itoa(i)
	}
	if _, err := New(Options{Categories: many}); !errors.Is(err, sdk.ErrBadConfig) {
		t.Errorf("%d buckets: error = %v, want ErrBadConfig", len(many), err)
	}
	for name, cfg := range map[string]sdk.Config{
		"range": {Categories: []string{"a", "b"}, Hi: 1},
		"param": {Categories: []string{"a", "b"}, Params: map[string]string{"g": "3"}},
	} {
		if _, err := FromConfig(cfg); !errors.Is(err, sdk.ErrBadConfig) {
			t.Errorf("%s: error = %v, want ErrBadConfig", name, err)
		}
	}
}

func TestDecode(t *testing.T) {
	ctx := context.Background()
	r := mustNew(t, Options{Categories: labels(10), Rand: seeded(4)})
	const eps0 = 1
	f, _ := r.Family(eps0)
	reports, err := r.Randomize(ctx, eps0, sdk.Inputs{Categories: slices.Repeat([]string{"c3"}, 50)})
	if err != nil {
		t.Fatal(err)
	}
	for _, rep := range reports {
		seed, y, err := r.Decode(eps0, rep)
		if err != nil || seed >= f.Seeds() || y >= f.G() {
			t.Fatalf("Decode(%x) = %d, %d, %v", rep, seed, y, err)
		}
		if o, err := r.Output(eps0, rep); err != nil || o != int(seed)*f.G()+y {
			t.Errorf("Output(%x) = %d, %v", rep, o, err)
		}
	}
	bad := [][]byte{nil, {0}, {0xff, 0xff, 0}, {0, 0, byte(f.G())}, {0, 0, 0, 0}}
	for _, rep := range bad {
		if _, _, err := r.Decode(eps0, rep); !errors.Is(err, sdk.ErrBadReport) {
			t.Errorf("Decode(%x) error = %v, want ErrBadReport", rep, err)
		}
	}
	if _, _, err := r.Decode(math.NaN(), reports[0]); !errors.Is(err, sdk.ErrBadEps0) {
		t.Errorf("Decode at NaN: error = %v", err)
	}
}

// FuzzAccumulate feeds arbitrary report bytes to Accumulate: it must never
// fail or panic, and every report is counted once, valid or malformed.
func FuzzAccumulate(f *testing.F) {
	f.Add([]byte{0, 0, 0}, 1.0)
	f.Add([]byte{0xff, 0xff, 0xff}, 2.0)
	f.Add([]byte{}, 0.5)
	f.Add([]byte{1, 2, 3, 4}, 30.0)
	r, err := New(Options{Categories: labels(10)})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, report []byte, eps0 float64) {
		s, err := r.Accumulate(context.Background(), eps0, [][]byte{report})
		if ldp.CheckEps0(eps0) != nil {
			if !errors.Is(err, sdk.ErrBadEps0) {
				t.Fatalf("eps0 %v: error %v", eps0, err)
			}
			return
		}
		if err != nil || s.N+s.Malformed != 1 {
			t.Fatalf("Accumulate(%x) at %v: %+v, %v", report, eps0, s, err)
		}
		if s.N == 1 {
			var sum int64
			for _, c := range s.Counts {
				sum += c
			}
			if sum > int64(len(s.Counts)) {
				t.Fatalf("a valid report supports %d of %d buckets", sum, len(s.Counts))
			}
		}
	})
}

// TestAtomsAgainstMatrix checks Atoms against the matrix form, derived
// independently of the atoms (one entry per seed and value): every output
// (seed, y) is mapped by Atoms for each declared set at every choice of
// inputs Atoms accepts, and each declared atom's r, p and q must be the
// sums over the outputs mapped to it of the blanket min_z R[z][y] (for a
// triple R[x3][y]), R[x][y] and R[x'][y]. Atoms must accept every pair of
// distinct buckets, each triple at its declared inputs, and, over the
// triples, each triple of distinct buckets exactly once (the dependent
// and independent kinds partition them; with d = 2 the x3 = x' triples).
// The configurations cover g = 2, 3, 5, 7, m = 1 to 4, and the cells of
// weight zero that Declaration leaves out.
func TestAtomsAgainstMatrix(t *testing.T) {
	ctx := context.Background()
	for _, tt := range []struct {
		d    int
		eps0 float64
		why  string
	}{
		{2, 2, "g = 2, m = 1: x3 = x', no (0,0) output in the pair"},
		{3, 2, "g = 3, m = 1: dependent triple only, no (0,0,0) output"},
		{4, 0.05, "g = 2, m = 2: independent triple only, no (1,1,1) nor (0,0,0)"},
		{5, 2, "g = 5, m = 1"},
		{7, 0.7, "g = 3, m = 2: both triples"},
		{7, 3, "g = 7, m = 1"},
		{10, 0.05, "g = 2, m = 4"},
		{10, 0.7, "g = 3, m = 3"},
		{16, 1.5, "g = 5, m = 2, 600 outputs"},
	} {
		r := mustNew(t, Options{Categories: labels(tt.d)})
		f, err := r.Family(tt.eps0)
		if err != nil {
			t.Fatal(err)
		}
		name := fmt.Sprintf("d=%d eps0=%g (%s)", tt.d, tt.eps0, tt.why)
		m, err := r.Declaration(tt.eps0, accountant.FormMatrix)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		a, err := r.Declaration(tt.eps0, accountant.FormAtoms)
		if err != nil {
			t.Fatal(err)
		}
		outs := m.Matrix.NumOutputs()
		reports := make([][]byte, outs)
		blanket := make([]float64, outs)
		for o := range outs {
			rep := make([]byte, r.desc.ReportBytes)
			putUint(rep[:r.seedW], uint64(o/f.G()))
			putUint(rep[r.seedW:], uint64(o%f.G()))
			reports[o] = rep
			blanket[o] = math.Inf(1)
			for z := range tt.d {
				blanket[o] = min(blanket[o], m.Matrix.At(z, o))
			}
		}
		sets := append(slices.Clone(a.Pairs), a.Triples...)
		triples := 0
		for set, s := range sets {
			triple := set >= len(a.Pairs)
			accepted := 0
			for _, xs := range ldptest.InputTuples(tt.d, triple) {
				got, err := r.Atoms(ctx, tt.eps0, set, xs, reports)
				if err != nil {
					if !errors.Is(err, sdk.ErrBadInput) {
						t.Errorf("%s set %d at %v: %v, want ErrBadInput", name, set, xs, err)
					}
					continue
				}
				accepted++
				x, x2, x3 := int(xs[0]), int(xs[1]), int(xs[len(xs)-1])
				if triple && tt.d > 2 && dependent(f.G(), f.M(), x, x2, x3) != (s.Label == "x3 - x dependent on x' - x") {
					t.Errorf("%s set %d (%s) accepts %v", name, set, s.Label, xs)
				}
				ldptest.CheckAtomSums(t, fmt.Sprintf("%s set %d at %v", name, set, xs), m.Matrix, blanket, s, triple, xs, got)
			}
			if triple {
				triples += accepted
			} else if accepted != tt.d*(tt.d-1) {
				t.Errorf("%s pair: Atoms accepted %d input pairs, want %d", name, accepted, tt.d*(tt.d-1))
			}
			if in := s.Inputs; triple {
				if _, err := r.Atoms(ctx, tt.eps0, set, in, reports); err != nil {
					t.Errorf("%s set %d at its declared inputs %v: %v", name, set, in, err)
				}
			} else if in != nil {
				t.Errorf("%s pair: declared inputs %v, want none (any two buckets)", name, in)
			}
		}
		want := tt.d * (tt.d - 1) * (tt.d - 2)
		if tt.d == 2 {
			want = 2
		}
		if triples != want {
			t.Errorf("%s: the triples accepted %d input triples, want %d", name, triples, want)
		}
	}
}

// TestAtomsErrors checks Atoms' errors: a budget out of range, a set it
// does not declare, inputs the set does not hold for, a malformed report.
func TestAtomsErrors(t *testing.T) {
	ctx := context.Background()
	r := mustNew(t, Options{Categories: labels(10)})
	const eps0 = 0.7 // g = 3, m = 3: a pair and both triples
	f, _ := r.Family(eps0)
	if f.G() != 3 || f.M() != 3 {
		t.Fatalf("eps0 %g: g = %d, m = %d, want 3 and 3", eps0, f.G(), f.M())
	}
	good := [][]byte{make([]byte, r.desc.ReportBytes)}
	badY := make([]byte, r.desc.ReportBytes)
	badY[len(badY)-1] = 3
	for _, tt := range []struct {
		name    string
		eps0    float64
		set     int
		inputs  []float64
		reports [][]byte
		want    error
	}{
		{"eps0", math.NaN(), 0, []float64{0, 1}, good, sdk.ErrBadEps0},
		{"set 3", eps0, 3, []float64{0, 1}, good, sdk.ErrBadInput},
		{"set -1", eps0, -1, []float64{0, 1}, good, sdk.ErrBadInput},
		{"pair of 3", eps0, 0, []float64{0, 1, 2}, good, sdk.ErrBadInput},
		{"equal", eps0, 0, []float64{3, 3}, good, sdk.ErrBadInput},
		{"out of range", eps0, 0, []float64{0, 10}, good, sdk.ErrBadInput},
		{"fraction", eps0, 0, []float64{0, 1.5}, good, sdk.ErrBadInput},
		{"dependent at independent inputs", eps0, 1, []float64{0, 1, 3}, good, sdk.ErrBadInput},
		{"independent at dependent inputs", eps0, 2, []float64{0, 1, 2}, good, sdk.ErrBadInput},
		{"independent repeated", eps0, 2, []float64{0, 1, 1}, good, sdk.ErrBadInput},
		{"short report", eps0, 0, []float64{0, 1}, [][]byte{good[0], {0}}, sdk.ErrBadReport},
		{"y out of range", eps0, 1, []float64{0, 1, 2}, [][]byte{badY}, sdk.ErrBadReport},
	} {
		if _, err := r.Atoms(ctx, tt.eps0, tt.set, tt.inputs, tt.reports); !errors.Is(err, tt.want) {
			t.Errorf("%s: error = %v, want %v", tt.name, err, tt.want)
		}
	}
	// Other inputs of a triple's kind are accepted: 4 - 1 = (0,1) and
	// 7 - 1 = (0,2) as base-3 digit vectors are dependent.
	if _, err := r.Atoms(ctx, eps0, 1, []float64{1, 4, 7}, good); err != nil {
		t.Errorf("dependent triple at 1, 4, 7: %v", err)
	}
	two := mustNew(t, Options{Categories: labels(2)})
	if _, err := two.Atoms(ctx, 1, 1, []float64{0, 1, 0}, [][]byte{make([]byte, two.desc.ReportBytes)}); !errors.Is(err, sdk.ErrBadInput) {
		t.Errorf("d = 2, triple with x3 = x: error = %v, want ErrBadInput", err)
	}
}

// TestAtomInputsLeaveAccountingUnchanged checks that the inputs the
// triples name (DeclaredSet.Inputs, for the kit) do not change what the
// accountant computes: the decomposition with them is the one without.
func TestAtomInputsLeaveAccountingUnchanged(t *testing.T) {
	for _, d := range []int{2, 3, 10, 1000} {
		for _, eps0 := range []float64{0.05, 0.7, 2} {
			r := mustNew(t, Options{Categories: labels(d)})
			a, err := r.Declaration(eps0, accountant.FormAtoms)
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
				t.Errorf("d=%d eps0=%g: the decomposition with the declared inputs differs from the one without:\n%+v\n%+v", d, eps0, with, without)
			}
		}
	}
}
