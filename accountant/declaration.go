package accountant

import (
	"fmt"
	"math"
)

// Form names the forms of a declaration (docs/accounting.md §2; FormSegments is
// segments.go's).
type Form string

// The declaration forms.
const (
	// FormMatrix declares R[x][y] for every input and output.
	FormMatrix Form = "matrix"
	// FormAtoms declares the merged decomposition atoms of the worst-case
	// neighbouring pairs, and lower-bound triples.
	FormAtoms Form = "atoms"
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
	// (see Longitudinal): the declared form is the law of one node's report
	// given its level, rows the node values -1, 0, +1, and Eps0 is also the
	// whole transcript's LDP level. A user's reports of such a randomizer
	// are not independent across periods, so Decompose refuses it (an
	// independent-report bound would be unsound); Node returns the node's
	// law for tools that test a sampler against it.
	Tree int `json:"tree,omitempty"`
	// Changes is the tree protocol's k, the changes per tree it reports
	// (one drawn uniformly in [1, Changes]). The accounting does not depend
	// on it; tools that test a sampler's whole transcripts against the
	// declared law (the conformance kit) need it. Set with Tree.
	Changes int `json:"changes,omitempty"`
}

// Node returns the declaration of one node's report of a longitudinal
// declaration (Tree cleared), after checking Tree. Errors wrap
// ErrInvalidDeclaration.
func (d *Declaration) Node() (*Declaration, error) {
	if d == nil || d.Tree == 0 {
		return nil, fmt.Errorf("%w: not a longitudinal declaration (tree = 0)", ErrInvalidDeclaration)
	}
	if d.Tree < 0 || d.Tree > MaxTree || d.Tree&(d.Tree-1) != 0 {
		return nil, fmt.Errorf("%w: tree = %d, must be a power of two in [1, %d]", ErrInvalidDeclaration, d.Tree, MaxTree)
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
	// Inputs optionally names the inputs of the set as real values (x, x'
	// and, for a triple, x3), for tools such as the conformance kit that
	// sample the randomizer at them.
	Inputs []float64 `json:"inputs,omitempty"`
}

// Validate checks the declaration against docs/accounting.md §2. Errors wrap
// ErrInvalidDeclaration and name the input, output or atom at fault.
func (d *Declaration) Validate() error {
	_, err := d.Decompose()
	return err
}

// Decompose validates the declaration and returns its decomposition.
func (d *Declaration) Decompose() (*Decomposition, error) {
	if d == nil {
		return nil, fmt.Errorf("%w: nil declaration", ErrInvalidDeclaration)
	}
	if d.Tree != 0 {
		return nil, fmt.Errorf("%w: a longitudinal declaration (tree = %d) describes reports that are not independent across periods; account for it with Longitudinal", ErrLongitudinal, d.Tree)
	}
	if math.IsNaN(d.Eps0) || math.IsInf(d.Eps0, 0) || d.Eps0 < 0 || d.Eps0 > MaxEps0 {
		return nil, fmt.Errorf("%w: eps0 = %v, must be finite and in (0, %g]", ErrInvalidDeclaration, d.Eps0, float64(MaxEps0))
	}
	switch d.Form {
	case FormGeneric:
		if d.Eps0 == 0 {
			return nil, fmt.Errorf("%w: generic declaration needs eps0 > 0", ErrInvalidDeclaration)
		}
		return GenericMech{Eps0: d.Eps0}.Decompose(d.Eps0)
	case FormMatrix:
		if d.Matrix == nil {
			return nil, fmt.Errorf("%w: form %q without a matrix", ErrInvalidDeclaration, d.Form)
		}
		return d.Matrix.Decompose(d.Eps0)
	case FormAtoms, FormSegments:
		if d.Eps0 == 0 {
			return nil, fmt.Errorf("%w: %s declaration needs eps0 > 0", ErrInvalidDeclaration, d.Form)
		}
		if len(d.Pairs) == 0 {
			return nil, fmt.Errorf("%w: %s declaration without pairs", ErrInvalidDeclaration, d.Form)
		}
		dec := &Decomposition{LocalEps: d.Eps0}
		for i, p := range d.Pairs {
			m, err := d.atomSet(p, false, setName("pair", i, p.Label))
			if err != nil {
				return nil, err
			}
			dec.Upper = append(dec.Upper, m, m.swap().Merge())
			dec.UpperSame = append(dec.UpperSame, m.same(false), m.same(true))
		}
		for i, t := range d.Triples {
			m, err := d.atomSet(t, true, setName("triple", i, t.Label))
			if err != nil {
				return nil, err
			}
			dec.Lower = append(dec.Lower, m, m.swap().Merge())
			dec.LowerSame = append(dec.LowerSame, m.same(false), m.same(true))
		}
		dec.Upper, dec.UpperSame = dedupe(dec.Upper), dedupe(dec.UpperSame)
		dec.Lower, dec.LowerSame = dedupe(dec.Lower), dedupe(dec.LowerSame)
		return dec, nil
	default:
		return nil, fmt.Errorf("%w: unknown form %q (want %q, %q, %q or %q)", ErrInvalidDeclaration, d.Form, FormMatrix, FormAtoms, FormSegments, FormGeneric)
	}
}

// atomSet validates one declared pair (lower false) or triple (lower true)
// and returns its merged atoms: the declared atoms, and for the segments
// form the bins split (pairs) or collapsed (triples; see segments.go).
func (d *Declaration) atomSet(s DeclaredSet, lower bool, what string) (AtomSet, error) {
	atoms := AtomSet(s.Atoms)
	switch {
	case d.Form == FormSegments:
		var err error
		if atoms, err = segmentAtoms(s, d.Eps0, lower, what); err != nil {
			return nil, err
		}
	case len(s.Bins) > 0:
		return nil, fmt.Errorf("%w: %s has bins, which only form %q declares", ErrInvalidDeclaration, what, FormSegments)
	}
	if err := atoms.validate(d.Eps0, lower, what); err != nil {
		return nil, err
	}
	return atoms.Merge(), nil
}

// same returns the atoms (r, p, p) of the pair's first input (second when
// second is set): an attribute a neighbour leaves unchanged.
func (s AtomSet) same(second bool) AtomSet {
	out := make(AtomSet, len(s))
	for j, a := range s {
		v := a.P
		if second {
			v = a.Q
		}
		out[j] = Atom{a.R, v, v}
	}
	return out
}

func setName(kind string, i int, label string) string {
	if label != "" {
		return fmt.Sprintf("%s %d (%s)", kind, i, label)
	}
	return fmt.Sprintf("%s %d", kind, i)
}
