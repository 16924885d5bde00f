// Package hadamard is Hadamard response (Acharya, Sun, Zhang, "Hadamard
// Response: Estimating Distributions Privately, Efficiently, and with Little
// Communication", AISTATS 2019) over a declared list of categories plus an
// optional "other" bucket, in its single-block form. It implements
// sdk.Randomizer.
//
// With k buckets and K = 2^ceil(log2(k+1)), bucket x owns the half
// C_x = {j in [0,K) : popcount((x+1) & j) even} of the outputs (row x+1 of
// the K×K Sylvester-Hadamard matrix); a report is an index uniform in C_x
// with probability e^eps0/(e^eps0+1), else uniform in its complement. A
// report costs ceil(log2 K) bits, and the collector decodes all k counts at
// once with a fast Walsh-Hadamard transform in O(K log K).
//
//	r, err := hadamard.New(hadamard.Options{Categories: urls})
//	reports, err := r.Randomize(ctx, eps0, sdk.Inputs{Categories: values})
//
// The single-block form is order-optimal for eps0 up to about 1; for large
// eps0 k-RR (small k) or RAPPOR's OUE mode estimate better.
package hadamard

import (
	"context"
	"fmt"
	"math"
	"math/bits"
	"strconv"

	"github.com/blanket-dp/blanket/accountant/declare"
	"github.com/blanket-dp/blanket/sdk"
	"github.com/blanket-dp/blanket/sdk/ldp"
)

// Plugin identity and limits.
const (
	// Name is the plugin name.
	Name = "hadamard"
	// Version is the report format version.
	Version = "1"
	// MaxBuckets is the largest number of buckets (categories plus other),
	// so that K <= 2^24.
	MaxBuckets = 1<<24 - 1
	// MatrixMaxK is the largest number of buckets for which the matrix form
	// is available; Declare returns it up to here, and the exact atoms above.
	MatrixMaxK = 64
)

// Options configures a Hadamard response randomizer.
type Options struct {
	// Categories are the category labels, distinct. Required; with Other at
	// least 1, else at least 2.
	Categories []string
	// Other is the label of a catch-all bucket for inputs not in Categories.
	// Defaults to "" (no bucket: such inputs are rejected).
	Other string
	// Confidence is the level of the confidence intervals. Defaults to 0.95.
	Confidence float64
	// Rand is the randomness source. Defaults to crypto/rand (a new
	// ldp.CryptoSource per call). An injected source is shared by all calls,
	// which then must not run concurrently.
	Rand ldp.Source
}

// Randomizer is Hadamard response. It is safe for concurrent use unless
// Options.Rand was set.
type Randomizer struct {
	dom  *ldp.Domain
	k    int // buckets
	kk   int // K, the number of outputs
	conf float64
	src  ldp.Source
	desc sdk.Description
}

var (
	_ sdk.PackedRandomizer = (*Randomizer)(nil)
	_ sdk.AtomMapper       = (*Randomizer)(nil)
)

// New returns a Hadamard response randomizer. Errors wrap sdk.ErrBadConfig.
func New(opts Options) (*Randomizer, error) {
	conf, err := ldp.Confidence(opts.Confidence)
	if err != nil {
		return nil, err
	}
	dom, err := ldp.NewDomain(opts.Categories, opts.Other, MaxBuckets)
	if err != nil {
		return nil, err
	}
	k := dom.Size()
	kk := 1 << bits.Len(uint(k)) // the smallest power of two >= k+1
	w := ldp.IndexWidth(kk)
	r := &Randomizer{dom: dom, k: k, kk: kk, conf: conf, src: opts.Rand}
	r.desc = sdk.Description{
		Name:        Name,
		Version:     Version,
		Input:       sdk.InputCategorical,
		Categories:  dom.Labels(),
		Other:       dom.Other(),
		Encoding:    fmt.Sprintf("output index in [0,%d), %d-byte big-endian unsigned integer", kk, w),
		ReportBytes: w,
		Params: []sdk.Param{
			{Name: "k", Value: strconv.Itoa(k), Doc: "number of buckets: the categories plus the other bucket (derived)"},
			{Name: "K", Value: strconv.Itoa(kk), Doc: "number of outputs, 2^ceil(log2(k+1)) (derived)"},
		},
		Eps0Min: ldp.MinEps0,
		Eps0Max: ldp.MaxEps0,
	}
	r.desc.Digest = ldp.Digest(r.desc)
	return r, nil
}

// FromConfig returns the randomizer of a plugin-independent configuration:
// Categories, Other and Confidence; no range and no parameters. Errors wrap
// sdk.ErrBadConfig.
func FromConfig(cfg sdk.Config) (*Randomizer, error) {
	if err := ldp.CategoricalConfig(Name, cfg); err != nil {
		return nil, err
	}
	return New(Options{Categories: cfg.Categories, Other: cfg.Other, Confidence: cfg.Confidence})
}

// K returns the number of buckets.
func (r *Randomizer) K() int { return r.k }

// Outputs returns the number of outputs K.
func (r *Randomizer) Outputs() int { return r.kk }

// Describe implements sdk.Randomizer.
func (r *Randomizer) Describe(ctx context.Context) (*sdk.Description, error) {
	return ldp.CopyDescription(&r.desc), nil
}

// InSet reports whether output y is in C_x, the half of the outputs that
// bucket x favours.
func InSet(x, y int) bool {
	return bits.OnesCount(uint(x+1)&uint(y))&1 == 0
}

// probs returns the probabilities of reporting inside and outside C_x.
func probs(eps0 float64) (in, out float64) {
	e := math.Exp(eps0)
	return e / (e + 1), 1 / (e + 1)
}

// Pure returns the estimator parameters at eps0: a report supports x when
// it lies in C_x, p* = e^eps0/(e^eps0+1), and q* = 1/2 because C_x' meets
// C_x and its complement in K/4 outputs each (distinct rows of a Hadamard
// matrix are orthogonal).
func (r *Randomizer) Pure(eps0 float64) ldp.Pure {
	in, _ := probs(eps0)
	return ldp.Pure{P: in, Q: 0.5, Diff: math.Tanh(eps0/2) / 2}
}

// Declare implements sdk.Randomizer: the matrix when k <= MatrixMaxK, else
// the exact atoms.
func (r *Randomizer) Declare(ctx context.Context, eps0 float64) (*declare.Declaration, error) {
	return r.Declaration(eps0, ldp.FormFor(r.k, MatrixMaxK))
}

// DeclareForm implements sdk.FormDeclarer: Declaration.
func (r *Randomizer) DeclareForm(ctx context.Context, eps0 float64, form declare.Form) (*declare.Declaration, error) {
	return r.Declaration(eps0, form)
}

// Declaration returns the declaration at eps0 in the given form; both
// decompose identically. Matrix form needs k <= MatrixMaxK.
//
// Let hi = 2e^eps0/((e^eps0+1)K) and lo = 2/((e^eps0+1)K): R[x][y] = hi for
// y in C_x, lo otherwise. The blanket (min over x) is hi at y = 0, which
// lies in every C_x, and lo at every y != 0 (for any set bit b of y, the
// bucket x = 2^b - 1 < k has popcount((x+1)&y) = 1). For a pair x != x',
// u = x+1 and u' = x'+1 are distinct non-zero vectors over GF(2), hence
// independent, so the four cells (y in C_x or not) × (y in C_x' or not) hold
// K/4 outputs each. With ratio pairs (p/r, q/r) the atoms are:
//
//	C_x only:              (K/4 lo, K/4 hi, K/4 lo)              ratios (e, 1)
//	C_x' only:             (K/4 lo, K/4 lo, K/4 hi)              ratios (1, e)
//	both, y != 0:          ((K/4-1) lo, (K/4-1) hi, (K/4-1) hi)  ratios (e, e)
//	neither, and y = 0:    (K/4 lo + hi, same, same)             ratios (1, 1)
//
// the same for every pair. Lower-bound triples (x, x', x3) use r = R[x3]:
// with u3 = u xor u' (possible when k >= 3) membership in C_x3 is
// "in both or in neither", four cells of K/4; with u3 independent of u, u'
// (k >= 4) eight cells of K/8; with k = 2 the only triple is x3 = x'.
// Each triple holds only for its relation between the inputs, and names
// inputs that satisfy it (DeclaredSet.Inputs, for the conformance kit;
// the accountant does not read them): 0, 1, 1 for x3 = x'; 0, 1, 2 for the
// xor (u = 1, u' = 2, u3 = 3); 0, 1, 3 for independent ones (u3 = 4).
// The pair holds for any two buckets and names none. Atoms maps reports
// to these atoms.
func (r *Randomizer) Declaration(eps0 float64, form declare.Form) (*declare.Declaration, error) {
	if err := ldp.CheckEps0(eps0); err != nil {
		return nil, err
	}
	in, out := probs(eps0)
	kf := float64(r.kk)
	hi, lo := 2*in/kf, 2*out/kf
	d := &declare.Declaration{Eps0: eps0, Form: form}
	switch form {
	case declare.FormMatrix:
		if r.k > MatrixMaxK {
			return nil, fmt.Errorf("%w: matrix form needs at most %d buckets, have %d", sdk.ErrBadConfig, MatrixMaxK, r.k)
		}
		rows := make([][]float64, r.k)
		for x := range rows {
			rows[x] = make([]float64, r.kk)
			for y := range rows[x] {
				if InSet(x, y) {
					rows[x][y] = hi
				} else {
					rows[x][y] = lo
				}
			}
		}
		m, err := declare.NewMatrix(rows)
		if err != nil {
			return nil, err
		}
		m.InputLabels = r.desc.Categories
		d.Matrix = m
	case declare.FormAtoms:
		q := kf / 4
		pair := []declare.Atom{
			{R: q * lo, P: q * hi, Q: q * lo},
			{R: q * lo, P: q * lo, Q: q * hi},
			{R: q*lo + hi, P: q*lo + hi, Q: q*lo + hi},
		}
		if q > 1 {
			pair = append(pair, declare.Atom{R: (q - 1) * lo, P: (q - 1) * hi, Q: (q - 1) * hi})
		}
		d.Pairs = []declare.DeclaredSet{{Label: "any two buckets", Atoms: pair}}
		g := func(in bool) float64 {
			if in {
				return hi
			}
			return lo
		}
		for _, kind := range r.triples() {
			var t []declare.Atom
			switch kind {
			case tripleX3IsX2:
				// x3 = x': r = R[x'], cells (a, b) of K/4.
				for _, a := range []bool{false, true} {
					for _, b := range []bool{false, true} {
						t = append(t, declare.Atom{R: q * g(b), P: q * g(a), Q: q * g(b)})
					}
				}
			case tripleXor:
				for _, a := range []bool{false, true} {
					for _, b := range []bool{false, true} {
						t = append(t, declare.Atom{R: q * g(a == b), P: q * g(a), Q: q * g(b)})
					}
				}
			case tripleIndependent:
				e := kf / 8
				for _, a := range []bool{false, true} {
					for _, b := range []bool{false, true} {
						for _, c := range []bool{false, true} {
							t = append(t, declare.Atom{R: e * g(c), P: e * g(a), Q: e * g(b)})
						}
					}
				}
			}
			d.Triples = append(d.Triples, declare.DeclaredSet{Label: kind.label(), Atoms: t, Inputs: kind.inputs()})
		}
	default:
		return nil, ldp.UnsupportedForm(Name, form)
	}
	return d, nil
}

// tripleKind is a kind of lower-bound triple (x, x', x3) that
// Declaration declares, by the relation of u = x+1, u' = x'+1 and
// u3 = x3+1 over GF(2).
type tripleKind int

const (
	// tripleX3IsX2 is x3 = x', the only triple of 2 buckets.
	tripleX3IsX2 tripleKind = iota
	// tripleXor is u3 = u xor u' (k >= 3).
	tripleXor
	// tripleIndependent is u, u', u3 linearly independent (k >= 4).
	tripleIndependent
)

// triples returns the kinds of triple Declaration declares, in order.
func (r *Randomizer) triples() []tripleKind {
	switch {
	case r.k == 2:
		return []tripleKind{tripleX3IsX2}
	case r.k == 3:
		return []tripleKind{tripleXor}
	default:
		return []tripleKind{tripleXor, tripleIndependent}
	}
}

// label returns the DeclaredSet.Label of a triple kind.
func (t tripleKind) label() string {
	switch t {
	case tripleX3IsX2:
		return "x3 = x'"
	case tripleXor:
		return "x3+1 = (x+1) xor (x'+1)"
	default:
		return "x+1, x'+1, x3+1 independent"
	}
}

// inputs returns the buckets x, x', x3 a triple kind is declared at: the
// first buckets whose u = x+1, u' = x'+1 and u3 = x3+1 satisfy its
// relation (they exist whenever the kind is declared).
func (t tripleKind) inputs() []float64 {
	switch t {
	case tripleX3IsX2:
		return []float64{0, 1, 1}
	case tripleXor:
		return []float64{0, 1, 2} // u3 = 3 = 1 xor 2
	default:
		return []float64{0, 1, 3} // 1, 2, 4: independent
	}
}

// holds reports whether a triple kind's relation holds for the distinct
// buckets x, x', x3 (for tripleX3IsX2, x3 = x').
func (t tripleKind) holds(xs []int) bool {
	u, u2, u3 := xs[0]+1, xs[1]+1, xs[2]+1
	switch t {
	case tripleX3IsX2:
		return u3 == u2
	case tripleXor:
		return u3 == u^u2
	default:
		// Distinct non-zero vectors over GF(2) are dependent only when one
		// is the sum of the other two.
		return u3 != u^u2
	}
}

// Atoms implements sdk.AtomMapper: the atom of each report in set 0 (the
// pair) or set 1 + i (triple i) of the atoms form at inputs (bucket
// indices). Let a = (y in C_x), b = (y in C_x') and c = (y in C_x3) for
// the report's output y. Read off Declaration, whose atoms are appended
// in this order:
//
//   - Pair (x, x'), any distinct buckets. Atom 0, (K/4 lo, K/4 hi, K/4 lo),
//     is (a, b) = (1, 0): K/4 outputs, at hi under x and lo under x' and
//     as blanket (y = 0 is in every C_x, so not here). Atom 1 is (0, 1).
//     Atom 2, K/4 lo + hi in each coordinate, is (0, 0) (K/4 outputs, lo
//     under x, under x' and as blanket) with y = 0 (hi under every input,
//     so also as blanket): both have ratios (1, 1). Atom 3 (K > 4) is
//     (1, 1) without y = 0: K/4 - 1 outputs, blanket lo since y != 0.
//     With K = 4 (k = 2, 3) y = 0 is the only (1, 1) output and the pair
//     has three atoms.
//   - Triple x3 = x' (k = 2): the loops over (a, b) with a outermost give
//     atom 2a + b; it holds for x3 = x' only.
//   - Triple u3 = u xor u' (k >= 3): atom 2a + b as well (c = (a == b) is
//     determined); it holds only for x3 + 1 = (x+1) xor (x'+1).
//   - Triple with u, u', u3 independent (k >= 4): atom 4a + 2b + c; it
//     holds for any x3 with u3 != u xor u'.
//
// The atoms of a triple hold for every input satisfying its relation, the
// declared Inputs among them. Inputs the set does not hold for (a count
// other than 2 or 3, a bucket out of range, equal buckets, a relation not
// satisfied) and a set not declared fail with sdk.ErrBadInput, a
// malformed report with sdk.ErrBadReport. TestAtomsAgainstMatrix sums the
// matrix over each atom's outputs.
func (r *Randomizer) Atoms(ctx context.Context, eps0 float64, set int, inputs []float64, reports [][]byte) ([]int, error) {
	if err := ldp.CheckEps0(eps0); err != nil {
		return nil, err
	}
	kinds := r.triples()
	var xs []int
	var err error
	switch {
	case set == 0:
		xs, err = ldp.SetBuckets(inputs, 2, r.k)
	case set < 0 || set > len(kinds):
		err = fmt.Errorf("%w: hadamard over %d buckets declares %d sets (a pair and %d triples), not set %d", sdk.ErrBadInput, r.k, 1+len(kinds), len(kinds), set)
	case kinds[set-1] == tripleX3IsX2:
		xs, err = ldp.TripleX3IsXPrime(inputs, r.k)
	default:
		xs, err = ldp.SetBuckets(inputs, 3, r.k)
		if err == nil && !kinds[set-1].holds(xs) {
			err = fmt.Errorf("%w: triple %d (%s) does not hold at inputs %v", sdk.ErrBadInput, set-1, kinds[set-1].label(), inputs)
		}
	}
	if err != nil {
		return nil, err
	}
	ys, err := ldp.DecodeAll(reports, r.Decode)
	if err != nil {
		return nil, err
	}
	out := make([]int, len(ys))
	for i, y := range ys {
		a, b := b2i(InSet(xs[0], y)), b2i(InSet(xs[1], y))
		switch {
		case set > 0 && kinds[set-1] == tripleIndependent:
			out[i] = 4*a + 2*b + b2i(InSet(xs[2], y))
		case set > 0:
			out[i] = 2*a + b
		case y == 0 || a == 0 && b == 0:
			out[i] = 2
		case a == 1 && b == 1:
			out[i] = 3
		default: // (1, 0) or (0, 1)
			out[i] = b
		}
	}
	return out, nil
}

// b2i returns 1 for true and 0 for false.
func b2i(v bool) int {
	if v {
		return 1
	}
	return 0
}

// Randomize implements sdk.Randomizer. Each report is an output index,
// ReportBytes long. It draws y uniform in [0, K) and, when y is on the wrong
// side of C_x, flips the lowest set bit of x+1 in y: a bijection between C_x
// and its complement, so the result is uniform on the chosen side.
func (r *Randomizer) Randomize(ctx context.Context, eps0 float64, in sdk.Inputs) ([][]byte, error) {
	if err := ldp.CheckEps0(eps0); err != nil {
		return nil, err
	}
	idx, err := r.dom.Batch(Name, in)
	if err != nil {
		return nil, err
	}
	if err := r.randomize(ctx, eps0, idx); err != nil {
		return nil, err
	}
	return ldp.EncodeIndices(idx, r.kk), nil
}

// RandomizePacked implements sdk.PackedRandomizer: Randomize with the
// reports concatenated.
func (r *Randomizer) RandomizePacked(ctx context.Context, eps0 float64, in sdk.PackedInputs) ([]byte, error) {
	return ldp.RandomizePackedIndices(ctx, eps0, r.dom, Name, in, r.kk, r.randomize)
}

// randomize replaces each bucket in idx by its randomized output index.
func (r *Randomizer) randomize(ctx context.Context, eps0 float64, idx []int) error {
	pin, pout := probs(eps0)
	src := ldp.DefaultSource(r.src)
	for i, x := range idx {
		if err := ldp.Canceled(ctx, i); err != nil {
			return err
		}
		u := x + 1
		y := int(ldp.Uintn(src, uint64(r.kk)))
		if InSet(x, y) != ldp.Choose(src, pin, pout) {
			y ^= u & -u
		}
		idx[i] = y
	}
	return nil
}

// Decode returns the output index of a report. Errors wrap sdk.ErrBadReport.
func (r *Randomizer) Decode(report []byte) (int, error) {
	return ldp.ReadIndex(report, r.kk)
}

// Accumulate implements sdk.Randomizer. The statistic's Counts are the
// number of reports per output index (K counts).
func (r *Randomizer) Accumulate(ctx context.Context, eps0 float64, reports [][]byte) (*sdk.Statistic, error) {
	return ldp.AccumulateIndices(ctx, &r.desc, eps0, r.kk, reports)
}

// Estimate implements sdk.Randomizer: one item per bucket. The number of
// reports in C_x is C(x) = (n + F[x+1])/2 where F is the Walsh-Hadamard
// transform of the output counts; the estimate is
// (C(x) - n/2)/(p* - 1/2) = F[x+1](e^eps0+1)/(e^eps0-1), with variance
// n(e^eps0+1)²/(e^eps0-1)² - n_x (Wang et al. 2017 with p*, q* = 1/2), and
// Norm-Sub post-processing (see ldp.Pure.Items).
func (r *Randomizer) Estimate(ctx context.Context, stat *sdk.Statistic) (*sdk.Estimate, error) {
	if err := ldp.CheckStatistic(stat, &r.desc, r.kk, true); err != nil {
		return nil, err
	}
	return ldp.NewEstimate(Name, stat, r.conf, r.Pure(stat.Eps0).Items(r.desc.Categories, r.support(stat), stat.N, r.conf)), nil
}

// support returns each bucket's support count C(x), the reports in C_x,
// from a checked statistic's output counts.
func (r *Randomizer) support(stat *sdk.Statistic) []int64 {
	f := append([]int64(nil), stat.Counts...)
	FWHT(f)
	support := make([]int64, r.k)
	for x := range support {
		support[x] = (stat.N + f[x+1]) / 2 // n + F[u] is even: F[u] = n - 2·(count outside C_x)
	}
	return support
}

// FWHT replaces a by its Walsh-Hadamard transform in place,
// a'[u] = sum_j (-1)^popcount(u&j) a[j], in O(K log K) additions
// (Sylvester order, unnormalised). It panics unless len(a) is a power of
// two. Values must stay within int64: |a'[u]| <= sum |a[j]|.
func FWHT(a []int64) {
	n := len(a)
	if n == 0 || n&(n-1) != 0 {
		panic(fmt.Sprintf("hadamard: FWHT length %d is not a power of two", n))
	}
	for h := 1; h < n; h <<= 1 {
		for i := 0; i < n; i += h << 1 {
			for j := i; j < i+h; j++ {
				x, y := a[j], a[j+h]
				a[j], a[j+h] = x+y, x-y
			}
		}
	}
}
