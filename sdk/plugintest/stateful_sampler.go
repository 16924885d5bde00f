package plugintest

import (
	"context"
	"fmt"
	"math"
	"math/bits"

	"gonum.org/v1/gonum/stat/distuv"

	"github.com/blanket-dp/blanket/sdk/ldp/ldptest"
)

// structureSteps bounds the user-steps of the structural test on a tree
// too large to enumerate (users × periods of one sequence).
const structureSteps = 1 << 14

// maxReportPeriods bounds the periods validReports steps its users for:
// a correct tree protocol gives n users n reports within a few periods
// (the leaves' users report every period).
const maxReportPeriods = 1024

// stepFrequencies is the frequency check of a stateful randomizer: its
// own Step, driven over one whole tree for Samples users per state
// sequence (sequences: off, on from the start, on from the middle, two
// changes, and alternating, with more changes than k), from a period that
// starts a tree (basePeriod). Each user's level is read from the periods
// that carried a report (the ends of the level's nodes: a pattern unique
// to the level), each report's output with Options.Output, the
// randomizer's sdk.OutputMapper or the index encoding (as in
// checkFrequencies), and the counts of the transcripts (level and
// outputs) are tested against the law the declaration defines (treeLaw)
// by Pearson's chi-square, at alpha = FalseFailureRate/families divided by the
// number of eps0 values and of sequences (the frequency family's share,
// as in checkFrequencies).
//
// Deterministic tests, which fail a correct randomizer never: every user
// reports exactly at the ends of its level's nodes (a report elsewhere,
// or a missing one, fails), every report has ReportBytes bytes, and every
// state Step returns is non-empty. On a tree larger than
// MaxEnumeratedTree these run on fewer users and the chi-square tests
// are skipped.
func (v *verifier) stepFrequencies(ctx context.Context, c *Check) {
	for _, eps0 := range v.opts.Eps0s {
		name := fmt.Sprintf("eps0=%g", eps0)
		p, why := v.treeOf(ctx, eps0)
		if p == nil {
			c.skip(name, "%s", why)
			continue
		}
		if p.tree > MaxEnumeratedTree {
			users := max(1, min(v.opts.Samples, structureSteps/p.tree))
			for _, x := range []stateSequence{sequences(p.tree)[1], sequences(p.tree)[4]} {
				tname := fmt.Sprintf("%s states %s", name, sequenceName(x))
				if _, _, err := v.transcripts(ctx, eps0, p.tree, x, users, 0, nil); err != nil {
					c.fail(tname, "%v", err)
				} else {
					c.pass(tname, "%d users report exactly at the ends of their level's nodes", users)
				}
				if ctx.Err() != nil {
					return
				}
			}
			c.skip(name+" transcripts", "a tree of %d periods has too many transcripts for a frequency test: run the kit on a small configuration of this plugin too (Tree <= %d), where the sampler's transcripts are tested against the declared law", p.tree, MaxEnumeratedTree)
			continue
		}
		law, err := newTreeLaw(p)
		if err != nil {
			c.skip(name, "%v", err)
			continue
		}
		output, hint, skip, err := v.outputMap(ctx, eps0, law.outputs)
		switch {
		case err != nil:
			c.fail(name, "%v", err)
			continue
		case skip != "":
			c.skip(name+" transcripts", "%s", skip)
			output = nil // the structural tests still run
		}
		seqs := sequences(p.tree)
		alpha := v.opts.FalseFailureRate / families / float64(len(v.opts.Eps0s)) / float64(len(seqs))
		for _, x := range seqs {
			tname := fmt.Sprintf("%s states %s", name, sequenceName(x))
			levels, codes, err := v.transcripts(ctx, eps0, p.tree, x, v.opts.Samples, law.outputs, output)
			if err != nil {
				c.fail(tname, "%v%s", err, hint)
				if ctx.Err() != nil {
					return
				}
				continue
			}
			if output == nil {
				c.pass(tname, "%d users report exactly at the ends of their level's nodes", len(levels))
				continue
			}
			counts := make([]int64, law.cells)
			for i, h := range levels {
				counts[law.offset[h-1]+codes[i]]++
			}
			c.add(chiSquareTest(tname, counts, law.law(x), alpha, law.describe, fmt.Sprintf("the transcripts of %d users", len(levels)), hint))
		}
	}
}

// sequenceName names a state sequence in a test: its digits when short.
func sequenceName(x stateSequence) string {
	if len(x) <= 16 {
		return x.String()
	}
	return fmt.Sprintf("%s...%s", x[:8], x[len(x)-8:])
}

// transcripts steps users through one tree with state sequence x (one
// state per period of the tree) from basePeriod, each from no state, and
// returns each user's level (1..L, read from the periods that carried its
// reports) and, when output is set, its transcript's code: sum over its
// level's nodes m of y_m·outputs^(m-1), y_m the output of node m's report.
// The error says how the randomizer broke the protocol: a report outside
// the ends of its level's nodes or a missing one, a report of the wrong
// length, an empty state, or an error of Step or of the output mapping.
func (v *verifier) transcripts(ctx context.Context, eps0 float64, tree int, x stateSequence, users, outputs int, output outputsFunc) (levels, codes []int, err error) {
	states := make([][]byte, users)
	levels, codes = make([]int, users), make([]int, users)
	sent := make([]bool, users)
	in := make([]string, users)
	weight := make([]int, users) // outputs^(m-1) of the user's next node
	for i := range weight {
		weight[i] = 1
	}
	for pos := 1; pos <= tree; pos++ {
		for i := range in {
			in[i] = v.desc.Categories[x[pos-1]]
		}
		reps, next, err := v.stepAll(ctx, eps0, basePeriod+int64(pos-1), states, in)
		if err != nil {
			return nil, nil, fmt.Errorf("position %d of the tree (period %d): Step: %w", pos, basePeriod+int64(pos-1), err)
		}
		for i, s := range next {
			if len(s) == 0 {
				return nil, nil, fmt.Errorf("position %d: Step returned an empty state for user %d; a state is never empty (an empty one reads as a first step)", pos, i)
			}
		}
		states = next
		var idx []int
		var batch [][]byte
		for i, r := range reps {
			sent[i] = len(r) > 0
			if !sent[i] {
				continue
			}
			if len(r) != v.desc.ReportBytes {
				return nil, nil, fmt.Errorf("user %d's report at position %d has %d bytes, ReportBytes is %d", i, pos, len(r), v.desc.ReportBytes)
			}
			idx, batch = append(idx, i), append(batch, r)
		}
		for i := range users {
			h := levels[i]
			switch {
			case h == 0 && sent[i]:
				// The first report of a user of level h is at 2^(h-1).
				if pos&(pos-1) != 0 {
					return nil, nil, fmt.Errorf("user %d's first report is at position %d, which is not the end of the first node of any level (a power of two)", i, pos)
				}
				levels[i] = bits.Len(uint(pos))
			case h > 0 && sent[i] != (pos%(1<<(h-1)) == 0):
				if sent[i] {
					return nil, nil, fmt.Errorf("user %d, of level %d by its first report, reported at position %d, which ends no node of its level (every %d periods)", i, h, pos, 1<<(h-1))
				}
				return nil, nil, fmt.Errorf("user %d, of level %d by its first report, sent no report at position %d, the end of its node %d", i, h, pos, pos>>(h-1))
			}
		}
		if output == nil || len(batch) == 0 {
			continue
		}
		ys, err := output(ctx, eps0, batch)
		if err == nil && len(ys) != len(batch) {
			err = fmt.Errorf("%d outputs for %d reports", len(ys), len(batch))
		}
		if err != nil {
			return nil, nil, fmt.Errorf("mapping the reports of position %d to outputs: %w", pos, err)
		}
		for j, y := range ys {
			i := idx[j]
			if y < 0 || y >= outputs {
				return nil, nil, fmt.Errorf("user %d's report at position %d (%x) maps to output %d of %d", i, pos, batch[j], y, outputs)
			}
			codes[i] += y * weight[i]
			weight[i] *= outputs
		}
	}
	for i, h := range levels {
		if h == 0 {
			return nil, nil, fmt.Errorf("user %d sent no report over the tree; the last node of every level ends at the tree's last period", i)
		}
	}
	return levels, codes, nil
}

// chiSquareTest tests counts against probs by Pearson's chi-square (cells
// pooled as in checkFrequencies) at false-failure rate alpha; a cell
// observed although its probability is 0 fails outright. cell names a
// cell in messages, what the counted items.
func chiSquareTest(name string, counts []int64, probs []float64, alpha float64, cell func(int) string, what, hint string) Test {
	var n int64
	for _, k := range counts {
		n += k
	}
	for i, p := range probs {
		if p == 0 && counts[i] > 0 {
			return Test{Name: name, Status: Fail, Message: fmt.Sprintf("%s: %s has declared probability 0 but was drawn %d times%s", what, cell(i), counts[i], hint)}
		}
	}
	x2, df := ldptest.ChiSquare(counts, probs)
	if df < 1 {
		return Test{Name: name, Status: Skip, Message: fmt.Sprintf("every cell has expected count below %d: draw more samples", ldptest.MinExpected)}
	}
	t := Test{Name: name, Statistic: x2, DF: float64(df), Threshold: ldptest.ChiSquareCritical(df, alpha), PValue: distuv.ChiSquared{K: float64(df)}.Survival(x2), Alpha: alpha}
	if x2 <= t.Threshold {
		t.Status = Pass
		t.Message = what + " fit the declared law"
		return t
	}
	t.Status = Fail
	worst, wz := 0, 0.0
	for i, p := range probs {
		if e := float64(n) * p; e > 0 {
			if z := math.Abs(float64(counts[i])-e) / math.Sqrt(e); z > wz {
				worst, wz = i, z
			}
		}
	}
	t.Message = fmt.Sprintf("%s do not fit the declared law: %s drawn %d times, expected %.1f%s", what, cell(worst), counts[worst], float64(n)*probs[worst], hint)
	return t
}

// validReports returns n valid reports at eps0 for the reports and
// statistics checks, and the name of the call that made them: Randomize
// of sample inputs, or for a stateful randomizer Step of n users (sample
// inputs held over the periods) from the start of a tree until they have
// sent n reports.
func (v *verifier) validReports(ctx context.Context, eps0 float64, n int) ([][]byte, string, error) {
	if !v.desc.Stateful {
		reps, err := v.randomize(ctx, eps0, v.sample(n))
		return reps, "Randomize", err
	}
	in := v.sample(n).Categories
	if in == nil {
		return nil, "Step", fmt.Errorf("plugintest: the kit steps categorical stateful randomizers only, this one takes %v inputs", v.desc.Input)
	}
	states := make([][]byte, n)
	var out [][]byte
	for period := int64(basePeriod); len(out) < n; period++ {
		if period >= basePeriod+maxReportPeriods {
			return nil, "Step", fmt.Errorf("plugintest: %d users sent only %d reports over %d periods", n, len(out), maxReportPeriods)
		}
		reps, next, err := v.stepAll(ctx, eps0, period, states, in)
		if err != nil {
			return nil, "Step", fmt.Errorf("period %d: %w", period, err)
		}
		states = next
		for _, r := range reps {
			if len(r) > 0 {
				out = append(out, r)
			}
		}
	}
	return out[:n], "Step", nil
}
