package client_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
)

// TestStaleCacheKeepsNewPlanPeriods (second review of C1): closeCachedPlan
// closes under the cached plan only the periods holding its values. With a
// stale cache (the process stopped between swapPlan and the best-effort
// cache write), a period holding only values of the plan the Provider had
// moved to is left for that plan and sent under it, not superseded; the
// cached plan's own ended period is sent under it. (The two periods
// overlap in time under two epochs; the horizon composes both.)
func TestStaleCacheKeepsNewPlanPeriods(t *testing.T) {
	ctx := context.Background()
	f := newFakeServer(t, nil)
	cfg, clk, o := planChangeConfig(t, f)
	p := newProvider(t, cfg)
	a := p.Plan()
	files, _ := filepath.Glob(filepath.Join(cfg.DataDir, "plan-*.json"))
	if len(files) != 1 {
		t.Fatalf("cache files %v", files)
	}
	cacheA, err := os.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	m := p.Meter("app").Categorical("screen")
	if err := m.Record(ctx, "home"); err != nil { // A's day period
		t.Fatal(err)
	}
	b := nextPlan(f, a, planChanges[1].change) // 12 h periods
	if changed, err := p.RefreshPlan(ctx); !changed || err != nil {
		t.Fatalf("refresh: %v %v", changed, err)
	}
	if err := m.Record(ctx, "away"); err != nil { // B's [12h, 24h)
		t.Fatal(err)
	}
	if err := p.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(files[0], cacheA, 0o600); err != nil { // the cache write was lost
		t.Fatal(err)
	}
	clk.Advance(day / 2)
	p = newProvider(t, cfg)
	pending, err := o.Pending(ctx, 10)
	if err != nil {
		t.Fatal(err)
	}
	for _, env := range pending {
		t.Logf("pending %s", env.Metric)
	}
	if len(pending) != 2 || p.Stats().Superseded != 0 {
		t.Fatalf("stats %+v, pending %d, want two reports and nothing superseded", p.Stats(), len(pending))
	}
	got := map[string]bool{}
	for _, env := range pending {
		for _, ep := range []string{a.Epoch(), b.Epoch()} {
			if want := "app/screen#" + ep + "#"; len(env.Metric) > len(want) && env.Metric[:len(want)] == want {
				got[ep] = true
			}
		}
	}
	if !got[a.Epoch()] || !got[b.Epoch()] {
		t.Fatalf("sent %v; want one report under each plan's epoch", got)
	}
}
