package accountant

import (
	"fmt"
	"math"

	"github.com/blanket-dp/blanket/accountant/declare"
)

// The accountant's input types are package declare's, which randomizers
// and apps import without the accountant's math (see its doc); these are
// the same types, constants and constructors under the accountant's names.
type (
	// Declaration is declare.Declaration.
	Declaration = declare.Declaration
	// Form is declare.Form.
	Form = declare.Form
	// DeclaredSet is declare.DeclaredSet.
	DeclaredSet = declare.DeclaredSet
	// Atom is declare.Atom.
	Atom = declare.Atom
	// Bin is declare.Bin.
	Bin = declare.Bin
	// Matrix is declare.Matrix.
	Matrix = declare.Matrix
	// SparseRow is declare.SparseRow.
	SparseRow = declare.SparseRow
	// Travel is declare.Travel.
	Travel = declare.Travel
)

// The declaration forms (declare.Form).
const (
	FormMatrix   = declare.FormMatrix
	FormAtoms    = declare.FormAtoms
	FormSegments = declare.FormSegments
	FormGeneric  = declare.FormGeneric
)

// The travel modes of a plan (declare.Travel).
const (
	TravelJoint    = declare.TravelJoint
	TravelParallel = declare.TravelParallel
	TravelSeparate = declare.TravelSeparate
)

// NewMatrix is declare.NewMatrix.
func NewMatrix(rows [][]float64) (*Matrix, error) { return declare.NewMatrix(rows) }

// NewSparseMatrix is declare.NewSparseMatrix.
func NewSparseMatrix(outputs int, rows []SparseRow) (*Matrix, error) {
	return declare.NewSparseMatrix(outputs, rows)
}

// DecodeDeclaration is declare.DecodeDeclaration.
func DecodeDeclaration(data []byte) (*Declaration, error) { return declare.DecodeDeclaration(data) }

// Validate checks the declaration d against docs/accounting.md §2. Errors
// wrap ErrInvalidDeclaration and name the input, output or atom at fault.
func Validate(d *Declaration) error {
	_, err := Decompose(d)
	return err
}

// Decompose validates the declaration d and returns its decomposition.
func Decompose(d *Declaration) (*Decomposition, error) {
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
		return decomposeMatrixMemo(d.Matrix, d.Eps0)
	case FormAtoms, FormSegments:
		if d.Eps0 == 0 {
			return nil, fmt.Errorf("%w: %s declaration needs eps0 > 0", ErrInvalidDeclaration, d.Form)
		}
		if len(d.Pairs) == 0 {
			return nil, fmt.Errorf("%w: %s declaration without pairs", ErrInvalidDeclaration, d.Form)
		}
		dec := &Decomposition{LocalEps: d.Eps0, Sampled: true}
		for i, p := range d.Pairs {
			m, err := atomSet(d, p, false, setName("pair", i, p.Label))
			if err != nil {
				return nil, err
			}
			dec.Upper = append(dec.Upper, m, m.swap().Merge())
			dec.UpperSame = append(dec.UpperSame, m.same(false), m.same(true))
		}
		for i, t := range d.Triples {
			m, err := atomSet(d, t, true, setName("triple", i, t.Label))
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
func atomSet(d *Declaration, s DeclaredSet, lower bool, what string) (AtomSet, error) {
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
		out[j] = Atom{R: a.R, P: v, Q: v}
	}
	return out
}

func setName(kind string, i int, label string) string {
	if label != "" {
		return fmt.Sprintf("%s %d (%s)", kind, i, label)
	}
	return fmt.Sprintf("%s %d", kind, i)
}
