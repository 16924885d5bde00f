package plugintest

import (
	"context"
	"fmt"
	"math"

	"github.com/blanket-dp/blanket/accountant"
	"github.com/blanket-dp/blanket/sdk"
)

// ratioTol is the relative tolerance on likelihood ratios, the accountant's
// own (accountant.Decompose of a matrix): closed forms evaluated in different
// orders differ by a few ulps, far below 1e-12.
const ratioTol = 1e-12

// matrixMaxCells bounds the rows × outputs the kit scans for the exact
// maximum likelihood ratio; larger (sparse) matrices are bounded by the
// accountant's validation alone.
const matrixMaxCells = 1 << 24

// checkDeclaration validates the declaration at each eps0 with the
// accountant (rows sum to 1, entries in [0,1], pure LDP, every ratio within
// e^eps0, atoms consistent) and computes the exact largest likelihood ratio
// itself: over the columns of a matrix, max_x R[x][y] / min_x R[x][y]; over
// the atoms of a declared pair, p/q, q/p, p/r and q/r, which must be at most
// e^eps0 (r is the smallest probability of the atom's outputs over all
// inputs, p and q two of them), and r <= p, r <= q (the accountant does not
// check these, and a blanket mass r above min(p, q) overstates the
// amplification). Lower-bound triples need r/p, r/q <= e^eps0 as well. A
// segments declaration is checked the same way at both ends of every
// bin's segment (the points (p/r, q/r) of its extreme outputs, which bound
// every output of the bin since the ratios are monotone along a segment)
// and at the bin's mean point (P/R, Q/R).
func (v *verifier) checkDeclaration(ctx context.Context, c *Check) {
	for _, eps0 := range v.opts.Eps0s {
		name := fmt.Sprintf("eps0=%g", eps0)
		d, err := v.declare(ctx, eps0)
		if err != nil {
			c.fail(name+" Declare", "%v", err)
			continue
		}
		switch {
		case d.Eps0 == eps0, d.Eps0 == 0 && d.Form == accountant.FormMatrix:
			c.pass(name+" eps0", "declared eps0 %v", d.Eps0)
		case d.Eps0 > 0 && d.Eps0 < eps0:
			c.pass(name+" eps0", "declares eps0 = %v, below the budget %v: the randomizer spends less than it may", d.Eps0, eps0)
		default:
			c.fail(name+" eps0", "declares eps0 = %v for budget %v", d.Eps0, eps0)
			continue
		}
		if (d.Tree != 0 || v.desc.Stateful) && v.treeDeclaration(c, name, eps0, d) {
			continue
		}
		if _, err := accountant.Decompose(d); err != nil {
			c.fail(name+" valid", "accountant rejects the %s declaration: %v", d.Form, err)
			continue
		}
		c.pass(name+" valid", "accountant accepts the %s declaration", d.Form)
		switch d.Form {
		case accountant.FormMatrix:
			v.matrixRatios(c, name, eps0, d.Matrix)
		case accountant.FormAtoms, accountant.FormSegments:
			v.atomRatios(c, name, eps0, d)
		default:
			c.pass(name+" ratios", "%s declaration: only eps0 is declared, and the accountant uses the generic clone bound", d.Form)
		}
		v.formsAgree(ctx, c, name, eps0, d)
	}
}

// matrixRatios checks the shape of a matrix and its largest likelihood
// ratio.
func (v *verifier) matrixRatios(c *Check, name string, eps0 float64, m *accountant.Matrix) {
	rows, outs := m.NumInputs(), m.NumOutputs()
	if v.desc.Input == sdk.InputCategorical {
		c.expect(rows == len(v.desc.Categories), name+" rows", "matrix has %d rows, the randomizer %d buckets", rows, len(v.desc.Categories))
	}
	if float64(rows)*float64(outs) > matrixMaxCells {
		c.skip(name+" ratios", "matrix of %d × %d: exact ratios checked by the accountant only", rows, outs)
		return
	}
	maxRatio, at := 1.0, -1
	for y := range outs {
		lo, hi := math.Inf(1), 0.0
		for x := range rows {
			p := m.At(x, y)
			lo, hi = min(lo, p), max(hi, p)
		}
		if hi == 0 {
			continue
		}
		if r := hi / lo; r > maxRatio {
			maxRatio, at = r, y
		}
	}
	v.ratioTest(c, name, eps0, maxRatio, fmt.Sprintf("output %d", at))
}

// atomRatios checks every atom of every declared pair and triple.
func (v *verifier) atomRatios(c *Check, name string, eps0 float64, d *accountant.Declaration) {
	maxRatio, where, blanket := 1.0, "", ""
	note := func(r float64, what string) {
		if r > maxRatio || math.IsNaN(r) {
			maxRatio, where = r, what
		}
	}
	for _, group := range []struct {
		kind  string
		sets  []accountant.DeclaredSet
		lower bool
	}{{"pair", d.Pairs, false}, {"triple", d.Triples, true}} {
		for i, s := range group.sets {
			for j, a := range segmentPoints(s) {
				at := fmt.Sprintf("%s %d (%s) %s", group.kind, i, s.Label, a.where)
				if j < len(s.Atoms) {
					at = fmt.Sprintf("%s %d (%s) atom %d", group.kind, i, s.Label, j)
				}
				if a.P == 0 && a.Q == 0 && a.R == 0 {
					continue
				}
				note(a.P/a.Q, at+" p/q")
				note(a.Q/a.P, at+" q/p")
				note(a.P/a.R, at+" p/r")
				note(a.Q/a.R, at+" q/r")
				if group.lower {
					note(a.R/a.P, at+" r/p")
					note(a.R/a.Q, at+" r/q")
				} else if blanket == "" && (a.R > a.P*(1+ratioTol) || a.R > a.Q*(1+ratioTol)) {
					blanket = fmt.Sprintf("%s: r = %v exceeds min(p, q) = %v; r is the smallest probability of its outputs over all inputs, so it cannot", at, a.R, min(a.P, a.Q))
				}
			}
		}
	}
	if blanket != "" {
		c.fail(name+" blanket", "%s", blanket)
	} else {
		c.pass(name+" blanket", "r <= min(p, q) in every pair atom")
	}
	v.ratioTest(c, name, eps0, maxRatio, where)
}

// ratioPoint is an atom, or a point of a bin (an end of its segment, as
// masses (1, p/r, q/r), or its mean), to check the ratios of.
type ratioPoint struct {
	accountant.Atom
	where string
}

// segmentPoints returns the atoms of s, then for each bin its two ends and
// its mean point.
func segmentPoints(s accountant.DeclaredSet) []ratioPoint {
	var out []ratioPoint
	for _, a := range s.Atoms {
		out = append(out, ratioPoint{Atom: a})
	}
	for j, b := range s.Bins {
		out = append(out,
			ratioPoint{accountant.Atom{R: 1, P: b.Lo[0], Q: b.Lo[1]}, fmt.Sprintf("bin %d low end", j)},
			ratioPoint{accountant.Atom{R: 1, P: b.Hi[0], Q: b.Hi[1]}, fmt.Sprintf("bin %d high end", j)},
			ratioPoint{accountant.Atom{R: b.R, P: b.P, Q: b.Q}, fmt.Sprintf("bin %d mean", j)})
	}
	return out
}

func (v *verifier) ratioTest(c *Check, name string, eps0, maxRatio float64, where string) {
	t := Test{Name: name + " ratios", Statistic: math.Log(maxRatio), Threshold: eps0}
	if maxRatio <= math.Exp(eps0)*(1+ratioTol) {
		t.Status = Pass
		t.Message = fmt.Sprintf("largest likelihood ratio e^%.6g <= e^eps0", math.Log(maxRatio))
	} else {
		t.Status = Fail
		t.Message = fmt.Sprintf("likelihood ratio e^%.6g at %s exceeds e^eps0 = e^%g", math.Log(maxRatio), where, eps0)
	}
	c.add(t)
}
