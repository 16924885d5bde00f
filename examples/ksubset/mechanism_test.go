package ksubset

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"slices"
	"testing"

	"github.com/blanket-dp/blanket/accountant"
	"github.com/blanket-dp/blanket/sdk"
	"github.com/blanket-dp/blanket/sdk/ldp"
	"github.com/blanket-dp/blanket/sdk/ldp/ldptest"
)

// small are configurations small enough for the matrix form and for
// enumeration: k = 2 (binary randomized response, the triple x3 = x'),
// s = 1 (k-RR), s = k-1 (no (0,0) group), s = 2 (no (1,1,1) group), and
// middle sizes.
var small = []struct{ k, s int }{{2, 1}, {3, 1}, {3, 2}, {4, 2}, {5, 2}, {6, 3}, {7, 6}, {8, 4}, {10, 3}, {12, 2}}

// eps0s are the budgets the exact tests run at, from nearly none to the
// accountant's largest.
var eps0s = []float64{0.01, 1, 5, 20}

// exactTol is the relative tolerance of comparisons of closed forms with
// sums over enumerated outputs: at most a few thousand terms, each within
// an ulp or two.
const exactTol = 1e-12

func near(a, b float64) bool { return math.Abs(a-b) <= exactTol*math.Max(math.Abs(a), math.Abs(b)) }

func newSmall(t testing.TB, k, s int) *Randomizer {
	t.Helper()
	r, err := New(Options{Categories: ldptest.Labels(k), S: s})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// subsets returns the masks of the s-subsets of [0, k) in increasing
// numeric order, which is colex order (two subsets compare by the largest
// element in which they differ): an enumeration independent of package
// ldp's colex functions.
func subsets(k, s int) []uint {
	var out []uint
	for m := range uint(1) << k {
		if bits.OnesCount(m) == s {
			out = append(out, m)
		}
	}
	return out
}

func report(m uint, k int) []byte {
	var members []int
	for i := range k {
		if m>>i&1 == 1 {
			members = append(members, i)
		}
	}
	return ldp.EncodeBitmap(members, k)
}

// TestMatrixIsTheLaw checks the matrix form against the mechanism's
// definition, output by output: R[x][Y] proportional to e^eps0 when x ∈ Y
// and to 1 when not, normalized by summing the row over the enumerated
// subsets; column j is the subset of the j-th mask in numeric order; and
// Outputs maps each subset's report to its column.
func TestMatrixIsTheLaw(t *testing.T) {
	ctx := context.Background()
	for _, c := range small {
		r := newSmall(t, c.k, c.s)
		masks := subsets(c.k, c.s)
		reports := make([][]byte, len(masks))
		for j, m := range masks {
			reports[j] = report(m, c.k)
		}
		for _, eps0 := range eps0s {
			name := fmt.Sprintf("k=%d s=%d eps0=%g", c.k, c.s, eps0)
			d, err := r.Declaration(eps0, accountant.FormMatrix)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if err := accountant.Validate(d); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			m := d.Matrix
			if m.NumOutputs() != len(masks) || m.NumInputs() != c.k {
				t.Fatalf("%s: matrix %d×%d, want %d×%d", name, m.NumInputs(), m.NumOutputs(), c.k, len(masks))
			}
			e := math.Exp(eps0)
			for x := range c.k {
				weight := func(mask uint) float64 {
					if mask>>x&1 == 1 {
						return e
					}
					return 1
				}
				var z float64
				for _, mask := range masks {
					z += weight(mask)
				}
				for j, mask := range masks {
					if got, want := m.At(x, j), weight(mask)/z; !near(got, want) {
						t.Fatalf("%s: R[%d][%b] = %v, want %v", name, x, mask, got, want)
					}
				}
			}
			got, err := r.Outputs(ctx, eps0, reports)
			if err != nil || !slices.Equal(got, seq(len(masks))) {
				t.Fatalf("%s: Outputs = %v, %v; want 0..%d", name, got, err, len(masks)-1)
			}
		}
	}
}

func seq(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}

// TestFormsAgree checks the closed-form atoms against the accountant's
// decomposition of the matrix (whose every entry TestMatrixIsTheLaw
// checks): the same blanket mass, and the same pair and triple sets up to
// swapping x and x', within a relative 1e-12 (ldptest.CheckSameDecomposition).
// k = 14, s = 4 has 1,001 outputs whose hundreds of equal ratios, each
// rounded its own way, once left a group in two atoms after
// accountant.AtomSet.Merge; k = 45, s = 2 is the largest matrix here.
func TestFormsAgree(t *testing.T) {
	for _, c := range append(slices.Clone(small), struct{ k, s int }{14, 4}, struct{ k, s int }{45, 2}) {
		r := newSmall(t, c.k, c.s)
		for _, eps0 := range []float64{0.001, 0.01, 0.5, 1, 3, 5, 12, 20, 30} {
			m, err := r.Declaration(eps0, accountant.FormMatrix)
			if err != nil {
				t.Fatal(err)
			}
			a, err := r.Declaration(eps0, accountant.FormAtoms)
			if err != nil {
				t.Fatal(err)
			}
			t.Run(fmt.Sprintf("k=%d s=%d eps0=%g", c.k, c.s, eps0), func(t *testing.T) {
				ldptest.CheckSameDecomposition(t, m, a)
			})
		}
	}
}

// TestAtomsAgainstMatrix maps every output to its atom with Atoms, at
// every input tuple, and checks that each declared atom's (r, p, q) is
// the sum over its outputs of the matrix's blanket (or R[x3]), R[x] and
// R[x'] (ldptest.CheckAtomSums); tuples that are not distinct buckets
// (or, for k = 2, not x3 = x') fail with sdk.ErrBadInput.
func TestAtomsAgainstMatrix(t *testing.T) {
	ctx := context.Background()
	for _, c := range small {
		r := newSmall(t, c.k, c.s)
		masks := subsets(c.k, c.s)
		reports := make([][]byte, len(masks))
		for j, m := range masks {
			reports[j] = report(m, c.k)
		}
		for _, eps0 := range eps0s {
			name := fmt.Sprintf("k=%d s=%d eps0=%g", c.k, c.s, eps0)
			m, _ := r.Declaration(eps0, accountant.FormMatrix)
			a, _ := r.Declaration(eps0, accountant.FormAtoms)
			blanket := ldptest.Blanket(m.Matrix)
			for set, s := range append(slices.Clone(a.Pairs), a.Triples...) {
				triple := set == 1
				accepted := 0
				for _, xs := range ldptest.InputTuples(c.k, triple) {
					got, err := r.Atoms(ctx, eps0, set, xs, reports)
					if err != nil {
						if !errors.Is(err, sdk.ErrBadInput) {
							t.Errorf("%s set %d at %v: %v, want ErrBadInput", name, set, xs, err)
						}
						continue
					}
					accepted++
					ldptest.CheckAtomSums(t, fmt.Sprintf("%s set %d at %v", name, set, xs), m.Matrix, blanket, s, triple, xs, got)
				}
				want := c.k * (c.k - 1) // ordered distinct pairs, and x3 = x' for k = 2
				if triple && c.k > 2 {
					want *= c.k - 2
				}
				if accepted != want {
					t.Errorf("%s set %d: Atoms accepted %d input tuples, want %d", name, set, accepted, want)
				}
			}
		}
	}
}

// TestPureExact checks p* and q* against the matrix: p* is the mass of
// row v on the subsets that hold v, q* that of another row on them; and
// p* - q* (computed in closed form, with Expm1) against their difference.
func TestPureExact(t *testing.T) {
	for _, c := range small {
		r := newSmall(t, c.k, c.s)
		masks := subsets(c.k, c.s)
		for _, eps0 := range eps0s {
			d, _ := r.Declaration(eps0, accountant.FormMatrix)
			p := r.Pure(eps0)
			for v := range c.k {
				var pStar, qStar float64
				for j, m := range masks {
					if m>>v&1 == 1 {
						pStar += d.Matrix.At(v, j)
						qStar += d.Matrix.At((v+1)%c.k, j)
					}
				}
				// The difference of two sums: its error is relative to
				// p*, not to the difference (at eps0 = 0.01, 1e3 times
				// smaller).
				if !near(p.P, pStar) || !near(p.Q, qStar) || math.Abs(p.Diff-(pStar-qStar)) > exactTol*pStar {
					t.Errorf("k=%d s=%d eps0=%g bucket %d: Pure %+v, matrix p* %v q* %v", c.k, c.s, eps0, v, p, pStar, qStar)
				}
			}
		}
	}
}

// TestEstimatorExact enumerates every joint output of a few users (k = 4,
// s = 2, inputs 0, 0, 1: 6³ = 216 outcomes, each with its probability
// from the matrix) and checks that the estimate of every bucket has
// exactly the true count as its mean and Pure.Variance at the true count
// as its variance.
func TestEstimatorExact(t *testing.T) {
	const k, s = 4, 2
	inputs := []int{0, 0, 1}
	truth := []float64{2, 1, 0, 0}
	r := newSmall(t, k, s)
	masks := subsets(k, s)
	for _, eps0 := range []float64{0.5, 2, 6} {
		d, _ := r.Declaration(eps0, accountant.FormMatrix)
		p := r.Pure(eps0)
		mean, sq := make([]float64, k), make([]float64, k)
		outcome := make([]int, len(inputs))
		var walk func(i int, prob float64)
		walk = func(i int, prob float64) {
			if i == len(inputs) {
				for v := range k {
					var support int64
					for _, j := range outcome {
						support += int64(masks[j] >> v & 1)
					}
					est := p.Count(support, int64(len(inputs)))
					mean[v] += prob * est
					sq[v] += prob * est * est
				}
				return
			}
			for j := range masks {
				outcome[i] = j
				walk(i+1, prob*d.Matrix.At(inputs[i], j))
			}
		}
		walk(0, 1)
		for v := range k {
			variance := sq[v] - mean[v]*mean[v]
			want := p.Variance(float64(len(inputs)), truth[v])
			// Tolerances: the mean is a sum of 216 terms of size up to
			// |estimate| ~ 1/(p*-q*); the variance a difference of two
			// such sums, relative to the second moment.
			scale := 1 / p.Diff
			if math.Abs(mean[v]-truth[v]) > 1e-10*scale || math.Abs(variance-want) > 1e-10*(sq[v]+1) {
				t.Errorf("eps0=%g bucket %d: mean %v (truth %v), variance %v (Pure %v)", eps0, v, mean[v], truth[v], variance, want)
			}
		}
	}
}

// TestDefaultS checks the numbers DefaultS's doc states (k = 100: its
// variance within 6% of the best s's at eps0 1.5 and 2, at most 26% and
// 35% above at 1 and 3, s = 1 best at 4) and OptimalS against a brute
// force over the matrix's p* and q* on small k.
func TestDefaultS(t *testing.T) {
	rare := func(p ldp.Pure) float64 { return p.Q * (1 - p.Q) / (p.Diff * p.Diff) }
	ratio := func(k int, eps0 float64) float64 {
		return rare(newSmall(t, k, DefaultS(k)).Pure(eps0)) / rare(newSmall(t, k, OptimalS(k, eps0)).Pure(eps0))
	}
	for _, tt := range []struct{ eps0, max float64 }{{1, 1.261}, {1.5, 1.06}, {2, 1.06}, {3, 1.35}} {
		if got := ratio(100, tt.eps0); got > tt.max {
			t.Errorf("k=100 eps0=%g: DefaultS's variance %.3f times the best, doc says at most %g", tt.eps0, got, tt.max)
		}
	}
	if s := OptimalS(100, 4); s != 1 {
		t.Errorf("OptimalS(100, 4) = %d, doc says 1", s)
	}
	for _, k := range []int{2, 3, 5, 8, 10} {
		for _, eps0 := range []float64{0.5, 1, 2, 4} {
			best, bestV := 0, math.Inf(1)
			for s := 1; s < k; s++ {
				masks := subsets(k, s)
				d, _ := newSmall(t, k, s).Declaration(eps0, accountant.FormMatrix)
				var pStar, qStar float64
				for j, m := range masks {
					if m&1 == 1 {
						pStar += d.Matrix.At(0, j)
						qStar += d.Matrix.At(1, j)
					}
				}
				// Ties within rounding go to the smaller s, as OptimalS's.
				if v := qStar * (1 - qStar) / ((pStar - qStar) * (pStar - qStar)); v < bestV*(1-1e-9) {
					best, bestV = s, v
				}
			}
			if got := OptimalS(k, eps0); got != best {
				t.Errorf("OptimalS(%d, %g) = %d, brute force %d", k, eps0, got, best)
			}
		}
	}
}

func TestDeclare(t *testing.T) {
	for _, tt := range []struct {
		k, s int
		want accountant.Form
	}{{8, 1, accountant.FormMatrix}, {14, 4, accountant.FormMatrix}, {15, 4, accountant.FormAtoms}, {1024, 1, accountant.FormMatrix}, {1025, 1, accountant.FormAtoms}, {100, 12, accountant.FormAtoms}} {
		// C(14, 4) = 1001, C(15, 4) = 1365.
		r := newSmall(t, tt.k, tt.s)
		ldptest.CheckDeclare(t, fmt.Sprintf("k=%d s=%d", tt.k, tt.s), r, 2, tt.want)
		if tt.want == accountant.FormAtoms {
			if _, err := r.Declaration(2, accountant.FormMatrix); !errors.Is(err, sdk.ErrBadConfig) {
				t.Errorf("k=%d s=%d: matrix form error = %v, want ErrBadConfig", tt.k, tt.s, err)
			}
		}
		ldptest.CheckBadDeclarations(t, r, r.Declaration)
	}
	// The atoms at k = 100: the blanket mass k c, and the pair's and the
	// triple's atoms each summing to 1 under x and x'.
	r := newSmall(t, 100, 12)
	d, _ := r.Declaration(3, accountant.FormAtoms)
	for _, set := range append(slices.Clone(d.Pairs), d.Triples...) {
		var rs, ps, qs float64
		for _, a := range set.Atoms {
			rs, ps, qs = rs+a.R, ps+a.P, qs+a.Q
		}
		if !near(ps, 1) || !near(qs, 1) {
			t.Errorf("%s: p sums to %v, q to %v", set.Label, ps, qs)
		}
		if set.Label == "any two buckets" && !near(rs, 100/(12*math.Exp(3)+88)) {
			t.Errorf("blanket mass %v, want k/(s e^eps0 + k - s)", rs)
		}
	}
}

func TestAtomsErrors(t *testing.T) {
	ctx := context.Background()
	r := newSmall(t, 100, 12)
	good := ldp.EncodeBitmap(seq(12), 100)
	for name, tt := range map[string]struct {
		set    int
		inputs []float64
		want   error
	}{
		"set 2":         {2, []float64{0, 1, 2}, sdk.ErrBadInput},
		"set -1":        {-1, []float64{0, 1}, sdk.ErrBadInput},
		"equal":         {0, []float64{3, 3}, sdk.ErrBadInput},
		"out of range":  {0, []float64{0, 100}, sdk.ErrBadInput},
		"not whole":     {0, []float64{0, 1.5}, sdk.ErrBadInput},
		"pair of three": {0, []float64{0, 1, 2}, sdk.ErrBadInput},
		"triple of two": {1, []float64{0, 1}, sdk.ErrBadInput},
		"x3 = x'":       {1, []float64{0, 1, 1}, sdk.ErrBadInput},
	} {
		if _, err := r.Atoms(ctx, 1, tt.set, tt.inputs, [][]byte{good}); !errors.Is(err, tt.want) {
			t.Errorf("%s: error = %v, want %v", name, err, tt.want)
		}
	}
	for _, bad := range [][]byte{nil, good[:12], ldp.EncodeBitmap(seq(11), 100)} {
		if _, err := r.Atoms(ctx, 1, 0, []float64{0, 1}, [][]byte{good, bad}); !errors.Is(err, sdk.ErrBadReport) {
			t.Errorf("report %x: error = %v, want ErrBadReport", bad, err)
		}
		if _, err := r.Outputs(ctx, 1, [][]byte{bad}); !errors.Is(err, sdk.ErrBadReport) {
			t.Errorf("Outputs of report %x: error = %v, want ErrBadReport", bad, err)
		}
	}
	if _, err := r.Atoms(ctx, math.NaN(), 0, []float64{0, 1}, nil); !errors.Is(err, sdk.ErrBadEps0) {
		t.Errorf("eps0 NaN: error = %v", err)
	}
	if _, err := r.Outputs(ctx, 31, nil); !errors.Is(err, sdk.ErrBadEps0) {
		t.Errorf("Outputs at eps0 31: error = %v", err)
	}
}
