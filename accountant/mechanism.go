package accountant

import (
	"fmt"
	"math"
	"strings"
)

// Decomposition is what the engine needs to bound one mechanism at one
// local budget: candidate atom sets for the upper bound (one per
// neighbouring pair, the bound is their maximum) and for the lower bound (one
// per triple), plus the sets of an attribute that does not change, used by
// composition.
type Decomposition struct {
	// LocalEps is the pure local DP level of the whole mechanism. The
	// shuffled guarantee never exceeds it (shuffling is post-processing).
	LocalEps float64
	// Upper holds one merged atom set per candidate neighbouring pair (x, x').
	Upper []AtomSet
	// UpperSame holds one set (r, p, p) per distinct input x, the atoms of an
	// attribute that a neighbour leaves unchanged.
	UpperSame []AtomSet
	// Lower holds one set (R[x3], R[x], R[x']) per candidate triple. Empty
	// when no valid triple is known; the lower bound is then 0.
	Lower []AtomSet
	// LowerSame holds the sets (R[x3], R[x], R[x]) for unchanged attributes.
	LowerSame []AtomSet
	// KRR is k when the mechanism is exactly k-ary randomized response (the
	// k-RR-specific baselines apply), else 0.
	KRR int
	// Sampled says that the upper candidates' blanket masses are those of
	// one randomizer's own declaration (a matrix, atoms or segments, or
	// k-RR), the law its blanket sampler draws: only then can a shuffler's
	// floor of blanket draws be accounted (docs/accounting.md §13).
	// Compositions, WorstOf and the generic clone leave it false.
	Sampled bool
	// ExactPairs says that every upper candidate is the exact
	// decomposition of a real neighbouring pair of the mechanism (a matrix,
	// or k-RR), so that its value with the victim among blanket draws alone
	// is also a lower bound. Atoms may declare dominating pairs, segments
	// split bins, WorstOf and compositions mix mechanisms: false.
	ExactPairs bool
}

// Gamma returns the smallest blanket mass over the upper candidate sets.
func (d *Decomposition) Gamma() float64 {
	g := math.Inf(1)
	for _, s := range d.Upper {
		g = math.Min(g, s.Gamma())
	}
	return g
}

// Mechanism is a family of local randomizers indexed by the total local
// budget eps0 (so that it can be calibrated). Implementations in this
// package: KRR, Generic, Declared, Joint, Parallel, Subsample, Func.
type Mechanism interface {
	// Decompose returns the decomposition at total local budget eps0.
	Decompose(eps0 float64) (*Decomposition, error)
	// FixedEps0 reports the budget the mechanism consumes when it does not
	// depend on the budget it is given (a declaration at a fixed eps0, or a
	// component with its own eps0).
	FixedEps0() (float64, bool)
	// String returns the mechanism in the --mech grammar.
	String() string
}

// KRRMech is k-ary randomized response: keep the input with probability
// e^eps0/(e^eps0+k-1), else report one of the other k-1 values uniformly.
type KRRMech struct {
	// K is the number of categories. Required, >= 2.
	K int
	// Eps0 fixes the local budget when > 0. Defaults to the budget given.
	Eps0 float64
}

// KRR returns k-ary randomized response over k categories.
func KRR(k int) KRRMech { return KRRMech{K: k} }

// FixedEps0 implements Mechanism.
func (m KRRMech) FixedEps0() (float64, bool) { return m.Eps0, m.Eps0 > 0 }

// String implements Mechanism.
func (m KRRMech) String() string {
	if m.Eps0 > 0 {
		return fmt.Sprintf("krr:k=%d:eps0=%g", m.K, m.Eps0)
	}
	return fmt.Sprintf("krr:k=%d", m.K)
}

// Decompose implements Mechanism with the exact atoms of docs/accounting.md
// §3 and the lower-bound atoms of §4.
func (m KRRMech) Decompose(eps0 float64) (*Decomposition, error) {
	if m.Eps0 > 0 {
		eps0 = m.Eps0
	}
	if err := checkEps0(eps0); err != nil {
		return nil, err
	}
	if m.K < 2 {
		return nil, argError("krr k", m.K, ">= 2")
	}
	e := math.Exp(eps0)
	k := float64(m.K)
	c := 1 / (e + k - 1)
	ec := e / (e + k - 1)
	d := &Decomposition{LocalEps: eps0, KRR: m.K, Sampled: true, ExactPairs: true}
	up := AtomSet{{R: c, P: ec, Q: c}, {R: c, P: c, Q: ec}}
	same := AtomSet{{R: c, P: ec, Q: ec}}
	if m.K > 2 {
		up = append(up, Atom{R: (k - 2) * c, P: (k - 2) * c, Q: (k - 2) * c})
	}
	same = append(same, Atom{R: (k - 1) * c, P: (k - 1) * c, Q: (k - 1) * c})
	d.Upper = []AtomSet{up.Merge()}
	d.UpperSame = []AtomSet{same.Merge()}
	if m.K >= 3 {
		low := AtomSet{{R: c, P: ec, Q: c}, {R: c, P: c, Q: ec}, {R: ec, P: c, Q: c}}
		lowSame := AtomSet{{R: c, P: ec, Q: ec}, {R: ec, P: c, Q: c}}
		if m.K > 3 {
			low = append(low, Atom{R: (k - 3) * c, P: (k - 3) * c, Q: (k - 3) * c})
			lowSame = append(lowSame, Atom{R: (k - 2) * c, P: (k - 2) * c, Q: (k - 2) * c})
		} else {
			lowSame = append(lowSame, Atom{R: c, P: c, Q: c})
		}
		d.Lower = []AtomSet{low.Merge()}
		d.LowerSame = []AtomSet{lowSame.Merge()}
	} else {
		// k = 2: the only triple is x3 = x'.
		d.Lower = []AtomSet{AtomSet{{R: c, P: ec, Q: c}, {R: ec, P: c, Q: ec}}.Merge()}
		d.LowerSame = []AtomSet{AtomSet{{R: c, P: ec, Q: ec}, {R: ec, P: c, Q: c}}.Merge()}
	}
	return d, nil
}

// GenericMech is any pure eps0-LDP randomizer about which nothing else is
// known. Its upper bound uses the generic clone decomposition (Feldman,
// McMillan, Talwar 2021; docs/accounting.md §6), valid for every eps0-LDP
// randomizer.
// Its lower bound is the exact divergence of a specific eps0-LDP randomizer
// (three inputs, two outputs: R(x) = (e, 1)/(e+1), R(x') = (1, e)/(e+1),
// R(x3) = (1/2, 1/2)), and of 3-RR: a lower bound on the worst case over
// the class.
type GenericMech struct {
	// Eps0 fixes the local budget when > 0. Defaults to the budget given.
	Eps0 float64
}

// Generic returns the generic eps0-LDP mechanism.
func Generic() GenericMech { return GenericMech{} }

// FixedEps0 implements Mechanism.
func (m GenericMech) FixedEps0() (float64, bool) { return m.Eps0, m.Eps0 > 0 }

// String implements Mechanism.
func (m GenericMech) String() string {
	if m.Eps0 > 0 {
		return fmt.Sprintf("generic:eps0=%g", m.Eps0)
	}
	return "generic"
}

// Decompose implements Mechanism.
func (m GenericMech) Decompose(eps0 float64) (*Decomposition, error) {
	if m.Eps0 > 0 {
		eps0 = m.Eps0
	}
	if err := checkEps0(eps0); err != nil {
		return nil, err
	}
	d := CloneDecomposition(eps0)
	// Lower bound: the three-input, two-output randomizer above, plus 3-RR.
	e := math.Exp(eps0)
	a, b := e/(e+1), 1/(e+1)
	d.Lower = []AtomSet{AtomSet{{R: 0.5, P: a, Q: b}, {R: 0.5, P: b, Q: a}}.Merge()}
	d.LowerSame = []AtomSet{AtomSet{{R: 0.5, P: a, Q: a}, {R: 0.5, P: b, Q: b}}.Merge()}
	rr, err := KRRMech{K: 3}.Decompose(eps0)
	if err != nil {
		return nil, err
	}
	d.Lower = append(d.Lower, rr.Lower...)
	d.LowerSame = append(d.LowerSame, rr.LowerSame...)
	return d, nil
}

// CloneDecomposition returns the generic clone decomposition at eps0
// (docs/accounting.md §6): two atoms of blanket mass e^-eps0/2 with
// p = (e^eps0, 1)/(e^eps0+1), q = (1, e^eps0)/(e^eps0+1), residual
// 1 - e^-eps0. Its unchanged-attribute set is the clone reduction with both
// reference inputs equal: one atom (e^-eps0, 1, 1). It has no lower-bound
// sets.
func CloneDecomposition(eps0 float64) *Decomposition {
	e := math.Exp(eps0)
	g := math.Exp(-eps0)
	a, b := e/(e+1), 1/(e+1)
	return &Decomposition{
		LocalEps:  eps0,
		Upper:     []AtomSet{AtomSet{{R: g / 2, P: a, Q: b}, {R: g / 2, P: b, Q: a}}.Merge()},
		UpperSame: []AtomSet{{{R: g, P: 1, Q: 1}}},
	}
}

// DeclaredMech wraps a Declaration at its fixed eps0.
type DeclaredMech struct {
	// Decl is the declaration. Required.
	Decl *Declaration
	// Name is used by String. Defaults to "declared".
	Name string
}

// FixedEps0 implements Mechanism.
func (m DeclaredMech) FixedEps0() (float64, bool) { return m.Decl.Eps0, true }

// String implements Mechanism.
func (m DeclaredMech) String() string {
	if m.Name != "" {
		return m.Name
	}
	return "declared"
}

// Decompose implements Mechanism; eps0 is ignored (the declaration fixes it).
func (m DeclaredMech) Decompose(float64) (*Decomposition, error) {
	return Decompose(m.Decl)
}

// FuncMech is a mechanism family given by a function that returns its
// declaration at each eps0, e.g. a randomizer plugin's Declare call.
type FuncMech struct {
	// Name is returned by String. Required.
	Name string
	// Declare returns the declaration at eps0. Required.
	Declare func(eps0 float64) (*Declaration, error)
	// Eps0 fixes the local budget when > 0.
	Eps0 float64
}

// FixedEps0 implements Mechanism.
func (m FuncMech) FixedEps0() (float64, bool) { return m.Eps0, m.Eps0 > 0 }

// String implements Mechanism.
func (m FuncMech) String() string { return m.Name }

// Decompose implements Mechanism.
func (m FuncMech) Decompose(eps0 float64) (*Decomposition, error) {
	if m.Eps0 > 0 {
		eps0 = m.Eps0
	}
	if err := checkEps0(eps0); err != nil {
		return nil, err
	}
	d, err := m.Declare(eps0)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", m.Name, err)
	}
	if d.Eps0 > eps0*(1+1e-12) {
		return nil, fmt.Errorf("%w: %s declared eps0 = %v at budget %v", ErrInvalidDeclaration, m.Name, d.Eps0, eps0)
	}
	dec, err := Decompose(d)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", m.Name, err)
	}
	return dec, nil
}

func joinNames(ms []Mechanism) string {
	parts := make([]string, len(ms))
	for i, m := range ms {
		parts[i] = m.String()
	}
	return strings.Join(parts, ",")
}
