package main

import (
	"fmt"
	"strconv"

	"github.com/blanket-dp/blanket/accountant"
)

// This file is --floor of the account commands: m draws of the blanket the
// shuffler adds to every batch (docs/accounting.md §13).

// floorHelp documents --floor.
const floorHelp = `--floor M (eps and delta, default 0) adds the guarantee of a shuffler that
puts M draws of the randomizer's blanket distribution into every batch, beside
the n reports (their honest floor with --max-fake-fraction). Two more bounds
are printed: with the floor (the n honest reports and the M draws together)
and the floor alone (the M draws and nothing else: it holds whatever every
other report in the batch is, fakes included). The JSON object adds floor:
draws, upper and alone (and alone_lower, a lower bound on the floor alone,
which is exact for the draws alone), in eps or delta. --rounds composes them;
with many honest reports the composed bound with the floor counts the draws at a
slightly smaller number (docs/accounting.md section 13).`

// floorUsage is the usage of --floor.
var floorUsage = fmt.Sprintf("number of blanket draws M the shuffler adds to each batch, an integer in [0, %d]: prints the guarantee with them and with them alone (default 0: none)", accountant.MaxN)

// newFloorValue returns a --floor flag: [0, MaxN], 0 unless given.
func newFloorValue() *intValue {
	return &intValue{min: 0, max: accountant.MaxN, example: " (e.g. 10000, 1e4)"}
}

// floorParts is what --floor adds to a report: the bounds with the draws
// and with the draws alone, in the report's unit (eps or delta).
type floorParts struct {
	Draws int `json:"draws"`
	// Upper bounds the batch of the report's honest n and the draws.
	Upper *float64 `json:"upper"`
	// Alone bounds the draws alone, whatever the other reports are;
	// AloneLower is a lower bound on that (exact up to the engine's
	// tolerance: the victim among the draws).
	Alone      *float64 `json:"alone"`
	AloneLower *float64 `json:"alone_lower"`
}

// floorCompositions returns the compositions of rounds reports of m at
// eps0 with the floor: among honest reports and the draws, and among the
// draws alone.
func floorCompositions(e *env, m accountant.Mechanism, eps0 float64, honest, draws, rounds int) (with, alone composition, err error) {
	with, err = e.engine.compose(accountant.Part{Mech: m, Eps0: eps0, N: honest, Floor: draws, Rounds: rounds})
	if err != nil {
		return nil, nil, fmt.Errorf("--floor: %w", err)
	}
	alone, err = e.engine.compose(accountant.Part{Mech: m, Eps0: eps0, N: 1, Floor: draws, Rounds: rounds})
	if err != nil {
		return nil, nil, fmt.Errorf("--floor: %w", err)
	}
	return with, alone, nil
}

// floorEps computes --floor's eps bounds at delta.
func floorEps(e *env, m accountant.Mechanism, eps0 float64, honest, draws, rounds int, delta float64) (*floorParts, error) {
	with, alone, err := floorCompositions(e, m, eps0, honest, draws, rounds)
	if err != nil {
		return nil, err
	}
	var w accountant.EpsilonResult
	a, err, wErr := both(func() (accountant.EpsilonResult, error) { return alone.Epsilon(delta) },
		func() (err error) { w, err = with.Epsilon(delta); return err })
	if err != nil {
		return nil, fmt.Errorf("--floor alone: %w", err)
	}
	if wErr != nil {
		return nil, fmt.Errorf("--floor: %w", wErr)
	}
	return &floorParts{Draws: draws, Upper: num(w.Upper), Alone: num(a.Upper), AloneLower: num(a.Lower)}, nil
}

// floorDelta computes --floor's delta bounds at eps.
func floorDelta(e *env, m accountant.Mechanism, eps0 float64, honest, draws, rounds int, eps float64) (*floorParts, error) {
	with, alone, err := floorCompositions(e, m, eps0, honest, draws, rounds)
	if err != nil {
		return nil, err
	}
	var w accountant.DeltaResult
	a, err, wErr := both(func() (accountant.DeltaResult, error) { return alone.Delta(eps) },
		func() (err error) { w, err = with.Delta(eps); return err })
	if err != nil {
		return nil, fmt.Errorf("--floor alone: %w", err)
	}
	if wErr != nil {
		return nil, fmt.Errorf("--floor: %w", wErr)
	}
	return &floorParts{Draws: draws, Upper: num(w.Upper), Alone: num(a.Upper), AloneLower: num(a.Lower)}, nil
}

// checkFloorMech refuses --floor where it has no meaning.
func checkFloorMech(floor *intValue, long bool) error {
	if floor.v > 0 && long {
		return usageErrorf("--floor: the tree protocol's node reports are not accounted with shuffler draws; use --floor with a single-report mechanism")
	}
	return nil
}

// rows adds the floor's bounds to a table.
func (f *floorParts) rows(t *table) {
	if f == nil {
		return
	}
	t.row("")
	t.row("floor", strconv.Itoa(f.Draws)+" blanket draws per batch")
	t.row("with the floor", fmtOpt(f.Upper)+" (the honest n and the draws)")
	alone := fmtOpt(f.Alone)
	if f.AloneLower != nil && *f.AloneLower > 0 {
		alone += " (lower " + fmtOpt(f.AloneLower) + ")"
	}
	t.row("floor alone", alone+" (whatever the other reports are)")
}
