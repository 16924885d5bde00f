package client_test

import (
	"context"
	"testing"
	"time"

	"github.com/blanket-dp/blanket/sdk/client"
)

// TestLedger checks the ledger per period across restarts: one entry per
// metric and period with a report, however many Records, with the
// period's bounds and the plan's epoch; and the window over the plan's
// horizon.
func TestLedger(t *testing.T) {
	f := newFakeServer(t, nil)
	pl := f.pl
	pl.Horizon = 3
	f.setPlan(pl)
	dir := t.TempDir()
	cfg, clk := clockConfig(f, dir)
	cfg.PeriodGrace = 2 * day // period 0 closes one and a half days after its end
	p := newProvider(t, cfg)
	ctx := context.Background()
	screen, bytes := p.Meter("app").Categorical("screen"), p.Meter("app").Sum("bytes")
	// Period 0: 4 Records of screen, 1 of bytes. Period 1: nothing.
	// Period 2: 1 Record of screen.
	for range 4 {
		if err := screen.Record(ctx, "home"); err != nil {
			t.Fatal(err)
		}
	}
	if err := bytes.Record(ctx, 3); err != nil {
		t.Fatal(err)
	}
	clk.Advance(2 * day)
	if err := screen.Record(ctx, "home"); err != nil {
		t.Fatal(err)
	}
	closeAndFlush(t, p, clk)
	p.Shutdown(ctx)

	// The ledger is durable: a new Provider on the same DataDir reads it.
	p = newProvider(t, cfg)
	got, err := p.Ledger(ctx)
	if err != nil {
		t.Fatal(err)
	}
	epoch := p.Plan().Epoch()
	d0 := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	want := []client.LedgerEntry{
		{Start: d0, End: d0.Add(day), Metric: "app/bytes", Epoch: epoch, Reports: 1, Eps0: testEps0, Upload: client.UploadAcknowledged},
		{Start: d0, End: d0.Add(day), Metric: "app/screen", Epoch: epoch, Reports: 1, Eps0: testEps0, Upload: client.UploadAcknowledged},
		{Start: d0.Add(2 * day), End: d0.Add(3 * day), Metric: "app/screen", Epoch: epoch, Reports: 1, Eps0: testEps0, Upload: client.UploadAcknowledged},
	}
	if len(got) != len(want) {
		t.Fatalf("ledger = %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("ledger[%d] = %+v, want %+v", i, got[i], want[i])
		}
	}
	// The clock is in period 3: the window of 3 periods is 1 to 3 and
	// holds period 2's report alone. The eps0 sums below are of at most
	// three terms of 2.0, exact in floating point.
	w, err := p.LedgerWindow(ctx)
	if err != nil {
		t.Fatal(err)
	}
	wantW := client.LedgerWindow{Start: d0.Add(day), End: d0.Add(4 * day), Periods: 3, PeriodsWithReports: 1, Reports: 1, LocalEps0: testEps0, Central: *p.Plan().Guarantee}
	if w != wantW {
		t.Errorf("window = %+v, want %+v", w, wantW)
	}
	// One period back, the window is 0 to 2 and holds all three.
	clk.Advance(-day)
	w, _ = p.LedgerWindow(ctx)
	if w.Start != d0 || w.PeriodsWithReports != 2 || w.Reports != 3 || w.LocalEps0 != 3*testEps0 || w.OtherEpochReports != 0 {
		t.Errorf("window one period earlier = %+v, want periods 0 to 2 with 3 reports in 2 periods", w)
	}
}
