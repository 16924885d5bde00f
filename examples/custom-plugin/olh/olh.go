// Package olh is optimal local hashing (Wang, Blocki, Li, Jha, "Locally
// Differentially Private Protocols for Frequency Estimation", USENIX
// Security 2017) over a declared list of categories plus an optional
// "other" bucket: a third-party Blanket plugin, written against the public
// SDK only (sdk, sdk/ldp, accountant). It implements sdk.Randomizer.
//
// A device draws a hash function H from a universal family (a seed, see
// Family), hashes its bucket x to H(x) in [0, g), and reports the seed and
// y: H(x) with probability e^eps0/(e^eps0+g-1), else one of the other g-1
// values uniformly (randomized response over g values). The report costs
// O(log d) bits whatever eps0; the collector counts, for every bucket v, the
// reports whose seed hashes v to y, in O(d) per report.
//
// g is the prime next to e^eps0 + 1 (below or above, whichever gives the
// smaller estimator variance), Wang et al.'s optimum rounded to a prime so
// that the family's probabilities are exact; above the smallest prime that
// is at least d, hashing gains nothing and g stays there.
//
//	r, err := olh.New(olh.Options{Categories: urls, Other: "other"})
//	reports, err := r.Randomize(ctx, eps0, sdk.Inputs{Categories: values})
//	stat, err := r.Accumulate(ctx, eps0, shuffled)
//	est, err := r.Estimate(ctx, stat)
//
// Its binary, cmd/blanket-olh, serves it with plugin.Serve. Test a plugin like
// this one with the conformance kit, sdk/plugintest.
package olh

import (
	"context"
	"fmt"
	"math"
	"strconv"

	"github.com/blanket-dp/blanket/accountant/declare"
	"github.com/blanket-dp/blanket/sdk"
	"github.com/blanket-dp/blanket/sdk/ldp"
)

// Plugin identity and limits.
const (
	// Name is the plugin name.
	Name = "olh"
	// Version is the report format version.
	Version = "1"
	// MaxBuckets is the largest number of buckets d, so that every seed
	// fits in 63 bits.
	MaxBuckets = 1 << 20
	// MatrixMaxBuckets and MatrixMaxOutputs bound the configurations for
	// which Declare returns the full matrix (one output per seed and hash
	// value); above either it returns the exact atoms. The matrix adds
	// nothing for the accountant (the atoms are exact) and its pair search
	// grows like d² × outputs; it is there so that the conformance kit can
	// test the sampler's joint distribution of seed and y.
	MatrixMaxBuckets = 16
	// MatrixMaxOutputs is the largest number of outputs, seeds × g, of a
	// matrix declaration.
	MatrixMaxOutputs = 1024
)

// Options configures an OLH randomizer.
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

// Randomizer is optimal local hashing. It is safe for concurrent use unless
// Options.Rand was set.
type Randomizer struct {
	dom   *ldp.Domain
	d     int
	gMax  int // the smallest prime >= d
	seedW int // bytes of the seed in a report
	yW    int // bytes of y
	conf  float64
	src   ldp.Source
	desc  sdk.Description
}

var (
	_ sdk.Randomizer   = (*Randomizer)(nil)
	_ sdk.OutputMapper = (*Randomizer)(nil)
	_ sdk.AtomMapper   = (*Randomizer)(nil)
)

// New returns an OLH randomizer. Errors wrap sdk.ErrBadConfig.
func New(opts Options) (*Randomizer, error) {
	conf, err := ldp.Confidence(opts.Confidence)
	if err != nil {
		return nil, err
	}
	dom, err := ldp.NewDomain(opts.Categories, opts.Other, MaxBuckets)
	if err != nil {
		return nil, err
	}
	d := dom.Size()
	gMax := primeAtLeast(d)
	seedW, yW := widths(d, gMax)
	r := &Randomizer{dom: dom, d: d, gMax: gMax, seedW: seedW, yW: yW, conf: conf, src: opts.Rand}
	r.desc = sdk.Description{
		Name:       Name,
		Version:    Version,
		Input:      sdk.InputCategorical,
		Categories: dom.Labels(),
		Other:      dom.Other(),
		Encoding: fmt.Sprintf("hash seed in [0, (g^m-1)g) as a %d-byte big-endian unsigned integer, then y in [0, g) as a %d-byte one; "+
			"g and m depend on eps0 (g prime next to e^eps0+1, at most %d; m = ceil(log_g %d))", r.seedW, r.yW, gMax, d),
		ReportBytes: r.seedW + r.yW,
		Params: []sdk.Param{
			{Name: "d", Value: strconv.Itoa(d), Doc: "number of buckets: the categories plus the other bucket (derived)"},
			{Name: "gmax", Value: strconv.Itoa(gMax), Doc: "largest number of hash values, the smallest prime >= d; g at each eps0 is at most this (derived)"},
		},
		Eps0Min: ldp.MinEps0,
		Eps0Max: ldp.MaxEps0,
	}
	r.desc.Digest = ldp.Digest(r.desc)
	return r, nil
}

// widths returns the bytes of the seed and of y in a report over d
// buckets. Every family has fewer than d·g² seeds: (g^m - 1)g < g^(m+1),
// and g^(m-1) < d when m >= 2 (m = 1 gives (g-1)g < g²); g <= gMax. With
// d <= MaxBuckets = 2^20 and gMax < 2^21 the bound is below 2^62.
func widths(d, gMax int) (seedW, yW int) {
	return ldp.IndexWidth(d * gMax * gMax), ldp.IndexWidth(gMax)
}

// FromConfig returns the randomizer of a plugin-independent configuration:
// Categories, Other and Confidence; no range and no parameters. Errors wrap
// sdk.ErrBadConfig.
func FromConfig(cfg sdk.Config) (*Randomizer, error) {
	if cfg.Lo != 0 || cfg.Hi != 0 {
		return nil, fmt.Errorf("%w: olh takes categories, not a range [%v, %v]", sdk.ErrBadConfig, cfg.Lo, cfg.Hi)
	}
	for name := range cfg.Params {
		return nil, fmt.Errorf("%w: olh has no parameter %q", sdk.ErrBadConfig, name)
	}
	return New(Options{Categories: cfg.Categories, Other: cfg.Other, Confidence: cfg.Confidence})
}

// D returns the number of buckets.
func (r *Randomizer) D() int { return r.d }

// Describe implements sdk.Randomizer.
func (r *Randomizer) Describe(ctx context.Context) (*sdk.Description, error) {
	return ldp.CopyDescription(&r.desc), nil
}

// grr returns the probabilities of reporting y = H(x) and each other value,
// and their complement (g-1)·other, each in closed form.
func grr(eps0 float64, g int) (keep, other, flip float64) {
	e := math.Exp(eps0)
	den := e + float64(g-1)
	return e / den, 1 / den, float64(g-1) / den
}

// pure returns the estimator parameters of family f at eps0. A report
// (seed, y) supports bucket v when H_seed(v) = y: with probability
// p* = keep for the sender's own bucket, and for any other bucket with
// probability q* = c·keep + (1-c)·other (the two buckets collide with
// probability c, and then y = H(v) exactly when y = H(x)); so
// p* - q* = (1-c)(keep - other) = (1-c)(e^eps0-1)/(e^eps0+g-1).
func pure(eps0 float64, f Family) ldp.Pure {
	keep, other, _ := grr(eps0, f.G())
	c, notC := f.Collision()
	return ldp.Pure{P: keep, Q: c*keep + notC*other, Diff: notC * math.Expm1(eps0) / (math.Exp(eps0) + float64(f.G()-1))}
}

// Pure returns the estimator parameters at eps0 (see pure). Errors wrap
// sdk.ErrBadEps0.
func (r *Randomizer) Pure(eps0 float64) (ldp.Pure, error) {
	f, err := r.Family(eps0)
	if err != nil {
		return ldp.Pure{}, err
	}
	return pure(eps0, f), nil
}

// Family returns the hash family used at eps0: g is whichever of the primes
// just below and just above e^eps0 + 1 gives the smaller variance
// q*(1-q*)/(p*-q*)² per report (the estimator's variance for a rare
// bucket), capped at the smallest prime >= d (with g >= d the family is
// injective, c = 0, and a larger g only adds noise). Errors wrap
// sdk.ErrBadEps0.
func (r *Randomizer) Family(eps0 float64) (Family, error) {
	if err := ldp.CheckEps0(eps0); err != nil {
		return Family{}, err
	}
	return familyAt(r.d, r.gMax, eps0), nil
}

// familyAt returns the family of d buckets at a valid eps0 (see Family).
func familyAt(d, gMax int, eps0 float64) Family {
	x := math.Exp(eps0) + 1
	if x >= float64(gMax) {
		return NewFamily(d, gMax)
	}
	best, bestVar := Family{}, math.Inf(1)
	for _, g := range []int{primeAtMost(int(math.Floor(x))), primeAtLeast(int(math.Ceil(x)))} {
		if g < 2 || g > gMax {
			continue
		}
		f := NewFamily(d, g)
		p := pure(eps0, f)
		if v := p.Q * (1 - p.Q) / (p.Diff * p.Diff); v < bestVar {
			best, bestVar = f, v
		}
	}
	return best
}

// Declare implements sdk.Randomizer: the matrix when d <= MatrixMaxBuckets
// and seeds × g <= MatrixMaxOutputs, else the exact atoms.
func (r *Randomizer) Declare(ctx context.Context, eps0 float64) (*declare.Declaration, error) {
	f, err := r.Family(eps0)
	if err != nil {
		return nil, err
	}
	if r.d <= MatrixMaxBuckets && f.Seeds() <= MatrixMaxOutputs/f.g {
		return r.Declaration(eps0, declare.FormMatrix)
	}
	return r.Declaration(eps0, declare.FormAtoms)
}

// DeclareForm implements sdk.FormDeclarer: Declaration.
func (r *Randomizer) DeclareForm(ctx context.Context, eps0 float64, form declare.Form) (*declare.Declaration, error) {
	return r.Declaration(eps0, form)
}

// Declaration returns the declaration at eps0 in the given form; both
// decompose identically. Matrix form needs d <= MatrixMaxBuckets and
// seeds × g <= MatrixMaxOutputs; output s·g + y is the report (seed s, y).
//
// Derivation. Let S be the number of seeds, keep = e^eps0/(e^eps0+g-1),
// other = 1/(e^eps0+g-1), and c the family's collision probability. Input
// x reports (s, y) with probability keep/S when y = H_s(x), else other/S.
// The blanket r_(s,y) = min over all buckets is other/S for every output:
// no H_s is constant on the buckets (Family, property 3), so some bucket
// hashes elsewhere. For a pair (x, x') group the outputs by
// (a, b) = (y = H_s(x), y = H_s(x')). A seed where x and x' collide
// (probability c, property 2) has one output with (1,1) and g-1 with (0,0);
// any other seed has one (1,0), one (0,1) and g-2 (0,0). Summing over seeds:
//
//	(1,0): r = (1-c) other, p = (1-c) keep,  q = (1-c) other   ratios (e, 1)
//	(0,1): r = (1-c) other, p = (1-c) other, q = (1-c) keep    ratios (1, e)
//	(1,1): r = c other,     p = c keep,      q = c keep        ratios (e, e)  (absent when c = 0)
//	(0,0): r = p = q = (g-2+c) other                           ratios (1, 1)
//
// the same for every pair, with blanket mass gamma = g·other. These atoms
// are exact: a (1,1) output of one seed and a (1,0) output of another are
// different outputs with different ratio pairs, merged only when their
// ratios agree.
//
// Lower-bound triples (x, x', x3) use r = R[x3] and group outputs by
// (a, b, t), t = (y = H_s(x3)). A seed falls in one of five patterns: all
// three hash values distinct (probability pD), exactly two equal (p12, p13,
// p23), or all equal (pA); an atom (a, b, t) of weight w is
// (w f(t), w f(a), w f(b)), f(1) = keep, f(0) = other, with
//
//	w(1,0,0) = pD + p23, w(0,1,0) = pD + p13, w(0,0,1) = pD + p12,
//	w(1,1,0) = p12, w(1,0,1) = p13, w(0,1,1) = p23, w(1,1,1) = pA,
//	w(0,0,0) = (g-3) pD + (g-2)(p12 + p13 + p23) + (g-1) pA.
//
// By property 4 two kinds of triple exist: dependent (x3 - x a multiple of
// x' - x as digit vectors, e.g. buckets 0, 1, 2 when g >= 3): pA = c,
// pD = 1 - c; independent (e.g. 0, 1, g, when d > g): with G = g^m,
// pA = (g^(m-2) - 1)/(G - 1), p12 = p13 = p23 = (g-1)g^(m-2)/(G - 1),
// pD = (g-1)(g-2)g^(m-2)/(G - 1). Both are declared when they exist; with
// d = 2 the only triple is x3 = x' (p23 = 1 - c, pA = c). A triple's atoms
// hold only for inputs of its kind, so each names such inputs
// (DeclaredSet.Inputs, for the conformance kit; the accountant does not
// read them): 0, 1, 2 (dependent), 0, 1, g (independent), 0, 1, 1 (x3 =
// x'). The pair holds for any two buckets and names none. Atoms maps
// reports to these atoms.
func (r *Randomizer) Declaration(eps0 float64, form declare.Form) (*declare.Declaration, error) {
	f, err := r.Family(eps0)
	if err != nil {
		return nil, err
	}
	keep, other, _ := grr(eps0, f.G())
	d := &declare.Declaration{Eps0: eps0, Form: form}
	switch form {
	case declare.FormMatrix:
		if r.d > MatrixMaxBuckets || f.Seeds() > MatrixMaxOutputs/f.g {
			return nil, fmt.Errorf("%w: matrix form needs at most %d buckets and %d outputs, have %d buckets and %d seeds × %d values",
				sdk.ErrBadConfig, MatrixMaxBuckets, MatrixMaxOutputs, r.d, f.Seeds(), f.G())
		}
		S := int(f.Seeds())
		rows := make([]declare.SparseRow, r.d)
		for x := range rows {
			rows[x] = declare.SparseRow{Default: other / float64(S), Entries: make(map[int]float64, S)}
			for s := range S {
				rows[x].Entries[s*f.G()+f.Hash(uint64(s), x)] = keep / float64(S)
			}
		}
		m, err := declare.NewSparseMatrix(S*f.G(), rows)
		if err != nil {
			return nil, err
		}
		m.InputLabels = r.desc.Categories
		d.Matrix = m
	case declare.FormAtoms:
		d.Pairs = []declare.DeclaredSet{{Label: "any two buckets", Atoms: atomsOf(pairCells(f), keep, other, false)}}
		for _, kind := range r.triples(f) {
			d.Triples = append(d.Triples, declare.DeclaredSet{Label: kind.label(), Atoms: atomsOf(kind.cells(f), keep, other, true), Inputs: kind.inputs(f)})
		}
	default:
		return nil, fmt.Errorf("%w: olh declares forms %q and %q, not %q", sdk.ErrBadConfig, declare.FormMatrix, declare.FormAtoms, form)
	}
	return d, nil
}

// cell is the group of outputs (seed, y) of a declared set with hash
// pattern (a, b, t): a = 1 when y = H_seed(x), b when y = H_seed(x'), t
// when y = H_seed(x3) (0 for a pair). W is the expected number of such
// outputs per seed, so that the group's mass under an input whose hash
// value y is (is not) is W·keep (W·other).
type cell struct {
	a, b, t int
	w       float64
}

// pairCells returns the cells of the pair (x, x') that Declaration
// declares as atoms, in order: (1,0) and (0,1) of weight 1 - c each,
// (1,1) of weight c when c > 0, and (0,0) of weight g - 2 + c when positive
// (see Declaration).
func pairCells(f Family) []cell {
	c, notC := f.Collision()
	out := []cell{{1, 0, 0, notC}, {0, 1, 0, notC}}
	if c > 0 {
		out = append(out, cell{1, 1, 0, c})
	}
	if w := float64(f.G()) - 2 + c; w > 0 {
		out = append(out, cell{0, 0, 0, w})
	}
	return out
}

// tripleCells returns the cells of positive weight of a triple whose hash
// values are all distinct with probability pD, pairwise equal with p12,
// p13, p23 (x=x', x=x3, x'=x3) and all equal with pA (see Declaration).
func tripleCells(g, pD, p12, p13, p23, pA float64) []cell {
	cells := []cell{
		{1, 0, 0, pD + p23}, {0, 1, 0, pD + p13}, {0, 0, 1, pD + p12},
		{1, 1, 0, p12}, {1, 0, 1, p13}, {0, 1, 1, p23}, {1, 1, 1, pA},
		{0, 0, 0, (g-3)*pD + (g-2)*(p12+p13+p23) + (g-1)*pA},
	}
	var out []cell
	for _, c := range cells {
		if c.w > 0 {
			out = append(out, c)
		}
	}
	return out
}

// atomsOf returns the atoms of cells: (w·other, w f(a), w f(b)) for a
// pair, whose blanket is other/S at every output, and (w f(t), w f(a),
// w f(b)) for a triple, f(1) = keep, f(0) = other.
func atomsOf(cells []cell, keep, other float64, triple bool) []declare.Atom {
	f := func(bit int) float64 {
		if bit == 1 {
			return keep
		}
		return other
	}
	out := make([]declare.Atom, len(cells))
	for i, c := range cells {
		r := c.w * other
		if triple {
			r = c.w * f(c.t)
		}
		out[i] = declare.Atom{R: r, P: c.w * f(c.a), Q: c.w * f(c.b)}
	}
	return out
}

// tripleKind is a kind of lower-bound triple (x, x', x3) by Family's
// property 4.
type tripleKind int

const (
	// tripleX3IsX2 is x3 = x', the only triple of 2 buckets.
	tripleX3IsX2 tripleKind = iota
	// tripleDependent has x3 - x a multiple of x' - x as digit vectors.
	tripleDependent
	// tripleIndependent has x3 - x and x' - x linearly independent.
	tripleIndependent
)

// triples returns the kinds of triple Declaration declares under family
// f, in order: x3 = x' when d = 2; dependent when d >= 3 and g >= 3 (three
// buckets whose differences are dependent, e.g. 0, 1, 2); independent
// when m >= 2.
func (r *Randomizer) triples(f Family) []tripleKind {
	var out []tripleKind
	if r.d == 2 {
		out = append(out, tripleX3IsX2)
	}
	if r.d >= 3 && f.G() >= 3 {
		out = append(out, tripleDependent)
	}
	if f.M() >= 2 {
		out = append(out, tripleIndependent)
	}
	return out
}

// label returns the DeclaredSet.Label of a triple kind.
func (k tripleKind) label() string {
	switch k {
	case tripleX3IsX2:
		return "x3 = x'"
	case tripleDependent:
		return "x3 - x dependent on x' - x"
	default:
		return "x3 - x independent of x' - x"
	}
}

// inputs returns the buckets x, x', x3 a triple kind is declared at: 0, 1,
// 1 for x3 = x'; 0, 1, 2 for dependent ones (2 = 2·1 as digit vectors when
// g >= 3); 0, 1, g for independent ones (the first two unit vectors; g < d
// when m >= 2).
func (k tripleKind) inputs(f Family) []float64 {
	switch k {
	case tripleX3IsX2:
		return []float64{0, 1, 1}
	case tripleDependent:
		return []float64{0, 1, 2}
	default:
		return []float64{0, 1, float64(f.G())}
	}
}

// cells returns the cells of a triple kind under family f: by property 4,
// x3 = x' has p23 = 1 - c and pA = c; a dependent triple pD = 1 - c and
// pA = c; an independent one, with G = g^m, pA = (g^(m-2) - 1)/(G - 1),
// p12 = p13 = p23 = (g-1)g^(m-2)/(G - 1), pD = (g-1)(g-2)g^(m-2)/(G - 1).
func (k tripleKind) cells(f Family) []cell {
	c, notC := f.Collision()
	gf := float64(f.G())
	switch k {
	case tripleX3IsX2:
		return tripleCells(gf, 0, 0, 0, notC, c)
	case tripleDependent:
		return tripleCells(gf, notC, 0, 0, 0, c)
	default:
		gm2 := math.Pow(gf, float64(f.M()-2))
		den := gm2*gf*gf - 1
		pA, pPair, pD := (gm2-1)/den, (gf-1)*gm2/den, (gf-1)*(gf-2)*gm2/den
		return tripleCells(gf, pD, pPair, pPair, pPair, pA)
	}
}

// Atoms implements sdk.AtomMapper: the atom of each report (seed, y)
// produced at eps0 in set 0 (the pair) or set 1 + i (triple i) of the
// atoms form at inputs (bucket indices). Atom j is cell j of Declaration
// (pairCells for the pair, tripleKind.cells for triple i of triples): the
// outputs with one hash pattern (a, b, t), a = [y = H_seed(x)],
// b = [y = H_seed(x')], t = [y = H_seed(x3)] (t = 0 for a pair). Why these
// groups have the declared masses: every output has probability keep/S
// under an input that hashes to y and other/S under one that does not,
// and blanket other/S (Family, property 3), so all outputs of a pattern
// share one ratio pair, and summing over them gives (W other, W f(a),
// W f(b)) for a pair and (W f(t), W f(a), W f(b)) for a triple, W being
// the pattern's outputs per seed averaged over seeds: for a pair 1 - c
// each for (1,0) and (0,1) (x and x' collide with probability c, property
// 2), c for (1,1) and g - 2 + c for (0,0); for a triple the weights of
// Declaration from the collision pattern of its kind (property 4).
// Patterns of weight zero are not atoms: with c = 0 (m = 1) no output is
// (1,1), with g = 2 and c = 0 none is (0,0), and a dependent triple has
// no output whose hash values of x, x', x3 are equal in pairs only.
//
// The pair holds for any two distinct buckets; the triples for inputs of
// their kind (tripleKind), the declared Inputs among them. Inputs the set
// does not hold for (a count other than 2 or 3, a bucket out of range,
// equal buckets but x3 = x' when d = 2, the wrong kind) and a set not
// declared fail with sdk.ErrBadInput, a malformed report with
// sdk.ErrBadReport, eps0 out of range with sdk.ErrBadEps0.
// TestAtomsAgainstMatrix sums the matrix over each atom's outputs.
func (r *Randomizer) Atoms(ctx context.Context, eps0 float64, set int, inputs []float64, reports [][]byte) ([]int, error) {
	f, err := r.Family(eps0)
	if err != nil {
		return nil, err
	}
	kinds := r.triples(f)
	var xs []int
	var cells []cell
	switch {
	case set == 0:
		xs, err = ldp.SetBuckets(inputs, 2, r.d)
		cells = pairCells(f)
	case set < 0 || set > len(kinds):
		err = fmt.Errorf("%w: olh over %d buckets at eps0 = %v declares %d sets (a pair and %d triples), not set %d", sdk.ErrBadInput, r.d, eps0, 1+len(kinds), len(kinds), set)
	case kinds[set-1] == tripleX3IsX2:
		xs, err = ldp.TripleX3IsXPrime(inputs, r.d)
		cells = tripleX3IsX2.cells(f)
	default:
		kind := kinds[set-1]
		xs, err = ldp.SetBuckets(inputs, 3, r.d)
		if err == nil && f.collinear(xs[0], xs[1], xs[2]) != (kind == tripleDependent) {
			err = fmt.Errorf("%w: triple %d (%s) does not hold at inputs %v under g = %d", sdk.ErrBadInput, set-1, kind.label(), inputs, f.G())
		}
		cells = kind.cells(f)
	}
	if err != nil {
		return nil, err
	}
	var index [2][2][2]int
	for i := range index {
		for j := range index[i] {
			index[i][j] = [2]int{-1, -1}
		}
	}
	for j, c := range cells {
		index[c.a][c.b][c.t] = j
	}
	out := make([]int, len(reports))
	for i, rep := range reports {
		seed, y, err := r.decode(f, rep)
		if err != nil {
			return nil, fmt.Errorf("report %d: %w", i, err)
		}
		hit := func(x int) int {
			if uint64(f.Hash(seed, x)) == y {
				return 1
			}
			return 0
		}
		a, b, t := hit(xs[0]), hit(xs[1]), 0
		if set > 0 {
			t = hit(xs[2])
		}
		if out[i] = index[a][b][t]; out[i] < 0 {
			// Unreachable for inputs the set holds for.
			return nil, fmt.Errorf("%w: report %d has hash pattern (%d, %d, %d) at inputs %v, which set %d excludes", sdk.ErrBadInput, i, a, b, t, inputs, set)
		}
	}
	return out, nil
}

func (r *Randomizer) source() ldp.Source {
	if r.src != nil {
		return r.src
	}
	return ldp.NewCryptoSource()
}

// putUint writes v big-endian into all of dst.
func putUint(dst []byte, v uint64) {
	for i := len(dst) - 1; i >= 0; i-- {
		dst[i] = byte(v)
		v >>= 8
	}
}

// readUint reads a big-endian unsigned integer of at most 8 bytes.
func readUint(src []byte) uint64 {
	var v uint64
	for _, b := range src {
		v = v<<8 | uint64(b)
	}
	return v
}

// Randomize implements sdk.Randomizer. Each report is a seed drawn
// uniformly from the family and y, randomized response over [0, g) around
// H_seed(x); ReportBytes long.
func (r *Randomizer) Randomize(ctx context.Context, eps0 float64, in sdk.Inputs) ([][]byte, error) {
	f, err := r.Family(eps0)
	if err != nil {
		return nil, err
	}
	if len(in.Reals) > 0 {
		return nil, fmt.Errorf("%w: olh takes categorical inputs, got %d reals", sdk.ErrBadInput, len(in.Reals))
	}
	idx, err := r.dom.Indices(in.Categories)
	if err != nil {
		return nil, err
	}
	keep, _, flip := grr(eps0, f.G())
	src := r.source()
	w := r.desc.ReportBytes
	buf := make([]byte, w*len(idx))
	out := make([][]byte, len(idx))
	for i, x := range idx {
		if err := ldp.Canceled(ctx, i); err != nil {
			return nil, err
		}
		s := ldp.Uintn(src, f.Seeds())
		h := f.Hash(s, x)
		y := h
		if !ldp.Choose(src, keep, flip) {
			y = ldp.Intn(src, f.G()-1)
			if y >= h {
				y++
			}
		}
		rep := buf[i*w : (i+1)*w : (i+1)*w]
		putUint(rep[:r.seedW], s)
		putUint(rep[r.seedW:], uint64(y))
		out[i] = rep
	}
	return out, nil
}

// decode returns the seed and y of a report under family f. Errors wrap
// sdk.ErrBadReport.
func (r *Randomizer) decode(f Family, report []byte) (seed, y uint64, err error) {
	if len(report) != r.desc.ReportBytes {
		return 0, 0, fmt.Errorf("%w: %d bytes, want %d", sdk.ErrBadReport, len(report), r.desc.ReportBytes)
	}
	seed, y = readUint(report[:r.seedW]), readUint(report[r.seedW:])
	if seed >= f.Seeds() || y >= f.g {
		return 0, 0, fmt.Errorf("%w: seed %d, y %d; want seed < %d, y < %d", sdk.ErrBadReport, seed, y, f.Seeds(), f.G())
	}
	return seed, y, nil
}

// Decode returns the seed and y of a report produced at eps0. Errors wrap
// sdk.ErrBadEps0 or sdk.ErrBadReport.
func (r *Randomizer) Decode(eps0 float64, report []byte) (seed uint64, y int, err error) {
	f, err := r.Family(eps0)
	if err != nil {
		return 0, 0, err
	}
	s, yy, err := r.decode(f, report)
	return s, int(yy), err
}

// Output returns the index seed·g + y of a report among the outputs of the
// matrix declaration at eps0 (the conformance kit's Options.Output; see
// also Outputs).
// Errors wrap sdk.ErrBadEps0 or sdk.ErrBadReport.
func (r *Randomizer) Output(eps0 float64, report []byte) (int, error) {
	f, err := r.Family(eps0)
	if err != nil {
		return 0, err
	}
	s, y, err := r.decode(f, report)
	if err != nil {
		return 0, err
	}
	if f.Seeds() > math.MaxInt/f.g {
		return 0, fmt.Errorf("%w: %d seeds × %d values do not fit an int", sdk.ErrBadReport, f.Seeds(), f.G())
	}
	return int(s*f.g + y), nil
}

// Outputs implements sdk.OutputMapper with Output, so that the kit can
// test OLH's output frequencies through the plugin protocol too (blanket
// plugin verify), where Options.Output cannot travel.
func (r *Randomizer) Outputs(ctx context.Context, eps0 float64, reports [][]byte) ([]int, error) {
	out := make([]int, len(reports))
	for i, rep := range reports {
		o, err := r.Output(eps0, rep)
		if err != nil {
			return nil, fmt.Errorf("report %d: %w", i, err)
		}
		out[i] = o
	}
	return out, nil
}

// Accumulate implements sdk.Randomizer. The statistic's Counts are the
// number of reports supporting each bucket v (H_seed(v) = y), d counts; a
// report supports several buckets, so they do not sum to N.
func (r *Randomizer) Accumulate(ctx context.Context, eps0 float64, reports [][]byte) (*sdk.Statistic, error) {
	f, err := r.Family(eps0)
	if err != nil {
		return nil, err
	}
	s := &sdk.Statistic{Plugin: Name, Digest: r.desc.Digest, Eps0: eps0, Counts: make([]int64, r.d)}
	a, prefix, digits := make([]uint64, f.M()), make([]uint64, f.M()), make([]uint64, f.M())
	for i, rep := range reports {
		if err := ldp.Canceled(ctx, i); err != nil {
			return nil, err
		}
		seed, y, err := r.decode(f, rep)
		if err != nil {
			s.Malformed++
			continue
		}
		f.support(seed, y, s.Counts, a, prefix, digits)
		s.N++
	}
	return s, nil
}

// Estimate implements sdk.Randomizer: one item per bucket, the estimated
// number of senders in it, (C(v) - n q*)/(p* - q*) with C(v) the reports
// supporting v (Wang et al. 2017; p*, q* in Pure), variance
// n q*(1-q*)/(p*-q*)² + n_v (1-p*-q*)/(p*-q*) with n_v the clamped
// estimate, and Norm-Sub post-processing (see ldp.Pure.Items).
func (r *Randomizer) Estimate(ctx context.Context, stat *sdk.Statistic) (*sdk.Estimate, error) {
	if err := ldp.CheckStatistic(stat, &r.desc, r.d, false); err != nil {
		return nil, err
	}
	p, err := r.Pure(stat.Eps0)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", sdk.ErrBadStatistic, err)
	}
	return &sdk.Estimate{
		Plugin:     Name,
		Eps0:       stat.Eps0,
		N:          stat.N,
		Malformed:  stat.Malformed,
		Confidence: r.conf,
		Items:      p.Items(r.desc.Categories, stat.Counts, stat.N, r.conf),
	}, nil
}
