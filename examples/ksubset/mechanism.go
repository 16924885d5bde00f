package ksubset

// The law of k-subset randomized response, what the accountant is told
// about it, and the estimator's parameters. k >= 2 buckets, subsets of
// size s in [1, k-1], e = e^eps0, f(1) = e and f(0) = 1.
//
// Law. The outputs are the C(k, s) s-subsets Y of [0, k); input x gives
// R[x][Y] = e/D when x ∈ Y and 1/D when not, D = C(k-1, s-1) e + C(k-1, s)
// (C(k-1, s-1) subsets hold x, C(k-1, s) do not: the row sums to 1).
// With C(k-1, s)/C(k-1, s-1) = (k-s)/s, D = C(k-1, s-1)/(s c) where
//
//	c = 1/(s e + k - s).
//
// Sampler (Randomize). P(x ∈ Y) = C(k-1, s-1) e/D = s e c and
// P(x ∉ Y) = (k-s) c, both in closed form for ldp.Choose; given either,
// every subset of the class has the same probability, so Y is x plus a
// uniform (s-1)-subset of the other k-1 buckets, or a uniform s-subset of
// them (ldp.SampleSubset, exact).
//
// Privacy. R[x][Y]/R[x'][Y] is e, 1 or 1/e, and e is attained (s >= 1 and
// s <= k-1 leave a subset holding x and not x'): pure eps0-LDP, exactly.
// The blanket r_Y = min_z R[z][Y] is 1/D for every output (s < k, so some
// z ∉ Y), and the blanket mass is C(k, s)/D = k c.
//
// Pair atoms (x, x'). Group the outputs by (a, b) = (x ∈ Y, x' ∈ Y):
// C(k-2, s-a-b) outputs, each (r, p, q) = (1, f(a), f(b))/D. From
// C(k-2, s-2), C(k-2, s-1), C(k-2, s) over C(k-1, s-1) = (s-1)/(k-1),
// (k-s)/(k-1), (k-s)(k-s-1)/((k-1)s), the groups' masses per unit,
// W_ab = C(k-2, s-a-b)/D, are
//
//	W11 = s(s-1) c/(k-1),  W10 = W01 = s(k-s) c/(k-1),  W00 = (k-s)(k-s-1) c/(k-1),
//
// and the atoms (W_ab, W_ab f(a), W_ab f(b)). They are exact: outputs of
// one group have equal (r, p, q), and groups have distinct ratio pairs
// (p/r, q/r) = (f(a), f(b)), so the accountant's merging by ratio pair
// gives these four groups. Groups of no output are left out (W11 when
// s = 1, W00 when s = k-1). Check: the W sum to k c (s(s-1) + 2s(k-s) +
// (k-s)(k-s-1) = k(k-1)), the blanket mass.
//
// Lower-bound triple (x, x', x3), distinct, k >= 3: r is R[x3][Y]; group
// by (a, b, t), t = (x3 ∈ Y), m = a+b+t of the three in Y: C(k-3, s-m)
// outputs, and C(k-3, s-m)/C(k-1, s-1) times s c gives
//
//	W_m = c T_m/((k-1)(k-2)),  T_0 = (k-s)(k-s-1)(k-s-2),  T_1 = s(k-s)(k-s-1),
//	T_2 = s(s-1)(k-s),  T_3 = s(s-1)(s-2),
//
// each atom (W f(t), W f(a), W f(b)). The T sum to k(k-1)(k-2) over the
// eight groups (Vandermonde for falling factorials), so the W to k c. By
// symmetry every triple of distinct buckets has these atoms. With k = 2
// (s = 1, binary randomized response) the only triple has x3 = x': the
// pair's groups with t = b.
//
// Estimator (Pure). A report supports bucket v when v ∈ Y. Its sender's
// own bucket: p* = P(x ∈ Y) = s e c. Any other bucket v: the outputs
// holding v and x have mass W11 e, those holding v and not x W10, so
// q* = W11 e + W10 = s c ((s-1) e + k - s)/(k-1), and
// p* - q* = s c (k-s)(e-1)/(k-1) (with Expm1, precise at small eps0).
// Reports are independent, so the support count C(v) has mean
// n_v p* + (n - n_v) q* and variance n_v p*(1-p*) + (n-n_v) q*(1-q*):
// (C(v) - n q*)/(p* - q*) is unbiased with the variance of ldp.Pure
// (Wang, Blocki, Li, Jha 2017, Thm. 2 and eq. 3). s = 1 gives k-RR's
// p* = e c, q* = c.
//
// mechanism_test.go checks every formula against the explicit matrix
// built by enumerating the subsets (the matrix form, independently of
// these closed forms): the atoms by the accountant's decomposition and
// by summing the matrix over each atom's outputs as Atoms maps them, and
// p*, q* by summing rows.

import (
	"context"
	"fmt"
	"math"

	"github.com/blanket-dp/blanket/accountant/declare"
	"github.com/blanket-dp/blanket/sdk"
	"github.com/blanket-dp/blanket/sdk/ldp"
)

// probs returns P(x ∈ Y) = s e c and P(x ∉ Y) = (k-s) c at eps0.
func (r *Randomizer) probs(eps0 float64) (in, out float64) {
	e, s, k := math.Exp(eps0), float64(r.s), float64(r.k)
	c := 1 / (s*e + k - s)
	return s * e * c, (k - s) * c
}

// Pure returns the estimator parameters at eps0 (already checked):
// p* = s e c, q* = s c ((s-1) e + k - s)/(k-1) and
// p* - q* = s c (k-s)(e-1)/(k-1), c = 1/(s e^eps0 + k - s).
func (r *Randomizer) Pure(eps0 float64) ldp.Pure {
	e, s, k := math.Exp(eps0), float64(r.s), float64(r.k)
	c := 1 / (s*e + k - s)
	return ldp.Pure{
		P:    s * e * c,
		Q:    s * c * ((s-1)*e + k - s) / (k - 1),
		Diff: s * c * (k - s) * math.Expm1(eps0) / (k - 1),
	}
}

// NumOutputs returns the number of outputs, C(k, s), and whether it fits
// an int.
func (r *Randomizer) NumOutputs() (int, bool) { return ldp.Binomial(r.k, r.s) }

// matrixSize reports whether the configuration declares the matrix form:
// C(k, s) <= MatrixMaxOutputs.
func (r *Randomizer) matrixSize() bool {
	n, ok := r.NumOutputs()
	return ok && n <= MatrixMaxOutputs
}

// Declare implements sdk.Randomizer: the matrix when C(k, s) <=
// MatrixMaxOutputs, else the exact atoms.
func (r *Randomizer) Declare(ctx context.Context, eps0 float64) (*declare.Declaration, error) {
	form := declare.FormAtoms
	if r.matrixSize() {
		form = declare.FormMatrix
	}
	return r.Declaration(eps0, form)
}

// DeclareForm implements sdk.FormDeclarer: Declaration.
func (r *Randomizer) DeclareForm(ctx context.Context, eps0 float64, form declare.Form) (*declare.Declaration, error) {
	return r.Declaration(eps0, form)
}

// Declaration returns the declaration at eps0 in the given form; both
// decompose identically (derivation at the top of this file). Matrix
// form needs C(k, s) <= MatrixMaxOutputs; its output j is the s-subset of
// colex rank j (ldp.ColexSubset). Atoms form: one pair, any two buckets,
// and one lower-bound triple, any three (x3 = x' when k = 2). Errors
// wrap sdk.ErrBadEps0 or, for another form or a matrix too large,
// sdk.ErrBadConfig.
func (r *Randomizer) Declaration(eps0 float64, form declare.Form) (*declare.Declaration, error) {
	if err := ldp.CheckEps0(eps0); err != nil {
		return nil, err
	}
	e := math.Exp(eps0)
	d := &declare.Declaration{Eps0: eps0, Form: form}
	switch form {
	case declare.FormMatrix:
		m, err := r.matrix(e)
		if err != nil {
			return nil, err
		}
		d.Matrix = m
	case declare.FormAtoms:
		c := 1 / (float64(r.s)*e + float64(r.k-r.s))
		d.Pairs = []declare.DeclaredSet{{Label: "any two buckets", Atoms: atoms(r.pairCells(c), e)}}
		label := "any three buckets"
		if r.k == 2 {
			label = "x3 = x'"
		}
		d.Triples = []declare.DeclaredSet{{Label: label, Atoms: atoms(r.tripleCells(c), e)}}
	default:
		return nil, ldp.UnsupportedForm(Name, form)
	}
	return d, nil
}

// matrix returns the matrix form: R[x][Y] = e/D for the subsets Y that
// hold x (sparse entries), 1/D for the others, D = C(k-1, s-1) e +
// C(k-1, s); output j is the subset of colex rank j.
func (r *Randomizer) matrix(e float64) (*declare.Matrix, error) {
	outputs, ok := r.NumOutputs()
	if !ok || outputs > MatrixMaxOutputs {
		return nil, fmt.Errorf("%w: the matrix form of ksubset needs at most %d outputs, C(%d, %d) is more", sdk.ErrBadConfig, MatrixMaxOutputs, r.k, r.s)
	}
	in, _ := ldp.Binomial(r.k-1, r.s-1)
	out, _ := ldp.Binomial(r.k-1, r.s)
	den := float64(in)*e + float64(out)
	rows := make([]declare.SparseRow, r.k)
	for x := range rows {
		rows[x] = declare.SparseRow{Default: 1 / den, Entries: make(map[int]float64, in)}
	}
	members := make([]int, 0, r.s)
	for j := range outputs {
		b := make([]byte, ldp.BitmapBytes(r.k))
		ldp.ColexSubset(b, j, r.k, r.s)
		members = ldp.AppendMembers(members[:0], b)
		for _, x := range members {
			rows[x].Entries[j] = e / den
		}
	}
	m, err := declare.NewSparseMatrix(outputs, rows)
	if err != nil {
		return nil, err
	}
	m.InputLabels = r.desc.Categories
	return m, nil
}

// cell is a group of outputs: a, b and t say whether they hold x, x' and
// x3, and w is their number over D (W at the top of this file).
type cell struct {
	a, b, t int
	w       float64
}

// pairCells returns the groups of the pair's outputs of positive weight,
// in the order of its atoms: (1,0), (0,1), (1,1), (0,0).
func (r *Randomizer) pairCells(c float64) []cell {
	k, s := float64(r.k), float64(r.s)
	all := []cell{
		{1, 0, 0, s * (k - s) * c / (k - 1)},
		{0, 1, 0, s * (k - s) * c / (k - 1)},
		{1, 1, 0, s * (s - 1) * c / (k - 1)},
		{0, 0, 0, (k - s) * (k - s - 1) * c / (k - 1)},
	}
	return positive(all)
}

// tripleCells returns the groups of the triple's outputs of positive
// weight, in the order of its atoms: (a, b, t) counting down from (1,1,1)
// in binary; with k = 2 the pair's groups with t = b.
func (r *Randomizer) tripleCells(c float64) []cell {
	if r.k == 2 {
		cells := r.pairCells(c)
		for i := range cells {
			cells[i].t = cells[i].b
		}
		return cells
	}
	k, s := float64(r.k), float64(r.s)
	t := [4]float64{(k - s) * (k - s - 1) * (k - s - 2), s * (k - s) * (k - s - 1), s * (s - 1) * (k - s), s * (s - 1) * (s - 2)}
	var all []cell
	for p := 7; p >= 0; p-- {
		a, b, x3 := p>>2&1, p>>1&1, p&1
		all = append(all, cell{a, b, x3, c * t[a+b+x3] / ((k - 1) * (k - 2))})
	}
	return positive(all)
}

// positive returns the cells of positive weight.
func positive(cells []cell) []cell {
	out := cells[:0]
	for _, c := range cells {
		if c.w > 0 {
			out = append(out, c)
		}
	}
	return out
}

// atoms returns the atoms (w f(t), w f(a), w f(b)) of cells at e =
// e^eps0; a pair's cells have t = 0, so r = w.
func atoms(cells []cell, e float64) []declare.Atom {
	f := func(bit int) float64 {
		if bit == 1 {
			return e
		}
		return 1
	}
	out := make([]declare.Atom, len(cells))
	for i, c := range cells {
		out[i] = declare.Atom{R: c.w * f(c.t), P: c.w * f(c.a), Q: c.w * f(c.b)}
	}
	return out
}

// Outputs implements sdk.OutputMapper: each report's colex rank among the
// s-subsets (ldp.ColexRank), its column in the matrix declaration.
// Errors wrap sdk.ErrBadEps0 or sdk.ErrBadReport.
func (r *Randomizer) Outputs(ctx context.Context, eps0 float64, reports [][]byte) ([]int, error) {
	if err := ldp.CheckEps0(eps0); err != nil {
		return nil, err
	}
	return ldp.DecodeAll(reports, func(rep []byte) (int, error) { return ldp.ColexRank(rep, r.k, r.s) })
}

// Atoms implements sdk.AtomMapper: set 0 is the pair at bucket inputs
// [x, x'], set 1 the triple at [x, x', x3] (x3 = x' when k = 2), and a
// report's atom is its group (x ∈ Y, x' ∈ Y, x3 ∈ Y) in the order of the
// declared atoms. Errors wrap sdk.ErrBadEps0, sdk.ErrBadInput (another
// set, inputs that are not distinct buckets) or sdk.ErrBadReport.
func (r *Randomizer) Atoms(ctx context.Context, eps0 float64, set int, inputs []float64, reports [][]byte) ([]int, error) {
	if err := ldp.CheckEps0(eps0); err != nil {
		return nil, err
	}
	var xs []int
	var cells []cell
	var err error
	switch {
	case set == 0:
		xs, err = ldp.SetBuckets(inputs, 2, r.k)
		cells = r.pairCells(1)
	case set == 1 && r.k == 2:
		xs, err = ldp.TripleX3IsXPrime(inputs, r.k)
		cells = r.tripleCells(1)
	case set == 1:
		xs, err = ldp.SetBuckets(inputs, 3, r.k)
		cells = r.tripleCells(1)
	default:
		err = fmt.Errorf("%w: ksubset declares 2 sets (a pair and a triple), not set %d", sdk.ErrBadInput, set)
	}
	if err != nil {
		return nil, err
	}
	var index [2][2][2]int
	for i := range 8 {
		index[i>>2][i>>1&1][i&1] = -1
	}
	for j, c := range cells {
		index[c.a][c.b][c.t] = j
	}
	bit := func(rep []byte, x int) int {
		if ldp.HasBit(rep, x) {
			return 1
		}
		return 0
	}
	out := make([]int, len(reports))
	for i, rep := range reports {
		if err := ldp.CheckBitmap(rep, r.k, r.s); err != nil {
			return nil, fmt.Errorf("report %d: %w", i, err)
		}
		a, b, t := bit(rep, xs[0]), bit(rep, xs[1]), 0
		if len(xs) == 3 {
			t = bit(rep, xs[2])
		}
		if out[i] = index[a][b][t]; out[i] < 0 { // unreachable: every pattern of an s-subset has positive weight
			return nil, fmt.Errorf("report %d: %w: holds (x, x', x3) as (%d, %d, %d), no declared atom", i, sdk.ErrBadReport, a, b, t)
		}
	}
	return out, nil
}
