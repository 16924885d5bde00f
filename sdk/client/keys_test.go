package client_test

import (
	"context"
	"testing"

	"github.com/blanket-dp/blanket/sdk/report"
)

// TestSealsEachPeriodToItsKey: the collector publishes its next key, valid
// from the period after next, while a value is staged for the current
// period. The refresh takes the new schedule without a new epoch, so the
// staged value is not dropped; it and the next period's value, sealed
// after the rotation was published, go to the old key (their periods'),
// and the period from which the new key is valid goes to the new key.
// Every report opens at the server (which, as the collector, opens a
// period's reports with that period's key only).
func TestSealsEachPeriodToItsKey(t *testing.T) {
	f := newFakeServer(t, nil)
	cfg, clk := clockConfig(f, t.TempDir())
	cfg.PlanRefresh = -1 // refreshed by hand
	p := newProvider(t, cfg)
	ctx := context.Background()
	screen := p.Meter("app").Categorical("screen")
	oldKey, epoch := f.priv.ID(), p.Plan().Epoch()
	period0 := p.Plan().ReportPeriod(clk.Now())

	if err := screen.Record(ctx, "home"); err != nil { // staged for period 0
		t.Fatal(err)
	}
	newKey := f.rotate(t, period0.Start+2*period0.Length)
	if changed, err := p.RefreshPlan(ctx); err != nil || !changed {
		t.Fatalf("RefreshPlan = %v, %v; want the new key schedule taken", changed, err)
	}
	if got := p.Plan(); got.Epoch() != epoch || len(got.CollectorKeys) != 2 {
		t.Fatalf("after the rotation: epoch %s (was %s), %d keys; want the same epoch and two keys", got.Epoch(), epoch, len(got.CollectorKeys))
	}
	for range 3 { // periods 1, 2 and 3: each closes the one before
		clk.Advance(day)
		if err := screen.Record(ctx, "search"); err != nil {
			t.Fatal(err)
		}
	}
	flush(t, p)
	if got := f.checkReports(t, f.pl)["app/screen"]; got != 3 {
		t.Fatalf("%d reports opened, want periods 0, 1 and 2", got)
	}
	if got := f.sealedCounts(); got[oldKey] != 2 || got[newKey] != 1 {
		t.Errorf("reports per key %v: want 2 to the old key %s (periods 0 and 1), 1 to the new %s (period 2)", got, oldKey, newKey)
	}
	if st := p.Stats(); st.Superseded != 0 || st.Messages != 3 {
		t.Errorf("stats %+v: want 3 messages, none superseded by the rotation", st)
	}
}

// TestPlanChangeSealsEndedPeriodsWithTheNewKeys: an app that missed the
// publication of the collector's next key (it fetched no plan since)
// staged a value for the key's first period; when it next refreshes, the
// collector serves a new plan (another epoch) with that key. The ended
// period closes under the plan it was staged under, as a plan change
// always does, but sealed to the key the new plan's schedule gives it,
// since keys are the collector's and not a plan's: the collector would
// open it with that key only.
func TestPlanChangeSealsEndedPeriodsWithTheNewKeys(t *testing.T) {
	f := newFakeServer(t, nil)
	cfg, clk, o := planChangeConfig(t, f)
	p := newProvider(t, cfg)
	ctx := context.Background()
	a := p.Plan()
	clk.Advance(day) // period 1
	period1 := a.ReportPeriod(clk.Now())
	newKey := f.rotate(t, period1.Start) // unseen by the app
	if err := p.Meter("app").Categorical("screen").Record(ctx, "home"); err != nil {
		t.Fatal(err)
	}
	clk.Advance(day) // period 1 ends, not closed yet
	f.mu.Lock()
	served := clonePlanJSON(f.pl)
	f.mu.Unlock()
	b := nextPlan(f, served, planChanges[0].change)
	if changed, err := p.RefreshPlan(ctx); !changed || err != nil || p.Plan().Epoch() != b.Epoch() {
		t.Fatalf("RefreshPlan = %v, %v; want the new plan", changed, err)
	}
	pending, err := o.Pending(ctx, 10)
	if err != nil || len(pending) != 1 {
		t.Fatalf("outbox: %d reports, %v; want period 1's", len(pending), err)
	}
	bind := periodBinding(a, "app/screen", period1)
	if _, err := report.Open(f.privs[newKey], bind, pending[0].Sealed); err != nil {
		t.Errorf("period 1's report does not open under its key %s (the new plan's schedule): %v", newKey, err)
	}
	if _, err := report.Open(f.priv, bind, pending[0].Sealed); err == nil {
		t.Errorf("period 1's report was sealed to the old key, by the stale schedule")
	}
}
