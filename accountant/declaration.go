package accountant

import (
	"fmt"
	"math"
)

// Form names the three forms of a declaration (spec section 2).
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
	// Pairs are the atoms of the worst-case neighbouring pairs (FormAtoms).
	// A mechanism that is not input-symmetric declares several.
	Pairs []DeclaredSet `json:"pairs,omitempty"`
	// Triples are lower-bound triples (x, x', x3) (FormAtoms). Optional: with
	// none the lower bound is 0.
	Triples []DeclaredSet `json:"triples,omitempty"`
}

// DeclaredSet is one declared atom set.
type DeclaredSet struct {
	// Label names the inputs, e.g. "x=a,x'=b", for error messages.
	Label string `json:"label,omitempty"`
	// Atoms are (r, p, q) per merged group of outputs; the residual atom is
	// implicit.
	Atoms []Atom `json:"atoms"`
}

// Validate checks the declaration against spec section 2. Errors wrap
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
	case FormAtoms:
		if d.Eps0 == 0 {
			return nil, fmt.Errorf("%w: atoms declaration needs eps0 > 0", ErrInvalidDeclaration)
		}
		if len(d.Pairs) == 0 {
			return nil, fmt.Errorf("%w: atoms declaration without pairs", ErrInvalidDeclaration)
		}
		dec := &Decomposition{LocalEps: d.Eps0}
		for i, p := range d.Pairs {
			s := AtomSet(p.Atoms)
			if err := s.validate(d.Eps0, false, setName("pair", i, p.Label)); err != nil {
				return nil, err
			}
			m := s.Merge()
			dec.Upper = append(dec.Upper, m, m.swap().Merge())
			same1, same2 := make(AtomSet, len(m)), make(AtomSet, len(m))
			for j, a := range m {
				same1[j] = Atom{a.R, a.P, a.P}
				same2[j] = Atom{a.R, a.Q, a.Q}
			}
			dec.UpperSame = append(dec.UpperSame, same1, same2)
		}
		for i, t := range d.Triples {
			s := AtomSet(t.Atoms)
			if err := s.validate(d.Eps0, true, setName("triple", i, t.Label)); err != nil {
				return nil, err
			}
			m := s.Merge()
			dec.Lower = append(dec.Lower, m, m.swap().Merge())
			same1, same2 := make(AtomSet, len(m)), make(AtomSet, len(m))
			for j, a := range m {
				same1[j] = Atom{a.R, a.P, a.P}
				same2[j] = Atom{a.R, a.Q, a.Q}
			}
			dec.LowerSame = append(dec.LowerSame, same1, same2)
		}
		dec.Upper, dec.UpperSame = dedupe(dec.Upper), dedupe(dec.UpperSame)
		dec.Lower, dec.LowerSame = dedupe(dec.Lower), dedupe(dec.LowerSame)
		return dec, nil
	default:
		return nil, fmt.Errorf("%w: unknown form %q (want %q, %q or %q)", ErrInvalidDeclaration, d.Form, FormMatrix, FormAtoms, FormGeneric)
	}
}

func setName(kind string, i int, label string) string {
	if label != "" {
		return fmt.Sprintf("%s %d (%s)", kind, i, label)
	}
	return fmt.Sprintf("%s %d", kind, i)
}
