package main

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/blanket-dp/blanket/accountant"
	"github.com/spf13/cobra"
)

// mechHelp documents the --mech grammar.
const mechHelp = `The --mech flag names the local randomizer:

  krr:k=K                 k-ary randomized response over K categories
  generic                 any pure eps0-LDP randomizer (worst case over the class)
  PLUGIN[:key=value...]   a plugin's own declaration: hadamard:k=K, rappor:d=D,
                          summation:k=LEVELS, laplace, or any plugin binary
                          ('blanket plugin list'). The host takes some keys:
                          eps0=E (the plugin's own budget), and k, d or
                          categories=N (N categories, labelled 0..N-1, given to
                          the plugin as its categories; summation's k is its
                          levels); every other key reaches the plugin as a
                          parameter (sdk.Config.Params)
  matrix:FILE.json        a declaration file: a matrix {"rows": [[...], ...]} with
                          optional "eps0", or {"form": "matrix"|"atoms"|"segments"|"generic", ...};
                          its eps0 is fixed by the file
  joint(M1,M2,...)        one report carries every component
  parallel(W1:M1,W2:M2)   each user reports component i with probability Wi (sum 1)
  subsample(S,M)          each user reports with probability S, else a null message
  longitudinal:tree=H     the tree protocol of Erlingsson et al. 2019 over trees of H
                          periods; --rounds is the window in periods (optional
                          :changes=K, :eps0=E); accounted alone, never inside
                          joint, parallel or subsample

--eps0 is the total local budget of one report. joint splits it evenly among
its components, except those that fix their own with :eps0=E (krr:k=10:eps0=1.5,
generic:eps0=2); every component of parallel and subsample gets all of it.
Combinators nest. Quote values that contain , ( ) : = or spaces in double quotes:
matrix:"my data/m.json". Numbers accept 1e6, 1_000_000 and 1000000.`

// roundsHelp documents --rounds.
const roundsHelp = `--rounds T bounds T reports of one user, each shuffled in its own batch of n;
the guarantee is per user over all of them (composed through privacy loss
distributions). With T > 1 the baselines are basic_composition (T times the
single-report eps at delta/T), kov15 (the optimal composition of one
single-report (eps_1, delta_1) guarantee, Kairouz, Oh and Viswanath 2015, best
over eps_1) and clone_composed (the generic clone bound composed the same way);
the single-report baselines are then null. With T = 1, the default, it is the
other way round and the numbers are those of one report.`

// roundsUsage is the usage of --rounds.
var roundsUsage = fmt.Sprintf("number of reports of one user T, each shuffled in its own batch of n, an integer in [1, %d]; the bounds cover all of them (default 1)", accountant.MaxRounds)

// mechFlags are the flags every account command shares.
type mechFlags struct {
	mech string
	json bool
}

func (f *mechFlags) add(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.mech, "mech", "", "the randomizer, e.g. krr:k=100 (see 'blanket account --help') (required)")
	cmd.Flags().BoolVar(&f.json, "json", false, "print JSON instead of a table")
}

// parse parses --mech.
func (f *mechFlags) parse(cmd *cobra.Command, e *env) (accountant.Mechanism, error) {
	if err := requireFlags(cmd, "mech"); err != nil {
		return nil, err
	}
	m, err := e.registry.Parse(f.mech)
	if err != nil {
		return nil, &usageError{fmt.Errorf("--mech: %w", err)}
	}
	return m, nil
}

// resolveEps0 returns --eps0, or the mechanism's own budget when it fixes
// one and --eps0 is not given.
func resolveEps0(m accountant.Mechanism, eps0 float64, given bool) (float64, error) {
	if given {
		return eps0, nil
	}
	if fixed, ok := m.FixedEps0(); ok {
		return fixed, nil
	}
	return 0, usageErrorf("missing required flag --eps0: %s does not fix its own local budget", m)
}

func newAccountCmd(e *env) *cobra.Command {
	cmd := &cobra.Command{
		Use:         "account",
		Annotations: map[string]string{oneShot: "true"},
		Short:       "Bound, compare and calibrate the privacy of a shuffled randomizer",
		Long: `Compute the central privacy of n shuffled reports of a local randomizer: eps at a
given delta (eps), delta at a given eps (delta), the largest local budget meeting
a target (calibrate), or a sweep over n, eps0 or the number of rounds (curve).
Every result has a sound upper bound, a lower bound (what no analysis can beat)
and the published baselines (clone, fmt21, bbgn19_hoeffding, bbgn19_bennett,
efmrtt19 for one report; basic_composition, kov15, clone_composed for several;
n/a or null where a baseline does not apply).

Privacy over time: --rounds T (every command, default 1) covers T reports of
one user, each shuffled in its own batch of n; the guarantee is per user over
all of them (composed through privacy loss distributions).

` + fakesHelp + `

` + longitudinalHelp + `

` + mechHelp + "\n\nRegistered mechanisms: " + strings.Join(e.registry.Names(), ", ") + ".",
		Args: cobra.NoArgs,
	}
	cmd.AddCommand(newEpsCmd(e), newDeltaCmd(e), newCalibrateCmd(e), newCurveCmd(e))
	return cmd
}

// computeEps computes the bounds and baselines of one (eps0, n, rounds,
// delta) point: one report through the single-report engine, several
// through a composition.
func computeEps(e *env, m accountant.Mechanism, eps0 float64, n, rounds int, delta float64) (epsReport, error) {
	start := time.Now()
	if rounds > 1 {
		c, err := e.engine.compose(accountant.Part{Mech: m, Eps0: eps0, N: n, Rounds: rounds})
		if err != nil {
			return epsReport{}, err
		}
		return composedEps(c, m, eps0, n, rounds, delta, start)
	}
	// The bounds and the baselines are independent: side by side, the
	// baselines' searches fill the core the bounds' leave idle.
	var bl map[string]*float64
	res, err, blErr := both(func() (accountant.EpsilonResult, error) { return e.engine.epsilon(m, eps0, n, delta) },
		func() (err error) { bl, err = e.engine.epsilonBaselines(m, eps0, n, delta); return err })
	if err != nil {
		return epsReport{}, err
	}
	if blErr != nil {
		return epsReport{}, fmt.Errorf("baselines: %w", blErr)
	}
	return newEpsReport(m, eps0, n, 1, delta, res, bl, start), nil
}

// composedEps computes the bounds and baselines of c, the composition of
// rounds reports of m at (eps0, n), at delta; start is when the work
// began.
func composedEps(c composition, m accountant.Mechanism, eps0 float64, n, rounds int, delta float64, start time.Time) (epsReport, error) {
	var bl map[string]*float64
	res, err, blErr := both(func() (accountant.EpsilonResult, error) { return c.Epsilon(delta) },
		func() (err error) { bl, err = c.EpsilonBaselines(delta); return err })
	if err != nil {
		return epsReport{}, err
	}
	if blErr != nil {
		return epsReport{}, fmt.Errorf("baselines: %w", blErr)
	}
	return newEpsReport(m, eps0, n, rounds, delta, res, bl, start), nil
}

// both runs f and g concurrently (a composition's bounds and its baselines
// are independent, and each mostly runs on one core) and returns their
// results. A panic in g is re-raised on the calling goroutine.
func both[T any](f func() (T, error), g func() error) (v T, fErr, gErr error) {
	var panicked any
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer func() { panicked = recover() }()
		gErr = g()
	}()
	v, fErr = f()
	<-done
	if panicked != nil {
		panic(panicked)
	}
	return v, fErr, gErr
}

// newEpsReport assembles an epsReport.
func newEpsReport(m accountant.Mechanism, eps0 float64, n, rounds int, delta float64, res accountant.EpsilonResult, bl map[string]*float64, start time.Time) epsReport {
	return epsReport{
		Mechanism: m.String(),
		Eps0:      eps0,
		N:         n,
		Rounds:    rounds,
		Delta:     delta,
		EpsUpper:  num(res.Upper),
		EpsLower:  num(res.Lower),
		LocalEps:  num(res.LocalEps),
		Amplified: res.Amplified,
		Tight:     res.Tight,
		Baselines: newBaselineSet(bl),
		Seconds:   time.Since(start).Seconds(),
	}
}

func newEpsCmd(e *env) *cobra.Command {
	var (
		mf     mechFlags
		eps0   = floatValue{rule: eps0Rule}
		n      = newCountValue()
		rounds = newRoundsValue()
		delta  = floatValue{rule: probRule}
		users  = newCountValue()
		fakes  = newFakeFlag()
		floor  = newFloorValue()
	)
	cmd := &cobra.Command{
		Use:   "eps --mech SPEC --eps0 E --n N --delta D [--rounds T] [--users U] [--max-fake-fraction F] [--floor M]",
		Short: "Central eps at a given delta",
		Long: `Print the central eps of n shuffled reports at the given delta: a sound upper
bound, a lower bound and every baseline. When shuffling cannot improve on the
local guarantee at this n, eps = eps0 (T eps0 over T rounds) and a note says
so.

` + roundsHelp + `

` + fakesHelp + `

` + floorHelp + `

--json prints one object with the keys mechanism, eps0, n, rounds, delta,
eps_upper, eps_lower, local_eps, amplified, tight, baselines (clone, fmt21,
bbgn19_hoeffding, bbgn19_bennett, efmrtt19, basic_composition, kov15,
clone_composed; null where a baseline does not apply) and seconds (wall time).
For a longitudinal tree protocol the baselines hold local and the object has
the key longitudinal: upper, per_period, transcript (null without --users),
trees, levels, mates, tail, local and users.

` + longitudinalHelp,
		Example: `  blanket account eps --mech krr:k=100 --eps0 4 --n 1e6 --delta 1e-6
  blanket account eps --mech krr:k=100 --eps0 4 --n 1e6 --delta 1e-6 --rounds 365
  blanket account eps --mech longitudinal:tree=64 --eps0 1 --n 1e5 --delta 1e-6 --rounds 365`,
		Args: cobra.NoArgs,
		RunE: runE(func(cmd *cobra.Command) error {
			m, err := mf.parse(cmd, e)
			if err != nil {
				return err
			}
			if err := requireFlags(cmd, "n", "delta"); err != nil {
				return err
			}
			e0, err := resolveEps0(m, eps0.v, eps0.set)
			if err != nil {
				return err
			}
			l, long, err := longitudinalOf(m, e0)
			if err != nil {
				return err
			}
			if err := checkUsers(users, m, long); err != nil {
				return err
			}
			if err := checkFloorMech(floor, long); err != nil {
				return err
			}
			finish := e.startStatus(cmd.ErrOrStderr(), "blanket account eps")
			var r epsReport
			if long {
				r, err = computeLongitudinalEps(e, l, m.String(), fakes.honest(n.v), rounds.v, fakes.honest(usersOf(users)), delta.v)
			} else {
				start := time.Now()
				r, err = computeEps(e, m, e0, fakes.honest(n.v), rounds.v, delta.v)
				if err == nil && floor.v > 0 {
					r.Floor, err = floorEps(e, m, e0, fakes.honest(n.v), floor.v, rounds.v, delta.v)
					r.Seconds = time.Since(start).Seconds()
				}
			}
			finish()
			if err != nil {
				return err
			}
			fakes.mark(&r.N, &r.fakeAssumption, n.v, r.Longitudinal, usersOf(users))
			if mf.json {
				return writeJSON(cmd.OutOrStdout(), r)
			}
			return writeEpsTable(cmd.OutOrStdout(), &r)
		}),
	}
	mf.add(cmd)
	cmd.Flags().Var(&eps0, "eps0", "total local budget of one report, "+eps0Rule.text+" (required unless --mech fixes it)")
	cmd.Flags().Var(n, "n", "number of users (shuffled reports), an integer >= 1 (required)")
	cmd.Flags().Var(&delta, "delta", "central delta, "+probRule.text+" (required)")
	cmd.Flags().Var(rounds, "rounds", roundsUsage)
	cmd.Flags().Var(users, "users", usersUsage)
	cmd.Flags().Var(floor, "floor", floorUsage)
	fakes.add(cmd)
	return cmd
}

func newDeltaCmd(e *env) *cobra.Command {
	var (
		mf     mechFlags
		eps0   = floatValue{rule: eps0Rule}
		n      = newCountValue()
		rounds = newRoundsValue()
		eps    = floatValue{rule: epsRule}
		users  = newCountValue()
		fakes  = newFakeFlag()
		floor  = newFloorValue()
	)
	cmd := &cobra.Command{
		Use:   "delta --mech SPEC --eps0 E --n N --eps EPS [--rounds T] [--users U] [--max-fake-fraction F] [--floor M]",
		Short: "Central delta at a given eps",
		Long: `Print the central delta of n shuffled reports at the given eps: a sound upper
bound, a lower bound and every baseline.

` + roundsHelp + `

` + fakesHelp + `

` + floorHelp + `

--json prints one object with the keys mechanism, eps0, n, rounds, eps,
delta_upper, delta_lower, baselines (the eight of 'blanket account eps', null
where a baseline does not apply) and seconds. For a longitudinal tree protocol
the baselines hold local (the delta of the local bound alone: trees x eps0 pure
DP, as binary randomized response) and the object has the key longitudinal:
upper, per_period, transcript, local_delta, trees, levels, mates, tail, local
(in eps) and users. Its per_period bound picks the level-mates that minimise
the delta among a few candidates; every candidate is a sound bound.

` + longitudinalHelp,
		Example: `  blanket account delta --mech krr:k=100 --eps0 4 --n 1e6 --eps 0.5
  blanket account delta --mech krr:k=100 --eps0 4 --n 1e6 --eps 2 --rounds 365`,
		Args: cobra.NoArgs,
		RunE: runE(func(cmd *cobra.Command) error {
			m, err := mf.parse(cmd, e)
			if err != nil {
				return err
			}
			if err := requireFlags(cmd, "n", "eps"); err != nil {
				return err
			}
			e0, err := resolveEps0(m, eps0.v, eps0.set)
			if err != nil {
				return err
			}
			l, long, err := longitudinalOf(m, e0)
			if err != nil {
				return err
			}
			if err := checkUsers(users, m, long); err != nil {
				return err
			}
			if err := checkFloorMech(floor, long); err != nil {
				return err
			}
			if long {
				finish := e.startStatus(cmd.ErrOrStderr(), "blanket account delta")
				r, err := computeLongitudinalDelta(e, l, m.String(), fakes.honest(n.v), rounds.v, fakes.honest(usersOf(users)), eps.v)
				finish()
				if err != nil {
					return err
				}
				fakes.mark(&r.N, &r.fakeAssumption, n.v, nil, 0)
				if r.Longitudinal != nil && fakes.v > 0 {
					r.Longitudinal.Users, r.Longitudinal.HonestUsers = usersOf(users), fakes.honest(usersOf(users))
				}
				if mf.json {
					return writeJSON(cmd.OutOrStdout(), r)
				}
				return writeDeltaTable(cmd.OutOrStdout(), &r)
			}
			start := time.Now()
			finish := e.startStatus(cmd.ErrOrStderr(), "blanket account delta")
			res, bl, err := computeDelta(e, m, e0, fakes.honest(n.v), rounds.v, eps.v)
			var fl *floorParts
			if err == nil && floor.v > 0 {
				fl, err = floorDelta(e, m, e0, fakes.honest(n.v), floor.v, rounds.v, eps.v)
			}
			finish()
			if err != nil {
				return err
			}
			r := deltaReport{
				Mechanism:      m.String(),
				Eps0:           e0,
				N:              n.v,
				fakeAssumption: fakes.assumption(n.v),
				Rounds:         rounds.v,
				Eps:            eps.v,
				DeltaUpper:     num(res.Upper),
				DeltaLower:     num(res.Lower),
				Baselines:      newBaselineSet(bl),
				Seconds:        time.Since(start).Seconds(),
				Floor:          fl,
			}
			if mf.json {
				return writeJSON(cmd.OutOrStdout(), r)
			}
			return writeDeltaTable(cmd.OutOrStdout(), &r)
		}),
	}
	mf.add(cmd)
	cmd.Flags().Var(&eps0, "eps0", "total local budget of one report, "+eps0Rule.text+" (required unless --mech fixes it)")
	cmd.Flags().Var(n, "n", "number of users (shuffled reports), an integer >= 1 (required)")
	cmd.Flags().Var(&eps, "eps", "central eps, "+epsRule.text+" (required)")
	cmd.Flags().Var(rounds, "rounds", roundsUsage)
	cmd.Flags().Var(users, "users", usersUsage)
	cmd.Flags().Var(floor, "floor", floorUsage)
	fakes.add(cmd)
	return cmd
}

// computeDelta computes the delta bounds and baselines of rounds reports
// of m at (eps0, n), at eps.
func computeDelta(e *env, m accountant.Mechanism, eps0 float64, n, rounds int, eps float64) (accountant.DeltaResult, map[string]*float64, error) {
	if rounds > 1 {
		c, err := e.engine.compose(accountant.Part{Mech: m, Eps0: eps0, N: n, Rounds: rounds})
		if err != nil {
			return accountant.DeltaResult{}, nil, err
		}
		var bl map[string]*float64
		res, err, blErr := both(func() (accountant.DeltaResult, error) { return c.Delta(eps) },
			func() (err error) { bl, err = c.DeltaBaselines(eps); return err })
		if err != nil {
			return accountant.DeltaResult{}, nil, err
		}
		if blErr != nil {
			return accountant.DeltaResult{}, nil, fmt.Errorf("baselines: %w", blErr)
		}
		return res, bl, nil
	}
	var bl map[string]*float64
	res, err, blErr := both(func() (accountant.DeltaResult, error) { return e.engine.delta(m, eps0, n, eps) },
		func() (err error) { bl, err = e.engine.deltaBaselines(m, eps0, n, eps); return err })
	if err != nil {
		return accountant.DeltaResult{}, nil, err
	}
	if blErr != nil {
		return accountant.DeltaResult{}, nil, fmt.Errorf("baselines: %w", blErr)
	}
	return res, bl, nil
}

func newCalibrateCmd(e *env) *cobra.Command {
	var (
		mf     mechFlags
		n      = newCountValue()
		rounds = newRoundsValue()
		eps    = floatValue{rule: epsRule}
		delta  = floatValue{rule: probRule}
		fakes  = newFakeFlag()
		floor  = newFloorValue()
	)
	cmd := &cobra.Command{
		Use:   "calibrate --mech SPEC --eps EPS --delta D --n N [--rounds T] [--max-fake-fraction F] [--floor M]",
		Short: "Largest local budget eps0 that meets a central (eps, delta) target",
		Long: `Print the largest total local budget eps0 whose sound upper bound meets the
central target (eps, delta) at n users, the guarantee achieved at that eps0, and
the largest eps0 each baseline would allow. Mechanisms whose eps0 is fixed
(matrix:FILE.json, or joint components that all fix their own) cannot be
calibrated.

With --rounds T the target covers all T reports of a user: eps0 is the budget
of each of them.

` + roundsHelp + `

` + fakesHelp + `

--floor M calibrates for batches to which the shuffler adds M draws of the
blanket (docs/accounting.md section 13): eps0 meets the target with the honest n
and the draws together; the baselines stay those without draws. The JSON object
adds floor (M).

--json prints one object with the keys mechanism, eps, delta, n, rounds, eps0,
achieved (eps_upper, eps_lower, local_eps, amplified, tight), baselines (the
eps0 each allows, keyed as in 'blanket account eps'; null where a baseline does
not apply) and seconds.

A longitudinal tree protocol is calibrated over a window of --rounds periods
with batches of at least --n (the per-period and local bounds; the transcript
bound of --users is not used, which can only make eps0 smaller). Its baselines
hold local, the largest eps0 whose local bound (trees x eps0) alone meets eps,
and the object has the key longitudinal: the parts of 'blanket account eps' at
the eps0 found.`,
		Example: `  blanket account calibrate --mech krr:k=100 --eps 1 --delta 1e-6 --n 1e6
  blanket account calibrate --mech krr:k=100 --eps 1 --delta 1e-6 --n 1e6 --rounds 30`,
		Args: cobra.NoArgs,
		RunE: runE(func(cmd *cobra.Command) error {
			m, err := mf.parse(cmd, e)
			if err != nil {
				return err
			}
			if err := requireFlags(cmd, "eps", "delta", "n"); err != nil {
				return err
			}
			t := accountant.Target{Eps: eps.v, Delta: delta.v, N: fakes.honest(n.v), Rounds: rounds.v, Floor: floor.v}
			// An error asking the mechanism for its declaration is left to
			// the calibration, which reports it at the eps0 it tries.
			if long, err := isLongitudinal(m); err == nil && long {
				if err := checkFloorMech(floor, true); err != nil {
					return err
				}
				return runLongitudinalCalibrate(cmd, e, m, t, mf.json, func(r *calibrateReport) {
					fakes.mark(&r.N, &r.fakeAssumption, n.v, nil, 0)
				})
			}
			start := time.Now()
			var (
				c     accountant.CalibrationResult
				bl    map[string]*float64
				blErr error
			)
			finish := e.startStatus(cmd.ErrOrStderr(), "blanket account calibrate")
			if _, fixed := m.FixedEps0(); !fixed {
				// Both search many budgets (the baselines calibrate the
				// clone): run them side by side.
				c, err, blErr = both(func() (accountant.CalibrationResult, error) { return e.engine.calibrate(m, t) },
					func() (err error) { bl, err = e.engine.calibrateBaselines(m, t); return err })
			} else {
				c, err = e.engine.calibrate(m, t)
				if err == nil {
					bl, blErr = e.engine.calibrateBaselines(m, t)
				}
			}
			finish()
			if errors.Is(err, accountant.ErrNotCalibratable) {
				return &usageError{err}
			}
			if err != nil {
				return err
			}
			if blErr != nil {
				return fmt.Errorf("baselines: %w", blErr)
			}
			r := calibrateReport{
				Mechanism:      m.String(),
				Eps:            t.Eps,
				Delta:          t.Delta,
				N:              n.v,
				fakeAssumption: fakes.assumption(n.v),
				Rounds:         rounds.v,
				Eps0:           num(c.Eps0),
				Achieved: achieved{
					EpsUpper:  num(c.Achieved.Upper),
					EpsLower:  num(c.Achieved.Lower),
					LocalEps:  num(c.Achieved.LocalEps),
					Amplified: c.Achieved.Amplified,
					Tight:     c.Achieved.Tight,
				},
				Baselines: newBaselineSet(bl),
				Seconds:   time.Since(start).Seconds(),
				Floor:     floor.v,
			}
			if mf.json {
				return writeJSON(cmd.OutOrStdout(), r)
			}
			return writeCalibrateTable(cmd.OutOrStdout(), &r)
		}),
	}
	mf.add(cmd)
	cmd.Flags().Var(&eps, "eps", "target central eps, "+epsRule.text+" (required)")
	cmd.Flags().Var(&delta, "delta", "target central delta, "+probRule.text+" (required)")
	cmd.Flags().Var(n, "n", "number of users (shuffled reports), an integer >= 1 (required)")
	cmd.Flags().Var(rounds, "rounds", roundsUsage)
	cmd.Flags().Var(floor, "floor", fmt.Sprintf("number of blanket draws M the shuffler adds to each batch, an integer in [0, %d]: eps0 meets the target with them (default 0: none)", accountant.MaxN))
	fakes.add(cmd)
	return cmd
}
