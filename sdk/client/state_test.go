package client_test

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"testing"

	"github.com/blanket-dp/blanket/sdk"
	"github.com/blanket-dp/blanket/sdk/client"
	"github.com/blanket-dp/blanket/sdk/internal/counter"
	"github.com/blanket-dp/blanket/sdk/report"
)

// TestStateCarriedForward records a state metric (the longitudinal
// protocol) in two of five periods: each period is stepped once, in
// order, with the last value recorded (carried over the periods without a
// Record), each step from the state the one before committed; a period
// sends an envelope exactly when its step returned a report, and stores
// its state either way; the collector opens every report as a valid
// report of the plugin, pooled under its period.
func TestStateCarriedForward(t *testing.T) {
	ctx := context.Background()
	f := stateServer(t)
	dir := t.TempDir()
	cfg, clk := clockConfig(f, dir)
	var sp stepSpy
	cfg.Randomizers = sp.cache(t)
	o := sqliteOutbox(t, dir)
	cfg.Outbox = o
	p := newProvider(t, cfg)
	enabled := p.Meter("app").Categorical("enabled")
	if err := enabled.Record(ctx, "true"); err != nil { // period 0
		t.Fatal(err)
	}
	for d := 1; d <= 5; d++ {
		clk.Set(t0.AddDate(0, 0, d))
		if d == 3 {
			if err := enabled.Record(ctx, "false"); err != nil { // period 3; closes period 2 first
				t.Fatal(err)
			}
		}
		flush(t, p)
		st, err := o.States(ctx)
		if err != nil || len(st) != 1 || st[0].Last != f.pl.ReportPeriod(t0.AddDate(0, 0, d-1)) {
			t.Fatalf("after period %d closed: states %+v, %v; want one, of period %d", d-1, st, err, d-1)
		}
	}
	calls := sp.got()
	checkChain(t, calls, periodIndex(0), nil, "true", "true", "true", "false", "false")

	// An envelope for every report, none for the steps that sent none.
	var withReport []report.Period
	for _, c := range calls {
		if c.report != nil {
			withReport = append(withReport, report.Period{Start: c.period * 86400, Length: 86400})
		}
	}
	keys := f.keyCounts()
	for _, per := range withReport {
		if keys[report.PeriodPoolKey(stateMetric, f.pl.Epoch(), per)] != 1 {
			t.Errorf("no envelope of period %s, whose step sent a report", per)
		}
	}
	if got := f.checkReports(t, f.pl)[stateMetric]; got != len(withReport) {
		t.Errorf("the collector opened %d reports of %s, the steps sent %d", got, stateMetric, len(withReport))
	}
	if st := p.Stats(); st.Steps != 5 || st.Messages != int64(len(withReport)) || st.Recorded != 2 {
		t.Errorf("stats %+v, want 5 steps, %d messages, 2 recorded", st, len(withReport))
	}
	states, err := o.States(ctx)
	if err != nil || len(states) != 1 || !bytes.Equal(states[0].State, calls[4].next) || states[0].Plan != f.pl.EpochDigest() {
		t.Errorf("stored states %+v, %v; want the last step's, under the plan", states, err)
	}
	carried, err := o.Carried(ctx)
	if err != nil || len(carried) != 1 || carried[0].Category != "false" || carried[0].Period != f.pl.ReportPeriod(t0.AddDate(0, 0, 4)) {
		t.Errorf("carried %+v, %v; want false of period 4", carried, err)
	}
	// The ledger charges the periods that sent a report.
	l, err := p.Ledger(ctx)
	if err != nil {
		t.Fatal(err)
	}
	charged := 0
	for _, e := range l {
		if e.Metric == stateMetric {
			charged += int(e.Reports)
		}
	}
	if charged != len(withReport) {
		t.Errorf("ledger charges %d reports of %s, want %d", charged, stateMetric, len(withReport))
	}
}

// TestStateStepWithoutReport steps the counter test randomizer (every=2:
// a report at a user's odd steps, none at the even ones): a step without
// a report commits no envelope and no ledger charge, but stores its state
// and closes the period; the next step starts from it.
func TestStateStepWithoutReport(t *testing.T) {
	ctx := context.Background()
	f := newFakeServer(t, nil)
	f.setPlan(statePlan(t, f, counter.Name, map[string]string{"every": "2"}, "a", "b"))
	dir := t.TempDir()
	cfg, clk := clockConfig(f, dir)
	cfg.UploadDelay = 1 << 40 // uploads only at Flush: the outbox is read between
	var sp stepSpy
	cfg.Randomizers = sp.cache(t)
	o := sqliteOutbox(t, dir)
	cfg.Outbox = o
	p := newProvider(t, cfg)
	if err := p.Meter("app").Categorical("enabled").Record(ctx, "b"); err != nil {
		t.Fatal(err)
	}
	var pending []int
	for d := 1; d <= 3; d++ {
		clk.Set(t0.AddDate(0, 0, d))
		if err := p.Meter("app").Categorical("screen").Record(ctx, "home"); err != nil { // closes period d-1
			t.Fatal(err)
		}
		envs, err := o.Pending(ctx, 100)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, e := range envs {
			if pool, _, _, _ := report.ParsePoolKey(e.Metric); pool == stateMetric {
				n++
			}
		}
		pending = append(pending, n)
		st, err := o.States(ctx)
		if err != nil || len(st) != 1 {
			t.Fatalf("period %d: states %+v, %v", d-1, st, err)
		}
		s, err := counter.Decode(st[0].State)
		if err != nil || s.Steps != int64(d) || s.Last != periodIndex(d-1) {
			t.Fatalf("period %d: stored state %+v, %v; want step %d of period %d", d-1, s, err, d, periodIndex(d-1))
		}
	}
	// Steps 1 and 3 report, step 2 does not.
	if pending[0] != 1 || pending[1] != 1 || pending[2] != 2 {
		t.Errorf("envelopes of %s pending after each period: %v, want [1 1 2]", stateMetric, pending)
	}
	calls := sp.got()
	checkChain(t, calls, periodIndex(0), nil, "b", "b", "b")
	if calls[1].report != nil || calls[0].report == nil || calls[2].report == nil {
		t.Errorf("reports %x %x %x, want one, none, one", calls[0].report, calls[1].report, calls[2].report)
	}
	l, err := o.Ledger(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range l {
		if e.Metric == stateMetric && e.Start.Equal(t0.AddDate(0, 0, 1).Truncate(day)) {
			t.Errorf("period 1 sent no report, but the ledger charges it: %+v", e)
		}
	}
	// The period without a report is closed for the metric all the same.
	if _, err := o.Stage(ctx, client.Value{Pool: stateMetric, Metric: stateMetric, Plan: f.pl.EpochDigest(), Kind: sdk.InputCategorical, Category: "a",
		Period: f.pl.ReportPeriod(t0.AddDate(0, 0, 1))}); !errors.Is(err, client.ErrPeriodClosed) {
		t.Errorf("staging into the stepped period without a report: %v, want ErrPeriodClosed", err)
	}
}

// TestStateRestart shuts a Provider down after a step and starts another
// on the same data dir a period later: its first step (of the period that
// ended meanwhile, at its start) is given exactly the state the outbox
// file holds, and the value carried forward.
func TestStateRestart(t *testing.T) {
	ctx := context.Background()
	f := stateServer(t)
	dir := t.TempDir()
	cfg, clk := clockConfig(f, dir)
	var sp1 stepSpy
	cfg.Randomizers = sp1.cache(t)
	p1, err := client.NewProvider(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := p1.Meter("app").Categorical("enabled").Record(ctx, "true"); err != nil {
		t.Fatal(err)
	}
	clk.Set(t0.AddDate(0, 0, 1))
	flush(t, p1)
	if err := p1.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	o, err := client.OpenSQLiteOutbox(ctx, filepath.Join(dir, client.OutboxFile))
	if err != nil {
		t.Fatal(err)
	}
	stored, err := o.States(ctx)
	o.Close()
	if err != nil || len(stored) != 1 {
		t.Fatalf("stored states after the shutdown: %+v, %v", stored, err)
	}
	first := sp1.got()
	checkChain(t, first, periodIndex(0), nil, "true")
	if !bytes.Equal(stored[0].State, first[0].next) {
		t.Fatalf("stored state %x, the step returned %x", stored[0].State, first[0].next)
	}

	clk.Set(t0.AddDate(0, 0, 2))
	var sp2 stepSpy
	cfg.Randomizers = sp2.cache(t)
	p2 := newProvider(t, cfg) // closes period 1 at its start
	checkChain(t, sp2.got(), periodIndex(1), stored[0].State, "true")
	if st := p2.Stats(); st.Steps != 1 {
		t.Errorf("restarted provider stats %+v, want one step", st)
	}
}

// crashingOutbox is a SQLite outbox whose ClosePeriod, while crash is
// set, fails every closing that commits a step without committing
// anything, as a process killed before its commit leaves the file.
type crashingOutbox struct {
	*client.SQLiteOutbox
	crash bool
}

func (o *crashingOutbox) ClosePeriod(ctx context.Context, c client.PeriodClose) error {
	if o.crash && c.Step != nil {
		return errors.New("test: the process died before the commit")
	}
	return o.SQLiteOutbox.ClosePeriod(ctx, c)
}

// TestStateCrashBeforeCommit steps period 0, then "crashes" while closing
// period 1 (its step ran, its commit never happened): the stored state is
// still period 0's and no envelope of period 1 exists. A Provider started
// on the same file steps period 1 again, from period 0's state, and
// commits it.
func TestStateCrashBeforeCommit(t *testing.T) {
	ctx := context.Background()
	f := stateServer(t)
	dir := t.TempDir()
	cfg, clk := clockConfig(f, dir)
	cfg.UploadDelay = 1 << 40 // uploads only at Flush: the outbox is read between
	var sp1 stepSpy
	cfg.Randomizers = sp1.cache(t)
	o := &crashingOutbox{SQLiteOutbox: sqliteOutbox(t, dir)}
	cfg.Outbox = o
	p1 := newProvider(t, cfg)
	enabled := p1.Meter("app").Categorical("enabled")
	if err := enabled.Record(ctx, "true"); err != nil {
		t.Fatal(err)
	}
	clk.Set(t0.AddDate(0, 0, 1))
	if err := enabled.Record(ctx, "false"); err != nil { // closes period 0
		t.Fatal(err)
	}
	before, err := o.States(ctx)
	if err != nil || len(before) != 1 {
		t.Fatalf("states after period 0: %+v, %v", before, err)
	}
	pendingBefore, err := o.Pending(ctx, 100)
	if err != nil {
		t.Fatal(err)
	}

	o.crash = true
	clk.Set(t0.AddDate(0, 0, 2))
	if err := enabled.Record(ctx, "false"); err != nil { // tries to close period 1
		t.Fatal(err)
	}
	calls := sp1.got()
	checkChain(t, calls, periodIndex(0), nil, "true", "false")
	after, err := o.States(ctx)
	if err != nil || len(after) != 1 || after[0].Last != before[0].Last || !bytes.Equal(after[0].State, before[0].State) {
		t.Fatalf("states after the crash: %+v, %v; want period 0's unchanged", after, err)
	}
	pendingAfter, err := o.Pending(ctx, 100)
	if err != nil || len(pendingAfter) != len(pendingBefore) {
		t.Fatalf("%d envelopes pending after the crash, %d before: the uncommitted step sent one", len(pendingAfter), len(pendingBefore))
	}
	if st := p1.Stats(); st.Steps != 1 {
		t.Errorf("stats %+v, want the one committed step", st)
	}
	staged, err := o.Staged(ctx)
	if err != nil || len(staged) != 2 {
		t.Errorf("staged %+v, %v; want period 1's value still staged, and period 2's", staged, err)
	}
	p1.Shutdown(ctx)

	// The restart: period 1 is stepped again, from period 0's state.
	o.crash = false
	var sp2 stepSpy
	cfg.Randomizers = sp2.cache(t)
	p2 := newProvider(t, cfg)
	checkChain(t, sp2.got(), periodIndex(1), before[0].State, "false")
	if !bytes.Equal(sp2.got()[0].state, calls[1].state) {
		t.Errorf("the redone step was given %x, the crashed one %x", sp2.got()[0].state, calls[1].state)
	}
	final, err := o.States(ctx)
	if err != nil || len(final) != 1 || final[0].Last != f.pl.ReportPeriod(t0.AddDate(0, 0, 1)) || !bytes.Equal(final[0].State, sp2.got()[0].next) {
		t.Errorf("states after the restart: %+v, %v; want the redone step's, of period 1", final, err)
	}
	if st := p2.Stats(); st.Steps != 1 {
		t.Errorf("restarted provider stats %+v, want one step", st)
	}
}

// TestStateReplayRefused steps period 0, then makes the outbox forget
// that period 0 is closed for the metric (as a damaged or hand-edited file
// would) and stages a value into it: the next closing does not step
// period 0 again, whose state's last period it is (the randomizer would
// have drawn a second report of it), sends nothing, and counts the value
// late; the carried value stays period 0's.
func TestStateReplayRefused(t *testing.T) {
	ctx := context.Background()
	f := stateServer(t)
	dir := t.TempDir()
	cfg, clk := clockConfig(f, dir)
	var sp stepSpy
	cfg.Randomizers = sp.cache(t)
	o := sqliteOutbox(t, dir)
	cfg.Outbox = o
	p := newProvider(t, cfg)
	if err := p.Meter("app").Categorical("enabled").Record(ctx, "true"); err != nil {
		t.Fatal(err)
	}
	clk.Set(t0.Add(day))
	flush(t, p) // closes period 0
	checkChain(t, sp.got(), periodIndex(0), nil, "true")
	sent, _, _ := f.counts()

	period0 := f.pl.ReportPeriod(t0)
	db, err := sql.Open("sqlite", filepath.Join(dir, client.OutboxFile))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.ExecContext(ctx, "DELETE FROM closed_periods WHERE pool = ? AND start = ?", stateMetric, period0.Start); err != nil {
		t.Fatal(err)
	}
	if _, err := o.Stage(ctx, client.Value{Pool: stateMetric, Metric: stateMetric, Plan: f.pl.EpochDigest(), Period: period0, Kind: sdk.InputCategorical, Category: "false"}); err != nil {
		t.Fatalf("staging into period 0 once the outbox forgot it was closed: %v", err)
	}
	flush(t, p) // closes period 0 again
	if calls := sp.got(); len(calls) != 1 {
		t.Fatalf("period 0 was stepped again: %+v", calls)
	}
	if after, _, _ := f.counts(); after != sent {
		t.Errorf("the server holds %d reports, %d before: the replay sent one", after, sent)
	}
	if staged, err := o.Staged(ctx); err != nil || len(staged) != 0 {
		t.Errorf("staged %+v, %v; want none", staged, err)
	}
	if st := p.Stats(); st.Late != 1 || st.Steps != 1 {
		t.Errorf("stats %+v, want the replayed value late and one step", st)
	}
	if c, err := o.Carried(ctx); err != nil || len(c) != 1 || c[0].Category != "true" || c[0].Period != period0 {
		t.Errorf("carried %+v, %v; want true of period 0", c, err)
	}
}

// TestStateStepsLatePeriodWithValue records a state metric's change in a
// period that then closes too late to send (the app did not run for days
// after it): the period is stepped all the same, with its value, and its
// report dropped unsent (Stats.Expired), so that the randomizer sees the
// change in the period it was recorded in; the periods after it without
// a Record and too late to send are not stepped (the randomizer carries
// the value over them). Were the late period skipped, the change would
// step in the next period sent, which can lie after the window of the
// guarantee or in the next tree (docs/time.md §5, "What the guarantee protects").
func TestStateStepsLatePeriodWithValue(t *testing.T) {
	ctx := context.Background()
	f := stateServer(t)
	dir := t.TempDir()
	cfg, clk := clockConfig(f, dir)
	cfg.UploadDelay = 1 << 40 // uploads only at Flush: the outbox is read between
	var sp stepSpy
	cfg.Randomizers = sp.cache(t)
	o := sqliteOutbox(t, dir)
	cfg.Outbox = o
	p := newProvider(t, cfg)
	enabled := p.Meter("app").Categorical("enabled")
	if err := enabled.Record(ctx, "true"); err != nil { // period 0
		t.Fatal(err)
	}
	clk.Set(t0.AddDate(0, 0, 1))
	flush(t, p)                                          // steps period 0
	if err := enabled.Record(ctx, "false"); err != nil { // period 1
		t.Fatal(err)
	}
	// Four days later, at noon (the grace is one period): period 1 ended
	// three and a half days ago, periods 2 and 3 more than a day ago
	// (nothing recorded), period 4 half a day ago, within the grace.
	clk.Set(t0.AddDate(0, 0, 5))
	flush(t, p)
	calls := sp.got()
	if len(calls) != 3 {
		t.Fatalf("%d steps, want 3 (periods 0, 1, 4): %+v", len(calls), calls)
	}
	want := []struct {
		period int64
		value  string
	}{{periodIndex(0), "true"}, {periodIndex(1), "false"}, {periodIndex(4), "false"}}
	state := []byte(nil)
	for i, c := range calls {
		if c.err != nil || c.period != want[i].period || c.value != want[i].value || !bytes.Equal(c.state, state) {
			t.Errorf("step %d: period %d, value %q, err %v; want period %d, value %q, from the state the step before returned",
				i, c.period, c.value, c.err, want[i].period, want[i].value)
		}
		state = c.next
	}
	keys := f.keyCounts()
	late := report.Period{Start: periodIndex(1) * 86400, Length: 86400}
	if keys[report.PeriodPoolKey(stateMetric, f.pl.Epoch(), late)] != 0 {
		t.Errorf("period %s closed three days late, but its report was sent", late)
	}
	if st := p.Stats(); st.Steps != 3 || st.Expired != 1 {
		t.Errorf("stats %+v, want 3 steps and 1 expired period", st)
	}
	states, err := o.States(ctx)
	if err != nil || len(states) != 1 || !bytes.Equal(states[0].State, calls[2].next) {
		t.Errorf("stored states %+v, %v; want the last step's", states, err)
	}
}

// TestStateRecordIntoClosedPeriodFiledLater records a state metric's new
// value into a period already stepped (the clock went back): the value is
// not dropped, as another metric's would be, but filed under the next
// period still open, and that period steps with it. Dropped, it would
// leave the randomizer on the old value in every later period.
func TestStateRecordIntoClosedPeriodFiledLater(t *testing.T) {
	ctx := context.Background()
	f := stateServer(t)
	dir := t.TempDir()
	cfg, clk := clockConfig(f, dir)
	var sp stepSpy
	cfg.Randomizers = sp.cache(t)
	cfg.Outbox = sqliteOutbox(t, dir)
	p := newProvider(t, cfg)
	enabled := p.Meter("app").Categorical("enabled")
	if err := enabled.Record(ctx, "true"); err != nil { // period 0
		t.Fatal(err)
	}
	clk.Set(t0.AddDate(0, 0, 1))
	flush(t, p) // steps period 0
	clk.Set(t0) // the clock goes back into period 0, closed
	if err := enabled.Record(ctx, "false"); err != nil {
		t.Fatal(err)
	}
	clk.Set(t0.AddDate(0, 0, 2))
	flush(t, p) // steps period 1
	checkChain(t, sp.got(), periodIndex(0), nil, "true", "false")
	if st := p.Stats(); st.Late != 0 || st.Recorded != 2 {
		t.Errorf("stats %+v, want 2 recorded and none late", st)
	}
}
