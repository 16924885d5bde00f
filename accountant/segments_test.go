package accountant_test

import (
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/blanket-dp/blanket/accountant"
)

// laplaceRow returns P(k | c) of the discrete Laplace mechanism on the
// centres {0..m} at rate lam: tanh(lam/2) e^(-lam |k - c|).
func laplaceRow(k, c int, lam float64) float64 {
	return math.Tanh(lam/2) * math.Exp(-lam*math.Abs(float64(k-c)))
}

// laplaceOutput is one output k of the pair (0, m) (or the triple with
// x3): its masses and ratio point.
type laplaceOutput struct {
	k       int
	r, p, q float64
}

// laplaceOutputs lists the outputs k in [-tail, m+tail] of the pair
// (x, x') = (0, m) with r the blanket min_c P(k|c) (x3 < 0) or P(k|x3), by
// brute force over the centres: an independent computation of what a
// plugin would declare in closed form. The truncated tails carry less than
// e^(-lam tail) of mass.
func laplaceOutputs(m int, lam float64, tail int, x3 int) []laplaceOutput {
	var out []laplaceOutput
	for k := -tail; k <= m+tail; k++ {
		r := math.Inf(1)
		if x3 >= 0 {
			r = laplaceRow(k, x3, lam)
		} else {
			for c := 0; c <= m; c++ {
				r = math.Min(r, laplaceRow(k, c, lam))
			}
		}
		out = append(out, laplaceOutput{k, r, laplaceRow(k, 0, lam), laplaceRow(k, m, lam)})
	}
	return out
}

// exactSet is one atom per output (Merge joins the equal-ratio tails).
func exactSet(outs []laplaceOutput) accountant.AtomSet {
	var s accountant.AtomSet
	for _, o := range outs {
		s = append(s, accountant.Atom{R: o.r, P: o.p, Q: o.q})
	}
	return s
}

// binned groups the outputs of the interior [0, m] into bins of about
// width outputs, never across the turn of the segments at m/2 (the points
// of k <= m/2 lie on one straight line, those of k >= m/2 on another), and
// keeps each tail as exact atoms.
func binned(outs []laplaceOutput, m, width int) accountant.DeclaredSet {
	var set accountant.DeclaredSet
	var cur []laplaceOutput
	flush := func() {
		if len(cur) == 0 {
			return
		}
		var b accountant.Bin
		for _, o := range cur {
			b.R += o.r
			b.P += o.p
			b.Q += o.q
		}
		first, last := cur[0], cur[len(cur)-1]
		b.Lo = [2]float64{first.p / first.r, first.q / first.r}
		b.Hi = [2]float64{last.p / last.r, last.q / last.r}
		set.Bins = append(set.Bins, b)
		cur = nil
	}
	for _, o := range outs {
		switch {
		case o.k < 0 || o.k > m:
			set.Atoms = append(set.Atoms, accountant.Atom{R: o.r, P: o.p, Q: o.q})
			continue
		case o.k == m/2+1:
			flush()
		}
		cur = append(cur, o)
		if len(cur) == width || o.k == m {
			flush()
		}
	}
	return set
}

func segmentsDecl(eps0 float64, pair, triple accountant.DeclaredSet) *accountant.Declaration {
	return &accountant.Declaration{Eps0: eps0, Form: accountant.FormSegments,
		Pairs: []accountant.DeclaredSet{pair}, Triples: []accountant.DeclaredSet{triple}}
}

// TestSegmentsAgainstEnumeration: on a discrete Laplace with 9 centres,
// bins one output wide give exactly the exact atoms; wider bins give an
// upper bound that is never below the exact one and only falls as the
// bins are refined, and a lower bound never above the exact triple's and
// only rising as they are refined, by exact enumeration of the n-fold sums.
func TestSegmentsAgainstEnumeration(t *testing.T) {
	const m, eps0, tail = 8, 2.0, 400
	lam := eps0 / (m + 1)
	up := laplaceOutputs(m, lam, tail, -1)
	low := laplaceOutputs(m, lam, tail, m/2)
	exactUp, exactLow := exactSet(up).Merge(), exactSet(low).Merge()

	decompose := func(width int) (upper, lower accountant.AtomSet) {
		d := segmentsDecl(eps0, binned(up, m, width), binned(low, m, width))
		dec, err := accountant.Decompose(d)
		if err != nil {
			t.Fatalf("width %d: %v", width, err)
		}
		return dec.Upper[0], dec.Lower[0]
	}
	u1, l1 := decompose(1)
	for _, n := range []int{2, 5} {
		for _, eps := range []float64{0.1, 0.5, 1} {
			if a, b := exactDelta(u1, n, eps), exactDelta(exactUp, n, eps); relErr(a, b) > 1e-9 {
				t.Errorf("n=%d eps=%g: one-output bins give upper delta %g, exact atoms %g", n, eps, a, b)
			}
			if a, b := exactDelta(l1, n, eps), exactDelta(exactLow, n, eps); relErr(a, b) > 1e-9 {
				t.Errorf("n=%d eps=%g: one-output bins give lower delta %g, exact atoms %g", n, eps, a, b)
			}
		}
	}
	const slack = 1e-12 // float summation order
	for _, n := range []int{2, 3, 6} {
		for _, eps := range []float64{0.05, 0.3, 1} {
			prevUp, prevLow := math.Inf(1), 0.0
			for _, width := range []int{4, 2, 1} { // coarse to fine, each bin a union of finer ones
				u, l := decompose(width)
				du, dl := exactDelta(u, n, eps), exactDelta(l, n, eps)
				if du > prevUp*(1+slack) {
					t.Errorf("n=%d eps=%g: refining to width %d raised the upper bound %g -> %g", n, eps, width, prevUp, du)
				}
				if dl < prevLow*(1-slack) {
					t.Errorf("n=%d eps=%g: refining to width %d lowered the lower bound %g -> %g", n, eps, width, prevLow, dl)
				}
				prevUp, prevLow = du, dl
			}
			if exact := exactDelta(exactUp, n, eps); prevUp < exact*(1-slack) {
				t.Errorf("n=%d eps=%g: binned upper %g below the exact %g", n, eps, prevUp, exact)
			}
			u5, l5 := decompose(5)
			if du, exact := exactDelta(u5, n, eps), exactDelta(exactUp, n, eps); du < exact*(1-slack) {
				t.Errorf("n=%d eps=%g: coarse upper %g below the exact %g", n, eps, du, exact)
			}
			if dl, exact := exactDelta(l5, n, eps), exactDelta(exactLow, n, eps); dl > exact*(1+slack) {
				t.Errorf("n=%d eps=%g: coarse lower %g above the exact %g", n, eps, dl, exact)
			}
		}
	}
	// The coarse upper bound is strictly looser somewhere: the test can
	// tell a split from the exact law.
	u5, _ := decompose(5)
	if a, b := exactDelta(u5, 3, 0.3), exactDelta(exactUp, 3, 0.3); !(a > b*(1+1e-6)) {
		t.Errorf("coarse bins give %g, exact %g: expected a strictly larger upper bound", a, b)
	}
}

// TestSegmentsEpsilon: the engine's eps for binned declarations brackets
// the exact atoms' at n = 1000.
func TestSegmentsEpsilon(t *testing.T) {
	const m, eps0, tail = 16, 3.0, 400
	lam := eps0 / (m + 1)
	up := laplaceOutputs(m, lam, tail, -1)
	low := laplaceOutputs(m, lam, tail, m/2)
	exact := &accountant.Declaration{Eps0: eps0, Form: accountant.FormAtoms,
		Pairs:   []accountant.DeclaredSet{{Atoms: exactSet(up)}},
		Triples: []accountant.DeclaredSet{{Atoms: exactSet(low)}}}
	ex, err := accountant.Epsilon(accountant.DeclaredMech{Decl: exact}, eps0, 1000, 1e-6)
	if err != nil {
		t.Fatal(err)
	}
	coarse, err := accountant.Epsilon(accountant.DeclaredMech{Decl: segmentsDecl(eps0, binned(up, m, 4), binned(low, m, 4))}, eps0, 1000, 1e-6)
	if err != nil {
		t.Fatal(err)
	}
	if !(coarse.Upper >= ex.Upper*(1-1e-3)) || !(coarse.Lower <= ex.Lower*(1+1e-3)) || !(coarse.Lower > 0) {
		t.Fatalf("binned eps [%g, %g] does not bracket the exact atoms' [%g, %g]", coarse.Lower, coarse.Upper, ex.Lower, ex.Upper)
	}
}

// TestSegmentsValidation: bad bins are rejected with errors naming them.
func TestSegmentsValidation(t *testing.T) {
	const m, eps0, tail = 8, 2.0, 400
	lam := eps0 / (m + 1)
	good := func() *accountant.Declaration {
		return segmentsDecl(eps0, binned(laplaceOutputs(m, lam, tail, -1), m, 3), binned(laplaceOutputs(m, lam, tail, m/2), m, 3))
	}
	if err := accountant.Validate(good()); err != nil {
		t.Fatalf("good declaration: %v", err)
	}
	b, err := json.Marshal(good())
	if err != nil {
		t.Fatal(err)
	}
	if d, err := accountant.DecodeDeclaration(b); err != nil || d.Form != accountant.FormSegments || len(d.Pairs[0].Bins) != len(good().Pairs[0].Bins) {
		t.Fatalf("JSON round trip: %v", err)
	}
	for _, c := range []struct {
		name, want string
		edit       func(d *accountant.Declaration)
	}{
		{"mean off the segment", "not on the segment", func(d *accountant.Declaration) {
			b := &d.Pairs[0].Bins[0]
			b.Lo[1] *= 1.01
			b.Hi[1] *= 1.01
		}},
		{"mean beyond an end", "not on the segment", func(d *accountant.Declaration) {
			b := &d.Pairs[0].Bins[0]
			b.Hi = [2]float64{(b.Lo[0] + b.P/b.R) / 2, b.Lo[1]}
		}},
		{"end below the blanket", "below 1", func(d *accountant.Declaration) {
			b := &d.Pairs[0].Bins[1]
			b.Hi[0] = 0.5
		}},
		{"ratio beyond eps0", "exceeds e^eps0", func(d *accountant.Declaration) {
			d.Eps0 = 1
		}},
		{"mass lost", "sum p", func(d *accountant.Declaration) {
			d.Pairs[0].Bins = d.Pairs[0].Bins[1:]
		}},
		{"no blanket mass", "must have blanket mass", func(d *accountant.Declaration) {
			d.Triples[0].Bins[0].R = 0
		}},
		{"bins in the atoms form", "only form", func(d *accountant.Declaration) {
			d.Form = accountant.FormAtoms
		}},
	} {
		d := good()
		c.edit(d)
		err := accountant.Validate(d)
		if !errors.Is(err, accountant.ErrInvalidDeclaration) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one containing %q", c.name, err, c.want)
		}
	}
}

// TestSegmentsFarEnd (second review of issue 10): a bin whose segment
// reaches a far end must still have its mean point on the segment to
// relative precision. Binary randomized response at eps0 = ln 2 (points
// (2, 1) and (1, 2), blanket 1/3 each) declared as two bins from (1.5,
// 1.5) to (1e15, 1e15): both means are 0.71 off their segments; with a
// tolerance scaled by the far end both were split onto (1.5, 1.5) and the
// upper bound came out 0 (the exact atoms give 0.093).
func TestSegmentsFarEnd(t *testing.T) {
	eps0 := math.Log(2)
	far, mid := [2]float64{1e15, 1e15}, [2]float64{1.5, 1.5}
	bad := &accountant.Declaration{Eps0: eps0, Form: accountant.FormSegments, Pairs: []accountant.DeclaredSet{{Bins: []accountant.Bin{
		{R: 1.0 / 3, P: 2.0 / 3, Q: 1.0 / 3, Lo: mid, Hi: far},
		{R: 1.0 / 3, P: 1.0 / 3, Q: 2.0 / 3, Lo: mid, Hi: far},
	}}}}
	if err := accountant.Validate(bad); err == nil {
		t.Fatal("a bin whose mean point is off its segment was accepted")
	}
	// A mean point just beyond an end, by a relative rounding error, is
	// still accepted (split onto that end).
	ok := &accountant.Declaration{Eps0: eps0, Form: accountant.FormSegments, Pairs: []accountant.DeclaredSet{{Bins: []accountant.Bin{
		{R: 1.0 / 3, P: 2.0 / 3 * (1 + 1e-15), Q: 1.0 / 3, Lo: [2]float64{1.5, 1}, Hi: [2]float64{2, 1}},
		{R: 1.0 / 3, P: 1.0 / 3, Q: 2.0 / 3, Lo: [2]float64{1, 2}, Hi: [2]float64{1, 2}},
	}}}}
	if err := accountant.Validate(ok); err != nil {
		t.Fatalf("a mean point beyond an end by rounding: %v", err)
	}
}
