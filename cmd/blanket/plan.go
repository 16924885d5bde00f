package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/blanket-dp/blanket/accountant"
	"github.com/blanket-dp/blanket/collector"
	"github.com/blanket-dp/blanket/sdk/plan"
	"github.com/blanket-dp/blanket/sdk/plan/accounting"
	"github.com/blanket-dp/blanket/sdk/plugin"
)

// planReport is the --json summary of 'blanket plan'.
type planReport struct {
	Target plan.Target `json:"target"`
	NMin   int         `json:"n_min"`
	// MaxFakeFraction is the plan's max_fake_fraction and HonestNMin the
	// honest floor of n_min it was calibrated at (both omitted at 0).
	MaxFakeFraction float64         `json:"max_fake_fraction,omitempty"`
	HonestNMin      int             `json:"honest_n_min,omitempty"`
	Travel          string          `json:"travel"`
	Period          string          `json:"period"`
	Horizon         int             `json:"horizon"`
	Rounds          int             `json:"rounds"`
	Guarantee       *plan.Guarantee `json:"guarantee"`
	Metrics         []planMetricRow `json:"metrics"`
	Digest          string          `json:"digest"`
}

// planMetricRow is one metric of a planReport.
type planMetricRow struct {
	Name    string  `json:"name"`
	Plugin  string  `json:"plugin"`
	Version string  `json:"version"`
	Weight  float64 `json:"weight"`
	Eps0    float64 `json:"eps0"`
	Delta   float64 `json:"delta"`
}

// pluginOpener returns the opener of the plugins in dir (and the
// built-ins); close it when done.
func pluginOpener(dir string) *collector.Plugins {
	var opts []plugin.Option
	if dir != "" {
		opts = append(opts, plugin.WithPluginDir(dir))
	}
	return collector.NewPlugins(opts...)
}

// loadPlan loads a plan file; a missing or invalid file is a usage error.
func loadPlan(path string) (*plan.Plan, error) {
	p, err := plan.Load(path)
	if errors.Is(err, plan.ErrInvalid) || errors.Is(err, fs.ErrNotExist) {
		return nil, &usageError{err}
	}
	return p, err
}

func newPlanCmd(e *env) *cobra.Command {
	var (
		out    string
		asJSON bool
		rounds = newRoundsValue()
	)
	cmd := &cobra.Command{
		Use:         "plan PLAN.yaml [-o OUT.yaml] [--json] [--rounds T]",
		Annotations: map[string]string{oneShot: "true"},
		Short:       "Calibrate a privacy plan: every metric's local budget eps0 for the target",
		Long: `Load a privacy plan (YAML: target eps and delta, n_min, travel, metrics with their
plugins), open every metric's randomizer (built in, or a blanket-<name> binary in
--plugin-dir) and calibrate it with the accountant: each metric gets the largest
eps0 such that the plan meets its target for batches of n_min reports.

The plan's horizon (default 1) is the number of consecutive reporting periods
(period, default 24h) the target covers: every user reports every metric once
per period, each report shuffled in its own batch of n_min, and the guarantee
is per user over any window of horizon periods (all those reports composed
through privacy loss distributions), so a longer horizon gives each report a
smaller eps0. --rounds T overrides the plan's horizon with T periods (the
calibrated plan records it).

The calibrated plan (YAML, the same fields plus version, eps0, delta per metric
and the guarantee) goes to -o, or to stdout. A summary goes to stdout when -o is
given and to stderr otherwise: a table of metric, plugin, weight, eps0 and delta
share with the guarantee and the allocation rule, or with --json one object
with the keys target, n_min, max_fake_fraction and honest_n_min (omitted when
the plan's max_fake_fraction is 0), travel, rounds, guarantee {eps, delta,
rule, rounds (omitted for one)}, metrics
[{name, plugin, version, weight, eps0, delta}] and digest (SHA-256 of the
calibrated plan).

A plan's max_fake_fraction f (default 0) assumes that at most a fraction f of
any batch's valid reports are fake (bought or stolen credentials, known to the
adversary): the plan is calibrated at the honest floor of n_min,
n_min - floor(f n_min), and the collector states every guarantee at the honest
floor of its batches (docs/accounting.md §11).

Calibration is not bit-for-bit reproducible (the accountant sums in parallel):
eps0 can differ in its last digits between runs. Publish one calibration:
'blanket serve' and 'blanket collector' keep the first they make of a plan.`,
		Example: `  blanket plan examples/plan.yaml -o plan.calibrated.yaml
  blanket plan examples/plan.yaml --json > /dev/null
  blanket plan examples/plan.yaml --rounds 30 -o plan.30days.yaml`,
		Args: cobra.ExactArgs(1),
		RunE: runE(func(cmd *cobra.Command) error {
			p, err := loadPlan(cmd.Flags().Arg(0))
			if err != nil {
				return err
			}
			ps := pluginOpener(e.pluginDir)
			defer ps.Close()
			if cmd.Flags().Changed("rounds") {
				p.Horizon = rounds.v
			}
			finish := e.startStatus(cmd.ErrOrStderr(), "blanket plan")
			err = accounting.Calibrate(cmd.Context(), p, ps.Open)
			finish()
			if err != nil {
				return err
			}
			y, err := p.YAML()
			if err != nil {
				return err
			}
			summary := cmd.ErrOrStderr()
			if out != "" && out != "-" {
				if err := os.WriteFile(out, y, 0o644); err != nil {
					return err
				}
				summary = cmd.OutOrStdout()
			} else if _, err := cmd.OutOrStdout().Write(y); err != nil {
				return err
			}
			if asJSON {
				return writeJSON(summary, newPlanReport(p))
			}
			return writePlanTable(summary, p)
		}),
	}
	cmd.Flags().StringVarP(&out, "output", "o", "", "write the calibrated plan (YAML) to this file instead of stdout")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the summary as JSON instead of a table")
	cmd.Flags().Var(rounds, "rounds", fmt.Sprintf("override the plan's horizon: the number of reporting periods T the target covers (every metric reported once per period, each report shuffled in its own batch), an integer in [1, %d] (default: the plan's horizon)", accountant.MaxRounds))
	return cmd
}

func weightOf(m plan.Metric) float64 {
	if m.Weight == 0 {
		return 1
	}
	return m.Weight
}

// newPlanReport summarises the calibrated plan p.
func newPlanReport(p *plan.Plan) planReport {
	r := planReport{Target: p.Target, NMin: p.NMin, Travel: p.Travel, Period: p.PeriodLength().String(), Horizon: p.HorizonPeriods(),
		Rounds: p.HorizonPeriods(), Guarantee: p.Guarantee, Digest: p.Digest(), Metrics: []planMetricRow{}}
	if p.MaxFakeFraction > 0 {
		r.MaxFakeFraction, r.HonestNMin = p.MaxFakeFraction, p.HonestReports(p.NMin)
	}
	for _, m := range p.Metrics {
		r.Metrics = append(r.Metrics, planMetricRow{Name: m.Name, Plugin: m.Plugin, Version: m.Version, Weight: weightOf(m), Eps0: m.Eps0, Delta: m.Delta})
	}
	return r
}

// writePlanTable writes the calibration of p as a table.
func writePlanTable(w io.Writer, p *plan.Plan) error {
	t := newTable(w)
	t.row("metric", "plugin", "weight", "eps0", "delta")
	for _, m := range p.Metrics {
		t.row(m.Name, m.Plugin, fmtNum(weightOf(m)), fmtNum(m.Eps0), fmtNum(m.Delta))
	}
	if err := t.flush(); err != nil {
		return err
	}
	t = newTable(w)
	t.row("")
	over := " per period of " + fmtPeriod(p.PeriodLength())
	if h := p.HorizonPeriods(); h > 1 {
		over = fmt.Sprintf(" over any %d consecutive periods of %s (%s)", h, fmtPeriod(p.PeriodLength()), fmtPeriod(time.Duration(h)*p.PeriodLength()))
	}
	t.row("target", fmt.Sprintf("eps %s, delta %s%s at n_min = %d (travel %s)", fmtNum(p.Target.Eps), fmtNum(p.Target.Delta), over, p.NMin, p.Travel))
	if p.MaxFakeFraction > 0 {
		t.row("fake reports", fmt.Sprintf("at most %s of a batch's valid reports (max_fake_fraction): calibrated at the honest floor of n_min, %d reports", fmtNum(p.MaxFakeFraction), p.HonestReports(p.NMin)))
	} else {
		t.row("fake reports", "none assumed (max_fake_fraction 0): every valid report counts as honest")
	}
	if g := p.Guarantee; g != nil {
		t.row("guarantee", fmt.Sprintf("eps %s, delta %s per user%s", fmtNum(g.Eps), fmtNum(g.Delta), over))
		t.row("rule", strings.TrimSpace(g.Rule))
	}
	return t.flush()
}

// fmtPeriod writes d in days when it is a whole number of them ("30 days",
// "1 day"), else as a Go duration ("1h30m0s").
func fmtPeriod(d time.Duration) string {
	const day = 24 * time.Hour
	switch {
	case d == day:
		return "1 day"
	case d%day == 0:
		return fmt.Sprintf("%d days", d/day)
	}
	return d.String()
}
