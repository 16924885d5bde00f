package plugintest

import (
	"context"
	"fmt"
	"math"
	"slices"

	"github.com/blanket-dp/blanket/accountant"
)

// The empirical privacy audit: a lower bound on the sampler's local eps
// from its samples, by a distinguishing attack (as LDP-Auditor, Arcolezi
// and Gambs 2024, and DP-Sniper do), compared with the declared eps0.
//
// Why it is a lower bound. For any two inputs x, x' and any set S of
// outputs, an eps-LDP randomizer has P_x(S) <= e^eps P_x'(S), so
// eps >= ln(P_x(S) / P_x'(S)). The kit draws n reports at x and n at x'
// (reusing the frequency check's samples of those inputs, each i.i.d. in
// draw order; a test's level holds on its own, so sharing samples between
// tests leaves the union bound intact), maps them to cells (outputs of a matrix, atoms of a declared pair, bins
// of a segments pair; every cell a set of outputs, so a union of cells is
// an output set S) and splits each sample in two halves:
//
//   - the first half chooses S: the cells ranked by their empirical ratio
//     (count at x + 1/2) / (count at x' + 1/2), and S the top m cells, m
//     chosen to maximise the bound below computed on the first half;
//   - the second half, independent of that choice, bounds: with the
//     one-sided Clopper-Pearson bounds lo = lower(P_x(S)) and hi =
//     upper(P_x'(S)), each at level 1 - a/2, P(lo <= P_x(S) and
//     P_x'(S) <= hi) >= 1 - a, and then eps >= ln(lo / hi).
//
// The same with x and x' swapped (a set favouring x'). Each bound is
// valid with probability 1 - a whatever the sampler is; a is this check's
// share of FalseFailureRate divided by the number of bounds (eps0s × pairs
// × 2 directions), so a sampler that is eps0-LDP fails the whole check
// with probability at most that share (union bound). The check fails when
// a bound exceeds the declared eps0 (relative tolerance 1e-12): then, at
// that confidence, the samples prove the sampler leaks more than it
// declares. A bound below eps0 proves nothing either way; the bound's
// value, reported for each pair, says how close the samples come.
//
// The pairs: for a matrix declaration, consecutive pairs of the frequency
// check's cases (up to three); for atoms, each declared pair at its
// inputs (sdk.AtomMapper); for segments, the first pair's bins at its
// declared inputs (sdk.OutputMapper). Generic declarations, and
// randomizers whose reports cannot be mapped, are not audited (skipped,
// saying why).

// CheckPrivacy is the empirical privacy audit (see privacy.go).
const CheckPrivacy = "privacy"

// maxAuditPairs bounds the pairs of inputs audited per eps0.
const maxAuditPairs = 3

// auditPair is a pair of inputs to audit and how its reports map to cells.
type auditPair struct {
	label   string
	x, x2   Case
	output  outputsFunc
	mapping string // drawKey's
	cells   int
}

// checkPrivacy runs the audit at each eps0.
func (v *verifier) checkPrivacy(ctx context.Context, c *Check) {
	if v.desc.Stateful {
		c.skip("all", "a stateful randomizer's transcripts are audited by the frequency check's exact law")
		return
	}
	type planned struct {
		eps0, declared float64
		pairs          []auditPair
	}
	var plans []planned
	bounds := 0
	for _, eps0 := range v.opts.Eps0s {
		name := fmt.Sprintf("eps0=%g", eps0)
		d, err := v.declare(ctx, eps0)
		if err != nil {
			c.fail(name, "Declare: %v", err)
			continue
		}
		pairs, skip, err := v.auditPairs(ctx, eps0, d)
		if !c.usable(name, err, skip) {
			continue
		}
		declared := d.Eps0
		if declared <= 0 {
			declared = eps0
		}
		plans = append(plans, planned{eps0, declared, pairs})
		bounds += 2 * len(pairs)
	}
	if bounds == 0 {
		return
	}
	level := v.opts.FalseFailureRate / families / float64(bounds)
	for _, p := range plans {
		for _, pr := range p.pairs {
			v.auditTest(ctx, c, p.eps0, p.declared, pr, level)
			if ctx.Err() != nil {
				return
			}
		}
	}
}

// auditPairs returns the pairs to audit at eps0 under declaration d, or
// why there are none.
func (v *verifier) auditPairs(ctx context.Context, eps0 float64, d *accountant.Declaration) ([]auditPair, string, error) {
	switch d.Form {
	case accountant.FormMatrix:
		if d.Matrix == nil {
			return nil, "", fmt.Errorf("a matrix declaration without a matrix")
		}
		cells := d.Matrix.NumOutputs()
		output, _, skip, err := v.outputMap(ctx, eps0, cells)
		if err != nil || skip != "" {
			return nil, skip, err
		}
		cases, err := v.cases(d.Matrix)
		if err != nil {
			return nil, "", err
		}
		var out []auditPair
		for i := 0; i+1 < len(cases) && len(out) < maxAuditPairs; i++ {
			if cases[i].Row == cases[i+1].Row {
				continue
			}
			out = append(out, auditPair{fmt.Sprintf("%s vs %s", v.caseLabel(cases[i]), v.caseLabel(cases[i+1])), cases[i], cases[i+1], output, mappingOutputs, cells})
		}
		if len(out) == 0 {
			return nil, "the matrix has no two distinct rows to tell apart", nil
		}
		return out, "", nil
	case accountant.FormAtoms:
		sets, skipped := v.atomSets(d)
		var out []auditPair
		for _, a := range sets {
			if a.triple || len(out) == maxAuditPairs {
				continue
			}
			f, skip, err := v.atomMap(ctx, eps0, a)
			if err != nil {
				return nil, "", err
			}
			if skip != "" {
				return nil, skip, nil
			}
			out = append(out, auditPair{fmt.Sprintf("%s: %s vs %s", a.label, v.caseLabel(a.cases[0]), v.caseLabel(a.cases[1])), a.cases[0], a.cases[1], f, mappingSet(a.index), len(a.set.Atoms) + len(a.set.Bins)})
		}
		if len(out) == 0 {
			return nil, fmt.Sprintf("no declared pair can be drawn: %v", skipped), nil
		}
		return out, "", nil
	case accountant.FormSegments:
		if len(d.Pairs) == 0 || len(d.Pairs[0].Atoms) > 0 || len(d.Pairs[0].Inputs) != 2 {
			return nil, "the segments declaration's first pair has exact atoms or no declared inputs", nil
		}
		pair := d.Pairs[0]
		output, _, skip, err := v.outputMap(ctx, eps0, len(pair.Bins))
		if err != nil || skip != "" {
			return nil, skip, err
		}
		x, x2 := Case{Real: pair.Inputs[0]}, Case{Real: pair.Inputs[1]}
		return []auditPair{{fmt.Sprintf("pair 0: %v vs %v", x.Real, x2.Real), x, x2, output, mappingBins, len(pair.Bins)}}, "", nil
	default:
		return nil, fmt.Sprintf("a %s declaration gives no outputs to tell inputs apart by", d.Form), nil
	}
}

// auditTest draws Samples reports at each input of pr and adds the test
// of the larger of the two directions' lower bounds against declared.
func (v *verifier) auditTest(ctx context.Context, c *Check, eps0, declared float64, pr auditPair, level float64) {
	name := fmt.Sprintf("eps0=%g %s", eps0, pr.label)
	draw := func(cs Case) ([]int, error) {
		if ys, ok := v.draws[drawKey{eps0, cs, pr.mapping}]; ok {
			return ys, nil // the frequency check's sample of this input
		}
		reports, err := v.randomizeAll(ctx, eps0, v.repeat(cs, v.opts.Samples))
		if err != nil {
			return nil, fmt.Errorf("the randomizer's Randomize: %v", err)
		}
		ys, err := pr.output(ctx, eps0, reports)
		if err == nil && len(ys) != len(reports) {
			err = fmt.Errorf("%d cells for %d reports", len(ys), len(reports))
		}
		if err != nil {
			return nil, fmt.Errorf("mapping reports: %v", err)
		}
		for i, y := range ys {
			if y < 0 || y >= pr.cells {
				return nil, fmt.Errorf("report %d (%x) maps to %d of %d", i, reports[i], y, pr.cells)
			}
		}
		return ys, nil
	}
	a, err := draw(pr.x)
	if err == nil {
		var b []int
		if b, err = draw(pr.x2); err == nil {
			best := distinguish(a, b, pr.cells, level)
			if rev := distinguish(b, a, pr.cells, level); rev.eps > best.eps {
				best, best.reversed = rev, true
			}
			t := Test{Name: name, Statistic: best.eps, Threshold: declared, Alpha: 2 * level, PValue: min(1, 2*auditPValue(best, declared))}
			dir := "x"
			if best.reversed {
				dir = "x'"
			}
			what := fmt.Sprintf("samples behave like eps0 >= %.4g at confidence 1-%.2g (a set of %d of %d cells favouring %s: %d of %d draws against %d of %d)", math.Max(best.eps, 0), 2*level, best.size, pr.cells, dir, best.kx, best.n, best.kx2, best.n)
			if best.eps > declared*(1+ratioTol) {
				t.Status = Fail
				t.Message = what + fmt.Sprintf(", declared %g: the sampler leaks more than it declares", declared)
			} else {
				t.Status = Pass
				t.Message = what + fmt.Sprintf(", declared %g", declared)
			}
			c.add(t)
			return
		}
	}
	c.fail(name, "%v", err)
}

// distinction is the outcome of one direction of the attack.
type distinction struct {
	eps      float64 // the lower bound ln(lo/hi), -Inf when lo = 0
	size     int     // cells in S
	kx, kx2  int64   // draws in S at x and at x', second halves
	n        int64   // draws per input in the second half
	reversed bool
}

// distinguish chooses, on the first halves of xs and x2s (cells drawn at
// x and at x'), the set of cells that best tells x from x', and returns
// the lower bound on eps that the second halves give for it at level
// 1 - level (see the top of this file).
func distinguish(xs, x2s []int, cells int, level float64) distinction {
	h := min(len(xs), len(x2s)) / 2
	count := func(ys []int) []int64 {
		out := make([]int64, cells)
		for _, y := range ys {
			out[y]++
		}
		return out
	}
	ax, ax2 := count(xs[:h]), count(x2s[:h])
	bx, bx2 := count(xs[h:2*h]), count(x2s[h:2*h])
	order := make([]int, cells)
	for i := range order {
		order[i] = i
	}
	ratio := func(j int) float64 { return (float64(ax[j]) + 0.5) / (float64(ax2[j]) + 0.5) }
	slices.SortStableFunc(order, func(i, j int) int {
		switch ri, rj := ratio(i), ratio(j); {
		case ri > rj:
			return -1
		case ri < rj:
			return 1
		}
		return 0
	})
	bound := func(kx, kx2, n int64) float64 {
		lo := cpLower(kx, n, level/2)
		if lo <= 0 {
			return math.Inf(-1)
		}
		return math.Log(lo / cpUpper(kx2, n, level/2))
	}
	// The first half chooses m.
	bestM, bestA := 1, math.Inf(-1)
	var sx, sx2 int64
	for m, j := range order {
		sx, sx2 = sx+ax[j], sx2+ax2[j]
		if b := bound(sx, sx2, int64(h)); b > bestA {
			bestM, bestA = m+1, b
		}
	}
	// The second half bounds.
	d := distinction{size: bestM, n: int64(h)}
	for _, j := range order[:bestM] {
		d.kx += bx[j]
		d.kx2 += bx2[j]
	}
	d.eps = bound(d.kx, d.kx2, d.n)
	return d
}

// auditPValue returns the p-value of one direction of a distinction
// against eps0 = declared: the smallest level a at which its bound, with
// each Clopper-Pearson bound at a/2, exceeds declared (1 when none does);
// the test of both directions doubles it (Bonferroni). The
// bound grows with a, so bisection on log a finds it.
func auditPValue(d distinction, declared float64) float64 {
	exceeds := func(a float64) bool {
		lo := cpLower(d.kx, d.n, a/2)
		return lo > 0 && math.Log(lo/cpUpper(d.kx2, d.n, a/2)) > declared*(1+ratioTol)
	}
	if !exceeds(1) {
		return 1
	}
	lo, hi := math.Log(1e-300), 0.0 // exceeds(e^hi), and the answer is in [e^lo, e^hi]
	if exceeds(math.Exp(lo)) {
		return 1e-300
	}
	for range 80 {
		mid := (lo + hi) / 2
		if exceeds(math.Exp(mid)) {
			hi = mid
		} else {
			lo = mid
		}
	}
	return math.Exp(hi)
}
