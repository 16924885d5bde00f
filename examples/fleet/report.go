package main

import (
	"context"
	"fmt"
	"math"

	"github.com/blanket-dp/blanket/accountant"
	"github.com/blanket-dp/blanket/sdk"
)

// falseFailure is the chance that the fleet fails on correct estimates
// (per metric), which sets the thresholds of check.
const falseFailure = 1e-6

// zFail is the |z| beyond which one estimate fails the run: the two-sided
// normal tail P(|Z| > 5) = 5.7e-7, so over the fleet's ~35 estimated
// quantities a correct run fails with probability about 2e-5.
const zFail = 5

// item is one estimate next to its truth.
type item struct {
	label           string
	truth           float64
	value, variance float64
	lo, hi          float64
}

func (it item) z() float64 {
	if it.variance <= 0 {
		if it.value == it.truth {
			return 0
		}
		return math.Inf(1)
	}
	return (it.value - it.truth) / math.Sqrt(it.variance)
}

// report prints every metric's estimates next to the truth and the error
// comparison; ok is false when an estimate fails check.
func (f *fleet) report(ctx context.Context) (ok bool, err error) {
	ok = true
	var zipfItems []item
	for r, m := range f.metrics {
		d, err := f.detail(ctx, m.Name)
		if err != nil {
			return false, err
		}
		idx := -1
		for i := range d.Epochs {
			if d.Epochs[i].Current {
				idx = i
			}
		}
		if idx < 0 {
			return false, fmt.Errorf("metric %q: the collector has no estimate", m.Name)
		}
		e := d.Epochs[idx]
		if e.EstimateError != "" || len(e.Estimates) == 0 {
			return false, fmt.Errorf("metric %q: %w: %s", m.Name, errNoEstimate, e.EstimateError)
		}
		t := f.truth[r]
		fmt.Fprintln(f.out)
		switch r {
		case roleSum:
			fmt.Fprintf(f.out, "%s (%s, values in [%g, %g], eps0 = %.4f): n = %d in %d batches\n", m.Name, m.Plugin, m.Lo, m.Hi, e.Eps0, e.N, e.Batches)
		default:
			fmt.Fprintf(f.out, "%s (%s, %d categories, eps0 = %.4f): n = %d in %d batches\n", m.Name, m.Plugin, len(t.labels), e.Eps0, e.N, e.Batches)
		}
		if g := e.Guarantee; g != nil {
			if f.plan.Pooled() {
				fmt.Fprintf(f.out, "  central guarantee of its weakest batch (%d %s messages, %d of this metric): (eps, delta) = (%.4g, %.3g)\n", g.Messages, f.plan.Travel, g.N, g.Eps, g.Delta)
			} else {
				fmt.Fprintf(f.out, "  central guarantee of its smallest batch (n = %d): (eps, delta) = (%.4g, %.3g)\n", g.N, g.Eps, g.Delta)
			}
		} else {
			fmt.Fprintln(f.out, "  central guarantee: unknown")
			ok = false
		}
		var items []item
		for _, es := range e.Estimates {
			it := item{label: es.Label, value: es.Value, variance: es.Variance, lo: es.Lo, hi: es.Hi}
			switch {
			case r == roleSum && es.Label == "sum":
				it.truth = t.sum
			case r == roleSum && es.Label == "mean":
				it.truth = t.sum / float64(t.n)
			case r == roleSum:
				continue
			default:
				i, found := t.index[es.Label]
				if found {
					it.truth = t.counts[i]
				} // an "other" bucket holds no simulated value: truth 0
			}
			items = append(items, it)
		}
		if !f.printItems(items, e.Confidence) {
			ok = false
		}
		if r == roleZipf {
			zipfItems = items
		}
	}
	if err := f.compare(ctx, zipfItems); err != nil {
		return false, err
	}
	return ok, nil
}

// printItems prints a table of estimates and checks them: every |z| must
// be at most zFail, and the number of truths outside their confidence
// intervals at most what chance allows at falseFailure (a binomial tail,
// treating the items' misses as independent).
func (f *fleet) printItems(items []item, conf float64) bool {
	if conf == 0 {
		conf = 0.95
	}
	fmt.Fprintf(f.out, "  %-16s %14s %14s  %-32s %7s\n", "", "truth", "estimate", fmt.Sprintf("%g%% confidence interval", 100*conf), "z")
	outside, worst := 0, 0.0
	for _, it := range items {
		mark := ""
		if it.truth < it.lo || it.truth > it.hi {
			outside++
			mark = "  *"
		}
		z := it.z()
		worst = math.Max(worst, math.Abs(z))
		fmt.Fprintf(f.out, "  %-16s %14s %14s  [%14s, %14s] %7.2f%s\n", it.label, num(it.truth), num(it.value), num(it.lo), num(it.hi), z, mark)
	}
	allowed := binomialAllowance(len(items), 1-conf, falseFailure)
	verdict := "ok"
	good := outside <= allowed && worst <= zFail
	if !good {
		verdict = "OFF"
	}
	fmt.Fprintf(f.out, "  truth outside the interval: %d of %d (up to %d expected by chance); largest |z| = %.2f (limit %d): %s\n", outside, len(items), allowed, worst, zFail, verdict)
	return good
}

// binomialAllowance returns the smallest t with P(Binomial(n, p) > t) <
// alpha: more than t misses happen by chance with probability below alpha.
func binomialAllowance(n int, p, alpha float64) int {
	pmf := math.Pow(1-p, float64(n)) // P(X = 0)
	cdf := pmf
	for t := 0; t < n; t++ {
		if 1-cdf < alpha {
			return t
		}
		pmf *= float64(n-t) / float64(t+1) * p / (1 - p)
		cdf += pmf
	}
	return n
}

// num formats a count or an amount.
func num(v float64) string {
	if math.Abs(v) >= 1e7 {
		return fmt.Sprintf("%.5e", v)
	}
	return fmt.Sprintf("%.1f", v)
}

// compare prints the mean absolute error of the categorical (Zipf)
// metric's counts at three local budgets for the same central target: the
// plan's eps0 (Blanket's accountant), the eps0 the generic clone bound
// allows (accountant.Generic, Feldman, McMillan, Talwar 2021), and eps0 =
// the metric's share of the target eps (local DP alone, no shuffling).
//
// The plan's row is measured on the server's estimate. The other two run
// the same randomizer in this process over the same ground-truth values:
// the server holds the plan's eps0 only. Each row also shows the expected
// MAE, sqrt(2/pi) times the mean estimated standard deviation (an unbiased,
// approximately normal estimator), which the measured MAE should be close
// to; the expected values are what to compare, the measured ones carry
// sampling noise of roughly 1/sqrt(2k) relative for k categories.
func (f *fleet) compare(ctx context.Context, served []item) error {
	m := f.metrics[roleZipf]
	t := f.truth[roleZipf]
	ws := f.plan.Weights()
	w := ws[f.plan.MetricIndex(m.Name)] // the metric's normalised weight
	// The same target under the generic clone bound, and with local DP
	// alone: separate travel gives the metric its share of the target;
	// joint travel gives it its share of the total local budget; parallel
	// travel gives every metric the whole budget.
	share := f.plan.Target.Eps * w
	var genEps0 float64
	genName := "generic clone bound, same (eps, delta, n_min)"
	switch f.plan.Travel {
	case "joint", "parallel":
		k := len(f.plan.Metrics)
		parts := make([]accountant.Mechanism, k)
		for i := range parts {
			parts[i] = accountant.Generic()
		}
		var mech accountant.Mechanism = accountant.ParallelMech{Weights: ws, Parts: parts}
		if f.plan.Travel == "joint" {
			mech = accountant.JointMech{Parts: parts, Weights: ws}
		} else {
			share = f.plan.Target.Eps
		}
		gen, err := accountant.Calibrate(mech, accountant.Target{Eps: f.plan.Target.Eps, Delta: f.plan.Target.Delta, N: f.plan.NMin})
		if err != nil {
			return fmt.Errorf("generic calibration: %w", err)
		}
		genEps0 = gen.Eps0
		if f.plan.Travel == "joint" {
			genEps0 *= w
		}
	default:
		// The plan composes the metrics' reports; the baseline is the
		// generic clone bound with today's linear split of the target.
		genName = "generic clone bound, linear split of (eps, delta)"
		gen, err := accountant.Calibrate(accountant.Generic(), accountant.Target{Eps: share, Delta: m.Delta, N: f.plan.NMin})
		if err != nil {
			return fmt.Errorf("generic calibration: %w", err)
		}
		genEps0 = gen.Eps0
	}
	values := make([]string, 0, t.n)
	for i, c := range t.counts {
		for range int(c) {
			values = append(values, t.labels[i])
		}
	}
	r, _, err := f.cache.Open(ctx, m.Plugin, m.Config())
	if err != nil {
		return err
	}
	rows := []struct {
		name  string
		eps0  float64
		items []item
	}{{fmt.Sprintf("this plan (Blanket's accountant, %s)", "on the server"), m.Eps0, served}}
	for _, c := range []struct {
		name string
		eps0 float64
	}{
		{genName, genEps0},
		{"local DP alone, no shuffling", share},
	} {
		items, err := simulateEstimate(ctx, r, c.eps0, values, t)
		if err != nil {
			return fmt.Errorf("%s: %w", c.name, err)
		}
		rows = append(rows, struct {
			name  string
			eps0  float64
			items []item
		}{c.name + ", in process", c.eps0, items})
	}
	fmt.Fprintf(f.out, "\nmean absolute error of the %s counts (%d categories, n = %d), plan target (eps, delta) = (%.4g, %.3g) per user at n_min = %d, the baselines' share for this metric eps = %.4g, delta = %.3g:\n",
		m.Name, len(t.labels), t.n, f.plan.Target.Eps, f.plan.Target.Delta, f.plan.NMin, share, m.Delta)
	var expected []float64
	for _, row := range rows {
		mae, exp := mae(row.items)
		expected = append(expected, exp)
		fmt.Fprintf(f.out, "  eps0 = %-7.4f MAE %10.1f   expected %10.1f   %s\n", row.eps0, mae, exp, row.name)
	}
	fmt.Fprintf(f.out, "  the accountant's eps0 cuts the expected error %.2fx against the generic bound, %.1fx against local DP alone\n",
		expected[1]/expected[0], expected[2]/expected[0])
	return nil
}

// simulateEstimate randomizes values at eps0 in process and estimates.
func simulateEstimate(ctx context.Context, r sdk.Randomizer, eps0 float64, values []string, t *truth) ([]item, error) {
	reps, err := r.Randomize(ctx, eps0, sdk.Inputs{Categories: values})
	if err != nil {
		return nil, err
	}
	st, err := r.Accumulate(ctx, eps0, reps)
	if err != nil {
		return nil, err
	}
	est, err := r.Estimate(ctx, st)
	if err != nil {
		return nil, err
	}
	var items []item
	for _, it := range est.Items {
		x := item{label: it.Label, value: it.Value, variance: it.Variance, lo: it.Lo, hi: it.Hi}
		if i, ok := t.index[it.Label]; ok {
			x.truth = t.counts[i]
		}
		items = append(items, x)
	}
	return items, nil
}

// mae returns the measured mean absolute error and the expected one,
// sqrt(2/pi)·mean(sd), of items.
func mae(items []item) (measured, expected float64) {
	for _, it := range items {
		measured += math.Abs(it.value - it.truth)
		expected += math.Sqrt(math.Max(it.variance, 0))
	}
	k := float64(len(items))
	return measured / k, math.Sqrt(2/math.Pi) * expected / k
}
