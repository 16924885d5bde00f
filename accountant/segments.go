package accountant

// Segments: a declaration form for continuous or huge output spaces.
//
// A pair (x, x') with blanket r determines, for every output y, the
// likelihood-ratio point v(y) = (p_y/r_y, q_y/r_y), and the upper bound of
// docs/accounting.md §3 depends on the mechanism only through the law of that point
// under the blanket: at every eps the privacy amplification variable is
// Z = <v, (1, -e^eps)>, a linear function of v, drawn with probability r_y
// (and Z = 0 on the residual). A mechanism with too many outputs to list
// (Laplace on a 2^40-point grid) groups them into bins; the outputs of a
// bin have their points on one straight segment [lo, hi] of the ratio
// plane, and the declaration gives for each bin its masses R = sum r_y,
// P = sum p_y, Q = sum q_y and the segment. The bin's mean point
// m = (P/R, Q/R) is the r-weighted mean of its outputs' points, so it lies
// on the segment too: m = lo + t(hi - lo) with t in [0, 1].
//
// Upper bound (split). Replace the bin by two atoms at the segment's ends,
// with blanket masses (1-t)R at lo and tR at hi. Their mean point is m, and
// every output of the bin, at lo + s(hi - lo), is itself the mean of the
// two-point law (1-s, s) on {lo, hi}; so the split law is a mean-preserving
// spread of the bin's law of v (a martingale coupling: draw an output,
// then an end with probabilities (1-s, s)). Because Z is linear in v, the
// split law of Z is a mean-preserving spread of the true one at every eps
// at once, hence larger in the convex order. Convex order is closed under
// sums of independent copies and (.)_+ is convex, so
// (1/n) E[(Z_1 + ... + Z_n)_+] can only grow: the bound stays an upper
// bound. The same holds inside the compositions: a joint product atom has
// the point v1 * v2 (coordinatewise), linear in v1 for a fixed independent
// v2, so a spread of one factor spreads the product; a parallel mixture of
// spread components is a spread of the mixture; the unchanged-attribute
// sets (r, p, p) are the first coordinate, spread the same way. The split
// atoms have the masses of the bin (sum of P and Q exactly preserved up to
// rounding), and satisfy the pair rules (p/r, q/r >= 1, p/q within
// e^eps0) because they are the segment's ends, which are validated, and
// the rules are linear in v.
//
// Lower bound (collapse). For a lower-bound triple (docs/accounting.md §4) the
// same bin becomes one atom (R, P, Q) at its mean point: the true law is a
// mean-preserving spread of the collapsed one (Jensen's inequality in the
// other direction), so the collapsed divergence is at most the exact one of
// the triple, itself at most the mechanism's: the bound stays a lower bound.
// Products of collapsed independent factors are conditional expectations
// of the product given the bins, so joint lower bounds stay sound.
//
// Refinement. Splitting a bin into two sub-bins at a point c of its
// segment can only lower the upper bound and raise the lower bound: the
// coarse split law is the fine one with its atom at c spread onto lo and
// hi, and the fine collapsed law is a spread of the coarse collapsed atom.
// The tests check both against exact enumeration of a small grid.

import (
	"fmt"
	"math"
)

// segmentTol is the relative tolerance on a bin's mean point lying on its
// segment: the declared points and masses are computed in floating point
// from closed forms, far more accurately than this.
const segmentTol = 1e-12

// checkBin validates one bin and returns the position t in [0, 1] of its
// mean point on the segment. lower selects the triple rules for the
// segment's ends.
func checkBin(b Bin, eps0 float64, lower bool, what string) (float64, error) {
	for _, f := range []struct {
		name string
		v    float64
	}{{"r", b.R}, {"p", b.P}, {"q", b.Q}, {"lo[0]", b.Lo[0]}, {"lo[1]", b.Lo[1]}, {"hi[0]", b.Hi[0]}, {"hi[1]", b.Hi[1]}} {
		if math.IsNaN(f.v) || math.IsInf(f.v, 0) || f.v < 0 {
			return 0, fmt.Errorf("%w: %s: %s = %v, must be finite and >= 0", ErrInvalidDeclaration, what, f.name, f.v)
		}
	}
	if !(b.R > 0) {
		return 0, fmt.Errorf("%w: %s: r = %v, a bin must have blanket mass", ErrInvalidDeclaration, what, b.R)
	}
	for _, end := range []struct {
		name string
		v    [2]float64
	}{{"lo", b.Lo}, {"hi", b.Hi}} {
		if err := checkRatioPoint(end.v, eps0, lower); err != nil {
			return 0, fmt.Errorf("%w: %s: end %s = %v: %v", ErrInvalidDeclaration, what, end.name, end.v, err)
		}
	}
	m := [2]float64{b.P / b.R, b.Q / b.R}
	if math.IsInf(m[0], 0) || math.IsInf(m[1], 0) {
		return 0, fmt.Errorf("%w: %s: mean point (p/r, q/r) = %v is not finite", ErrInvalidDeclaration, what, m)
	}
	// The split point Lo + t(Hi - Lo), t the projection of the mean point
	// clamped to the segment, must be the mean point up to segmentTol
	// relative to each coordinate's own size: then the split keeps the
	// bin's masses (P, Q) to that precision whatever the segment's length
	// (a tolerance scaled by the ends would let a far end hide a mean point
	// off the segment, and the split would then not be a spread).
	d := [2]float64{b.Hi[0] - b.Lo[0], b.Hi[1] - b.Lo[1]}
	t := 0.0
	if len2 := d[0]*d[0] + d[1]*d[1]; len2 > 0 {
		t = min(max(((m[0]-b.Lo[0])*d[0]+(m[1]-b.Lo[1])*d[1])/len2, 0), 1)
	}
	for i := range 2 {
		at := b.Lo[i] + t*d[i]
		if math.Abs(at-m[i]) > segmentTol*math.Max(math.Abs(m[i]), math.Abs(at)) {
			return 0, fmt.Errorf("%w: %s: mean point (p/r, q/r) = %v is not on the segment from %v to %v (nearest point %v): the outputs of a bin must lie on its segment", ErrInvalidDeclaration, what, m, b.Lo, b.Hi, [2]float64{b.Lo[0] + t*d[0], b.Lo[1] + t*d[1]})
		}
	}
	return t, nil
}

// checkRatioPoint checks the rules of docs/accounting.md §2 on one ratio point
// v = (p/r, q/r): pure LDP (p > 0 exactly when q > 0) and p/q within
// e^eps0; for a pair the blanket rule p/r, q/r >= 1 (r is the minimum over
// the inputs), for a triple p/r and q/r within [e^-eps0, e^eps0].
func checkRatioPoint(v [2]float64, eps0 float64, lower bool) error {
	e := math.Exp(eps0) * (1 + 1e-12)
	switch {
	case (v[0] > 0) != (v[1] > 0):
		return fmt.Errorf("an output possible under one input must be possible under the other (pure LDP)")
	case v[0] > e*v[1] || v[1] > e*v[0]:
		return fmt.Errorf("p/q exceeds e^eps0 = %v", math.Exp(eps0))
	case !lower && (v[0] < 1-1e-12 || v[1] < 1-1e-12):
		return fmt.Errorf("p/r or q/r below 1 (r is the minimum over all inputs, so r <= p and r <= q)")
	case lower && (v[0] > e || v[1] > e || v[0]*e < 1 || v[1]*e < 1):
		return fmt.Errorf("ratio to r beyond e^eps0 = %v", math.Exp(eps0))
	}
	return nil
}

// segmentAtoms returns the atoms of a segments set: its exact atoms and
// each bin split onto its segment's ends (lower false: the upper bound) or
// collapsed to its mean point (lower true).
func segmentAtoms(s DeclaredSet, eps0 float64, lower bool, what string) (AtomSet, error) {
	out := append(AtomSet(nil), s.Atoms...)
	for i, b := range s.Bins {
		t, err := checkBin(b, eps0, lower, fmt.Sprintf("%s bin %d", what, i))
		if err != nil {
			return nil, err
		}
		if lower {
			out = append(out, Atom{R: b.R, P: b.P, Q: b.Q})
			continue
		}
		wHi := t * b.R
		wLo := b.R - wHi
		out = append(out, Atom{R: wLo, P: wLo * b.Lo[0], Q: wLo * b.Lo[1]}, Atom{R: wHi, P: wHi * b.Hi[0], Q: wHi * b.Hi[1]})
	}
	return out, nil
}
