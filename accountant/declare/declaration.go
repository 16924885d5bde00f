package declare

import "fmt"

// Form names the forms of a declaration (docs/accounting.md §2).
type Form string

// The declaration forms.
const (
	// FormMatrix declares R[x][y] for every input and output.
	FormMatrix Form = "matrix"
	// FormAtoms declares the merged decomposition atoms of the worst-case
	// neighbouring pairs, and lower-bound triples.
	FormAtoms Form = "atoms"
	// FormSegments declares pairs and triples by bins of outputs on
	// straight segments of the likelihood-ratio plane (see Bin), for
	// mechanisms with continuous or huge output spaces. DeclaredSet.Atoms
	// may hold exact atoms besides the bins.
	FormSegments Form = "segments"
	// FormGeneric declares only eps0.
	FormGeneric Form = "generic"
)

// Declaration is what a randomizer declares about its output distributions at
// one local budget.
type Declaration struct {
	// Eps0 is the pure local DP level. Required (> 0); for a matrix it may be
	// 0, and is then computed as the largest log likelihood ratio.
	Eps0 float64 `json:"eps0"`
	// Form selects which of the fields below is set. Required.
	Form Form `json:"form"`
	// Matrix is the full output distribution (FormMatrix).
	Matrix *Matrix `json:"matrix,omitempty"`
	// Pairs are the atoms of the worst-case neighbouring pairs (FormAtoms,
	// FormSegments).
	// A mechanism that is not input-symmetric declares several.
	Pairs []DeclaredSet `json:"pairs,omitempty"`
	// Triples are lower-bound triples (x, x', x3) (FormAtoms, FormSegments).
	// Optional: with none the lower bound is 0.
	Triples []DeclaredSet `json:"triples,omitempty"`
	// Tree, when > 0, marks a longitudinal tree protocol over Tree periods
	// (see accountant.Longitudinal): the declared form is the law of one
	// node's report given its level, rows the node values -1, 0, +1, and
	// Eps0 is also the whole transcript's LDP level. A user's reports of
	// such a randomizer are not independent across periods, so
	// accountant.Decompose refuses it (an independent-report bound would be
	// unsound); Node returns the node's law for tools that test a sampler
	// against it.
	Tree int `json:"tree,omitempty"`
	// Changes is the tree protocol's k, the changes per tree it reports
	// (one drawn uniformly in [1, Changes]). The accounting does not depend
	// on it; tools that test a sampler's whole transcripts against the
	// declared law (the conformance kit) need it. Set with Tree.
	Changes int `json:"changes,omitempty"`
}

// Node returns the declaration of one node's report of a longitudinal
// declaration (Tree cleared), after checking Tree. Errors wrap ErrInvalid.
func (d *Declaration) Node() (*Declaration, error) {
	if d == nil || d.Tree == 0 {
		return nil, fmt.Errorf("%w: not a longitudinal declaration (tree = 0)", ErrInvalid)
	}
	if d.Tree < 0 || d.Tree > MaxTree || d.Tree&(d.Tree-1) != 0 {
		return nil, fmt.Errorf("%w: tree = %d, must be a power of two in [1, %d]", ErrInvalid, d.Tree, MaxTree)
	}
	n := *d
	n.Tree = 0
	return &n, nil
}

// DeclaredSet is one declared atom set.
type DeclaredSet struct {
	// Label names the inputs, e.g. "x=a,x'=b", for error messages.
	Label string `json:"label,omitempty"`
	// Atoms are (r, p, q) per merged group of outputs; the residual atom is
	// implicit.
	Atoms []Atom `json:"atoms"`
	// Bins are groups of outputs on segments of the ratio plane
	// (FormSegments only), besides the exact Atoms.
	Bins []Bin `json:"bins,omitempty"`
	// Inputs optionally names the inputs of the set (x, x' and, for a
	// triple, x3): values of a real randomizer, bucket indices of a
	// categorical one. Tools such as the conformance kit sample the
	// randomizer at them. A set without Inputs claims its atoms for every
	// choice of distinct inputs (a randomizer symmetric in its inputs, as
	// k-RR), and such tools pick the inputs themselves.
	Inputs []float64 `json:"inputs,omitempty"`
}

// Atom is one component of a blanket decomposition for a neighbouring pair
// (x, x'): R is the blanket mass r_y = min_x R[x][y] (for a lower-bound
// triple, R[x3][y]), P = R[x][y] and Q = R[x'][y], summed over the outputs y
// merged into this atom.
type Atom struct {
	R float64 `json:"r"`
	P float64 `json:"p"`
	Q float64 `json:"q"`
}

// Bin is a group of outputs of one declared pair or triple whose
// likelihood-ratio points (p/r, q/r) all lie on the straight segment from
// Lo to Hi (each given as [p/r, q/r]). R, P and Q are the group's total
// blanket mass (for a triple, mass under x3) and masses under x and x'.
// The upper bound splits the bin onto the segment's ends, the lower bound
// collapses it to its mean point (P/R, Q/R); the proof is at the top of
// accountant/segments.go.
type Bin struct {
	R  float64    `json:"r"`
	P  float64    `json:"p"`
	Q  float64    `json:"q"`
	Lo [2]float64 `json:"lo"`
	Hi [2]float64 `json:"hi"`
}
