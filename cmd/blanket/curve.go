package main

import (
	"fmt"
	"strconv"

	"github.com/blanket-dp/blanket/accountant"
	"github.com/spf13/cobra"
)

// maxPoints bounds --points.
const maxPoints = 10000

func newCurveCmd(e *env) *cobra.Command {
	var (
		mf     mechFlags
		eps0   = sweepValue{rule: eps0Rule}
		n      = sweepValue{integer: newCountValue()}
		points = intValue{min: 2, max: maxPoints, v: 20}
		delta  = floatValue{rule: probRule}
		plotTo string
	)
	cmd := &cobra.Command{
		Use:   "curve --mech SPEC (--n LO:HI --eps0 E | --eps0 LO:HI --n N) --delta D",
		Short: "Central eps over a range of n or of eps0, as CSV, JSON or a plot",
		Long: `Sweep the central eps over a range of n (--n LO:HI with one --eps0) or of
eps0 (--eps0 LO:HI with one --n); exactly one of the two is a range. The points
are log-spaced from LO to HI, both included, for n (rounded to integers, repeats
dropped) and for eps0 alike, to match the log axes of the plot.

Prints CSV by default, one row per point with the columns n, eps0, delta,
eps_upper, eps_lower, local_eps, amplified, tight, one per baseline (empty where
a baseline does not apply) and seconds; --json prints an array of objects with
the keys of 'blanket account eps --json'. --plot FILE (.svg, .png or .pdf) also
draws eps upper, eps lower and the baselines against n or eps0 on log axes.

Points are computed concurrently, one per CPU (GOMAXPROCS); progress is shown
on stderr when it is a terminal.`,
		Example: `  blanket account curve --mech krr:k=100 --eps0 4 --n 1e3:1e8 --points 20 --delta 1e-6 --plot eps.svg
  blanket account curve --mech krr:k=100 --eps0 0.5:8 --n 1e6 --delta 1e-6 --json`,
		Args: cobra.NoArgs,
		RunE: runE(func(cmd *cobra.Command) error {
			m, err := mf.parse(cmd, e)
			if err != nil {
				return err
			}
			if err := requireFlags(cmd, "n", "delta"); err != nil {
				return err
			}
			if !eps0.set {
				fixed, ok := m.FixedEps0()
				if !ok {
					return usageErrorf("missing required flag --eps0: %s does not fix its own local budget", m)
				}
				eps0.lo, eps0.hi = fixed, fixed
			}
			if _, fixed := m.FixedEps0(); fixed && eps0.isRange {
				return usageErrorf("--eps0 %s: sweeping eps0 has no effect, %s fixes its own local budget", eps0.text, m)
			}
			switch {
			case n.isRange && eps0.isRange:
				return usageErrorf("exactly one of --n and --eps0 must be a range LO:HI, got --n %s and --eps0 %s", n.text, eps0.text)
			case !n.isRange && !eps0.isRange:
				return usageErrorf("exactly one of --n and --eps0 must be a range LO:HI (e.g. --n 1e3:1e8), got neither")
			}
			if plotTo != "" {
				if err := checkPlotPath(plotTo); err != nil {
					return err
				}
			}
			type point struct {
				n    int
				eps0 float64
			}
			var pts []point
			var xs []float64
			if n.isRange {
				for _, v := range logSpaceInts(int(n.lo), int(n.hi), points.v) {
					pts = append(pts, point{v, eps0.lo})
					xs = append(xs, float64(v))
				}
			} else {
				for _, v := range logSpace(eps0.lo, eps0.hi, points.v) {
					pts = append(pts, point{int(n.lo), v})
					xs = append(xs, v)
				}
			}
			var onDone func(int)
			stderr := cmd.ErrOrStderr()
			if e.isTerminal(stderr) {
				pr := newProgress(stderr, "blanket account curve", len(pts))
				onDone = pr.update
				defer pr.finish()
			}
			rows, err := forEach(cmd.Context(), len(pts), e.workers, func(i int) (epsReport, error) {
				r, err := computeEps(e, m, pts[i].eps0, pts[i].n, delta.v)
				if err != nil {
					return r, fmt.Errorf("n=%d eps0=%g: %w", pts[i].n, pts[i].eps0, err)
				}
				return r, nil
			}, onDone)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if mf.json {
				err = writeJSON(out, rows)
			} else {
				err = writeCurveCSV(out, rows)
			}
			if err != nil || plotTo == "" {
				return err
			}
			return plotCurve(plotTo, curveTitle(m, n.isRange, eps0.lo, int(n.lo), delta.v),
				axisLabel(n.isRange), "central eps (upper, lower, baselines)", xs, rows)
		}),
	}
	mf.add(cmd)
	cmd.Flags().Var(&eps0, "eps0", "total local budget of one report, "+eps0Rule.text+", or a range LO:HI (required unless --mech fixes it)")
	cmd.Flags().Var(&n, "n", "number of users, an integer >= 1, or a range LO:HI (required)")
	cmd.Flags().Var(&points, "points", "number of points of the range, an integer in [2, "+strconv.Itoa(maxPoints)+"]")
	cmd.Flags().Var(&delta, "delta", "central delta, "+probRule.text+" (required)")
	cmd.Flags().StringVar(&plotTo, "plot", "", "also draw the curves to this .svg, .png or .pdf file")
	return cmd
}

// curveTitle names the mechanism, the fixed parameter and delta.
func curveTitle(m accountant.Mechanism, overN bool, eps0 float64, n int, delta float64) string {
	mech := shorten(m.String(), 60)
	if overN {
		return fmt.Sprintf("%s, eps0 = %g, delta = %g", mech, eps0, delta)
	}
	return fmt.Sprintf("%s, n = %d, delta = %g", mech, n, delta)
}

func axisLabel(overN bool) string {
	if overN {
		return "n (number of users)"
	}
	return "eps0 (total local budget)"
}
