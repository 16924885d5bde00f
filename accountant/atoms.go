package accountant

import (
	"fmt"
	"math"
)

// AtomSet is the list of atoms of one neighbouring pair (or one lower-bound
// triple). The residual atom, weight 1 - sum R with p = q = 0, is implicit.
type AtomSet []Atom

// Gamma returns the blanket mass sum R of the set.
func (s AtomSet) Gamma() float64 {
	var g float64
	for _, a := range s {
		g += a.R
	}
	return g
}

// sums returns sum R, sum P and sum Q.
func (s AtomSet) sums() (r, p, q float64) {
	for _, a := range s {
		r += a.R
		p += a.P
		q += a.Q
	}
	return
}

// ratioTol is the relative tolerance under which two likelihood ratios are
// treated as equal when merging atoms: four ulps, so that ratios that are
// equal in exact arithmetic but were computed in a different order merge.
const ratioTol = 4 * 0x1p-52

func sameRatio(a, b float64) bool {
	if a == b {
		return true
	}
	return math.Abs(a-b) <= ratioTol*math.Max(math.Abs(a), math.Abs(b))
}

// Merge returns the simplified decomposition of s: atoms with zero blanket
// mass dropped (they carry no mass in the blanket), atoms with equal
// likelihood-ratio pairs (P/R, Q/R) merged by adding R, P and Q (Su et al.
// Thm 7; exact), sorted canonically. Atoms with R = 0 and P or Q > 0 cannot
// occur in a valid decomposition; Merge keeps them, last, so that
// validation can report them.
//
// "Equal" is within ratioTol of the first atom of the group, in two
// levels: the atoms sorted by P/R are cut into groups whose P/R is within
// ratioTol of the group's first, and each of those, sorted by Q/R, is cut
// the same way. Comparing with the group's first atom (never with the
// running sum, whose ratio moves as atoms are added) keeps every merged
// group within ratioTol of one point, however many atoms it holds, so the
// result does not depend on how many equal outputs a mechanism lists. The
// merged set's value differs from the unmerged one's by far less than the
// engine's relative safety margin (TestMergeNearEqualRatios).
func (s AtomSet) Merge() AtomSet {
	var m merger
	return m.merge(m.addSet(s))
}

// swap returns the set of the reversed pair (x', x).
func (s AtomSet) swap() AtomSet {
	out := make(AtomSet, len(s))
	for i, a := range s {
		out[i] = Atom{R: a.R, P: a.Q, Q: a.P}
	}
	return out
}

// sumTol is the tolerance on probability sums (docs/accounting.md §2).
const sumTol = 1e-12

// validate checks one atom set against eps0. lower selects the rules of a
// lower-bound triple (sum R = 1, R is itself a distribution of the
// randomizer, so P/R and Q/R are bounded by e^eps0 too). what names the set in
// errors.
func (s AtomSet) validate(eps0 float64, lower bool, what string) error {
	e := math.Exp(eps0) * (1 + 1e-12)
	r, p, q := s.sums()
	for i, a := range s {
		for _, f := range []struct {
			name string
			v    float64
		}{{"r", a.R}, {"p", a.P}, {"q", a.Q}} {
			if math.IsNaN(f.v) || math.IsInf(f.v, 0) || f.v < 0 {
				return fmt.Errorf("%w: %s atom %d: %s = %v, must be finite and >= 0", ErrInvalidDeclaration, what, i, f.name, f.v)
			}
		}
		if (a.P > 0) != (a.Q > 0) {
			return fmt.Errorf("%w: %s atom %d: p = %v and q = %v, an output possible under one input must be possible under the other (pure LDP)", ErrInvalidDeclaration, what, i, a.P, a.Q)
		}
		if a.R == 0 && a.P > 0 {
			return fmt.Errorf("%w: %s atom %d: r = 0 with p = %v > 0, the blanket must cover every output", ErrInvalidDeclaration, what, i, a.P)
		}
		if a.P > e*a.Q || a.Q > e*a.P {
			return fmt.Errorf("%w: %s atom %d: p/q = %v exceeds e^eps0 = %v", ErrInvalidDeclaration, what, i, math.Max(a.P/a.Q, a.Q/a.P), math.Exp(eps0))
		}
		if !lower && a.R > math.Min(a.P, a.Q)*(1+1e-12) {
			return fmt.Errorf("%w: %s atom %d: blanket mass r = %v exceeds min(p, q) = %v (r is the minimum over all inputs, so r <= p and r <= q)", ErrInvalidDeclaration, what, i, a.R, math.Min(a.P, a.Q))
		}
		if lower && (a.P > e*a.R || a.Q > e*a.R || a.R > e*a.P || a.R > e*a.Q) {
			return fmt.Errorf("%w: %s atom %d: ratio to r exceeds e^eps0 = %v", ErrInvalidDeclaration, what, i, math.Exp(eps0))
		}
	}
	if math.Abs(p-1) > sumTol || math.Abs(q-1) > sumTol {
		return fmt.Errorf("%w: %s: sum p = %.15g, sum q = %.15g, both must be 1 (tolerance %g)", ErrInvalidDeclaration, what, p, q, sumTol)
	}
	if lower && math.Abs(r-1) > sumTol {
		return fmt.Errorf("%w: %s: sum r = %.15g, must be 1 for a lower-bound triple", ErrInvalidDeclaration, what, r)
	}
	if !lower && (r > 1+sumTol || r <= 0) {
		return fmt.Errorf("%w: %s: blanket mass sum r = %.15g, must be in (0,1]", ErrInvalidDeclaration, what, r)
	}
	return nil
}

// dedupe merges every set and drops duplicates.
func dedupe(sets []AtomSet) []AtomSet {
	seen := make(map[string]bool, len(sets))
	out := make([]AtomSet, 0, len(sets))
	keys := newKeyer()
	for _, s := range sets {
		m := s.Merge()
		k := keys.key(m)
		if seen[k] {
			continue
		}
		seen[k] = true
		out = append(out, m)
	}
	return out
}
