package plugintest

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"

	"gonum.org/v1/gonum/stat/distuv"

	"github.com/blanket-dp/blanket/accountant"
	"github.com/blanket-dp/blanket/sdk"
	"github.com/blanket-dp/blanket/sdk/ldp"
	"github.com/blanket-dp/blanket/sdk/ldp/ldptest"
)

// checkFrequencies draws Samples reports for each case at each eps0 with
// the randomizer's own sampler, maps every report to its output (column of
// the declared matrix) with Options.Output, and compares the counts with the
// declared row by Pearson's chi-square test (ldptest.ChiSquare: cells with
// expected count below 5 are pooled). An output observed although its
// declared probability is 0 fails outright.
//
// Threshold. Under the null hypothesis (the sampler draws from the declared
// row) Pearson's statistic is asymptotically chi-square with cells-1
// degrees of freedom, so the test fails with probability alpha when the
// statistic exceeds the (1 - alpha) quantile of that distribution
// (distuv.ChiSquared.Quantile). alpha is FalseFailureRate/families (this family's
// share) divided by the number of eps0 values and by the number of cases.
//
// This is a test of the whole output distribution, hence of the exact
// likelihood ratios the declaration claims: a sampler running at a larger
// eps0 than it declares, or favouring some outputs, fails it. It needs a
// matrix declaration, or a segments one (segmentFrequencies); atoms and
// generic declarations do not say which output has which probability, so
// the check runs on their atoms through sdk.AtomMapper (atomFrequencies),
// and is skipped for a randomizer that does not implement it.
func (v *verifier) checkFrequencies(ctx context.Context, c *Check) {
	if v.desc.Stateful {
		v.stepFrequencies(ctx, c)
		return
	}
	alpha := v.opts.FalseFailureRate / families / float64(len(v.opts.Eps0s))
	for _, eps0 := range v.opts.Eps0s {
		name := fmt.Sprintf("eps0=%g", eps0)
		d, err := v.declare(ctx, eps0)
		if err != nil {
			c.fail(name, "Declare: %v", err)
			continue
		}
		if d.Form == accountant.FormSegments {
			v.segmentFrequencies(ctx, c, name, eps0, d, alpha)
			continue
		}
		if d.Form == accountant.FormAtoms {
			v.atomFrequencies(ctx, c, name, eps0, d, alpha)
			continue
		}
		if d.Form != accountant.FormMatrix || d.Matrix == nil {
			c.skip(name, "the %s declaration does not give each output's probability: the sampler is unchecked at this configuration", d.Form)
			continue
		}
		m := d.Matrix
		output, hint, skip, err := v.outputMap(ctx, eps0, m.NumOutputs())
		if !c.usable(name, err, skip) {
			continue
		}
		cases, err := v.cases(m)
		if err != nil {
			c.fail(name, "%v", err)
			continue
		}
		for _, cs := range cases {
			probs := make([]float64, m.NumOutputs())
			for y := range probs {
				probs[y] = m.At(cs.Row, y)
			}
			v.frequencyTest(ctx, c, eps0, probs, output, mappingOutputs, hint, v.caseName(eps0, cs), cs, alpha/float64(len(cases)))
			if ctx.Err() != nil {
				return
			}
		}
	}
}

// cases returns Options.Cases, or the default cases for matrix m.
func (v *verifier) cases(m *accountant.Matrix) ([]Case, error) {
	rows := m.NumInputs()
	if v.opts.Cases != nil {
		for i, cs := range v.opts.Cases {
			if cs.Row < 0 || cs.Row >= rows {
				return nil, fmt.Errorf("case %d of Options.Cases has row %d, the matrix %d rows", i, cs.Row, rows)
			}
		}
		return v.opts.Cases, nil
	}
	var picked []int
	for _, i := range []int{0, 1, rows / 2, rows - 1} {
		if i < rows && !slices.Contains(picked, i) && len(picked) < MaxCases {
			picked = append(picked, i)
		}
	}
	var out []Case
	if v.desc.Input == sdk.InputCategorical {
		if rows != len(v.desc.Categories) {
			return nil, fmt.Errorf("the matrix has %d rows, the randomizer %d buckets", rows, len(v.desc.Categories))
		}
		for _, i := range picked {
			out = append(out, Case{Category: v.desc.Categories[i], Row: i})
		}
		if v.desc.Other != "" {
			out = append(out, Case{Category: v.unknownLabel(), Row: rows - 1})
		}
		return out, nil
	}
	if rows < 2 {
		return nil, fmt.Errorf("the matrix of a real randomizer has %d rows, need at least 2", rows)
	}
	lo, hi := v.desc.Lo, v.desc.Hi
	level := func(i int) float64 {
		if i == rows-1 {
			return hi
		}
		return lo + (hi-lo)*float64(i)/float64(rows-1)
	}
	for _, i := range picked {
		out = append(out, Case{Real: level(i), Row: i})
	}
	if below := lo - (hi - lo); !math.IsInf(below, 0) {
		out = append(out, Case{Real: below, Row: 0})
	}
	if above := hi + (hi - lo); !math.IsInf(above, 0) {
		out = append(out, Case{Real: above, Row: rows - 1})
	}
	return out, nil
}

func (v *verifier) caseName(eps0 float64, cs Case) string {
	if v.desc.Input == sdk.InputCategorical {
		return fmt.Sprintf("eps0=%g input %q (row %d)", eps0, cs.Category, cs.Row)
	}
	return fmt.Sprintf("eps0=%g input %v (row %d)", eps0, cs.Real, cs.Row)
}

// outputsFunc maps a batch of reports produced at eps0 to output indices.
type outputsFunc func(ctx context.Context, eps0 float64, reports [][]byte) ([]int, error)

// outputMap returns how the frequency check maps reports to outs outputs
// at eps0: Options.Output; else the randomizer's own mapping when it is
// an sdk.OutputMapper that does not answer errors.ErrUnsupported (a plugin
// process); else the SDK's index encoding, when the report width fits it.
// hint is appended to failure messages; skip, when not "", is why the
// check cannot run.
func (v *verifier) outputMap(ctx context.Context, eps0 float64, outs int) (f outputsFunc, hint, skip string, err error) {
	if out := v.opts.Output; out != nil {
		return perReport(out), "", "", nil
	}
	if om, ok := v.r.(sdk.OutputMapper); ok {
		perr := guard(func() error {
			_, err := om.Outputs(ctx, eps0, nil)
			return err
		})
		switch {
		case perr == nil:
			return func(ctx context.Context, eps0 float64, reports [][]byte) (out []int, err error) {
				err = guard(func() error {
					out, err = om.Outputs(ctx, eps0, reports)
					return err
				})
				return out, err
			}, "", "", nil
		case !errors.Is(perr, errors.ErrUnsupported):
			return nil, "", "", fmt.Errorf("the randomizer's Outputs: %v", perr)
		}
	}
	if w := ldp.IndexWidth(outs); w != v.desc.ReportBytes {
		return nil, "", fmt.Sprintf("reports are %d bytes, not the %d-byte index encoding of %d outputs; implement sdk.OutputMapper (or set Options.Output) to map reports to outputs", v.desc.ReportBytes, w, outs), nil
	}
	hint = "; reports were read as output indices in the SDK's index encoding: if that is not this plugin's encoding, implement sdk.OutputMapper (or set Options.Output)"
	return perReport(defaultOutput(outs)), hint, "", nil
}

// perReport makes an outputsFunc of a function of one report; a report it
// fails names its index.
func perReport(f func(eps0 float64, report []byte) (int, error)) outputsFunc {
	return func(_ context.Context, eps0 float64, reports [][]byte) ([]int, error) {
		out := make([]int, len(reports))
		for i, rep := range reports {
			err := guard(func() (err error) {
				out[i], err = f(eps0, rep)
				return err
			})
			if err != nil {
				return nil, fmt.Errorf("report %d (%x): %w", i, rep, err)
			}
		}
		return out, nil
	}
}

// frequencyTest samples input cs and runs the chi-square test of its
// outputs against probs. hint is appended to failure messages.
//
// mapping names output (drawKey): the cells drawn are kept for the
// privacy audit, which tests the same inputs.
func (v *verifier) frequencyTest(ctx context.Context, c *Check, eps0 float64, probs []float64, output outputsFunc, mapping, hint, name string, cs Case, alpha float64) {
	reports, err := v.randomizeAll(ctx, eps0, v.repeat(cs, v.opts.Samples))
	if err != nil {
		c.fail(name, "Randomize: %v", err)
		return
	}
	if ys := v.fitTest(ctx, c, eps0, reports, probs, output, hint, name, "the declared row", alpha); ys != nil {
		v.draws[drawKey{eps0, cs, mapping}] = ys
	}
}

// fitTest maps reports drawn at eps0 to cells with output and runs
// Pearson's chi-square test of their counts against probs at false-failure
// rate alpha; law names probs in messages ("the declared row"). A report
// of the wrong length, one that does not map to a cell, and a cell of
// probability 0 drawn fail outright. It returns the reports' cells, or nil
// when they could not be mapped.
func (v *verifier) fitTest(ctx context.Context, c *Check, eps0 float64, reports [][]byte, probs []float64, output outputsFunc, hint, name, law string, alpha float64) []int {
	outs := len(probs)
	counts := make([]int64, outs)
	for i, rep := range reports {
		if len(rep) != v.desc.ReportBytes {
			c.fail(name, "report %d has %d bytes, ReportBytes is %d", i, len(rep), v.desc.ReportBytes)
			return nil
		}
	}
	ys, err := output(ctx, eps0, reports)
	if err == nil && len(ys) != len(reports) {
		err = fmt.Errorf("%d outputs for %d reports", len(ys), len(reports))
	}
	if err != nil {
		c.fail(name, "mapping reports to outputs: %v%s", err, hint)
		return nil
	}
	for i, y := range ys {
		if y < 0 || y >= outs {
			c.fail(name, "report %d (%x) maps to output %d of %d%s", i, reports[i], y, outs, hint)
			return nil
		}
		counts[y]++
	}
	for y := range probs {
		if probs[y] == 0 && counts[y] > 0 {
			c.fail(name, "output %d has declared probability 0 but was drawn %d times%s", y, counts[y], hint)
			return ys
		}
	}
	x2, df := ldptest.ChiSquare(counts, probs)
	if df < 1 {
		c.skip(name, "every output has expected count below %d: draw more samples", ldptest.MinExpected)
		return ys
	}
	chi := distuv.ChiSquared{K: float64(df)}
	t := Test{Name: name, Statistic: x2, DF: float64(df), Threshold: ldptest.ChiSquareCritical(df, alpha), PValue: chi.Survival(x2), Alpha: alpha}
	if x2 <= t.Threshold {
		t.Status = Pass
		t.Message = fmt.Sprintf("%d reports fit %s", len(reports), law)
	} else {
		t.Status = Fail
		worst, wz := 0, 0.0
		for y, p := range probs {
			if e := float64(len(reports)) * p; e > 0 {
				if z := math.Abs(float64(counts[y])-e) / math.Sqrt(e); z > wz {
					worst, wz = y, z
				}
			}
		}
		t.Message = fmt.Sprintf("%d reports do not fit %s: output %d drawn %d times, expected %.1f%s", len(reports), law, worst, counts[worst], float64(len(reports))*probs[worst], hint)
	}
	c.add(t)
	return ys
}

// segmentFrequencies is the frequency check of a segments declaration. Its
// outputs are the bins of the first declared pair, in order (a plugin's
// Outputs, or Options.Output, maps each report to its bin): the kit draws
// reports at the pair's inputs (DeclaredSet.Inputs x and x') and at each
// triple's third input x3, whose bins' declared masses are P, Q and R,
// and runs the chi-square test on each. Triples with bins other than the
// pair's (another count) are not tested; pairs with exact atoms besides
// bins are skipped (which output an atom is, is not declared).
func (v *verifier) segmentFrequencies(ctx context.Context, c *Check, name string, eps0 float64, d *accountant.Declaration, alpha float64) {
	if len(d.Pairs) == 0 {
		c.skip(name, "the segments declaration has no pair")
		return
	}
	pair := d.Pairs[0]
	switch {
	case v.desc.Input != sdk.InputReal:
		c.skip(name, "a segments declaration of a %v randomizer: its inputs cannot be drawn from DeclaredSet.Inputs", v.desc.Input)
		return
	case len(pair.Atoms) > 0 || len(pair.Bins) == 0:
		c.skip(name, "the first pair has exact atoms besides bins (or no bins): which output an atom is, is not declared")
		return
	case len(pair.Inputs) != 2:
		c.skip(name, "the first pair declares %d inputs, not its x and x' (DeclaredSet.Inputs)", len(pair.Inputs))
		return
	}
	outs := len(pair.Bins)
	output, hint, skip, err := v.outputMap(ctx, eps0, outs)
	if !c.usable(name, err, skip) {
		return
	}
	type test struct {
		what  string
		x     float64
		probs []float64
	}
	masses := func(f func(accountant.Bin) float64, bins []accountant.Bin) []float64 {
		out := make([]float64, len(bins))
		for i, b := range bins {
			out[i] = f(b)
		}
		return out
	}
	tests := []test{
		{"x", pair.Inputs[0], masses(func(b accountant.Bin) float64 { return b.P }, pair.Bins)},
		{"x'", pair.Inputs[1], masses(func(b accountant.Bin) float64 { return b.Q }, pair.Bins)},
	}
	for i, t := range d.Triples {
		if len(t.Atoms) == 0 && len(t.Bins) == outs && len(t.Inputs) == 3 && t.Inputs[2] != pair.Inputs[0] && t.Inputs[2] != pair.Inputs[1] {
			tests = append(tests, test{fmt.Sprintf("triple %d x3", i), t.Inputs[2], masses(func(b accountant.Bin) float64 { return b.R }, t.Bins)})
		}
	}
	for _, t := range tests {
		v.frequencyTest(ctx, c, eps0, t.probs, output, mappingBins, hint, fmt.Sprintf("%s %s = %v (%d bins)", name, t.what, t.x, outs), Case{Real: t.x}, alpha/float64(len(tests)))
		if ctx.Err() != nil {
			return
		}
	}
}
