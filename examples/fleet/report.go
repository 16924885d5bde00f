package main

import (
	"context"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/blanket-dp/blanket/accountant"
	"github.com/blanket-dp/blanket/sdk"
)

// falseFailure is the chance that the fleet fails on correct estimates
// (per metric), which sets the thresholds of check.
const falseFailure = 1e-6

// zFail is the |z| beyond which one estimate fails the run: the two-sided
// normal tail P(|Z| > 5.5) = 3.8e-8, so over the fleet's ~250 estimated
// quantities (7 days of 34) a correct run fails with probability about
// 1e-5.
const zFail = 5.5

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

// report prints, per metric and day, the estimates next to the truth and
// the period's guarantee, checks every estimate of every day, prints the
// guarantee over the horizon and the error comparison; ok is false when an
// estimate fails check or a guarantee is missing.
func (f *fleet) report(ctx context.Context) (ok bool, err error) {
	ok = true
	var lastZipf []item
	var horizonShown bool
	for r, m := range f.metrics {
		d, err := f.detail(ctx, m.Name, true)
		if err != nil {
			return false, err
		}
		days := d.byDay(f.first, f.period, f.cfg.days)
		fmt.Fprintln(f.out)
		if r == roleSum {
			fmt.Fprintf(f.out, "%s (%s, values in [%g, %g] per user and day, eps0 = %.4f), per day:\n", m.Name, m.Plugin, m.Lo, m.Hi, m.Eps0)
			fmt.Fprintf(f.out, "  %-10s %7s %8s %16s %16s  %-36s %6s\n", "day", "n", "eps", "truth (sum)", "estimate", "confidence interval", "z")
		} else {
			trend := f.trending(r)
			fmt.Fprintf(f.out, "%s (%s, %d categories, eps0 = %.4f), per day; the trending category %q shown, all checked:\n", m.Name, m.Plugin, len(m.Categories), m.Eps0, trend)
			fmt.Fprintf(f.out, "  %-10s %7s %8s %16s %16s  %-36s %6s\n", "day", "n", "eps", "truth", "estimate", "confidence interval", "z")
		}
		var all []item
		conf := 0.0
		for day, p := range days {
			label := f.first.Add(time.Duration(day) * f.period).Format(time.DateOnly)
			t := f.truth[r][day]
			if p == nil {
				if t.n > 0 {
					return false, fmt.Errorf("metric %q, day %s: no estimate of %d reports", m.Name, label, t.n)
				}
				continue
			}
			if p.EstimateError != "" || len(p.Estimates) == 0 {
				return false, fmt.Errorf("metric %q, day %s: %w: %s", m.Name, label, errNoEstimate, p.EstimateError)
			}
			conf = p.Confidence
			eps := "unknown"
			if g := p.Guarantee; g != nil {
				eps = fmt.Sprintf("%.4f", g.Eps)
			} else {
				ok = false
			}
			items := f.items(r, p, t)
			all = append(all, items...)
			var shown item
			for _, it := range items {
				if (r == roleSum && it.label == "sum") || (r != roleSum && it.label == f.trending(r)) {
					shown = it
				}
			}
			fmt.Fprintf(f.out, "  %-10s %7d %8s %16s %16s  [%15s, %15s] %6.2f\n", label, p.N, eps, num(shown.truth), num(shown.value), num(shown.lo), num(shown.hi), shown.z())
			if r == roleZipf {
				lastZipf = items
			}
		}
		if !f.check(all, conf) {
			ok = false
		}
		if !horizonShown && d.Horizon != nil {
			horizonShown = true
			if !f.printHorizon(d) {
				ok = false
			}
		}
	}
	if !horizonShown {
		fmt.Fprintln(f.out, "\nguarantee over the horizon: not reported by the collector")
		ok = false
	}
	if err := f.compare(ctx, lastZipf); err != nil {
		return false, err
	}
	return ok, nil
}

// trending returns the category whose share the population grows (see
// population).
func (f *fleet) trending(r int) string {
	cats := f.metrics[r].Categories
	if r == roleFeature {
		return cats[len(cats)-1]
	}
	return cats[min(1, len(cats)-1)]
}

// items pairs a period's estimates with the day's truth t.
func (f *fleet) items(r int, p *periodDetail, t *truth) []item {
	var items []item
	for _, es := range p.Estimates {
		it := item{label: es.Label, value: es.Value, variance: es.Variance, lo: es.Lo, hi: es.Hi}
		switch {
		case r == roleSum && es.Label == "sum":
			it.truth = t.sum
		case r == roleSum && es.Label == "mean":
			it.truth = t.sum / float64(t.n)
		case r == roleSum:
			continue
		default:
			if i, found := t.index[es.Label]; found {
				it.truth = t.counts[i]
			} // an "other" bucket holds no simulated value: truth 0
		}
		items = append(items, it)
	}
	return items
}

// shortDuration drops a Go duration's zero minutes and seconds ("24h").
func shortDuration(d string) string {
	if strings.HasSuffix(d, "m0s") {
		d = d[:len(d)-2]
	}
	if strings.HasSuffix(d, "h0m") {
		d = d[:len(d)-2]
	}
	return d
}

// printHorizon prints the collector's guarantee over the plan's horizon;
// it reports false when the guarantee is missing or above the target
// (the plan was calibrated for batches of n_min, every batch is larger).
//
// Under parallel travel the collector bounds each period's round by one
// pair that dominates every mechanism the round can be: the worst of the
// plan's weights and of every mix of metrics of the window's batches, all
// at the window's smallest batch rounded down to two significant digits
// (docs/time.md §2). A mix taken from a larger batch and accounted at the
// smallest one states a little more than that batch's own guarantee, so
// the horizon can exceed both the target and every batch's guarantee
// while being sound. There a horizon above the target passes when it is
// at least the weakest batch guarantee of its periods up to rounding
// (much less would point at a round left out) and at most parallelSlack times the target
// (the mixes of one fleet's batches stay close; a bound further off is a
// defect to look at).
func (f *fleet) printHorizon(d *metricDetail) bool {
	h := d.Horizon
	over := fmt.Sprintf("any %d consecutive periods of %s", h.Periods, shortDuration(h.Period))
	if h.Periods == 1 {
		over = "one period of " + shortDuration(h.Period)
	}
	fmt.Fprintf(f.out, "\nguarantee per user over the horizon (%s, every metric):", over)
	if h.Eps == nil {
		fmt.Fprintf(f.out, " unknown (%s)\n", h.Note)
		return f.plan.Travel == "parallel"
	}
	win := ""
	if h.Window != nil {
		win = fmt.Sprintf(", weakest window from %s, %d reports of a user", h.Window.Start.Format(time.DateOnly), h.Reports)
	}
	fmt.Fprintf(f.out, " (eps, delta) = (%.4g, %.3g)%s; the plan's target is (%g, %g)\n", *h.Eps, h.Delta, win, h.TargetEps, h.TargetDelta)
	if *h.Eps <= h.TargetEps {
		return true
	}
	if f.plan.Travel != "parallel" {
		return false
	}
	var batch float64
	for _, p := range d.Periods {
		if p.Current && p.Guarantee != nil {
			batch = math.Max(batch, p.Guarantee.Eps)
		}
	}
	lo, hi := batch*(1-pldSlack), parallelSlack*math.Max(h.TargetEps, batch)
	if *h.Eps < lo || *h.Eps > hi {
		fmt.Fprintf(f.out, "  %.6g is outside [%.6g, %.6g]: the weakest batch's guarantee (less the PLD's rounding) and %g times the larger of it and the target\n", *h.Eps, lo, hi, parallelSlack)
		return false
	}
	fmt.Fprintf(f.out, "  above the target: under parallel travel every mix of the window's batches is bounded at its smallest batch (the weakest batch alone gives %.4g)\n", batch)
	return true
}

// parallelSlack is how far above the target (or the weakest batch's own
// guarantee, when larger) a parallel horizon may lie (see printHorizon).
const parallelSlack = 1.05

// pldSlack is how far below a batch's own guarantee the horizon may lie:
// both are upper bounds, the batch's from its single-report root, the
// horizon's from the composition's discretised privacy loss, and the two
// computations differ in the last digits.
const pldSlack = 1e-3

// check checks items (every estimate of every day of a metric): every |z|
// must be at most zFail, and the number of truths outside their confidence
// intervals at most what chance allows at falseFailure (a binomial tail,
// treating the items' misses as independent). It prints one line.
func (f *fleet) check(items []item, conf float64) bool {
	if conf == 0 {
		conf = 0.95
	}
	outside, worst := 0, 0.0
	for _, it := range items {
		if it.truth < it.lo || it.truth > it.hi {
			outside++
		}
		worst = math.Max(worst, math.Abs(it.z()))
	}
	allowed := binomialAllowance(len(items), 1-conf, falseFailure)
	verdict := "ok"
	good := outside <= allowed && worst <= zFail
	if !good {
		verdict = "OFF"
	}
	fmt.Fprintf(f.out, "  all %d estimates of all days: truth outside the %g%% interval %d times (up to %d expected by chance); largest |z| = %.2f (limit %g): %s\n",
		len(items), 100*conf, outside, allowed, worst, zFail, verdict)
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
	t := f.truth[roleZipf][f.cfg.days-1] // the last day's
	ws := f.plan.Weights()
	w := ws[f.plan.MetricIndex(m.Name)] // the metric's normalised weight
	// The same target under the generic clone bound, and with local DP
	// alone: separate travel gives the metric its share of the target;
	// joint travel gives it its share of the total local budget; parallel
	// travel gives every metric the whole budget.
	share := f.plan.Target.Eps * w
	H := f.plan.HorizonPeriods()
	var genEps0 float64
	fmt.Fprintf(f.log, "  calibrating the baselines (the generic clone bound over %d periods) for the error comparison\n", H)
	// The baselines are calibrated where the plan is: at the honest floor
	// of n_min (n_min itself unless the plan has a max_fake_fraction).
	genName := fmt.Sprintf("generic clone bound composed over %d periods, same (eps, delta, n_min)", H)
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
		gen, err := accountant.Calibrate(mech, accountant.Target{Eps: f.plan.Target.Eps, Delta: f.plan.Target.Delta, N: f.plan.HonestReports(f.plan.NMin), Rounds: H})
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
		genName = fmt.Sprintf("generic clone bound composed over %d periods, linear split of (eps, delta)", H)
		gen, err := accountant.Calibrate(accountant.Generic(), accountant.Target{Eps: share, Delta: m.Delta, N: f.plan.HonestReports(f.plan.NMin), Rounds: H})
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
		{fmt.Sprintf("local DP alone, no shuffling, basic composition over %d periods", H), share / float64(H)},
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
	fmt.Fprintf(f.out, "\nmean absolute error of the %s counts of the last day (%d categories, n = %d), plan target (eps, delta) = (%.4g, %.3g) per user over %d periods at n_min = %d, the baselines' share for this metric eps = %.4g, delta = %.3g:\n",
		m.Name, len(t.labels), t.n, f.plan.Target.Eps, f.plan.Target.Delta, H, f.plan.NMin, share, m.Delta)
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
