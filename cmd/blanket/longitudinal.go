package main

import (
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/blanket-dp/blanket/accountant"
	"github.com/spf13/cobra"
)

// This file is how the account commands treat a longitudinal tree protocol
// (accountant.Longitudinal): --rounds is the window in periods, --n the
// smallest batch of a period, --users the optional transcript bound.

// longitudinalHelp documents the account commands on a tree protocol.
const longitudinalHelp = `A longitudinal tree protocol (--mech longitudinal:tree=H, or a declaration with a
tree) is accounted over a window of periods: --rounds W is the window in periods
and --n the smallest batch a period's reports are shuffled in (every level
together). The data protected is the state history: two histories differing
only inside one window of W periods are neighbours, and every report that
difference can change counts, after the window included (docs/time.md §5).
Its eps is the smallest of three bounds: per_period (two shuffled node reports
per tree the window meets, the level-mates inferred from --n over every period
that can hold one, their tail paid from delta), transcript (only with --users)
and local (T trees times eps0, T the trees a window of W periods meets). No lower bound is known (0). The published
baselines bound independent reports, which a tree protocol does not send: only
local applies, the others are n/a.

--users U adds the transcript bound: the amplification of one tree's whole
transcript, eps0-LDP, among U users, composed over the T trees. It is sound only
when, in every period of the window, the reports of all U users are shuffled in
one batch and every one of them sends every report its level calls for (every
user reports at every end of a node of its level: no user offline, no period
split into several batches). The batches cannot show whether that holds; leave
--users out unless the deployment guarantees it.`

// usersUsage is the usage of --users.
var usersUsage = "with a longitudinal --mech only: the number of users U whose reports are shuffled in one batch in every period, every user reporting at every node end; adds the transcript bound, sound only under that condition (see --help). An integer >= 1; default: not assumed"

// noteLongitudinal is printed under every table of a tree protocol.
const noteLongitudinal = "longitudinal tree protocol: --rounds is the window in periods, --n the smallest batch of a period; the bound is the smallest of per_period, transcript (with --users) and local (trees x eps0)"

// noteLongitudinalNA replaces noteBaselines for a tree protocol.
const noteLongitudinalNA = "n/a: the published baselines bound independent reports, and a tree protocol's are not independent across periods; only local applies"

// noteLongitudinalNoLower says that the lower bound is trivial.
const noteLongitudinalNoLower = "no lower bound is known for a tree protocol: the lower bound 0 is trivial"

// noteLongitudinalNotAmplified is the note for a bound at the local level.
const noteLongitudinalNotAmplified = "shuffling cannot help at this n; eps = local eps, trees x eps0"

// longitudinalParts is the breakdown of a tree protocol's eps, the key
// "longitudinal" of the eps, curve and calibrate JSON.
type longitudinalParts struct {
	Upper      *float64 `json:"upper"`
	PerPeriod  *float64 `json:"per_period"`
	Transcript *float64 `json:"transcript"`
	Trees      int      `json:"trees"`
	Levels     int      `json:"levels"`
	Mates      int      `json:"mates"`
	Tail       float64  `json:"tail"`
	Local      *float64 `json:"local"`
	Users      int      `json:"users"`
	// HonestUsers is, with --max-fake-fraction, the honest floor of Users
	// the transcript bound is computed for (omitted without).
	HonestUsers int `json:"honest_users,omitempty"`
}

// longitudinalDeltaParts is the breakdown of a tree protocol's delta, the
// key "longitudinal" of the delta JSON.
type longitudinalDeltaParts struct {
	Upper      *float64 `json:"upper"`
	PerPeriod  *float64 `json:"per_period"`
	Transcript *float64 `json:"transcript"`
	LocalDelta *float64 `json:"local_delta"`
	Trees      int      `json:"trees"`
	Levels     int      `json:"levels"`
	Mates      int      `json:"mates"`
	Tail       float64  `json:"tail"`
	Local      *float64 `json:"local"`
	Users      int      `json:"users"`
	// HonestUsers is as in longitudinalParts.
	HonestUsers int `json:"honest_users,omitempty"`
}

// longitudinalOf returns the Longitudinal of m at eps0 when m is a tree
// protocol (accountant.LongitudinalOf).
func longitudinalOf(m accountant.Mechanism, eps0 float64) (accountant.Longitudinal, bool, error) {
	return accountant.LongitudinalOf(m, eps0)
}

// isLongitudinal reports whether m is a tree protocol, asking it at its own
// eps0 or at 1 (accountant.IsLongitudinal, safe on every mechanism).
func isLongitudinal(m accountant.Mechanism) (bool, error) {
	eps0, fixed := m.FixedEps0()
	if !fixed {
		eps0 = 1
	}
	_, ok, err := accountant.LongitudinalOf(m, eps0)
	return ok, err
}

// checkUsers returns a usage error when --users is given for a mechanism
// that is not a tree protocol.
func checkUsers(users *intValue, m accountant.Mechanism, long bool) error {
	if users.set && !long {
		return usageErrorf("--users %d: the transcript bound applies to a longitudinal tree protocol only, and %s is not one", users.v, m)
	}
	return nil
}

// usersOf returns --users, 0 when not given.
func usersOf(users *intValue) int {
	if !users.set {
		return 0
	}
	return users.v
}

// computeLongitudinalEps computes the guarantee of the tree protocol l over
// a window of rounds periods with batches of at least n, with users
// (0: none) for the transcript bound, at delta.
func computeLongitudinalEps(e *env, l accountant.Longitudinal, mech string, n, rounds, users int, delta float64) (epsReport, error) {
	start := time.Now()
	l.Periods, l.Batch, l.Users = rounds, n, users
	r, err := e.engine.longEpsilon(l, delta)
	if err != nil {
		return epsReport{}, err
	}
	return epsReport{
		Mechanism: mech,
		Eps0:      l.Eps0,
		N:         n,
		Rounds:    rounds,
		Delta:     delta,
		EpsUpper:  num(r.Upper),
		EpsLower:  num(0),
		LocalEps:  num(r.Local),
		Amplified: r.Upper < r.Local,
		Tight:     false,
		Baselines: newBaselineSet(map[string]*float64{baselineLocal: num(r.Local)}),
		Seconds:   time.Since(start).Seconds(),
		Longitudinal: &longitudinalParts{
			Upper:      num(r.Upper),
			PerPeriod:  num(r.PerPeriod),
			Transcript: num(r.Transcript),
			Trees:      r.Trees,
			Levels:     r.Levels,
			Mates:      r.Mates,
			Tail:       r.Tail,
			Local:      num(r.Local),
			Users:      users,
		},
	}, nil
}

// baselineLocal is the one baseline of a tree protocol: the local bound.
const baselineLocal = "local"

// computeLongitudinalDelta computes the delta of the tree protocol l over a
// window of rounds periods with batches of at least n, with users (0:
// none) for the transcript bound, at eps.
func computeLongitudinalDelta(e *env, l accountant.Longitudinal, mech string, n, rounds, users int, eps float64) (deltaReport, error) {
	start := time.Now()
	l.Periods, l.Batch, l.Users = rounds, n, users
	r, err := e.engine.longDelta(l, eps)
	if err != nil {
		return deltaReport{}, err
	}
	return deltaReport{
		Mechanism:  mech,
		Eps0:       l.Eps0,
		N:          n,
		Rounds:     rounds,
		Eps:        eps,
		DeltaUpper: num(r.Upper),
		DeltaLower: num(0),
		Baselines:  newBaselineSet(map[string]*float64{baselineLocal: num(r.LocalDelta)}),
		Seconds:    time.Since(start).Seconds(),
		Longitudinal: &longitudinalDeltaParts{
			Upper:      num(r.Upper),
			PerPeriod:  num(r.PerPeriod),
			Transcript: num(r.Transcript),
			LocalDelta: num(r.LocalDelta),
			Trees:      r.Trees,
			Levels:     r.Levels,
			Mates:      r.Mates,
			Tail:       r.Tail,
			Local:      num(r.Local),
			Users:      users,
		},
	}, nil
}

// calibrateLongitudinal calibrates the tree protocol m to the target over
// a window of t.Rounds periods (accountant.CalibrateLongitudinal) and
// reports the guarantee's parts at the eps0 found. The local baseline is
// the largest eps0 whose local bound alone meets t.Eps.
func calibrateLongitudinal(e *env, m accountant.Mechanism, t accountant.Target) (calibrateReport, error) {
	start := time.Now()
	if fixed, ok := m.FixedEps0(); ok {
		return calibrateReport{}, &usageError{fmt.Errorf("%w: %s fixes eps0 = %g", accountant.ErrNotCalibratable, m, fixed)}
	}
	l, _, err := longitudinalOf(m, 1)
	if err != nil {
		return calibrateReport{}, err
	}
	c, err := e.engine.longCalibrate(m, t)
	if err != nil {
		return calibrateReport{}, err
	}
	r := calibrateReport{
		Mechanism: m.String(),
		Eps:       t.Eps,
		Delta:     t.Delta,
		N:         t.N,
		Rounds:    t.Rounds,
		Eps0:      num(c.Eps0),
		Achieved: achieved{
			EpsUpper:  num(c.Achieved.Upper),
			EpsLower:  num(c.Achieved.Lower),
			LocalEps:  num(c.Achieved.LocalEps),
			Amplified: c.Achieved.Amplified,
			Tight:     c.Achieved.Tight,
		},
		Baselines: newBaselineSet(map[string]*float64{baselineLocal: num(localCalibrated(l.Tree, accountant.TreesInWindow(l.Tree, t.Rounds), t.Eps))}),
	}
	// The parts at the eps0 found: the same evaluation the calibration
	// accepted.
	at, ok, err := longitudinalOf(m, c.Eps0)
	if err != nil || !ok {
		return calibrateReport{}, fmt.Errorf("at the calibrated eps0 = %g: %v", c.Eps0, err)
	}
	p, err := computeLongitudinalEps(e, at, m.String(), t.N, t.Rounds, 0, t.Delta)
	if err != nil {
		return calibrateReport{}, fmt.Errorf("at the calibrated eps0 = %g: %w", c.Eps0, err)
	}
	r.Longitudinal = p.Longitudinal
	r.Seconds = time.Since(start).Seconds()
	return r, nil
}

// localCalibrated returns the largest eps0 at which trees trees of the
// given size are eps-DP locally: TranscriptLocalEps(tree, eps0) = eps/trees,
// capped at accountant.MaxEps0.
func localCalibrated(tree, trees int, eps float64) float64 {
	per := eps / float64(trees)
	if tree == 1 {
		// log((e^eps0+1)/2) = per.
		per = math.Log(2*math.Exp(per) - 1)
	}
	return math.Min(per, accountant.MaxEps0)
}

// writeLongitudinalRows adds the parts of a tree protocol's eps to a table.
func writeLongitudinalRows(t *table, p *longitudinalParts) {
	t.row("")
	t.row("longitudinal", "eps")
	t.row("  per_period", fmtOpt(p.PerPeriod))
	t.row("  transcript", transcriptCell(p.Transcript, p.Users))
	t.row("  local", fmtOpt(p.Local))
	t.row("  trees", strconv.Itoa(p.Trees))
	t.row("  levels", strconv.Itoa(p.Levels))
	t.row("  mates", strconv.Itoa(p.Mates))
	t.row("  tail", fmtNum(p.Tail))
	t.row("  users", usersCell(p.Users, p.HonestUsers))
}

// writeLongitudinalDeltaRows adds the parts of a tree protocol's delta to a
// table.
func writeLongitudinalDeltaRows(t *table, p *longitudinalDeltaParts) {
	t.row("")
	t.row("longitudinal", "delta")
	t.row("  per_period", fmtOpt(p.PerPeriod))
	t.row("  transcript", transcriptCell(p.Transcript, p.Users))
	t.row("  local", fmtOpt(p.LocalDelta))
	t.row("  local eps", fmtOpt(p.Local))
	t.row("  trees", strconv.Itoa(p.Trees))
	t.row("  levels", strconv.Itoa(p.Levels))
	t.row("  mates", strconv.Itoa(p.Mates))
	t.row("  tail", fmtNum(p.Tail))
	t.row("  users", usersCell(p.Users, p.HonestUsers))
}

func transcriptCell(v *float64, users int) string {
	if users == 0 {
		return "n/a (no --users)"
	}
	return fmtOpt(v)
}

func usersCell(users, honest int) string {
	switch {
	case users == 0:
		return "not assumed"
	case honest > 0:
		return fmt.Sprintf("%d (honest: %d)", users, honest)
	}
	return strconv.Itoa(users)
}

// longitudinalNotes are the notes under a tree protocol's table.
func longitudinalNotes(amplified, anyNA bool) []string {
	notes := []string{noteLongitudinal}
	if !amplified {
		notes = append(notes, noteLongitudinalNotAmplified)
	}
	notes = append(notes, noteLongitudinalNoLower)
	if anyNA {
		notes = append(notes, noteLongitudinalNA)
	}
	return notes
}

// runLongitudinalCalibrate is the calibrate command on a tree protocol;
// edit, when not nil, completes the report before it is written.
func runLongitudinalCalibrate(cmd *cobra.Command, e *env, m accountant.Mechanism, t accountant.Target, asJSON bool, edit func(*calibrateReport)) error {
	finish := e.startStatus(cmd.ErrOrStderr(), "blanket account calibrate")
	r, err := calibrateLongitudinal(e, m, t)
	finish()
	if err != nil {
		return err
	}
	if edit != nil {
		edit(&r)
	}
	if asJSON {
		return writeJSON(cmd.OutOrStdout(), r)
	}
	return writeCalibrateTable(cmd.OutOrStdout(), &r)
}
