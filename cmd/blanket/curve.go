package main

import (
	"fmt"
	"strconv"
	"strings"
	"time"

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
		rounds = sweepValue{integer: newRoundsValue()}
		points = intValue{min: 2, max: maxPoints, v: 20}
		delta  = floatValue{rule: probRule}
		users  = newCountValue()
		fakes  = newFakeFlag()
		floor  = newFloorValue()
		plotTo string
	)
	cmd := &cobra.Command{
		Use:   "curve --mech SPEC --n N|LO:HI --eps0 E|LO:HI [--rounds T|LO:HI] --delta D [--max-fake-fraction F] [--floor M]",
		Short: "Central eps over a range of n, eps0 or rounds, as CSV, JSON or a plot",
		Long: `Sweep the central eps over a range of n (--n LO:HI), of eps0 (--eps0 LO:HI) or
of the number of rounds (--rounds LO:HI); exactly one of the three is a range,
the others are single values (--rounds defaults to 1). The points are
log-spaced from LO to HI, both included, for n and rounds (rounded to integers,
repeats dropped) and for eps0 alike, to match the log axes of the plot.

--rounds T covers T reports of one user, each shuffled in its own batch of n;
the guarantee is per user over all of them (composed through privacy loss
distributions). A sweep over rounds shows how the guarantee degrades with the
horizon: every point reuses the single-report evaluations of the first.

Prints CSV by default, one row per point with the columns n, eps0, rounds,
delta, eps_upper, eps_lower, local_eps, amplified, tight, one per baseline
(clone, fmt21, bbgn19_hoeffding, bbgn19_bennett, efmrtt19, basic_composition,
kov15, clone_composed; empty where a baseline does not apply) and seconds;
--json prints an array of objects with the keys of 'blanket account eps --json'.
--plot FILE (.svg, .png or .pdf) also draws eps upper, eps lower and the
baselines against n, eps0 or T on log axes (over rounds, the composition
baselines basic_composition, kov15 and clone_composed, which start at T = 2).

For a longitudinal tree protocol --rounds is the window in periods (a sweep over
rounds sweeps the window), the baseline columns hold local (the others are
empty) and the JSON objects have the key longitudinal of 'blanket account eps'.

` + fakesHelp + `

--floor M adds, at every point, the eps with M shuffler draws of the blanket
and the honest n together and of the draws alone (as 'blanket account eps
--floor'): CSV columns floor, floor_eps_upper and floor_eps_alone after tight,
the JSON key floor, and two more curves on the plot.

Points are computed concurrently, one per CPU (GOMAXPROCS); progress is shown
on stderr when it is a terminal.

` + longitudinalHelp,
		Example: `  blanket account curve --mech krr:k=100 --eps0 4 --n 1e3:1e8 --points 20 --delta 1e-6 --plot eps.svg
  blanket account curve --mech krr:k=100 --eps0 0.5:8 --n 1e6 --delta 1e-6 --json
  blanket account curve --mech krr:k=100 --eps0 4 --n 1e6 --rounds 1:3650 --points 12 --delta 1e-6 --plot horizon.svg`,
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
			if !rounds.set {
				rounds.lo, rounds.hi = 1, 1
			}
			if _, fixed := m.FixedEps0(); fixed && eps0.isRange {
				return usageErrorf("--eps0 %s: sweeping eps0 has no effect, %s fixes its own local budget", eps0.text, m)
			}
			if err := checkOneRange(map[string]*sweepValue{"n": &n, "eps0": &eps0, "rounds": &rounds}); err != nil {
				return err
			}
			if plotTo != "" {
				if err := checkPlotPath(plotTo); err != nil {
					return err
				}
			}
			var (
				pts []curvePoint
				xs  []float64
			)
			T := int(rounds.lo)
			switch {
			case n.isRange:
				for _, v := range logSpaceInts(int(n.lo), int(n.hi), points.v) {
					pts = append(pts, curvePoint{v, eps0.lo, T})
					xs = append(xs, float64(v))
				}
			case eps0.isRange:
				for _, v := range logSpace(eps0.lo, eps0.hi, points.v) {
					pts = append(pts, curvePoint{int(n.lo), v, T})
					xs = append(xs, v)
				}
			default:
				for _, v := range logSpaceInts(int(rounds.lo), int(rounds.hi), points.v) {
					pts = append(pts, curvePoint{int(n.lo), eps0.lo, v})
					xs = append(xs, float64(v))
				}
			}
			_, long, err := longitudinalOf(m, eps0.lo)
			if err != nil {
				return err
			}
			if err := checkUsers(users, m, long); err != nil {
				return err
			}
			if err := checkFloorMech(floor, long); err != nil {
				return err
			}
			// Every point is computed for the honest floor of its n
			// (--max-fake-fraction; n itself without it), and says so.
			point := func(p curvePoint) (epsReport, error) {
				return computeEps(e, m, p.eps0, fakes.honest(p.n), p.rounds, delta.v)
			}
			switch {
			case long:
				// Every point is its own window: a tree protocol has no
				// composition to share.
				point = func(p curvePoint) (epsReport, error) {
					l, _, err := longitudinalOf(m, p.eps0)
					if err != nil {
						return epsReport{}, err
					}
					return computeLongitudinalEps(e, l, m.String(), fakes.honest(p.n), p.rounds, fakes.honest(usersOf(users)), delta.v)
				}
			case rounds.isRange:
				// One composition for the sweep: every point shares its
				// memoised single-report evaluations.
				base, err := e.engine.compose(accountant.Part{Mech: m, Eps0: eps0.lo, N: fakes.honest(int(n.lo)), Rounds: pts[0].rounds})
				if err != nil {
					return err
				}
				point = func(p curvePoint) (epsReport, error) {
					start := time.Now()
					c, err := base.withRounds(p.rounds)
					if err != nil {
						return epsReport{}, err
					}
					return composedEps(c, m, p.eps0, fakes.honest(p.n), p.rounds, delta.v, start)
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
				r, err := point(pts[i])
				if err == nil && floor.v > 0 {
					r.Floor, err = floorEps(e, m, pts[i].eps0, fakes.honest(pts[i].n), floor.v, pts[i].rounds, delta.v)
				}
				if err != nil {
					return r, fmt.Errorf("%v: %w", pts[i], err)
				}
				fakes.mark(&r.N, &r.fakeAssumption, pts[i].n, r.Longitudinal, usersOf(users))
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
			var x curveAxis
			switch {
			case n.isRange:
				x = axisN
			case eps0.isRange:
				x = axisEps0
			default:
				x = axisRounds
			}
			names := baselineNames()
			switch {
			case long:
				names = []string{baselineLocal}
			case x == axisRounds:
				names = accountant.CompositionBaselineNames
			}
			xLabel := x.label()
			if long && x == axisRounds {
				xLabel = "W (window, periods)"
			}
			return plotCurve(plotTo, curveTitle(m, x, eps0.lo, int(n.lo), T, delta.v, fakes.v),
				xLabel, "central eps (upper, lower, baselines)", xs, rows, names)
		}),
	}
	mf.add(cmd)
	cmd.Flags().Var(&eps0, "eps0", "total local budget of one report, "+eps0Rule.text+", or a range LO:HI (required unless --mech fixes it)")
	cmd.Flags().Var(&n, "n", "number of users, an integer >= 1, or a range LO:HI (required)")
	cmd.Flags().Var(&rounds, "rounds", fmt.Sprintf("number of reports of one user T, each shuffled in its own batch of n, an integer in [1, %d], or a range LO:HI (default 1)", accountant.MaxRounds))
	cmd.Flags().Var(&points, "points", "number of points of the range, an integer in [2, "+strconv.Itoa(maxPoints)+"]")
	cmd.Flags().Var(&delta, "delta", "central delta, "+probRule.text+" (required)")
	cmd.Flags().Var(users, "users", usersUsage)
	fakes.add(cmd)
	cmd.Flags().Var(floor, "floor", floorUsage)
	cmd.Flags().StringVar(&plotTo, "plot", "", "also draw the curves to this .svg, .png or .pdf file")
	return cmd
}

// curvePoint is one point of a sweep.
type curvePoint struct {
	n      int
	eps0   float64
	rounds int
}

// String names the point in errors.
func (p curvePoint) String() string {
	if p.rounds > 1 {
		return fmt.Sprintf("n=%d eps0=%g rounds=%d", p.n, p.eps0, p.rounds)
	}
	return fmt.Sprintf("n=%d eps0=%g", p.n, p.eps0)
}

// checkOneRange returns a usage error unless exactly one of the sweep
// flags (keyed by name) is a range.
func checkOneRange(flags map[string]*sweepValue) error {
	order := []string{"n", "eps0", "rounds"}
	var ranges []string
	for _, name := range order {
		if s := flags[name]; s.isRange {
			ranges = append(ranges, fmt.Sprintf("--%s %s", name, s.text))
		}
	}
	switch len(ranges) {
	case 1:
		return nil
	case 0:
		return usageErrorf("exactly one of --n, --eps0 and --rounds must be a range LO:HI (e.g. --n 1e3:1e8), got none")
	default:
		return usageErrorf("exactly one of --n, --eps0 and --rounds must be a range LO:HI, got %s", strings.Join(ranges, " and "))
	}
}

// curveAxis is the swept parameter.
type curveAxis int

const (
	axisN curveAxis = iota
	axisEps0
	axisRounds
)

func (a curveAxis) label() string {
	switch a {
	case axisN:
		return "n (number of users)"
	case axisEps0:
		return "eps0 (total local budget)"
	default:
		return "T (reports per user)"
	}
}

// curveTitle names the mechanism, the fixed parameters and delta, and a
// fraction of fake reports when not 0.
func curveTitle(m accountant.Mechanism, x curveAxis, eps0 float64, n, rounds int, delta, fakes float64) string {
	mech := shorten(m.String(), 60)
	over := ""
	if rounds > 1 {
		over = fmt.Sprintf(", T = %d", rounds)
	}
	if fakes > 0 {
		over += fmt.Sprintf(", fakes <= %g n", fakes)
	}
	switch x {
	case axisN:
		return fmt.Sprintf("%s, eps0 = %g%s, delta = %g", mech, eps0, over, delta)
	case axisEps0:
		return fmt.Sprintf("%s, n = %d%s, delta = %g", mech, n, over, delta)
	default:
		return fmt.Sprintf("%s, eps0 = %g, n = %d, delta = %g", mech, eps0, n, delta)
	}
}
