package main

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/blanket-dp/blanket/accountant"
)

// baselineSet maps every baseline name (baselineNames) to its value, nil
// where the baseline does not apply. In JSON the missing values are null.
type baselineSet map[string]*float64

// baselineNames are every baseline in display order: the single-report
// ones (accountant.BaselineNames), which apply to one report, then the
// composition ones (accountant.CompositionBaselineNames), which apply to
// several.
func baselineNames() []string {
	return slices.Concat(accountant.BaselineNames, accountant.CompositionBaselineNames)
}

// newBaselineSet copies m, keeping only finite values and adding every
// baseline name that m lacks as nil.
func newBaselineSet(m map[string]*float64) baselineSet {
	b := baselineSet{}
	for _, name := range baselineNames() {
		b[name] = nil
	}
	for name, v := range m {
		if v != nil {
			b[name] = num(*v)
		} else {
			b[name] = nil
		}
	}
	return b
}

// names returns the baseline names in display order: baselineNames, then
// any others.
func (b baselineSet) names() []string {
	names := baselineNames()
	var extra []string
	for name := range b {
		if !slices.Contains(names, name) {
			extra = append(extra, name)
		}
	}
	slices.Sort(extra)
	return append(names, extra...)
}

// num returns &v, or nil when v is NaN or infinite (JSON has no such
// numbers).
func num(v float64) *float64 {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return nil
	}
	return &v
}

// epsReport is the result of `account eps` and one point of `account curve`.
type epsReport struct {
	Mechanism string  `json:"mechanism"`
	Eps0      float64 `json:"eps0"`
	N         int     `json:"n"`
	fakeAssumption
	Rounds    int         `json:"rounds"`
	Delta     float64     `json:"delta"`
	EpsUpper  *float64    `json:"eps_upper"`
	EpsLower  *float64    `json:"eps_lower"`
	LocalEps  *float64    `json:"local_eps"`
	Amplified bool        `json:"amplified"`
	Tight     bool        `json:"tight"`
	Baselines baselineSet `json:"baselines"`
	Seconds   float64     `json:"seconds"`
	// Longitudinal is the breakdown of a tree protocol's bound, absent
	// for other mechanisms.
	Longitudinal *longitudinalParts `json:"longitudinal,omitempty"`
	// Floor is --floor's bounds, absent without it.
	Floor *floorParts `json:"floor,omitempty"`
}

// deltaReport is the result of `account delta`.
type deltaReport struct {
	Mechanism string  `json:"mechanism"`
	Eps0      float64 `json:"eps0"`
	N         int     `json:"n"`
	fakeAssumption
	Rounds     int         `json:"rounds"`
	Eps        float64     `json:"eps"`
	DeltaUpper *float64    `json:"delta_upper"`
	DeltaLower *float64    `json:"delta_lower"`
	Baselines  baselineSet `json:"baselines"`
	Seconds    float64     `json:"seconds"`
	// Longitudinal is the breakdown of a tree protocol's bound, absent
	// for other mechanisms.
	Longitudinal *longitudinalDeltaParts `json:"longitudinal,omitempty"`
	// Floor is --floor's bounds, absent without it.
	Floor *floorParts `json:"floor,omitempty"`
}

// achieved is the guarantee at the calibrated eps0.
type achieved struct {
	EpsUpper  *float64 `json:"eps_upper"`
	EpsLower  *float64 `json:"eps_lower"`
	LocalEps  *float64 `json:"local_eps"`
	Amplified bool     `json:"amplified"`
	Tight     bool     `json:"tight"`
}

// calibrateReport is the result of `account calibrate`. Its baselines are
// the largest eps0 each baseline allows.
type calibrateReport struct {
	Mechanism string  `json:"mechanism"`
	Eps       float64 `json:"eps"`
	Delta     float64 `json:"delta"`
	N         int     `json:"n"`
	fakeAssumption
	Rounds    int         `json:"rounds"`
	Eps0      *float64    `json:"eps0"`
	Achieved  achieved    `json:"achieved"`
	Baselines baselineSet `json:"baselines"`
	Seconds   float64     `json:"seconds"`
	// Longitudinal is the breakdown of a tree protocol's bound at Eps0,
	// absent for other mechanisms.
	Longitudinal *longitudinalParts `json:"longitudinal,omitempty"`
	// Floor is --floor's draws per batch, absent without it.
	Floor int `json:"floor,omitempty"`
}

// writeJSON writes v as indented JSON.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// fmtNum formats a number for tables: six significant digits.
func fmtNum(v float64) string { return strconv.FormatFloat(v, 'g', 6, 64) }

// fmtOpt formats an optional number; nil means the bound does not apply.
func fmtOpt(v *float64) string {
	if v == nil {
		return "n/a"
	}
	return fmtNum(*v)
}

// Notes printed under tables.
const (
	noteNotAmplified       = "shuffling cannot help at this n; eps = eps0"
	noteNotAmplifiedRounds = "shuffling cannot help at this n; eps = local eps, the sum of the reports' local budgets"
	noteNotTight           = "the engine reached its memory cap: the bounds are sound but not certified within 0.5% of the exact value"
	noteNoLower            = "no lower-bound triple is known for this mechanism: the lower bound 0 is trivial"
	noteBaselines          = "n/a: the baseline does not apply to this mechanism or parameters (clone, fmt21, bbgn19_*, efmrtt19 bound one report, basic_composition, kov15, clone_composed several)"
)

// notAmplifiedNote is the note for a result that shuffling does not
// improve.
func notAmplifiedNote(rounds int) string {
	if rounds > 1 {
		return noteNotAmplifiedRounds
	}
	return noteNotAmplified
}

// notTightNote is the note for bounds that are not certified: a
// composition is certified to accountant.HorizonTolerance, one report to
// 0.5%.
func notTightNote(rounds int) string {
	if rounds > 1 {
		return fmt.Sprintf("the bounds are sound but not certified within %g%% of the composition of the exact single-report bounds", 100*accountant.HorizonTolerance)
	}
	return noteNotTight
}

// table writes "key  value" rows aligned in columns.
type table struct {
	tw *tabwriter.Writer
}

func newTable(w io.Writer) *table { return &table{tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)} }

func (t *table) row(cells ...string) { fmt.Fprintln(t.tw, strings.Join(cells, "\t")) }

func (t *table) flush() error { return t.tw.Flush() }

// writeEpsTable writes an eps report as a table.
func writeEpsTable(w io.Writer, r *epsReport) error {
	t := newTable(w)
	t.row("mechanism", r.Mechanism)
	t.row("eps0", fmtNum(r.Eps0))
	t.row("n", strconv.Itoa(r.N))
	r.fakeAssumption.rows(t)
	t.row("rounds", strconv.Itoa(r.Rounds))
	t.row("delta", fmtNum(r.Delta))
	t.row("")
	t.row("bound", "eps")
	t.row("upper", fmtOpt(r.EpsUpper))
	t.row("lower", fmtOpt(r.EpsLower))
	anyNA := writeBaselineRows(t, r.Baselines)
	if r.Longitudinal != nil {
		writeLongitudinalRows(t, r.Longitudinal)
	}
	r.Floor.rows(t)
	t.row("")
	t.row("local eps", fmtOpt(r.LocalEps))
	t.row("seconds", fmt.Sprintf("%.3f", r.Seconds))
	if err := t.flush(); err != nil {
		return err
	}
	if r.Longitudinal != nil {
		return writeNotes(w, longitudinalNotes(r.Amplified, anyNA))
	}
	var notes []string
	if !r.Amplified {
		notes = append(notes, notAmplifiedNote(r.Rounds))
	}
	if !r.Tight {
		notes = append(notes, notTightNote(r.Rounds))
	}
	if r.EpsLower != nil && *r.EpsLower == 0 && r.Amplified {
		notes = append(notes, noteNoLower)
	}
	if anyNA {
		notes = append(notes, noteBaselines)
	}
	return writeNotes(w, notes)
}

// writeDeltaTable writes a delta report as a table.
func writeDeltaTable(w io.Writer, r *deltaReport) error {
	t := newTable(w)
	t.row("mechanism", r.Mechanism)
	t.row("eps0", fmtNum(r.Eps0))
	t.row("n", strconv.Itoa(r.N))
	r.fakeAssumption.rows(t)
	t.row("rounds", strconv.Itoa(r.Rounds))
	t.row("eps", fmtNum(r.Eps))
	t.row("")
	t.row("bound", "delta")
	t.row("upper", fmtOpt(r.DeltaUpper))
	t.row("lower", fmtOpt(r.DeltaLower))
	anyNA := writeBaselineRows(t, r.Baselines)
	if r.Longitudinal != nil {
		writeLongitudinalDeltaRows(t, r.Longitudinal)
	}
	r.Floor.rows(t)
	t.row("")
	t.row("seconds", fmt.Sprintf("%.3f", r.Seconds))
	if err := t.flush(); err != nil {
		return err
	}
	if r.Longitudinal != nil {
		return writeNotes(w, longitudinalNotes(true, anyNA))
	}
	var notes []string
	if anyNA {
		notes = append(notes, noteBaselines)
	}
	return writeNotes(w, notes)
}

// writeCalibrateTable writes a calibration report as a table.
func writeCalibrateTable(w io.Writer, r *calibrateReport) error {
	t := newTable(w)
	t.row("mechanism", r.Mechanism)
	t.row("target eps", fmtNum(r.Eps))
	t.row("target delta", fmtNum(r.Delta))
	t.row("n", strconv.Itoa(r.N))
	r.fakeAssumption.rows(t)
	if r.Floor > 0 {
		t.row("floor", strconv.Itoa(r.Floor)+" blanket draws per batch (the baselines without)")
	}
	t.row("rounds", strconv.Itoa(r.Rounds))
	t.row("")
	t.row("bound", "largest eps0")
	t.row("this work", fmtOpt(r.Eps0))
	anyNA := writeBaselineRows(t, r.Baselines)
	t.row("")
	t.row("at that eps0:", "")
	t.row("  eps upper", fmtOpt(r.Achieved.EpsUpper))
	t.row("  eps lower", fmtOpt(r.Achieved.EpsLower))
	t.row("  local eps", fmtOpt(r.Achieved.LocalEps))
	if r.Longitudinal != nil {
		writeLongitudinalRows(t, r.Longitudinal)
	}
	t.row("seconds", fmt.Sprintf("%.3f", r.Seconds))
	if err := t.flush(); err != nil {
		return err
	}
	if r.Longitudinal != nil {
		return writeNotes(w, longitudinalNotes(r.Achieved.Amplified, anyNA))
	}
	var notes []string
	if !r.Achieved.Amplified {
		notes = append(notes, notAmplifiedNote(r.Rounds))
	}
	if !r.Achieved.Tight {
		notes = append(notes, notTightNote(r.Rounds))
	}
	if anyNA {
		notes = append(notes, noteBaselines)
	}
	return writeNotes(w, notes)
}

// writeBaselineRows adds one row per baseline and reports whether any is
// n/a.
func writeBaselineRows(t *table, b baselineSet) (anyNA bool) {
	for _, name := range b.names() {
		t.row(name, fmtOpt(b[name]))
		anyNA = anyNA || b[name] == nil
	}
	return anyNA
}

func writeNotes(w io.Writer, notes []string) error {
	if len(notes) > 0 {
		if _, err := fmt.Fprintln(w); err != nil {
			return err
		}
	}
	for _, n := range notes {
		if _, err := fmt.Fprintf(w, "note: %s\n", n); err != nil {
			return err
		}
	}
	return nil
}

// curveColumns are the CSV columns before the baselines.
var curveColumns = []string{"n", "eps0", "rounds", "delta", "eps_upper", "eps_lower", "local_eps", "amplified", "tight"}

// writeCurveCSV writes one row per point; missing values are empty cells.
// With --max-fake-fraction the columns max_fake_fraction and honest_n
// follow n; with --floor the columns floor, floor_eps_upper and
// floor_eps_alone follow tight.
func writeCurveCSV(w io.Writer, rows []epsReport) error {
	cw := csv.NewWriter(w)
	names := baselineSet{}.names()
	fakes, floor := false, false
	if len(rows) > 0 {
		names = rows[0].Baselines.names()
		fakes = rows[0].MaxFakeFraction > 0
		floor = rows[0].Floor != nil
	}
	cols := append([]string(nil), curveColumns...)
	if fakes {
		cols = slices.Insert(cols, 1, "max_fake_fraction", "honest_n")
	}
	if floor {
		cols = append(cols, "floor", "floor_eps_upper", "floor_eps_alone")
	}
	if err := cw.Write(append(append(cols, names...), "seconds")); err != nil {
		return err
	}
	cell := func(v *float64) string {
		if v == nil {
			return ""
		}
		return strconv.FormatFloat(*v, 'g', -1, 64)
	}
	for _, r := range rows {
		rec := []string{strconv.Itoa(r.N)}
		if fakes {
			rec = append(rec, strconv.FormatFloat(r.MaxFakeFraction, 'g', -1, 64), strconv.Itoa(r.HonestN))
		}
		rec = append(rec,
			strconv.FormatFloat(r.Eps0, 'g', -1, 64),
			strconv.Itoa(r.Rounds),
			strconv.FormatFloat(r.Delta, 'g', -1, 64),
			cell(r.EpsUpper), cell(r.EpsLower), cell(r.LocalEps),
			strconv.FormatBool(r.Amplified), strconv.FormatBool(r.Tight),
		)
		if floor {
			var f floorParts
			if r.Floor != nil {
				f = *r.Floor
			}
			rec = append(rec, strconv.Itoa(f.Draws), cell(f.Upper), cell(f.Alone))
		}
		for _, name := range names {
			rec = append(rec, cell(r.Baselines[name]))
		}
		rec = append(rec, strconv.FormatFloat(r.Seconds, 'f', 3, 64))
		if err := cw.Write(rec); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}
