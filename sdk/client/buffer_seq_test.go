package client_test

// The order in which a stage pass stages values, and Enabled's cached
// draw, against what Records staging themselves did (from a review of
// 4a35199 and 2e39869, helper-48).

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/blanket-dp/blanket/sdk/client"
)

// stateAfterClockBack: P0 closed (stepped); "true" recorded in P1; the
// clock goes back into P0 and "false" is recorded (late: filed into P1 by
// stageStateLater). Returns what P1 holds for the state metric.
func stateAfterClockBack(t *testing.T, stageInterval time.Duration) []client.Value {
	f := stateServer(t)
	dir := t.TempDir()
	cfg, clk := clockConfig(f, dir)
	cfg.StageInterval = stageInterval
	o := sqliteOutbox(t, dir)
	cfg.Outbox = o
	var spy stepSpy
	cfg.Randomizers = spy.cache(t)
	p := newProvider(t, cfg)
	ctx := context.Background()
	st := p.Meter("app").Categorical("enabled")
	if err := st.Record(ctx, "false"); err != nil {
		t.Fatal(err)
	}
	clk.Advance(day)
	flush(t, p)                                    // closes P0
	if err := st.Record(ctx, "true"); err != nil { // P1
		t.Fatal(err)
	}
	clk.Advance(-day) // back into the closed P0
	if err := st.Record(ctx, "false"); err != nil {
		t.Fatal(err)
	}
	flush(t, p) // stages (nothing has ended at P0's clock)
	return stagedOf(t, o, stateMetric)
}

// TestBufferedClockBackStateOrder: the buffered path must stage as the
// Records did one by one (buffer.go's notes): the later Record ("false",
// filed into P1 because the clock went back into closed P0) is the state.
// (periodOrder staged P0's key first, so P1's earlier Record won; the pass now
// stages in the order of the Records.)
func TestBufferedClockBackStateOrder(t *testing.T) {
	imm := stateAfterClockBack(t, -1)
	buf := stateAfterClockBack(t, time.Hour)
	t.Logf("immediate: %+v", imm)
	t.Logf("buffered:  %+v", buf)
	if len(imm) != 1 || len(buf) != 1 || imm[0].Category != buf[0].Category || imm[0].Count != buf[0].Count {
		t.Errorf("buffered path staged %+v, the path where each Record stages itself %+v", buf, imm)
	}
}

// TestBufferedKeyRotationSamePeriod: a same-epoch key rotation makes a
// new *verifiedPlan (and metricStates) with the same digest, so one
// period's Records of one metric sit under two buffer keys that stage
// into ONE outbox value. periodOrder ties them (same Start) and map order
// decides which category is last.
func TestBufferedKeyRotationSamePeriod(t *testing.T) {
	wrong := 0
	const n = 16
	for range n {
		f := newFakeServer(t, nil)
		dir := t.TempDir()
		cfg, clk := clockConfig(f, dir)
		cfg.StageInterval = time.Hour
		cfg.PlanRefresh = -1
		o := sqliteOutbox(t, dir)
		cfg.Outbox = o
		p := newProvider(t, cfg)
		ctx := context.Background()
		screen := p.Meter("app").Categorical("screen")
		period0 := p.Plan().ReportPeriod(clk.Now())
		if err := screen.Record(ctx, "home"); err != nil {
			t.Fatal(err)
		}
		f.rotate(t, period0.Start+2*period0.Length)
		if changed, err := p.RefreshPlan(ctx); err != nil || !changed {
			t.Fatalf("RefreshPlan = %v, %v", changed, err)
		}
		if err := screen.Record(ctx, "search"); err != nil {
			t.Fatal(err)
		}
		flush(t, p)
		vals := stagedOf(t, o, "app/screen")
		if len(vals) != 1 || vals[0].Category != "search" || vals[0].Count != 2 {
			wrong++
			t.Logf("staged %+v, want \"search\" count 2", vals)
		}
		p.Shutdown(ctx)
	}
	if wrong > 0 {
		t.Errorf("%d of %d runs staged the earlier Record's category last", wrong, n)
	}
}

// TestBufferedShutdownHeldLost: at Shutdown's last pass, P0's state
// value fails once; P1's value (a later Record that returned nil) is held
// behind it and then dropped with the buffer. Before 4a35199 it was
// staged: only the failed value was lost.
func TestBufferedShutdownHeldLost(t *testing.T) {
	f := stateServer(t)
	dir := t.TempDir()
	cfg, clk := clockConfig(f, dir)
	cfg.StageInterval = time.Hour
	fo := &flakyOutbox{Outbox: sqliteOutbox(t, dir)}
	cfg.Outbox = fo
	var spy stepSpy
	cfg.Randomizers = spy.cache(t)
	p := newProvider(t, cfg)
	ctx := context.Background()
	st := p.Meter("app").Categorical("enabled")
	if err := st.Record(ctx, "true"); err != nil { // P0
		t.Fatal(err)
	}
	clk.Advance(day)
	if err := st.Record(ctx, "false"); err != nil { // P1
		t.Fatal(err)
	}
	var n atomic.Int64
	fo.setFail(func(v client.Value) bool {
		// Shutdown stages twice (stopStager, then closeEnded in
		// lastUpload): fail both, as one bad moment of the disk would.
		return v.Metric == stateMetric && v.Category == "true" && n.Add(1) <= 2
	})
	t.Logf("Shutdown: %v", p.Shutdown(ctx))
	fo.setFail(nil)
	vals := stagedOf(t, sqliteOutbox(t, dir), stateMetric)
	t.Logf("after Shutdown: %+v", vals)
	found := false
	for _, v := range vals {
		if v.Category == "false" && v.Period == p.Plan().ReportPeriod(clk.Now()) {
			found = true
		}
	}
	if !found {
		t.Errorf("P1's Record (returned nil, did not fail) was not staged at Shutdown")
	}
}

// TestEnabledClosedPeriod: P0's draw is cached; the clock moves
// to P1, a Flush closes P0, the clock goes back into P0 with no Enabled
// call in between. Enabled answers true from the cache, but the period is
// closed: a Record is late. Before 2e39869 Enabled was false (Draw:
// ErrPeriodClosed).
func TestEnabledClosedPeriod(t *testing.T) {
	f := newPooledServer(t, "parallel")
	dir := t.TempDir()
	cfg, clk := clockConfig(f, dir)
	p := newProvider(t, cfg)
	ctx := context.Background()
	m := p.Meter("app")
	type inst interface{ Enabled(context.Context) bool }
	ins := []inst{m.Categorical("screen"), m.Categorical("feature"), m.Sum("bytes")}
	which := -1
	for i, in := range ins {
		if in.Enabled(ctx) {
			which = i
		}
	}
	if which < 0 {
		t.Fatal("no metric enabled")
	}
	clk.Advance(day)
	flush(t, p) // closes P0
	clk.Advance(-day)
	on := ins[which].Enabled(ctx)
	late := p.Stats().Late
	var err error
	switch which {
	case 0:
		err = m.Categorical("screen").Record(ctx, "home")
	case 1:
		err = m.Categorical("feature").Record(ctx, "a")
	case 2:
		err = m.Sum("bytes").Record(ctx, 1)
	}
	if err != nil {
		t.Fatal(err)
	}
	gotLate := p.Stats().Late - late
	t.Logf("Enabled in closed P0 = %v; the Record was late: %v", on, gotLate == 1)
	if on && gotLate == 1 {
		t.Errorf("Enabled is true in a closed period whose Record is dropped as late")
	}
}
