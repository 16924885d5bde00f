package plugintest

import (
	"context"
	"fmt"

	"github.com/blanket-dp/blanket/sdk"
)

// stepEstimator is the estimator check of a stateful randomizer, through
// Step. A ground-truth population of BatchSize users (the state sequences
// of the frequency check, users assigned in turn, so that some change
// more often than k and some are on from the start) is stepped from a
// period that starts a tree (basePeriod) over the tree's first
// min(Tree, MaxEnumeratedTree) periods, Batches times with fresh states.
// After each period p the statistics of that period's reports
// (Accumulate) are merged with those of the periods before it in the same
// span (Description.Span: periods floor(p/Span)*Span through p, as the
// collector merges them) and estimated. The estimate of a tree protocol
// has one item, the number of users in the on state at p as far as each
// user's first k changes go (a user that changed more often counts in
// the state its k-th change left, until the next tree); its mean over
// the batches is tested against that truth and its reported variance
// against the spread of the estimates, with the tests and the
// false-failure split of checkEstimator (one mean and one variance test
// per period and eps0).
func (v *verifier) stepEstimator(ctx context.Context, c *Check) {
	perEps := v.opts.FalseFailureRate / families / float64(len(v.opts.Eps0s))
	for _, eps0 := range v.opts.Eps0s {
		name := fmt.Sprintf("eps0=%g", eps0)
		p, why := v.treeOf(ctx, eps0)
		if p == nil {
			c.skip(name, "%s", why)
			continue
		}
		v.stepEstimatorAt(ctx, c, name, eps0, p, perEps)
		if ctx.Err() != nil {
			return
		}
	}
}

func (v *verifier) stepEstimatorAt(ctx context.Context, c *Check, name string, eps0 float64, p *treeProtocol, perEps float64) {
	periods := min(p.tree, MaxEnumeratedTree)
	seqs := sequences(periods)
	users := v.opts.BatchSize
	truth := make([]float64, periods+1)
	in := make([][]string, periods+1) // in[pos]: every user's input at pos
	for pos := 1; pos <= periods; pos++ {
		in[pos] = make([]string, users)
		for i := range users {
			x := seqs[i%len(seqs)]
			in[pos][i] = v.desc.Categories[x[pos-1]]
			truth[pos] += float64(x.followed(pos, p.changes))
		}
	}
	span := max(v.desc.Span, 1)
	B := v.opts.Batches
	values := make([][]float64, periods+1)
	variances := make([]float64, periods+1)
	for b := range B {
		states := make([][]byte, users)
		var merged *sdk.Statistic
		for pos := 1; pos <= periods; pos++ {
			period := basePeriod + int64(pos-1)
			bname := fmt.Sprintf("%s batch %d position %d", name, b, pos)
			reps, next, err := v.stepAll(ctx, eps0, period, states, in[pos])
			if err != nil {
				c.fail(bname, "Step: %v", err)
				return
			}
			states = next
			var sent [][]byte
			for _, r := range reps {
				if len(r) > 0 {
					sent = append(sent, r)
				}
			}
			stat, err := v.accumulate(ctx, eps0, sent)
			if err != nil {
				c.fail(bname, "Accumulate: %v", err)
				return
			}
			if merged == nil || period%span == 0 {
				merged = stat
			} else if err := merged.Merge(stat); err != nil {
				c.fail(bname, "merging the statistics of the span's periods: %v", err)
				return
			}
			est, err := v.estimate(ctx, merged.Clone())
			if err != nil {
				c.fail(bname, "Estimate of the statistics merged over the periods %d..%d: %v", period-(period%span), period, err)
				return
			}
			if len(est.Items) != 1 {
				c.fail(bname, "the estimate of a tree protocol has one item (the users in the on state), got %d", len(est.Items))
				return
			}
			values[pos] = append(values[pos], est.Items[0].Value)
			variances[pos] += est.Items[0].Variance / float64(B)
		}
	}
	alpha := perEps / float64(periods)
	for pos := 1; pos <= periods; pos++ {
		tname := fmt.Sprintf("%s position %d (%q users)", name, pos, v.desc.Categories[1])
		c.add(meanTest(tname+" mean", values[pos], variances[pos], truth[pos], alpha))
		c.add(varianceTest(tname+" variance", values[pos], variances[pos], truth[pos], v.opts.VarianceSlack, alpha))
	}
}
