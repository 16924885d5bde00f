package client_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/blanket-dp/blanket/sdk/client"
	"github.com/blanket-dp/blanket/sdk/plan"
	"github.com/blanket-dp/blanket/sdk/report"
	"gonum.org/v1/gonum/stat/distuv"
)

// newPooledServer starts a fake server whose plan is the test plan with
// the given travel (and weights 1, 1, 2 for parallel travel).
func newPooledServer(t *testing.T, travel string) *fakeServer {
	t.Helper()
	f := newFakeServer(t, nil)
	pl := testPlan(nil)
	pl.CollectorKey = fakeKey(t, f)
	pl.Travel = travel
	if travel == "parallel" {
		pl.Metrics[2].Weight = 2
	}
	f.setPlan(pl)
	return f
}

// fakeKey returns the collector key f's plan was served with.
func fakeKey(t *testing.T, f *fakeServer) string {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	p, err := plan.Parse(f.plan)
	if err != nil {
		t.Fatal(err)
	}
	return p.CollectorKey
}

// TestJointTravel records the test plan's three metrics under joint
// travel: nothing is sent until every metric has a value, then one message
// carries all three in plan order under the pool's binding; a metric
// recorded twice in a round keeps its last value; staged values survive a
// restart of the Provider; the ledger charges each metric.
func TestJointTravel(t *testing.T) {
	f := newPooledServer(t, "joint")
	dir := t.TempDir()
	cfg := fastConfig(f, dir)
	p := newProvider(t, cfg)
	ctx := context.Background()
	m := p.Meter("app")
	if err := m.Categorical("screen").Record(ctx, "home"); err != nil {
		t.Fatal(err)
	}
	if err := m.Categorical("feature").Record(ctx, "b"); err != nil {
		t.Fatal(err)
	}
	if err := m.Categorical("feature").Record(ctx, "c"); err != nil {
		t.Fatal(err)
	}
	flush(t, p)
	if st := p.Stats(); st.Recorded != 3 || st.Messages != 0 || st.Uploaded != 0 {
		t.Fatalf("before the round completes: stats %+v, want 3 recorded, no message", st)
	}
	if _, raw, _ := f.counts(); raw != 0 {
		t.Fatalf("the server got %d envelopes before the round completed", raw)
	}
	if err := p.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}

	// A new Provider on the same DataDir completes the round with the
	// staged reports.
	p = newProvider(t, cfg)
	m = p.Meter("app")
	if err := m.Sum("bytes").Record(ctx, 40); err != nil {
		t.Fatal(err)
	}
	for i := range 4 {
		for _, rec := range []func() error{
			func() error { return m.Categorical("screen").Record(ctx, "search") },
			func() error { return m.Categorical("feature").Record(ctx, "d") },
			func() error { return m.Sum("bytes").Record(ctx, float64(i)) },
		} {
			if err := rec(); err != nil {
				t.Fatal(err)
			}
		}
	}
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
	// Every part is a valid report of its metric's randomizer.
	got := f.checkReports(t, p.Plan())
	for _, name := range []string{"app/screen", "app/feature", "app/bytes"} {
		if got[name] != 5 {
			t.Errorf("metric %q: %d reports, want 5", name, got[name])
		}
	}
	ledger, err := p.Ledger(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(ledger) != 3 {
		t.Fatalf("ledger %+v, want one entry per metric", ledger)
	}
	for _, l := range ledger {
		if l.Reports != 5 || l.Eps0 != 5*testEps0 {
			t.Errorf("ledger %+v, want 5 reports at eps0 %v", l, testEps0)
		}
	}
	// The pool's binding covers every metric's: a message does not open
	// under a plan with another eps0.
	pl := p.Plan()
	f.mu.Lock()
	sealed := f.sealedMessages[0]
	f.mu.Unlock()
	if _, err := report.Open(f.priv, pl.PoolBinding(), sealed); err != nil {
		t.Fatalf("opening under the plan's pool binding: %v", err)
	}
	pl.Metrics[1].Eps0++
	if _, err := report.Open(f.priv, pl.PoolBinding(), sealed); !errors.Is(err, report.ErrOpen) {
		t.Errorf("opening under another eps0: %v, want ErrOpen", err)
	}
}

// TestJointDailyLimit checks that MaxReportsPerDay applies to every
// metric of a joint message, and that a refused round keeps its staged
// reports.
func TestJointDailyLimit(t *testing.T) {
	f := newPooledServer(t, "joint")
	cfg := fastConfig(f, t.TempDir())
	cfg.MaxReportsPerDay = 1
	p := newProvider(t, cfg)
	ctx := context.Background()
	m := p.Meter("app")
	round := func() error {
		for _, rec := range []func() error{
			func() error { return m.Categorical("screen").Record(ctx, "home") },
			func() error { return m.Categorical("feature").Record(ctx, "a") },
			func() error { return m.Sum("bytes").Record(ctx, 1) },
		} {
			if err := rec(); err != nil {
				return err
			}
		}
		return nil
	}
	if err := round(); err != nil {
		t.Fatal(err)
	}
	if err := round(); !errors.Is(err, client.ErrDailyLimit) {
		t.Fatalf("second round of the day: %v, want ErrDailyLimit", err)
	}
	if st := p.Stats(); st.Messages != 1 {
		t.Fatalf("stats %+v, want 1 message", st)
	}
}

// TestParallelChoice checks parallel travel over many instances: each
// round chooses exactly one metric (Enabled is true for it alone), with
// the plan's weights (chi-square test, false-failure rate 1e-6); a Record
// of the chosen metric sends a one-part message and starts a new round,
// Records of the others send nothing.
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
		if st.Messages != 1 || st.Recorded != 1 || st.Skipped != 2 {
			t.Fatalf("stats %+v, want 1 message, 1 recorded, 2 skipped", st)
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

// TestParallelRoundSurvivesRestart checks that a round's choice is kept in
// the outbox (a restart does not draw again) and that the message reaches
// the server as one part of the chosen metric under the pool's binding.
func TestParallelRoundSurvivesRestart(t *testing.T) {
	f := newPooledServer(t, "parallel")
	cfg := fastConfig(f, t.TempDir())
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
	for round := range 5 {
		p := newProvider(t, cfg)
		which := enabled(p)
		for range 3 {
			p.Shutdown(ctx)
			p = newProvider(t, cfg)
			if again := enabled(p); again != which {
				t.Fatalf("round %d: metric %d chosen, %d after a restart", round, which, again)
			}
		}
		m := p.Meter("app")
		var err error
		if which == 2 {
			err = m.Sum(names[which]).Record(ctx, 7)
		} else {
			err = m.Categorical(names[which]).Record(ctx, "a")
		}
		if err != nil {
			t.Fatal(err)
		}
		flush(t, p)
		p.Shutdown(ctx)
		f.mu.Lock()
		msgs := f.messages
		f.mu.Unlock()
		if len(msgs) != round+1 || len(msgs[round]) != 1 || msgs[round][0].Metric != which {
			t.Fatalf("round %d: messages %v, want one more with one part of metric %d", round, msgs, which)
		}
	}
	pl := testPlan(nil)
	pl.Travel = "parallel"
	got := f.checkReports(t, pl)
	total := 0
	for _, c := range got {
		total += c
	}
	if total != 5 {
		t.Errorf("%d valid reports, want 5", total)
	}
}

// TestOutboxStaging checks Stage and Staged on every outbox: replacing,
// staging once (a draw already staged for the round stands), and an Add
// consuming exactly the entries it names, atomically with the report,
// refusing (ErrStaleRound, storing nothing) when one changed.
func TestOutboxStaging(t *testing.T) {
	ctx := context.Background()
	for name, open := range outboxes(t) {
		t.Run(name, func(t *testing.T) {
			o := open()
			defer o.Close()
			stage := func(st client.Staged, once bool) client.Staged {
				t.Helper()
				got, err := o.Stage(ctx, st, once)
				if err != nil {
					t.Fatal(err)
				}
				return got
			}
			stage(client.Staged{Metric: "b", Plan: "p1", Report: []byte{1}}, false)
			a := stage(client.Staged{Metric: "a", Plan: "p1", Report: []byte{2}}, false)
			b := stage(client.Staged{Metric: "b", Plan: "p2", Report: []byte{3}}, false) // replaces b
			draw := stage(client.Staged{Metric: "", Plan: "p2/day1", Report: []byte("a")}, true)
			if again := stage(client.Staged{Metric: "", Plan: "p2/day1", Report: []byte("b")}, true); string(again.Report) != "a" {
				t.Fatalf("staged once: the second draw %q replaced the first", again.Report)
			}
			if next := stage(client.Staged{Metric: "", Plan: "p2/day2", Report: []byte("b")}, true); string(next.Report) != "b" {
				t.Fatalf("a new round's draw: %q, want b", next.Report)
			}
			draw = stage(draw, false) // back to day 1's draw
			got, err := o.Staged(ctx)
			if err != nil {
				t.Fatal(err)
			}
			want := []client.Staged{draw, a, b}
			if len(got) != len(want) {
				t.Fatalf("staged %+v, want %+v", got, want)
			}
			for i := range want {
				if got[i].Metric != want[i].Metric || got[i].Plan != want[i].Plan || !bytes.Equal(got[i].Report, want[i].Report) {
					t.Errorf("staged[%d] = %+v, want %+v", i, got[i], want[i])
				}
			}
			// An Add naming an entry that changed stores nothing.
			stale := entry("@joint", "2026-01-01", false)
			stale.Charges = []client.Charge{{Metric: "a", Eps0: 0.5}}
			stale.Unstage = []client.Staged{a, {Metric: "b", Plan: "p1", Report: []byte{1}}}
			if err := o.Add(ctx, stale, 0); !errors.Is(err, client.ErrStaleRound) {
				t.Fatalf("Add with a replaced entry: %v, want ErrStaleRound", err)
			}
			if p, _ := o.Pending(ctx, 10); len(p) != 0 {
				t.Fatalf("the refused Add stored %d reports", len(p))
			}
			if l, _ := o.Ledger(ctx); len(l) != 0 {
				t.Fatalf("the refused Add charged %+v", l)
			}
			e := entry("@joint", "2026-01-01", false)
			e.Charges = []client.Charge{{Metric: "a", Eps0: 0.5}, {Metric: "b", Eps0: 0.25}}
			e.Unstage = []client.Staged{a, b}
			if err := o.Add(ctx, e, 0); err != nil {
				t.Fatal(err)
			}
			if got, err := o.Staged(ctx); err != nil || len(got) != 1 || got[0].Metric != "" {
				t.Fatalf("after the Add: staged %+v, %v; want the draw alone", got, err)
			}
			l, err := o.Ledger(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if len(l) != 2 || l[0].Metric != "a" || l[0].Eps0 != 0.5 || l[1].Metric != "b" || l[1].Eps0 != 0.25 || l[0].Reports != 1 {
				t.Fatalf("ledger %+v, want a and b charged once", l)
			}
		})
	}
	// Durable: staged entries survive closing and reopening the file.
	path := filepath.Join(t.TempDir(), "outbox.db")
	o, err := client.OpenSQLiteOutbox(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := o.Stage(ctx, client.Staged{Metric: "m", Plan: "p", Report: []byte("r")}, false); err != nil {
		t.Fatal(err)
	}
	o.Close()
	if o, err = client.OpenSQLiteOutbox(ctx, path); err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	if got, err := o.Staged(ctx); err != nil || len(got) != 1 || string(got[0].Report) != "r" {
		t.Fatalf("after reopening: %+v, %v", got, err)
	}
}

// slowAdd widens the window between reading a round and committing it,
// as sealing and an fsync do on a slow device, and makes every staged
// report unique (a counter appended), so that a report sent twice shows.
type slowAdd struct {
	client.Outbox
	n *atomic.Int64
}

func (o slowAdd) Add(ctx context.Context, e client.Entry, maxPerDay int) error {
	time.Sleep(3 * time.Millisecond)
	return o.Outbox.Add(ctx, e, maxPerDay)
}

func (o slowAdd) Stage(ctx context.Context, st client.Staged, once bool) (client.Staged, error) {
	if st.Metric != "" {
		st.Report = fmt.Appendf(append([]byte(nil), st.Report...), "#%d", o.n.Add(1))
	}
	return o.Outbox.Stage(ctx, st, once)
}

// TestJointTwoProcesses runs two Providers on one SQLite outbox file (two
// processes of one app) recording joint rounds concurrently, with a slow
// commit: no staged report goes out twice. Each message consumes three
// staged reports and each Record stages one, so messages*3 plus the
// reports still staged cannot exceed the Records.
func TestJointTwoProcesses(t *testing.T) {
	f := newPooledServer(t, "joint")
	path := filepath.Join(t.TempDir(), "outbox.db")
	ctx := context.Background()
	var ps [2]*client.Provider
	var counter atomic.Int64
	for i := range ps {
		o, err := client.OpenSQLiteOutbox(ctx, path)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { o.Close() })
		cfg := fastConfig(f, "")
		cfg.Outbox, cfg.UploadDelay = slowAdd{o, &counter}, time.Hour
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
			}
			errs <- nil
		}()
	}
	for range ps {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range ps {
		flush(t, p)
	}
	messages := ps[0].Stats().Messages + ps[1].Stats().Messages
	f.mu.Lock()
	got := len(f.messages)
	f.mu.Unlock()
	o, err := client.OpenSQLiteOutbox(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	left, err := o.Staged(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d messages, %d reports still staged, from %d Records", messages, len(left), 2*records)
	if int64(got) != messages || messages == 0 {
		t.Fatalf("server has %d messages, the providers committed %d", got, messages)
	}
	if 3*messages+int64(len(left)) > 2*records {
		t.Fatalf("%d messages and %d staged reports from %d Records: a staged report went out twice", messages, len(left), 2*records)
	}
	// Every staged report is unique: none may be in two messages.
	seen := map[string]int{}
	f.mu.Lock()
	for i, msg := range f.messages {
		for _, part := range msg {
			if j, dup := seen[string(part.Report)]; dup {
				t.Errorf("staged report %q sent in messages %d and %d", part.Report, j, i)
			}
			seen[string(part.Report)] = i
		}
	}
	f.mu.Unlock()
}

// TestPlanRefresh checks that a Provider picks up a new plan: a
// conditional GET that costs a 304 while the plan is the same, a switch to
// a changed plan (reports sealed under it from then on, the cache file
// updated for an offline start), a refused plan leaving the old one in
// use, and the background refresh of Config.PlanRefresh.
func TestPlanRefresh(t *testing.T) {
	f := newFakeServer(t, nil)
	dir := t.TempDir()
	cfg := fastConfig(f, dir)
	cfg.PlanRefresh = -1 // by hand first
	p := newProvider(t, cfg)
	ctx := context.Background()
	screen := p.Meter("app").Categorical("screen")
	if err := screen.Record(ctx, "home"); err != nil {
		t.Fatal(err)
	}
	flush(t, p)
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
	flush(t, p)
	// The fake server opens under the plan it serves: the report after
	// the switch opened (checkReports fails on any report that did not).
	if got := f.checkReports(t, next); got["app/screen"] != 2 {
		t.Fatalf("reports %v, want 2 of app/screen", got)
	}
	ledger, _ := p.Ledger(ctx)
	if len(ledger) != 1 || ledger[0].Eps0 != testEps0+2.5 {
		t.Fatalf("ledger %+v, want eps0 %v + 2.5", ledger, testEps0)
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
// and dropped round after round.
func TestJointMessageTooLarge(t *testing.T) {
	_, pub, err := report.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	pl := testPlan(pub)
	pl.Travel = "joint"
	labels := make([]string, 60000) // RAPPOR reports of 7500 bytes
	for i := range labels {
		labels[i] = fmt.Sprint("l", i)
	}
	pl.Metrics = pl.Metrics[:0]
	for i := range 9 { // 67,500 bytes of reports
		pl.Metrics = append(pl.Metrics, plan.Metric{Name: fmt.Sprint("big/", i), Plugin: "rappor", Categories: labels, Version: "1", Eps0: testEps0})
	}
	f := newFakeServer(t, pl)
	cfg := fastConfig(f, t.TempDir())
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
