package client_test

import (
	"context"
	"testing"
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
