package client_test

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/blanket-dp/blanket/sdk"
	"github.com/blanket-dp/blanket/sdk/client"
	"github.com/blanket-dp/blanket/sdk/plan"
)

// TestStateNewPlanFreshState changes the plan (every eps0 from 2 to 2.5)
// while a state metric is being stepped: the periods that ended under the
// old plan are stepped under it, from its run's state; the new plan's
// first step starts from no state (a new protocol run: the old state was
// drawn for another eps0, and the longitudinal randomizer would refuse
// it), with the value carried forward across the change; both runs' states
// are kept.
func TestStateNewPlanFreshState(t *testing.T) {
	ctx := context.Background()
	f := stateServer(t)
	a := f.pl
	cfg, clk, o := planChangeConfig(t, f)
	var sp stepSpy
	cfg.Randomizers = sp.cache(t)
	p := newProvider(t, cfg)
	if err := p.Meter("app").Categorical("enabled").Record(ctx, "true"); err != nil {
		t.Fatal(err)
	}
	clk.Set(t0.AddDate(0, 0, 1))
	flush(t, p) // steps period 0 under plan a
	b := nextPlan(f, a, func(p *plan.Plan) {
		for i := range p.Metrics {
			p.Metrics[i].Eps0 = 2.5
		}
	})
	clk.Set(t0.AddDate(0, 0, 2))
	if changed, err := p.RefreshPlan(ctx); err != nil || !changed {
		t.Fatalf("RefreshPlan = %v, %v", changed, err) // steps period 1 under plan a first
	}
	for d := 3; d <= 4; d++ {
		clk.Set(t0.AddDate(0, 0, d))
		flush(t, p) // steps period d-1 under plan b
	}
	calls := sp.got()
	if len(calls) != 4 {
		t.Fatalf("%d steps, want 4: %+v", len(calls), calls)
	}
	checkChain(t, calls[:2], periodIndex(0), nil, "true", "true")
	checkChainAt(t, calls[2:], 2.5, periodIndex(2), nil, "true", "true")
	states, err := o.States(ctx)
	if err != nil || len(states) != 2 {
		t.Fatalf("states %+v, %v; want one per plan", states, err)
	}
	for _, s := range states {
		want := map[string]struct {
			last  int
			state []byte
		}{a.Digest(): {1, calls[1].next}, b.Digest(): {3, calls[3].next}}[s.Plan]
		if s.Last != a.ReportPeriod(t0.AddDate(0, 0, want.last)) || string(s.State) != string(want.state) {
			t.Errorf("state of plan %.8s: %+v; want the last step's, of period %d", s.Plan, s, want.last)
		}
	}
}

// TestStatePooledTravelRefused gives a Provider a plan with a state metric
// under joint and under parallel travel: it refuses it, naming the metric,
// as plan.Calibrate does. Under separate travel it takes it.
func TestStatePooledTravelRefused(t *testing.T) {
	f := stateServer(t)
	for _, travel := range []string{"joint", "parallel", "separate"} {
		t.Run(travel, func(t *testing.T) {
			pl := clonePlanJSON(f.pl)
			pl.Travel = travel
			cfg := fastConfig(f, t.TempDir())
			cfg.Plan = pl
			p, err := client.NewProvider(context.Background(), cfg)
			if travel == "separate" {
				if err != nil {
					t.Fatalf("separate travel: %v", err)
				}
				p.Shutdown(context.Background())
				return
			}
			if !errors.Is(err, client.ErrPlanRefused) || !errors.Is(err, plan.ErrInvalid) || !strings.Contains(err.Error(), `"`+stateMetric+`"`) || !strings.Contains(err.Error(), "separate travel") {
				t.Fatalf("NewProvider: %v; want ErrPlanRefused naming %q and separate travel", err, stateMetric)
			}
		})
	}
}

// TestStateMigrationV5 opens an outbox file of version 5, which has no
// table of states, with a value of the state metric staged for period 0
// (that version could not send it: the randomizer refuses Randomize): the
// file migrates to version 6 with no state and no carried value, a
// Provider steps period 0 with the staged value from no state, then
// period 1 with the value carried forward.
func TestStateMigrationV5(t *testing.T) {
	ctx := context.Background()
	f := stateServer(t)
	dir := t.TempDir()
	path := filepath.Join(dir, client.OutboxFile)
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	const v5 = outboxSchemaV4 + `
ALTER TABLE staged_values ADD COLUMN records INTEGER NOT NULL DEFAULT 1;
PRAGMA user_version = 5;`
	if _, err := db.ExecContext(ctx, v5); err != nil {
		t.Fatal(err)
	}
	period0 := f.pl.ReportPeriod(t0)
	if _, err := db.ExecContext(ctx, `INSERT INTO staged_values (metric, plan, start, length, pool, kind, category, total, records, rev) VALUES
		(?, ?, ?, ?, ?, ?, 'true', 0, 2, 2)`, stateMetric, f.pl.Digest(), period0.Start, period0.Length, stateMetric, int(sdk.InputCategorical)); err != nil {
		t.Fatal(err)
	}

	o, err := client.OpenSQLiteOutbox(ctx, path)
	if err != nil {
		t.Fatalf("opening the version 5 file: %v", err)
	}
	var version int
	if err := db.QueryRowContext(ctx, "PRAGMA user_version").Scan(&version); err != nil || version != 6 {
		t.Errorf("user_version %d, %v; want 6", version, err)
	}
	if st, err := o.States(ctx); err != nil || len(st) != 0 {
		t.Errorf("states after the migration: %+v, %v; want none", st, err)
	}
	if c, err := o.Carried(ctx); err != nil || len(c) != 0 {
		t.Errorf("carried values after the migration: %+v, %v; want none", c, err)
	}
	if vs, err := o.Staged(ctx); err != nil || len(vs) != 1 || vs[0].Category != "true" || vs[0].Count != 2 {
		t.Errorf("staged after the migration: %+v, %v; want the value", vs, err)
	}

	cfg, clk := clockConfig(f, dir)
	cfg.Outbox = o
	t.Cleanup(func() { o.Close() })
	var sp stepSpy
	cfg.Randomizers = sp.cache(t)
	clk.Set(t0.AddDate(0, 0, 1))
	p := newProvider(t, cfg) // steps period 0 at its start
	clk.Set(t0.AddDate(0, 0, 2))
	flush(t, p)
	checkChain(t, sp.got(), periodIndex(0), nil, "true", "true")
	if st, err := o.States(ctx); err != nil || len(st) != 1 || st[0].Last != f.pl.ReportPeriod(t0.AddDate(0, 0, 1)) {
		t.Errorf("states %+v, %v; want one, of period 1", st, err)
	}
}
