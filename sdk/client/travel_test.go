package client_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"gonum.org/v1/gonum/stat/distuv"

	"github.com/blanket-dp/blanket/plugins/builtin"
	"github.com/blanket-dp/blanket/sdk"
	"github.com/blanket-dp/blanket/sdk/client"
	"github.com/blanket-dp/blanket/sdk/plan"
	"github.com/blanket-dp/blanket/sdk/report"
)

// newPooledServer starts a fake server whose plan is the test plan with
// the given travel (and weights 1, 1, 2 for parallel travel).
func newPooledServer(t *testing.T, travel string) *fakeServer {
	t.Helper()
	f := newFakeServer(t, nil)
	pl := testPlan(nil)
	pl.CollectorKeys = fakeKeys(t, f)
	pl.Travel = travel
	if travel == "parallel" {
		pl.Metrics[2].Weight = 2
	}
	f.setPlan(pl)
	return f
}

// fakeKeys returns the collector key schedule f's plan was served with.
func fakeKeys(t testing.TB, f *fakeServer) []plan.CollectorKey {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	p, err := plan.Parse(f.plan)
	if err != nil {
		t.Fatal(err)
	}
	return p.CollectorKeys
}

// TestJointTravel records the test plan's three metrics under joint
// travel in five periods: nothing is sent while a period is open; once it
// has closed, one message carries all three in plan order under the
// pool's binding for the period, made of each metric's last value (a
// sum's total); staged values survive a restart of the Provider; the
// ledger charges each metric once per period.
func TestJointTravel(t *testing.T) {
	f := newPooledServer(t, "joint")
	dir := t.TempDir()
	cfg, clk := clockConfig(f, dir)
	var sp spy
	cfg.Randomizers = sp.cache(t)
	p := newProvider(t, cfg)
	ctx := context.Background()
	m := p.Meter("app")
	if err := errors.Join(
		m.Categorical("screen").Record(ctx, "home"),
		m.Categorical("feature").Record(ctx, "b"),
		m.Categorical("feature").Record(ctx, "c"),
		m.Sum("bytes").Record(ctx, 15),
	); err != nil {
		t.Fatal(err)
	}
	flush(t, p)
	if st := p.Stats(); st.Recorded != 4 || st.Messages != 0 || st.Uploaded != 0 {
		t.Fatalf("while the period is open: stats %+v, want 4 recorded, no message", st)
	}
	if _, raw, _ := f.counts(); raw != 0 {
		t.Fatalf("the server got %d envelopes while the period was open", raw)
	}
	if err := p.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}

	// A new Provider on the same DataDir adds to the staged values.
	p = newProvider(t, cfg)
	m = p.Meter("app")
	if err := m.Sum("bytes").Record(ctx, 25); err != nil {
		t.Fatal(err)
	}
	clk.Advance(day)
	recordPeriods(t, clk, 4, func(i int) error {
		return errors.Join(
			m.Categorical("screen").Record(ctx, "search"),
			m.Categorical("feature").Record(ctx, "d"),
			m.Sum("bytes").Record(ctx, float64(i)))
	})
	flush(t, p)
	if st := p.Stats(); st.Messages != 5 || st.Uploaded != 5 {
		t.Fatalf("stats %+v, want 5 messages uploaded", st)
	}
	f.mu.Lock()
	msgs := f.messages
	f.mu.Unlock()
	if len(msgs) != 5 {
		t.Fatalf("server decoded %d messages, want 5", len(msgs))
	}
	for i, msg := range msgs {
		if len(msg) != 3 {
			t.Fatalf("message %d has %d parts, want 3", i, len(msg))
		}
		for j, part := range msg {
			if part.Metric != j {
				t.Errorf("message %d part %d is of metric %d", i, j, part.Metric)
			}
		}
	}
	// The first period's message was made of the last category of each
	// categorical metric and the total of the sum, across the restart.
	if in := sp.got("krr"); len(in) != 5 || in[0].Categories[0] != "home" {
		t.Errorf("screen randomized %+v, want home first", in)
	}
	if in := sp.got("rappor"); len(in) != 5 || in[0].Categories[0] != "c" {
		t.Errorf("feature randomized %+v, want c (the last) first", in)
	}
	if in := sp.got("summation"); len(in) != 5 || in[0].Reals[0] != 40 {
		t.Errorf("bytes randomized %+v, want the total 40 first", in)
	}
	// Every part is a valid report of its metric's randomizer.
	got := f.checkReports(t, p.Plan())
	for _, name := range []string{"app/screen", "app/feature", "app/bytes"} {
		if got[name] != 5 {
			t.Errorf("metric %q: %d reports, want 5", name, got[name])
		}
	}
	for key, n := range f.keyCounts() {
		if n != 1 {
			t.Errorf("%d messages of pool key %q, want 1 per period", n, key)
		}
	}
	ledger, err := p.Ledger(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(ledger) != 15 {
		t.Fatalf("ledger %+v, want one entry per metric and period", ledger)
	}
	for _, l := range ledger {
		if l.Reports != 1 || l.Eps0 != testEps0 {
			t.Errorf("ledger %+v, want 1 report at eps0 %v", l, testEps0)
		}
	}
	// The pool's binding for the period covers every metric's: a message
	// does not open under a plan with another eps0, nor in another period.
	pl := p.Plan()
	period := pl.ReportPeriod(t0)
	f.mu.Lock()
	sealed := f.sealedMessages[0]
	f.mu.Unlock()
	if _, err := report.Open(f.priv, periodBinding(pl, "@joint", period), sealed); err != nil {
		t.Fatalf("opening under the plan's pool binding: %v", err)
	}
	if _, err := report.Open(f.priv, periodBinding(pl, "@joint", pl.ReportPeriod(t0.Add(day))), sealed); !errors.Is(err, report.ErrOpen) {
		t.Errorf("opening under the next period: %v, want ErrOpen", err)
	}
	pl.Metrics[1].Eps0++
	if _, err := report.Open(f.priv, periodBinding(pl, "@joint", period), sealed); !errors.Is(err, report.ErrOpen) {
		t.Errorf("opening under another eps0: %v, want ErrOpen", err)
	}
}

// TestParallelChoice checks parallel travel over many instances: each
// period draws exactly one metric (Enabled is true for it alone), with
// the plan's weights (chi-square test, false-failure rate 1e-6); a Record
// of the chosen metric is staged, Records of the others are skipped.
func TestParallelChoice(t *testing.T) {
	f := newPooledServer(t, "parallel")
	ctx := context.Background()
	first := newProvider(t, fastConfig(f, t.TempDir()))
	pl := first.Plan()
	cache := client.NewRandomizerCache(nil)
	defer cache.Close()
	names := []string{"screen", "feature", "bytes"}
	const n = 3000
	var chosen [3]int
	for range n {
		cfg := fastConfig(f, "")
		cfg.Mode, cfg.Plan, cfg.Outbox, cfg.Randomizers = client.ModeLocal, pl, client.NewMemoryOutbox(), cache
		p, err := client.NewProvider(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		m := p.Meter("app")
		which := -1
		for i, name := range names {
			var on bool
			if i == 2 {
				on = m.Sum(name).Enabled(ctx)
			} else {
				on = m.Categorical(name).Enabled(ctx)
			}
			if on {
				if which >= 0 {
					t.Fatalf("metrics %d and %d both enabled", which, i)
				}
				which = i
			}
		}
		if which < 0 {
			t.Fatal("no metric enabled")
		}
		chosen[which]++
		// Record the others first: they send nothing; then the chosen one.
		for i := range 3 {
			j := (which + 1 + i) % 3
			var err error
			if j == 2 {
				err = m.Sum(names[j]).Record(ctx, 5)
			} else {
				err = m.Categorical(names[j]).Record(ctx, "a")
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		st := p.Stats()
		if st.Recorded != 1 || st.Skipped != 2 {
			t.Fatalf("stats %+v, want 1 recorded, 2 skipped", st)
		}
		p.Shutdown(ctx)
	}
	w := pl.Weights()
	var chi2 float64
	for i := range chosen {
		e := n * w[i]
		chi2 += (float64(chosen[i]) - e) * (float64(chosen[i]) - e) / e
	}
	crit := distuv.ChiSquared{K: 2}.Quantile(1 - 1e-6)
	if chi2 > crit {
		t.Errorf("choices %v for weights %v: chi-square %.1f above %.1f", chosen, w, chi2, crit)
	}
	t.Logf("choices %v for weights %v: chi-square %.2f", chosen, w, chi2)
}

// TestParallelRoundSurvivesRestart checks that a period's draw is kept in
// the outbox (a restart in the period does not draw again), that the
// drawn metric's Records, however many, send one message for the period,
// as one part of that metric under the pool's binding, and the others'
// nothing.
func TestParallelRoundSurvivesRestart(t *testing.T) {
	f := newPooledServer(t, "parallel")
	cfg, clk := clockConfig(f, t.TempDir())
	ctx := context.Background()
	names := []string{"screen", "feature", "bytes"}
	enabled := func(p *client.Provider) int {
		m := p.Meter("app")
		for i, name := range names {
			if (i == 2 && m.Sum(name).Enabled(ctx)) || (i < 2 && m.Categorical(name).Enabled(ctx)) {
				return i
			}
		}
		return -1
	}
	const periods = 5
	var drawn []int
	for round := range periods {
		p := newProvider(t, cfg)
		which := enabled(p)
		for range 3 {
			p.Shutdown(ctx)
			p = newProvider(t, cfg)
			if again := enabled(p); again != which {
				t.Fatalf("period %d: metric %d drawn, %d after a restart", round, which, again)
			}
		}
		drawn = append(drawn, which)
		m := p.Meter("app")
		for range 3 {
			if err := errors.Join(m.Sum("bytes").Record(ctx, 7), m.Categorical("screen").Record(ctx, "home"), m.Categorical("feature").Record(ctx, "a")); err != nil {
				t.Fatal(err)
			}
		}
		if st := p.Stats(); st.Recorded != 3 || st.Skipped != 6 {
			t.Fatalf("period %d: stats %+v, want 3 recorded, 6 skipped", round, st)
		}
		p.Shutdown(ctx)
		clk.Advance(day)
	}
	p := newProvider(t, cfg) // closes the last period
	flush(t, p)
	f.mu.Lock()
	msgs := f.messages
	f.mu.Unlock()
	if len(msgs) != periods {
		t.Fatalf("%d messages, want one per period", len(msgs))
	}
	for i, msg := range msgs {
		if len(msg) != 1 || msg[0].Metric != drawn[i] {
			t.Errorf("period %d: message %v, want one part of metric %d", i, msg, drawn[i])
		}
	}
	for key, n := range f.keyCounts() {
		if n != 1 {
			t.Errorf("%d messages of pool key %q, want 1 per period", n, key)
		}
	}
	pl := testPlan(nil)
	pl.Travel = "parallel"
	got := f.checkReports(t, pl)
	total := 0
	for _, c := range got {
		total += c
	}
	if total != periods {
		t.Errorf("%d valid reports, want %d", total, periods)
	}
}

// slowClose widens the window between reading a period and committing
// its closing, as randomizing, sealing and an fsync do on a slow device.
type slowClose struct {
	client.Outbox
}

func (o slowClose) ClosePeriod(ctx context.Context, c client.PeriodClose) error {
	time.Sleep(3 * time.Millisecond)
	return o.Outbox.ClosePeriod(ctx, c)
}

// TestJointTwoProcesses runs two Providers on one SQLite outbox file (two
// processes of one app) recording joint periods concurrently on a clock
// that moves on while they record, with a slow commit: whatever the
// interleaving, no period sends two messages, every message the providers
// committed reaches the server, and nothing stays staged once every
// period has closed.
func TestJointTwoProcesses(t *testing.T) {
	f := newPooledServer(t, "joint")
	path := filepath.Join(t.TempDir(), "outbox.db")
	ctx := context.Background()
	clk := newTestClock()
	var ps [2]*client.Provider
	for i := range ps {
		o, err := client.OpenSQLiteOutbox(ctx, path)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { o.Close() })
		cfg := fastConfig(f, "")
		cfg.Outbox, cfg.UploadDelay, cfg.Now = slowClose{o}, time.Hour, clk.Now
		ps[i] = newProvider(t, cfg)
	}
	const records = 60
	errs := make(chan error, len(ps))
	for i, p := range ps {
		go func() {
			m := p.Meter("app")
			for r := range records {
				var err error
				switch (r + i) % 3 {
				case 0:
					err = m.Categorical("screen").Record(ctx, "home")
				case 1:
					err = m.Categorical("feature").Record(ctx, "a")
				default:
					err = m.Sum("bytes").Record(ctx, 1)
				}
				if err != nil {
					errs <- err
					return
				}
				if i == 0 && r%12 == 11 {
					clk.Advance(day)
				}
			}
			errs <- nil
		}()
	}
	for range ps {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	clk.Advance(day)
	for _, p := range ps {
		flush(t, p)
	}
	var messages, late, incomplete int64
	for _, p := range ps {
		st := p.Stats()
		messages, late, incomplete = messages+st.Messages, late+st.Late, incomplete+st.Incomplete
	}
	f.mu.Lock()
	got := len(f.messages)
	f.mu.Unlock()
	keys := f.keyCounts()
	t.Logf("%d messages in %d periods, %d incomplete, %d Records late, from %d Records", messages, len(keys), incomplete, late, 2*records)
	if int64(got) != messages || messages == 0 {
		t.Fatalf("server has %d messages, the providers committed %d", got, messages)
	}
	for key, n := range keys {
		if n != 1 {
			t.Errorf("%d messages of pool key %q, want at most 1 per period", n, key)
		}
	}
	o, err := client.OpenSQLiteOutbox(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	if left, err := o.Staged(ctx); err != nil || len(left) != 0 {
		t.Errorf("staged after every period closed: %+v, %v", left, err)
	}
}

// TestPlanRefresh checks that a Provider picks up a new plan: a
// conditional GET that costs a 304 while the plan is the same, a switch to
// a changed plan (reports sealed under it from then on, a value staged
// under the old plan in the open period dropped, the cache file updated
// for an offline start), a refused plan leaving the old one in use, and
// the background refresh of Config.PlanRefresh.
func TestPlanRefresh(t *testing.T) {
	f := newFakeServer(t, nil)
	dir := t.TempDir()
	cfg, clk := clockConfig(f, dir)
	cfg.PlanRefresh = -1 // by hand first
	p := newProvider(t, cfg)
	ctx := context.Background()
	screen := p.Meter("app").Categorical("screen")
	if err := screen.Record(ctx, "home"); err != nil {
		t.Fatal(err)
	}
	closeAndFlush(t, p, clk)
	// Staged under the old plan, in the period the plan changes in.
	if err := screen.Record(ctx, "settings"); err != nil {
		t.Fatal(err)
	}
	if changed, err := p.RefreshPlan(ctx); changed || err != nil {
		t.Fatalf("same plan: changed %v, %v", changed, err)
	}
	f.mu.Lock()
	nm := f.notModified
	f.mu.Unlock()
	if nm != 1 {
		t.Fatalf("%d answers 304, want 1", nm)
	}

	// A recalibrated plan: every eps0 2.5.
	next := p.Plan()
	for i := range next.Metrics {
		next.Metrics[i].Eps0 = 2.5
	}
	f.setPlan(next)
	if changed, err := p.RefreshPlan(ctx); !changed || err != nil {
		t.Fatalf("new plan: changed %v, %v", changed, err)
	}
	if got := p.Plan().Metrics[0].Eps0; got != 2.5 {
		t.Fatalf("after the refresh eps0 = %v, want 2.5", got)
	}
	if err := screen.Record(ctx, "search"); err != nil {
		t.Fatal(err)
	}
	closeAndFlush(t, p, clk)
	// The fake server opens under the plan it serves: the report after
	// the switch opened (checkReports fails on any report that did not).
	// The period of the switch sent one report, under the new plan.
	if got := f.checkReports(t, next); got["app/screen"] != 2 {
		t.Fatalf("reports %v, want 2 of app/screen", got)
	}
	if st := p.Stats(); st.Superseded != 1 || st.Messages != 2 {
		t.Fatalf("stats %+v, want 2 reports and the old plan's value superseded", st)
	}
	ledger, _ := p.Ledger(ctx)
	if len(ledger) != 2 || ledger[0].Eps0 != testEps0 || ledger[1].Eps0 != 2.5 || ledger[1].Epoch != next.Epoch() {
		t.Fatalf("ledger %+v, want eps0 %v then 2.5 under the new epoch", ledger, testEps0)
	}

	// A plan above the ceiling is refused; the Provider keeps reporting
	// by the one it has.
	greedy := p.Plan()
	greedy.Metrics[0].Eps0 = 9
	f.setPlan(greedy)
	if changed, err := p.RefreshPlan(ctx); changed || !errors.Is(err, client.ErrEps0AboveCeiling) {
		t.Fatalf("greedy plan: changed %v, %v; want ErrEps0AboveCeiling", changed, err)
	}
	if got := p.Plan().Metrics[0].Eps0; got != 2.5 {
		t.Fatalf("after the refused plan eps0 = %v, want 2.5", got)
	}
	if err := screen.Record(ctx, "home"); err != nil {
		t.Fatal(err)
	}
	p.Shutdown(ctx)

	// An offline start uses the last plan accepted.
	f.setPlanErr(http.StatusServiceUnavailable)
	off := newProvider(t, cfg)
	if got := off.Plan().Metrics[0].Eps0; got != 2.5 {
		t.Fatalf("offline start: eps0 = %v, want the refreshed 2.5", got)
	}
	off.Shutdown(ctx)

	// In the background.
	f.setPlanErr(0)
	f.setPlan(next)
	cfg.PlanRefresh = 10 * time.Millisecond
	bg := newProvider(t, cfg)
	again := bg.Plan()
	for i := range again.Metrics {
		again.Metrics[i].Eps0 = 1.5
	}
	f.setPlan(again)
	deadline := time.Now().Add(10 * time.Second)
	for bg.Plan().Metrics[0].Eps0 != 1.5 {
		if time.Now().After(deadline) {
			t.Fatal("the background refresh did not pick up the new plan")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestJointMessageTooLarge checks that a joint plan whose sealed messages
// would exceed what an envelope carries is refused up front, not charged
// and dropped round after round. Nine RAPPOR metrics of two categories
// whose randomizers declare reports of 7500 bytes (bigReports) stand for
// nine of 60,000 categories: a plan that large takes 18 s of CPU under
// -race in JSON alone. TestJointMessageTooLargeRAPPOR (make audit) runs the
// real thing.
func TestJointMessageTooLarge(t *testing.T) {
	cache := client.NewRandomizerCache(func(ctx context.Context, name string, cfg sdk.Config) (sdk.Randomizer, error) {
		r, err := client.InProcess(builtin.Factories())(ctx, name, cfg)
		if err != nil {
			return nil, err
		}
		return bigReports{Randomizer: r, bytes: 7500}, nil
	})
	t.Cleanup(func() { cache.Close() })
	jointMessageTooLarge(t, []string{"a", "b"}, cache)
}

// bigReports is a randomizer whose description claims reports of bytes
// bytes.
type bigReports struct {
	sdk.Randomizer
	bytes int
}

func (r bigReports) Describe(ctx context.Context) (*sdk.Description, error) {
	d, err := r.Randomizer.Describe(ctx)
	if err != nil {
		return nil, err
	}
	c := *d
	c.ReportBytes = r.bytes
	return &c, nil
}

// jointMessageTooLarge runs TestJointMessageTooLarge on nine RAPPOR
// metrics over labels whose reports are 7500 bytes each (67,500 bytes of
// reports): refused under joint travel, accepted under parallel. A nil
// cache opens the built-in plugins.
func jointMessageTooLarge(t *testing.T, labels []string, cache *client.RandomizerCache) {
	_, pub, err := report.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	pl := testPlan(pub)
	pl.Travel = "joint"
	pl.Metrics = pl.Metrics[:0]
	for i := range 9 {
		pl.Metrics = append(pl.Metrics, plan.Metric{Name: fmt.Sprint("big/", i), Plugin: "rappor", Categories: labels, Version: "1", Eps0: testEps0})
	}
	f := newFakeServer(t, pl)
	cfg := fastConfig(f, t.TempDir())
	cfg.Randomizers = cache
	if _, err := client.NewProvider(context.Background(), cfg); !errors.Is(err, client.ErrPlanRefused) || !strings.Contains(err.Error(), "sealed message") {
		t.Fatalf("NewProvider: %v, want a refusal naming the message size", err)
	}
	// Parallel travel sends one report at a time: the same metrics fit.
	pl.Travel = "parallel"
	f.setPlan(pl)
	if _, err := client.NewProvider(context.Background(), cfg); err != nil {
		t.Fatalf("parallel: %v", err)
	}
}

// drawCounter counts the Draws that reach its outbox.
type drawCounter struct {
	client.Outbox
	draws atomic.Int64
}

func (o *drawCounter) Draw(ctx context.Context, d client.Draw) (client.Draw, error) {
	o.draws.Add(1)
	return o.Outbox.Draw(ctx, d)
}

// TestEnabledDrawInMemory: with parallel travel, Enabled asks the outbox
// for a period's draw once and answers from memory after that (no disk
// I/O on an app's hot path), the same metric every time; the next period
// draws again; after Shutdown Enabled is false.
func TestEnabledDrawInMemory(t *testing.T) {
	f := newPooledServer(t, "parallel")
	dir := t.TempDir()
	cfg, clk := clockConfig(f, dir)
	o := &drawCounter{Outbox: sqliteOutbox(t, dir)}
	cfg.Outbox = o
	p := newProvider(t, cfg)
	ctx := context.Background()
	m := p.Meter("app")
	enabled := func() int {
		which := -1
		for i, on := range []bool{m.Categorical("screen").Enabled(ctx), m.Categorical("feature").Enabled(ctx), m.Sum("bytes").Enabled(ctx)} {
			if on {
				if which >= 0 {
					t.Fatalf("metrics %d and %d both enabled", which, i)
				}
				which = i
			}
		}
		return which
	}
	for period := range 2 {
		first := enabled()
		if first < 0 {
			t.Fatal("no metric enabled")
		}
		for range 100 {
			if again := enabled(); again != first {
				t.Fatalf("period %d: metric %d enabled, then %d", period, first, again)
			}
		}
		if n := o.draws.Load(); n != int64(period+1) {
			t.Errorf("after period %d: %d Draws reached the outbox, want %d (one per period)", period, n, period+1)
		}
		clk.Advance(day)
	}
	if err := p.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if enabled() >= 0 {
		t.Error("a metric enabled after Shutdown")
	}
}
