package plugintest

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"

	"gonum.org/v1/gonum/mathext"

	"github.com/blanket-dp/blanket/accountant"
	"github.com/blanket-dp/blanket/sdk"
)

// The frequency check of an atoms declaration, at any size.
//
// An atoms declaration says, for each declared set (a pair (x, x') or a
// triple (x, x', x3)), how much mass each atom, a group of outputs, has
// under x (p), under x' (q) and, for a pair, as blanket (r, the sum over
// the atom's outputs of their smallest probability over all inputs), or,
// for a triple, under x3 (r). It does not say which output is in which
// atom; a randomizer that implements sdk.AtomMapper does. The kit then
// draws Samples reports at each input of the set, maps them to atoms, and
// tests:
//
//   - the atoms' counts under x, x' (and x3) against p, q (and r) by
//     Pearson's chi-square, as for a matrix row: a sampler that runs at
//     another eps0 than it declares moves mass between atoms whose
//     likelihood ratios differ, and fails;
//   - the blanket of a pair (the blanket test): every input z gives each
//     atom at least its blanket mass, P_z(atom j) = sum_{y in j} R[z][y]
//     >= sum_{y in j} min_x R[x][y] = r_j. The kit draws at up to two
//     inputs besides x and x' and fails when the one-sided Clopper-Pearson
//     upper bound of P_z(atom j) falls below r_j: the declared blanket is
//     then larger than the sampler gives, at the stated confidence. (This
//     is a necessary condition only: an atom's minimum over inputs is
//     taken per output, which no sample of atom counts can see; the
//     comparison of the atoms with the full matrix on a small
//     configuration, where both are declared, is exact.)
//
// The sets are taken at their declared Inputs, or, when a set names none
// (it then holds for every choice of distinct inputs, as k-RR's does), at
// the first buckets of a categorical randomizer (0 and 1, and 2 for a
// triple; with 2 buckets a triple's x3 is x').

// atomSet is one declared set with the inputs it is drawn at.
type atomSet struct {
	index  int // into Pairs, then Triples
	label  string
	set    accountant.DeclaredSet
	triple bool
	inputs []float64 // passed to Atoms
	cases  []Case    // x, x' (and x3), to draw
}

// maxAtomSets bounds the declared sets the kit draws per eps0.
const maxAtomSets = 4

// atomSets returns the declared sets of d to draw, and for each set that
// cannot be drawn why.
func (v *verifier) atomSets(d *accountant.Declaration) (sets []atomSet, skipped []string) {
	all := make([]atomSet, 0, len(d.Pairs)+len(d.Triples))
	for i, s := range d.Pairs {
		all = append(all, atomSet{index: i, label: fmt.Sprintf("pair %d", i), set: s})
	}
	for i, s := range d.Triples {
		all = append(all, atomSet{index: len(d.Pairs) + i, label: fmt.Sprintf("triple %d", i), set: s, triple: true})
	}
	for _, a := range all {
		if len(sets) == maxAtomSets {
			skipped = append(skipped, fmt.Sprintf("%s and the sets after it: the kit draws at most %d sets", a.label, maxAtomSets))
			break
		}
		if s := a.set.Label; s != "" {
			a.label += " (" + s + ")"
		}
		var err error
		a.inputs, a.cases, err = v.setCases(a.set, a.triple)
		if err != nil {
			skipped = append(skipped, fmt.Sprintf("%s: %v", a.label, err))
			continue
		}
		sets = append(sets, a)
	}
	return sets, skipped
}

// setCases returns the inputs of a declared set as Atoms takes them and as
// cases to draw.
func (v *verifier) setCases(s accountant.DeclaredSet, triple bool) ([]float64, []Case, error) {
	want := 2
	if triple {
		want = 3
	}
	inputs := slices.Clone(s.Inputs)
	if v.desc.Input == sdk.InputReal {
		if len(inputs) != want {
			return nil, nil, fmt.Errorf("declares %d inputs, not its %d (DeclaredSet.Inputs)", len(inputs), want)
		}
		cases := make([]Case, want)
		for i, x := range inputs {
			cases[i] = Case{Real: x}
		}
		return inputs, cases, nil
	}
	k := len(v.desc.Categories)
	if len(inputs) == 0 {
		inputs = []float64{0, 1}
		if triple {
			inputs = append(inputs, min(2, float64(k-1)))
		}
	}
	if len(inputs) != want {
		return nil, nil, fmt.Errorf("declares %d inputs, not its %d (DeclaredSet.Inputs)", len(inputs), want)
	}
	cases := make([]Case, want)
	for i, x := range inputs {
		b := int(x)
		if float64(b) != x || b < 0 || b >= k {
			return nil, nil, fmt.Errorf("input %d is %v, not a bucket index in [0, %d)", i, x, k)
		}
		cases[i] = Case{Category: v.desc.Categories[b], Row: b}
	}
	return inputs, cases, nil
}

// atomMap returns the mapping of reports to the atoms of set a, or why
// there is none (skip).
func (v *verifier) atomMap(ctx context.Context, eps0 float64, a atomSet) (f outputsFunc, skip string, err error) {
	am, ok := v.r.(sdk.AtomMapper)
	if !ok {
		return nil, "the randomizer does not map reports to its atoms: implement sdk.AtomMapper so that its sampler is checked at this size", nil
	}
	perr := guard(func() error {
		_, err := am.Atoms(ctx, eps0, a.index, a.inputs, nil)
		return err
	})
	switch {
	case errors.Is(perr, errors.ErrUnsupported):
		return nil, "the plugin does not map reports to its atoms (RPC Atoms): implement sdk.AtomMapper so that its sampler is checked at this size", nil
	case perr != nil:
		return nil, "", fmt.Errorf("the randomizer's Atoms for %s at inputs %v: %v", a.label, a.inputs, perr)
	}
	return func(ctx context.Context, eps0 float64, reports [][]byte) (out []int, err error) {
		err = guard(func() error {
			out, err = am.Atoms(ctx, eps0, a.index, a.inputs, reports)
			return err
		})
		return out, err
	}, "", nil
}

// atomFrequencies runs the atoms tests at eps0 with false-failure budget
// alpha.
func (v *verifier) atomFrequencies(ctx context.Context, c *Check, name string, eps0 float64, d *accountant.Declaration, alpha float64) {
	sets, skipped := v.atomSets(d)
	for _, s := range skipped {
		c.skip(name+" atoms", "%s", s)
	}
	if len(sets) == 0 {
		if len(skipped) == 0 {
			c.skip(name+" atoms", "the declaration has no pair")
		}
		return
	}
	type draw struct {
		set   atomSet
		what  string
		cs    Case
		probs []float64
	}
	type blanket struct {
		set atomSet
		cs  Case
	}
	var draws []draw
	var blankets []blanket
	maps := map[int]outputsFunc{}
	for _, a := range sets {
		f, skip, err := v.atomMap(ctx, eps0, a)
		if !c.usable(name+" "+a.label, err, skip) {
			continue
		}
		maps[a.index] = f
		masses := [3][]float64{}
		for _, at := range a.set.Atoms {
			masses[0] = append(masses[0], at.P)
			masses[1] = append(masses[1], at.Q)
			masses[2] = append(masses[2], at.R)
		}
		for _, b := range a.set.Bins {
			masses[0] = append(masses[0], b.P)
			masses[1] = append(masses[1], b.Q)
			masses[2] = append(masses[2], b.R)
		}
		for i, what := range []string{"x", "x'", "x3"}[:len(a.cases)] {
			if i == 2 && a.cases[2] == a.cases[1] {
				// x3 = x': its law is q's, drawn already, so the triple's
				// r must equal its q atom by atom.
				for j, r := range masses[2] {
					if q := masses[1][j]; math.Abs(r-q) > ratioTol*math.Max(r, q) {
						c.fail(fmt.Sprintf("%s %s x3 = x'", name, a.label), "atom %d declares r = %.12g under x3 but q = %.12g under x' = x3: with x3 = x' they are the same law", j, r, q)
						break
					}
				}
				continue
			}
			draws = append(draws, draw{a, what, a.cases[i], masses[i]})
		}
		if !a.triple {
			for _, z := range v.thirdInputs(a) {
				blankets = append(blankets, blanket{a, z})
			}
		}
	}
	tests := len(draws) + len(blankets)
	first := len(c.Tests)
	defer func() {
		for i := first; i < len(c.Tests); i++ {
			c.Tests[i].Atoms = c.Tests[i].Status != Skip
		}
	}()
	for _, dr := range draws {
		v.frequencyTest(ctx, c, eps0, dr.probs, maps[dr.set.index], mappingSet(dr.set.index), "", fmt.Sprintf("%s %s %s = %s (%d atoms)", name, dr.set.label, dr.what, v.caseLabel(dr.cs), len(dr.probs)), dr.cs, alpha/float64(tests))
		if ctx.Err() != nil {
			return
		}
	}
	for _, b := range blankets {
		v.blanketTest(ctx, c, eps0, b.set, maps[b.set.index], b.cs, alpha/float64(tests))
		if ctx.Err() != nil {
			return
		}
	}
}

// thirdInputs returns up to two inputs other than the pair's to test its
// blanket at: the middle and last buckets of a categorical randomizer,
// or the range's ends and middle of a real one, skipping the pair's own.
func (v *verifier) thirdInputs(a atomSet) []Case {
	var out []Case
	if v.desc.Input == sdk.InputCategorical {
		k := len(v.desc.Categories)
		for _, b := range []int{k / 2, k - 1, 2, 3} {
			if len(out) == 2 {
				break
			}
			if b < k && !slices.ContainsFunc(a.cases, func(c Case) bool { return c.Row == b }) && !slices.ContainsFunc(out, func(c Case) bool { return c.Row == b }) {
				out = append(out, Case{Category: v.desc.Categories[b], Row: b})
			}
		}
		return out
	}
	for _, x := range []float64{(v.desc.Lo + v.desc.Hi) / 2, v.desc.Hi, v.desc.Lo} {
		if len(out) == 2 {
			break
		}
		if !slices.ContainsFunc(a.cases, func(c Case) bool { return c.Real == x }) && !slices.ContainsFunc(out, func(c Case) bool { return c.Real == x }) {
			out = append(out, Case{Real: x})
		}
	}
	return out
}

// caseLabel names a case's input.
func (v *verifier) caseLabel(cs Case) string {
	if v.desc.Input == sdk.InputCategorical {
		return fmt.Sprintf("%q", cs.Category)
	}
	return fmt.Sprint(cs.Real)
}

// blanketTest draws Samples reports at input z, maps them to the atoms of
// pair a, and fails when some atom's Clopper-Pearson upper bound at level
// 1 - alpha/atoms is below its declared blanket mass r.
func (v *verifier) blanketTest(ctx context.Context, c *Check, eps0 float64, a atomSet, output outputsFunc, z Case, alpha float64) {
	name := fmt.Sprintf("eps0=%g %s blanket at %s", eps0, a.label, v.caseLabel(z))
	rs := make([]float64, 0, len(a.set.Atoms)+len(a.set.Bins))
	for _, at := range a.set.Atoms {
		rs = append(rs, at.R)
	}
	for _, b := range a.set.Bins {
		rs = append(rs, b.R)
	}
	reports, err := v.randomizeAll(ctx, eps0, v.repeat(z, v.opts.Samples))
	if err != nil {
		c.fail(name, "Randomize: %v", err)
		return
	}
	ys, err := output(ctx, eps0, reports)
	if err == nil && len(ys) != len(reports) {
		err = fmt.Errorf("%d atoms for %d reports", len(ys), len(reports))
	}
	if err != nil {
		c.fail(name, "mapping reports to atoms: %v", err)
		return
	}
	counts := make([]int64, len(rs))
	for i, y := range ys {
		if y < 0 || y >= len(rs) {
			c.fail(name, "report %d (%x) maps to atom %d of %d", i, reports[i], y, len(rs))
			return
		}
		counts[y]++
	}
	level := alpha / float64(len(rs))
	n := int64(len(reports))
	worst, worstGap := -1, 0.0
	pValue := 1.0 // the smallest one-sided p-value, P(Binomial(n, r_j) <= count_j)
	for j, r := range rs {
		if r == 0 {
			continue
		}
		if counts[j] < n {
			pValue = min(pValue, mathext.RegIncBeta(float64(n-counts[j]), float64(counts[j]+1), 1-min(r, 1)))
		}
		ub := cpUpper(counts[j], n, level)
		if gap := r*(1-ratioTol) - ub; gap > 0 && (worst < 0 || gap/r > worstGap) {
			worst, worstGap = j, gap/r
		}
	}
	// Each atom is tested at alpha/len(rs): the test's p-value is the
	// smallest atom's times the number of atoms (Bonferroni), comparable
	// with the test's alpha.
	t := Test{Name: name, Alpha: alpha, PValue: min(1, pValue*float64(len(rs)))}
	if worst < 0 {
		t.Status = Pass
		t.Message = fmt.Sprintf("%d reports give every atom at least its declared blanket mass", n)
	} else {
		ub := cpUpper(counts[worst], n, level)
		t.Status = Fail
		t.Statistic, t.Threshold = ub, rs[worst]
		t.Message = fmt.Sprintf("atom %d declares blanket mass r = %.6g, but %s draws it %d times in %d (at most %.6g at confidence 1-%.2g): the declared blanket is larger than the sampler gives (an overstated blanket claims more amplification than the mechanism has)", worst, rs[worst], v.caseLabel(z), counts[worst], n, ub, level)
	}
	c.add(t)
}

// cpUpper is the one-sided Clopper-Pearson upper confidence bound, at
// level 1 - alpha, on a binomial probability from k successes in n trials:
// the p with P(Binomial(n, p) <= k) = alpha; 1 - alpha^(1/n) when k = 0,
// 1 when k = n. The binomial tail is gonum's regularized incomplete beta,
// P(Binomial(n, p) <= k) = I_{1-p}(n-k, k+1), inverted by bisection
// (cpSolve), which keeps the end where the tail is at most alpha: the
// bound returned is never below the exact one by more than the tail's
// rounding. gonum's own inverse (InvRegIncBeta) is wrong by orders of
// magnitude at the kit's levels when k is small (cpUpper(0, 10^4, 7e-9)
// came out near 1 instead of 0.0019, blinding the privacy audit to its
// strongest evidence, a cell one input never draws); TestCPBounds checks
// these against exact binomial sums and the closed forms.
func cpUpper(k, n int64, alpha float64) float64 {
	switch {
	case k >= n:
		return 1
	case k <= 0:
		return -math.Expm1(math.Log(alpha) / float64(n))
	}
	tail := func(p float64) float64 { return mathext.RegIncBeta(float64(n-k), float64(k+1), 1-p) }
	// tail falls from 1 to 0 as p grows: the smallest p with tail <= alpha.
	return cpSolve(func(p float64) bool { return tail(p) <= alpha }, true)
}

// cpLower is the one-sided Clopper-Pearson lower confidence bound, at
// level 1 - alpha: the p with P(Binomial(n, p) >= k) = alpha; 0 when
// k = 0, alpha^(1/n) when k = n. P(Binomial(n, p) >= k) = I_p(k, n-k+1),
// inverted by bisection like cpUpper, keeping the end where the tail is
// at most alpha.
func cpLower(k, n int64, alpha float64) float64 {
	switch {
	case k <= 0:
		return 0
	case k >= n:
		return math.Exp(math.Log(alpha) / float64(n))
	}
	tail := func(p float64) float64 { return mathext.RegIncBeta(float64(k), float64(n-k+1), p) }
	// tail grows from 0 to 1 with p: the largest p with tail <= alpha.
	return cpSolve(func(p float64) bool { return tail(p) <= alpha }, false)
}

// cpSolve finds the boundary in (0, 1) of a predicate that holds on one
// side of it: when upper, ok holds above the boundary and cpSolve returns
// a point where it holds (the boundary from above); else ok holds below
// and it returns a point where it holds (the boundary from below). It
// bisects in log p while the bracket spans a factor of 2 (so that tiny
// probabilities keep their relative precision), then arithmetically, to
// a relative 1e-12.
func cpSolve(ok func(p float64) bool, upper bool) float64 {
	lo, hi := 0x1p-1000, 1.0 // the answer lies in [lo, hi]
	if upper {
		if ok(lo) {
			return lo
		}
	} else if !ok(lo) {
		return 0
	}
	for i := 0; i < 4000 && hi-lo > 1e-12*hi; i++ {
		mid := (lo + hi) / 2
		if hi > 2*lo {
			mid = math.Sqrt(lo * hi)
		}
		// The side of mid that the predicate puts on the answer's side.
		if ok(mid) == upper {
			hi = mid
		} else {
			lo = mid
		}
	}
	if upper {
		return hi
	}
	return lo
}
