package client_test

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/blanket-dp/blanket/sdk/client"
	"github.com/blanket-dp/blanket/sdk/plan"
	"github.com/blanket-dp/blanket/sdk/report"
)

// planChanges are the new plans the tests of a plan change switch to, each
// made from the plan in use: a recalibration (every eps0 changes) and a
// new reporting period (12 h, so that the old plan's period is no period
// of the new one). The period is written as plan.Plan.Validate normalizes
// it, so that the plan's digest is the one the client computes.
var planChanges = []struct {
	name   string
	change func(*plan.Plan)
}{
	{name: "eps0", change: func(p *plan.Plan) {
		for i := range p.Metrics {
			p.Metrics[i].Eps0 = 2.5
		}
	}},
	{name: "period", change: func(p *plan.Plan) { p.Period = (12 * time.Hour).String() }},
}

// planChangeConfig is a clockConfig whose reports stay in the SQLite
// outbox o of dir, which the test reads, until a Flush: the uploader
// waits an hour after a closing, and the plan is refreshed by hand only.
func planChangeConfig(t *testing.T, f *fakeServer) (client.Config, *testClock, *client.SQLiteOutbox) {
	t.Helper()
	dir := t.TempDir()
	cfg, clk := clockConfig(f, dir)
	cfg.PlanRefresh = -1
	cfg.UploadDelay = time.Hour
	o := sqliteOutbox(t, dir)
	cfg.Outbox = o
	return cfg, clk, o
}

// nextPlan returns plan a changed by change; the server serves it from
// then on.
func nextPlan(f *fakeServer, a *plan.Plan, change func(*plan.Plan)) *plan.Plan {
	b := clonePlanJSON(a)
	change(b)
	f.setPlan(b)
	return b
}

// checkSentUnder checks that the outbox holds one report, pending upload:
// app/screen's report of period, pooled under plan a's epoch, opening
// under a's binding of the period and not under b's, and charged to the
// ledger at a's eps0 in a's epoch.
func checkSentUnder(t *testing.T, o client.Outbox, f *fakeServer, a, b *plan.Plan, period report.Period) {
	t.Helper()
	ctx := context.Background()
	pending, err := o.Pending(ctx, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(pending) != 1 {
		t.Fatalf("outbox holds %d reports, want the ended period's one", len(pending))
	}
	env := pending[0]
	if want := report.PeriodPoolKey("app/screen", a.Epoch(), period); env.Metric != want {
		t.Errorf("pool key %q, want %q (the old plan's epoch)", env.Metric, want)
	}
	if _, err := report.Open(f.priv, periodBinding(a, "app/screen", period), env.Sealed); err != nil {
		t.Errorf("opening under the old plan's binding: %v", err)
	}
	if _, err := report.Open(f.priv, periodBinding(b, "app/screen", period), env.Sealed); err == nil {
		t.Errorf("the report opens under the new plan's binding")
	}
	ledger, err := o.Ledger(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(ledger) != 1 || ledger[0].Epoch != a.Epoch() || ledger[0].Eps0 != testEps0 || ledger[0].Metric != "app/screen" {
		t.Errorf("ledger %+v, want app/screen charged %v in epoch %s", ledger, testEps0, a.Epoch())
	}
}

// TestRefreshPlanClosesEndedPeriods checks that a period which ended
// under the plan in use but was not closed yet (no Record, tick or Flush
// since its end) is closed under that plan when RefreshPlan takes a new
// one: its report is sealed under the old plan's binding and epoch,
// nothing is superseded, and the Provider reports by the new plan.
func TestRefreshPlanClosesEndedPeriods(t *testing.T) {
	for _, c := range planChanges {
		t.Run(c.name, func(t *testing.T) {
			f := newFakeServer(t, nil)
			cfg, clk, o := planChangeConfig(t, f)
			p := newProvider(t, cfg)
			ctx := context.Background()
			a := p.Plan()
			if err := p.Meter("app").Categorical("screen").Record(ctx, "home"); err != nil {
				t.Fatal(err)
			}
			clk.Advance(day) // the period of t0 ends, within the grace
			b := nextPlan(f, a, c.change)
			if changed, err := p.RefreshPlan(ctx); !changed || err != nil {
				t.Fatalf("new plan: changed %v, %v", changed, err)
			}
			if got := p.Plan().Digest(); got != b.Digest() {
				t.Fatalf("after the refresh the plan is %s, want the new %s", got, b.Digest())
			}
			if st := p.Stats(); st.Superseded != 0 || st.Messages != 1 {
				t.Fatalf("stats %+v, want the ended period sealed, nothing superseded", st)
			}
			checkSentUnder(t, o, f, a, b, a.ReportPeriod(t0))
			flush(t, p) // closing again under the new plan changes nothing
			if st := p.Stats(); st.Superseded != 0 || st.Messages != 1 || st.Uploaded != 1 {
				t.Errorf("after a flush: stats %+v, want the one report uploaded", st)
			}
		})
	}
}

// TestRestartClosesEndedPeriodsUnderCachedPlan checks the same at start:
// a Provider shut down in a period, restarted on the same DataDir after
// the period ended while the collector now serves a new plan, closes the
// period under the plan cached by the last run before it takes the new
// one.
func TestRestartClosesEndedPeriodsUnderCachedPlan(t *testing.T) {
	for _, c := range planChanges {
		t.Run(c.name, func(t *testing.T) {
			f := newFakeServer(t, nil)
			cfg, clk, o := planChangeConfig(t, f)
			ctx := context.Background()
			p := newProvider(t, cfg)
			a := p.Plan()
			if err := p.Meter("app").Categorical("screen").Record(ctx, "home"); err != nil {
				t.Fatal(err)
			}
			if err := p.Shutdown(ctx); err != nil { // in the period: nothing to send
				t.Fatal(err)
			}
			clk.Advance(day)
			b := nextPlan(f, a, c.change)
			p = newProvider(t, cfg)
			if got := p.Plan().Digest(); got != b.Digest() {
				t.Fatalf("after the restart the plan is %s, want the new %s", got, b.Digest())
			}
			if st := p.Stats(); st.Superseded != 0 || st.Messages != 1 {
				t.Fatalf("stats %+v, want the ended period sealed at start, nothing superseded", st)
			}
			checkSentUnder(t, o, f, a, b, a.ReportPeriod(t0))
		})
	}
}

// TestPlanChangeSupersedesOpenPeriod checks the documented loss that
// stays: a value staged under the old plan for a period still open when
// the plan changes (by RefreshPlan, or at a restart that finds a new plan)
// is dropped when the period closes (Stats.Superseded), and nothing of it
// is sent or charged.
func TestPlanChangeSupersedesOpenPeriod(t *testing.T) {
	ctx := context.Background()
	for _, c := range planChanges {
		t.Run("refresh/"+c.name, func(t *testing.T) {
			f := newFakeServer(t, nil)
			cfg, clk, o := planChangeConfig(t, f)
			p := newProvider(t, cfg)
			if err := p.Meter("app").Categorical("screen").Record(ctx, "home"); err != nil {
				t.Fatal(err)
			}
			nextPlan(f, p.Plan(), c.change)
			if changed, err := p.RefreshPlan(ctx); !changed || err != nil {
				t.Fatalf("new plan: changed %v, %v", changed, err)
			}
			if st := p.Stats(); st.Superseded != 0 || st.Messages != 0 {
				t.Fatalf("stats %+v: the open period closed at the change", st)
			}
			clk.Advance(day)
			flush(t, p)
			checkSuperseded(t, p, o)
		})
		t.Run("restart/"+c.name, func(t *testing.T) {
			f := newFakeServer(t, nil)
			cfg, clk, o := planChangeConfig(t, f)
			p := newProvider(t, cfg)
			if err := p.Meter("app").Categorical("screen").Record(ctx, "home"); err != nil {
				t.Fatal(err)
			}
			if err := p.Shutdown(ctx); err != nil {
				t.Fatal(err)
			}
			nextPlan(f, p.Plan(), c.change)
			p = newProvider(t, cfg) // still in the period
			clk.Advance(day)
			flush(t, p)
			checkSuperseded(t, p, o)
		})
	}
}

// TestRestartWithoutCachedPlanSupersedes documents the case the cached
// plan cannot help: when the plan file of the last run is gone from
// DataDir, a restart that finds a new plan has no binding for the values
// staged under the old one, and drops them even for a period that ended
// (Stats.Superseded).
func TestRestartWithoutCachedPlanSupersedes(t *testing.T) {
	f := newFakeServer(t, nil)
	cfg, clk, o := planChangeConfig(t, f)
	ctx := context.Background()
	p := newProvider(t, cfg)
	if err := p.Meter("app").Categorical("screen").Record(ctx, "home"); err != nil {
		t.Fatal(err)
	}
	if err := p.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	cached, err := filepath.Glob(filepath.Join(cfg.DataDir, "plan-*.json"))
	if err != nil || len(cached) != 1 {
		t.Fatalf("cached plans %v, %v; want one", cached, err)
	}
	if err := os.Remove(cached[0]); err != nil {
		t.Fatal(err)
	}
	clk.Advance(day)
	nextPlan(f, p.Plan(), planChanges[0].change)
	p = newProvider(t, cfg)
	checkSuperseded(t, p, o)
}

// checkSuperseded checks that p dropped one value as superseded and the
// outbox holds no report, no charge and nothing staged.
func checkSuperseded(t *testing.T, p *client.Provider, o client.Outbox) {
	t.Helper()
	ctx := context.Background()
	if st := p.Stats(); st.Superseded != 1 || st.Messages != 0 {
		t.Errorf("stats %+v, want the value superseded, nothing sealed", st)
	}
	pending, err := o.Pending(ctx, 10)
	if err != nil {
		t.Fatal(err)
	}
	ledger, err := o.Ledger(ctx)
	if err != nil {
		t.Fatal(err)
	}
	staged, err := o.Staged(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(pending) != 0 || len(ledger) != 0 || len(staged) != 0 {
		t.Errorf("outbox: %d reports, ledger %+v, staged %+v; want all empty", len(pending), ledger, staged)
	}
}

// TestPlanChangeConcurrentRecords runs Records of three metrics, a clock
// moving a quarter period at a time and plan refreshes alternating
// between two plans, all at once: nothing deadlocks (each step has a
// deadline), nothing stays staged once every period has ended, and no
// metric sends two reports in one period, in whatever epoch. Run it with
// -race for the lock discipline. 16 steps (4 periods) here, 80 in
// TestPlanChangeConcurrentRecordsDeep (make audit).
func TestPlanChangeConcurrentRecords(t *testing.T) {
	planChangeConcurrentRecords(t, 16)
}

// planChangeConcurrentRecords runs TestPlanChangeConcurrentRecords for
// steps quarter periods.
func planChangeConcurrentRecords(t *testing.T, steps int) {
	f := newFakeServer(t, nil)
	cfg, clk, o := planChangeConfig(t, f)
	cfg.PeriodGrace = 30 * day // a slow step must not expire a period
	p := newProvider(t, cfg)
	ctx := context.Background()
	a := p.Plan()
	b := clonePlanJSON(a)
	planChanges[0].change(b)
	const workers = 3
	m := p.Meter("app")
	screen, feature, bytes := m.Categorical("screen"), m.Categorical("feature"), m.Sum("bytes")
	records := [workers]func() error{
		func() error { return screen.Record(ctx, "home") },
		func() error { return feature.Record(ctx, "a") },
		func() error { return bytes.Record(ctx, 1) },
	}
	var errs [workers + 1]error
	for step := range steps {
		var start, wg sync.WaitGroup
		start.Add(1)
		for w, rec := range records {
			wg.Go(func() {
				start.Wait()
				for range 5 {
					if err := rec(); err != nil && errs[w] == nil {
						errs[w] = err
					}
				}
			})
		}
		wg.Go(func() {
			start.Wait()
			f.setPlan([]*plan.Plan{a, b}[step%2])
			if _, err := p.RefreshPlan(ctx); err != nil && errs[workers] == nil {
				errs[workers] = err
			}
		})
		start.Done()
		done := make(chan struct{})
		go func() { wg.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Fatalf("step %d: Records and RefreshPlan still running after 30s", step)
		}
		clk.Advance(day / 4)
	}
	for i, err := range errs {
		if err != nil {
			t.Fatalf("goroutine %d: %v", i, err)
		}
	}
	clk.Advance(2 * day)
	flush(t, p)
	if staged, err := o.Staged(ctx); err != nil || len(staged) != 0 {
		t.Fatalf("staged after every period ended: %+v, %v", staged, err)
	}
	perPeriod := map[string]int{}
	for key, n := range f.keyCounts() {
		pool, _, period, err := report.ParsePoolKey(key)
		if err != nil {
			t.Fatal(err)
		}
		perPeriod[pool+" "+period.String()] += n
	}
	for k, n := range perPeriod {
		if n != 1 {
			t.Errorf("%s: %d reports, want 1", k, n)
		}
	}
	st := p.Stats()
	t.Logf("stats %+v, %d metric periods reported", st, len(perPeriod))
	if st.Messages != int64(len(perPeriod)) || st.Uploaded != st.Messages {
		t.Errorf("stats %+v: %d messages, the server holds %d", st, st.Messages, len(perPeriod))
	}
}
