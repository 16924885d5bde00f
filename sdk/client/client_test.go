package client_test

import (
	"context"
	"errors"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/blanket-dp/blanket/plugins/builtin"
	"github.com/blanket-dp/blanket/sdk"
	"github.com/blanket-dp/blanket/sdk/client"
	"github.com/blanket-dp/blanket/sdk/plan"
	"github.com/blanket-dp/blanket/sdk/report"
)

// fastConfig is a ModeOn configuration against f that uploads at once and
// retries quickly, on a clock stopped at t0 (clockConfig gives one that
// moves).
func fastConfig(f *fakeServer, dir string) client.Config {
	return client.Config{
		Mode:        client.ModeOn,
		Endpoint:    f.URL,
		PlanKey:     testPlanKey,
		DataDir:     dir,
		MaxEps0:     8,
		UploadDelay: time.Millisecond,
		RetryMin:    5 * time.Millisecond,
		RetryMax:    50 * time.Millisecond,
		Now:         newTestClock().Now,
		// Every Record stages itself: these tests move a test clock
		// between Records and check what each Record staged and closed
		// at once. The buffered path (the default) is tested in
		// buffer_test.go, against this one.
		StageInterval: -1,
	}
}

func newProvider(t *testing.T, cfg client.Config) *client.Provider {
	t.Helper()
	p, err := client.NewProvider(context.Background(), cfg)
	if err != nil {
		t.Fatalf("NewProvider: %v", err)
	}
	t.Cleanup(func() { p.Shutdown(context.Background()) })
	return p
}

func flush(t *testing.T, p *client.Provider) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := p.Flush(ctx); err != nil {
		t.Fatalf("Flush: %v", err)
	}
}

// TestRoundTrip records values of every kind in 10 periods through a real
// HTTP server and the SQLite outbox; the server opens every report with
// the collector's private key under its metric's binding for its period
// and checks it is a valid report of the metric's randomizer.
func TestRoundTrip(t *testing.T) {
	f := newFakeServer(t, nil)
	cfg, clk := clockConfig(f, t.TempDir())
	p := newProvider(t, cfg)
	ctx := context.Background()
	m := p.Meter("app")
	screen, feature, bytes := m.Categorical("screen"), m.Categorical("feature"), m.Sum("bytes")
	recordPeriods(t, clk, 10, func(i int) error {
		return errors.Join(
			screen.Record(ctx, []string{"home", "search", "settings", "elsewhere"}[i%4]),
			feature.Record(ctx, []string{"a", "b", "c", "d"}[i%4]),
			bytes.Record(ctx, float64(10*i)))
	})
	flush(t, p)
	got := f.checkReports(t, p.Plan())
	for _, name := range []string{"app/screen", "app/feature", "app/bytes"} {
		if got[name] != 10 {
			t.Errorf("metric %q: server holds %d reports, want 10", name, got[name])
		}
	}
	st := p.Stats()
	if st.Recorded != 30 || st.Messages != 30 || st.Uploaded != 30 || st.Accepted != 30 || st.Duplicates != 0 || st.Dropped != 0 {
		t.Errorf("stats = %+v, want 30 recorded, sealed, uploaded and accepted", st)
	}
	if distinct, raw, _ := f.counts(); distinct != 30 || raw != 30 {
		t.Errorf("server: %d distinct ids, %d deliveries; want 30 and 30", distinct, raw)
	}
	for key, n := range f.keyCounts() {
		if n != 1 {
			t.Errorf("%d reports of pool key %q, want 1 per metric and period", n, key)
		}
	}
}

// TestBindingSeparatesMetrics checks that a report sealed for one metric
// does not open as another's: the binding is in the HPKE info.
func TestBindingSeparatesMetrics(t *testing.T) {
	f := newFakeServer(t, nil)
	var got []report.Envelope
	f.setHooks(func(n int, envs []report.Envelope) (int, http.Header, bool) {
		got = append(got, envs...)
		return 0, nil, true
	}, nil)
	cfg, clk := clockConfig(f, t.TempDir())
	p := newProvider(t, cfg)
	if err := p.Meter("app").Categorical("screen").Record(context.Background(), "home"); err != nil {
		t.Fatal(err)
	}
	closeAndFlush(t, p, clk)
	if len(got) != 1 {
		t.Fatalf("server got %d envelopes, want 1", len(got))
	}
	pl := p.Plan()
	period := pl.ReportPeriod(t0)
	bind := func(name string) report.Binding {
		b := pl.Binding(name)
		b.Period = period
		return b
	}
	if _, err := report.Open(f.priv, bind("app/screen"), got[0].Sealed); err != nil {
		t.Fatalf("opening under the plan's binding: %v", err)
	}
	if _, err := report.Open(f.priv, bind("app/feature"), got[0].Sealed); !errors.Is(err, report.ErrOpen) {
		t.Errorf("opening under another metric's binding: err = %v, want ErrOpen", err)
	}
	wrongEps := bind("app/screen")
	wrongEps.Eps0++
	if _, err := report.Open(f.priv, wrongEps, got[0].Sealed); !errors.Is(err, report.ErrOpen) {
		t.Errorf("opening under another eps0: err = %v, want ErrOpen", err)
	}
	for _, other := range []report.Period{{}, pl.ReportPeriod(t0.Add(day))} {
		b := bind("app/screen")
		b.Period = other
		if _, err := report.Open(f.priv, b, got[0].Sealed); !errors.Is(err, report.ErrOpen) {
			t.Errorf("opening under period %v: err = %v, want ErrOpen", other, err)
		}
	}
	// Another plan with the same metric, plugin, version and eps0 but
	// other categories is another epoch: the report does not open there.
	other := p.Plan()
	other.Metrics[0].Categories = []string{"search", "home", "settings"}
	if other.Binding("app/screen").Eps0 != pl.Binding("app/screen").Eps0 {
		t.Fatal("the other plan changed eps0")
	}
	otherBinding := other.Binding("app/screen")
	otherBinding.Period = period
	if _, err := report.Open(f.priv, otherBinding, got[0].Sealed); !errors.Is(err, report.ErrOpen) {
		t.Errorf("opening under another epoch: err = %v, want ErrOpen", err)
	}
	if want := report.PeriodPoolKey("app/screen", pl.Epoch(), period); got[0].Metric != want {
		t.Errorf("envelope pool key %q, want %q", got[0].Metric, want)
	}
}

// TestPlanRefusals checks every reason to refuse a plan.
func TestPlanRefusals(t *testing.T) {
	_, pub, err := report.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	_, otherPub, err := report.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	cases := map[string]struct {
		edit    func(p *plan.Plan)
		maxEps0 float64
		want    error
	}{
		"eps0 above ceiling": {edit: func(p *plan.Plan) { p.Metrics[1].Eps0 = 3 }, maxEps0: 2.5, want: client.ErrEps0AboveCeiling},
		"unknown plugin":     {edit: func(p *plan.Plan) { p.Metrics[0].Plugin = "no-such-plugin" }, want: client.ErrPluginUnavailable},
		"plugin version":     {edit: func(p *plan.Plan) { p.Metrics[2].Version = "99" }, want: client.ErrPluginUnavailable},
		"bad plugin config":  {edit: func(p *plan.Plan) { p.Metrics[2].Params = map[string]string{"k": "zero"} }, want: client.ErrPluginUnavailable},
		"uncalibrated eps0":  {edit: func(p *plan.Plan) { p.Metrics[0].Eps0 = 0 }, want: client.ErrNotCalibrated},
		"no guarantee":       {edit: func(p *plan.Plan) { p.Guarantee = nil }, want: client.ErrNotCalibrated},
		"missing key":        {edit: func(p *plan.Plan) { p.CollectorKeys = nil }, want: client.ErrNoCollectorKey},
		"key not base64":     {edit: func(p *plan.Plan) { p.CollectorKeys[0].Key = "not base64!" }, want: client.ErrNoCollectorKey},
		"key wrong length":   {edit: func(p *plan.Plan) { p.CollectorKeys[0].Key = "AAAA" }, want: plan.ErrBadKeySchedule},
		"key of another id":  {edit: func(p *plan.Plan) { p.CollectorKeys[0].ID = "0000000000000000" }, want: plan.ErrBadKeySchedule},
		"keys out of order": {edit: func(p *plan.Plan) {
			p.CollectorKeys = append(p.CollectorKeys, p.CollectorKeys[0])
			p.CollectorKeys[0] = plan.NewCollectorKey(otherPub, 86400)
		}, want: plan.ErrBadKeySchedule},
		"unknown travel": {edit: func(p *plan.Plan) { p.Travel = "broadcast" }, want: plan.ErrInvalid},
		"invalid plan":   {edit: func(p *plan.Plan) { p.NMin = 1 }, want: plan.ErrInvalid},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			pl := testPlan(pub)
			c.edit(pl)
			f := newFakeServer(t, pl)
			cfg := fastConfig(f, t.TempDir())
			cfg.Outbox = client.NewMemoryOutbox()
			if c.maxEps0 != 0 {
				cfg.MaxEps0 = c.maxEps0
			}
			p, err := client.NewProvider(context.Background(), cfg)
			if !errors.Is(err, c.want) || !errors.Is(err, client.ErrPlanRefused) {
				t.Fatalf("NewProvider: err = %v, want %v and ErrPlanRefused", err, c.want)
			}
			if p != nil {
				t.Fatalf("NewProvider returned a Provider with an error")
			}
			t.Logf("%v", err)
		})
	}
	t.Run("ceiling met exactly", func(t *testing.T) {
		f := newFakeServer(t, nil)
		cfg := fastConfig(f, t.TempDir())
		cfg.MaxEps0 = testEps0
		newProvider(t, cfg)
	})
}

// TestPlanUnavailable checks the offline start: with no plan cached,
// NewProvider fails with ErrPlanUnavailable; after one verified start, the
// cached plan is used while the collector is down.
func TestPlanUnavailable(t *testing.T) {
	f := newFakeServer(t, nil)
	dir := t.TempDir()
	f.setPlanErr(http.StatusServiceUnavailable)
	if _, err := client.NewProvider(context.Background(), fastConfig(f, dir)); !errors.Is(err, client.ErrPlanUnavailable) {
		t.Fatalf("no cached plan: err = %v, want ErrPlanUnavailable", err)
	}
	f.setPlanErr(0)
	p, err := client.NewProvider(context.Background(), fastConfig(f, dir))
	if err != nil {
		t.Fatal(err)
	}
	p.Shutdown(context.Background())
	f.setPlanErr(http.StatusServiceUnavailable)
	cfg, clk := clockConfig(f, dir)
	p = newProvider(t, cfg)
	if err := p.Meter("app").Categorical("screen").Record(context.Background(), "home"); err != nil {
		t.Fatalf("Record with the cached plan: %v", err)
	}
	closeAndFlush(t, p, clk)
	if distinct, _, _ := f.counts(); distinct != 1 {
		t.Errorf("server holds %d reports, want 1", distinct)
	}
	// A stricter app refuses the cached plan too.
	cfg = fastConfig(f, dir)
	cfg.MaxEps0 = 1
	if _, err := client.NewProvider(context.Background(), cfg); !errors.Is(err, client.ErrEps0AboveCeiling) {
		t.Errorf("cached plan above the ceiling: err = %v, want ErrEps0AboveCeiling", err)
	}
}

// TestConfigErrors checks the required fields.
func TestConfigErrors(t *testing.T) {
	f := newFakeServer(t, nil)
	cases := map[string]func(c *client.Config){
		"no endpoint":    func(c *client.Config) { c.Endpoint = "" },
		"no max eps0":    func(c *client.Config) { c.MaxEps0 = 0 },
		"NaN max eps0":   func(c *client.Config) { c.MaxEps0 = math.NaN() },
		"inf max eps0":   func(c *client.Config) { c.MaxEps0 = math.Inf(1) },
		"no data dir":    func(c *client.Config) { c.DataDir = "" },
		"bad mode":       func(c *client.Config) { c.Mode = "maybe" },
		"negative batch": func(c *client.Config) { c.BatchSize = -1 },
		"negative grace": func(c *client.Config) { c.PeriodGrace = -time.Second },
		"retry max<min":  func(c *client.Config) { c.RetryMin, c.RetryMax = time.Second, time.Millisecond },
	}
	for name, edit := range cases {
		t.Run(name, func(t *testing.T) {
			cfg := fastConfig(f, t.TempDir())
			edit(&cfg)
			if _, err := client.NewProvider(context.Background(), cfg); !errors.Is(err, client.ErrBadConfig) {
				t.Errorf("err = %v, want ErrBadConfig", err)
			}
		})
	}
}

// TestModes checks the consent modes: off touches neither network nor
// disk; local stores sealed reports and never uploads them; on uploads.
func TestModes(t *testing.T) {
	ctx := context.Background()
	// record records both metrics in 3 periods, then moves clk to the
	// next, so that the third closes at the next Record, tick or start.
	record := func(t *testing.T, p *client.Provider, clk *testClock) {
		t.Helper()
		m := p.Meter("app")
		recordPeriods(t, clk, 3, func(int) error {
			return errors.Join(m.Categorical("screen").Record(ctx, "home"), m.Sum("bytes").Record(ctx, 5))
		})
	}
	t.Run("off", func(t *testing.T) {
		f := newFakeServer(t, nil)
		dir := filepath.Join(t.TempDir(), "data")
		cfg, clk := clockConfig(f, dir)
		cfg.Mode = client.ModeOff
		p := newProvider(t, cfg)
		record(t, p, clk)
		// Even unknown metrics and bad values are silently ignored.
		if err := p.Meter("app").Sum("nope").Record(ctx, math.NaN()); err != nil {
			t.Errorf("Record in ModeOff: %v", err)
		}
		if p.Meter("app").Categorical("screen").Enabled(ctx) {
			t.Error("Enabled in ModeOff")
		}
		flush(t, p)
		if gets, posts := f.requests(); gets+posts != 0 {
			t.Errorf("ModeOff made %d requests", gets+posts)
		}
		if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("ModeOff created its data dir: %v", err)
		}
		if l, _ := p.Ledger(ctx); len(l) != 0 {
			t.Errorf("ModeOff ledger = %v, want empty", l)
		}
	})
	t.Run("zero mode is off", func(t *testing.T) {
		p := newProvider(t, client.Config{})
		if p.Mode() != client.ModeOff {
			t.Errorf("mode = %v, want off", p.Mode())
		}
		record(t, p, newTestClock())
	})
	t.Run("local", func(t *testing.T) {
		f := newFakeServer(t, nil)
		dir := t.TempDir()
		cfg, clk := clockConfig(f, dir)
		cfg.Mode = client.ModeLocal
		// Without a cached plan, local records nothing and asks the
		// server nothing: nothing leaves the device.
		p := newProvider(t, cfg)
		record(t, p, clk)
		flush(t, p)
		if p.Meter("app").Categorical("screen").Enabled(ctx) || p.Plan() != nil {
			t.Error("Enabled, or a plan, in ModeLocal without a cached plan")
		}
		if err := p.Shutdown(ctx); err != nil {
			t.Fatal(err)
		}
		if st := p.Stats(); st.Recorded != 0 || st.Messages != 0 {
			t.Errorf("without a plan: stats = %+v, want nothing recorded", st)
		}
		if gets, posts := f.requests(); gets+posts != 0 {
			t.Fatalf("ModeLocal made %d plan requests and %d uploads, want none", gets, posts)
		}
		// A run in ModeOn caches the plan; local reports by it from
		// then on, still asking the server nothing.
		on := cfg
		on.Mode = client.ModeOn
		if err := newProvider(t, on).Shutdown(ctx); err != nil {
			t.Fatal(err)
		}
		gets0, _ := f.requests()
		p = newProvider(t, cfg)
		record(t, p, clk)
		if !p.Meter("app").Categorical("screen").Enabled(ctx) {
			t.Error("not Enabled in ModeLocal")
		}
		// Without an uploader, the third period closes at the next start.
		if st := p.Stats(); st.Recorded != 6 || st.Messages != 4 || st.Uploaded != 0 {
			t.Errorf("stats = %+v, want 6 recorded, 4 sealed, none uploaded", st)
		}
		if err := p.Shutdown(ctx); err != nil {
			t.Fatal(err)
		}
		p = newProvider(t, cfg)
		if st := p.Stats(); st.Messages != 2 {
			t.Errorf("after a restart: stats = %+v, want the last period's 2 reports sealed", st)
		}
		l, err := p.Ledger(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(l) != 6 {
			t.Errorf("ledger %+v, want 3 periods of 2 metrics", l)
		}
		for _, e := range l {
			if e.LocalReports != 1 || e.Reports != 0 || e.Eps0 != 0 || e.Upload != client.UploadLocal {
				t.Errorf("ledger %+v: want 1 local report, nothing charged", e)
			}
		}
		if err := p.Shutdown(ctx); err != nil {
			t.Fatal(err)
		}
		if gets, posts := f.requests(); gets != gets0 || posts != 0 {
			t.Errorf("ModeLocal with a cached plan made %d plan requests and %d uploads, want none", gets-gets0, posts)
		}
		// Switching to on uploads only what is recorded from then on.
		cfg.Mode = client.ModeOn
		p = newProvider(t, cfg)
		if err := p.Meter("app").Categorical("screen").Record(ctx, "home"); err != nil {
			t.Fatal(err)
		}
		closeAndFlush(t, p, clk)
		if _, posts := f.requests(); posts != 1 {
			t.Errorf("%d uploads, want 1", posts)
		}
		if distinct, _, _ := f.counts(); distinct != 1 {
			t.Errorf("server holds %d reports, want 1 (local reports stay local)", distinct)
		}
	})
	t.Run("on", func(t *testing.T) {
		f := newFakeServer(t, nil)
		cfg, clk := clockConfig(f, t.TempDir())
		p := newProvider(t, cfg)
		record(t, p, clk)
		flush(t, p)
		if distinct, _, _ := f.counts(); distinct != 6 {
			t.Errorf("server holds %d reports, want 6", distinct)
		}
	})
}

func TestModeFromEnv(t *testing.T) {
	cases := map[string]client.Mode{
		"":        client.ModeLocal,
		"off":     client.ModeOff,
		"local":   client.ModeLocal,
		"on":      client.ModeOn,
		" ON ":    client.ModeOn,
		"Local":   client.ModeLocal,
		"yes":     client.ModeOff, // anything else is off
		"enabled": client.ModeOff,
	}
	for v, want := range cases {
		t.Setenv(client.EnvMode, v)
		if got := client.ModeFromEnv(); got != want {
			t.Errorf("%s=%q: mode %v, want %v", client.EnvMode, v, got, want)
		}
	}
}

// TestInstrumentErrors checks the errors an instrument returns.
func TestInstrumentErrors(t *testing.T) {
	f := newFakeServer(t, nil)
	cfg := fastConfig(f, t.TempDir())
	cfg.Outbox = client.NewMemoryOutbox()
	p := newProvider(t, cfg)
	ctx := context.Background()
	m := p.Meter("app")

	unknown := m.Categorical("nope")
	if err := unknown.Record(ctx, "home"); !errors.Is(err, client.ErrUnknownMetric) {
		t.Errorf("unknown metric: %v", err)
	}
	if !errors.Is(unknown.Err(), client.ErrUnknownMetric) || unknown.Enabled(ctx) {
		t.Errorf("unknown metric: Err = %v, Enabled = %v", unknown.Err(), unknown.Enabled(ctx))
	}
	if err := p.Meter("").Categorical("screen").Record(ctx, "home"); !errors.Is(err, client.ErrUnknownMetric) {
		t.Errorf("unscoped name: %v", err)
	}
	if err := p.Meter("").Categorical("app/screen").Record(ctx, "home"); err != nil {
		t.Errorf("full name with scope \"\": %v", err)
	}
	if err := m.Sum("screen").Record(ctx, 1); !errors.Is(err, client.ErrWrongKind) {
		t.Errorf("Sum on a categorical metric: %v", err)
	}
	if err := m.Categorical("bytes").Record(ctx, "x"); !errors.Is(err, client.ErrWrongKind) {
		t.Errorf("Categorical on a real metric: %v", err)
	}
	if err := m.Categorical("feature").Record(ctx, "zzz"); !errors.Is(err, client.ErrBadValue) || !errors.Is(err, sdk.ErrBadInput) {
		t.Errorf("category outside a domain without other: %v", err)
	}
	if err := m.Categorical("screen").Record(ctx, "zzz"); err != nil {
		t.Errorf("category outside a domain with other: %v", err)
	}
	for _, v := range []float64{math.NaN(), math.Inf(1), math.Inf(-1)} {
		if err := m.Sum("bytes").Record(ctx, v); !errors.Is(err, client.ErrBadValue) {
			t.Errorf("Sum.Record(%v): %v", v, err)
		}
	}
	if err := m.Sum("bytes").Record(ctx, 1e9); err != nil {
		t.Errorf("out-of-range value (clamped): %v", err)
	}
	if got := m.Sum("bytes").Name(); got != "app/bytes" {
		t.Errorf("Name = %q", got)
	}
	if st := p.Stats(); st.Recorded != 3 {
		t.Errorf("recorded %d, want 3 (failed Records store nothing)", st.Recorded)
	}
	if err := p.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if err := m.Categorical("screen").Record(ctx, "home"); !errors.Is(err, client.ErrShutdown) {
		t.Errorf("Record after Shutdown: %v", err)
	}
	if err := p.Shutdown(ctx); err != nil {
		t.Errorf("second Shutdown: %v", err)
	}
}

// TestNilProvider checks that an app can go on after NewProvider fails.
func TestNilProvider(t *testing.T) {
	var p *client.Provider
	ctx := context.Background()
	if err := p.Meter("app").Categorical("screen").Record(ctx, "x"); err != nil {
		t.Error(err)
	}
	if err := p.Meter("app").Sum("bytes").Record(ctx, 1); err != nil {
		t.Error(err)
	}
	if err := p.Flush(ctx); err != nil {
		t.Error(err)
	}
	if l, err := p.Ledger(ctx); err != nil || l != nil {
		t.Error(l, err)
	}
	if w, err := p.LedgerWindow(ctx); err != nil || w != (client.LedgerWindow{}) {
		t.Error(w, err)
	}
	if p.Mode() != client.ModeOff || p.Plan() != nil || p.Stats() != (client.Stats{}) {
		t.Error("nil provider is not off")
	}
	if err := p.Shutdown(ctx); err != nil {
		t.Error(err)
	}
}

// TestConcurrentRecord records from many goroutines released by a barrier
// into one period and checks the outcome against the sequential ground
// truth: every Record counted, the staged sum equal to the sum of the
// values, and one report per metric when the period closes.
func TestConcurrentRecord(t *testing.T) {
	for _, store := range []string{"sqlite", "memory"} {
		t.Run(store, func(t *testing.T) {
			const goroutines, each = 16, 25
			f := newFakeServer(t, nil)
			cfg, clk := clockConfig(f, "")
			if store == "memory" {
				cfg.Outbox = client.NewMemoryOutbox()
			} else {
				o, err := client.OpenSQLiteOutbox(context.Background(), filepath.Join(t.TempDir(), "outbox.db"))
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { o.Close() })
				cfg.Outbox = o
			}
			p := newProvider(t, cfg)
			ctx := context.Background()
			start := make(chan struct{})
			errs := make(chan error, goroutines)
			var wg sync.WaitGroup
			var wantSum float64
			for g := range goroutines {
				for i := range each {
					if (g+i)%2 == 1 {
						wantSum += float64(i)
					}
				}
				wg.Go(func() {
					m := p.Meter("app")
					<-start
					for i := range each {
						var err error
						if (g+i)%2 == 0 {
							err = m.Categorical("screen").Record(ctx, "search")
						} else {
							err = m.Sum("bytes").Record(ctx, float64(i))
						}
						if err != nil {
							errs <- err
							return
						}
					}
				})
			}
			close(start)
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Fatal(err)
			}
			const n = goroutines * each
			staged, err := cfg.Outbox.Staged(ctx)
			if err != nil {
				t.Fatal(err)
			}
			// Sums of small integers are exact in floating point, in any
			// order.
			// Half the Records are of each metric: a goroutine records 13
			// of one and 12 of the other, half of them starting with each.
			if len(staged) != 2 || staged[0].Metric != "app/bytes" || staged[0].Sum != wantSum || staged[1].Category != "search" ||
				staged[0].Count != n/2 || staged[1].Count != n/2 {
				t.Fatalf("staged %+v, want app/bytes at %v and app/screen at search, each of %d Records", staged, wantSum, n/2)
			}
			closeAndFlush(t, p, clk)
			if distinct, raw, _ := f.counts(); distinct != 2 || raw != 2 {
				t.Errorf("server: %d distinct, %d deliveries; want 2 and 2", distinct, raw)
			}
			if st := p.Stats(); st.Recorded != n || st.Messages != 2 || st.Uploaded != 2 {
				t.Errorf("stats = %+v, want %d recorded, 2 sealed and uploaded", st, n)
			}
			l, err := p.Ledger(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if len(l) != 2 || l[0].Reports != 1 || l[1].Reports != 1 {
				t.Errorf("ledger %+v, want one report per metric", l)
			}
			f.checkReports(t, p.Plan())
		})
	}
}

// TestSharedRandomizers checks that providers sharing a cache open each
// randomizer once.
func TestSharedRandomizers(t *testing.T) {
	f := newFakeServer(t, nil)
	var mu sync.Mutex
	opens := map[string]int{}
	cache := client.NewRandomizerCache(func(ctx context.Context, name string, cfg sdk.Config) (sdk.Randomizer, error) {
		mu.Lock()
		opens[name]++
		mu.Unlock()
		return client.InProcess(builtin.Factories())(ctx, name, cfg)
	})
	defer cache.Close()
	hc := &http.Client{}
	var wg sync.WaitGroup
	for range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cfg, clk := clockConfig(f, "")
			cfg.Outbox, cfg.Randomizers, cfg.HTTPClient = client.NewMemoryOutbox(), cache, hc
			p, err := client.NewProvider(context.Background(), cfg)
			if err != nil {
				t.Error(err)
				return
			}
			if err := p.Meter("app").Categorical("screen").Record(context.Background(), "home"); err != nil {
				t.Error(err)
			}
			clk.Advance(day) // Shutdown's flush closes the period
			if err := p.Shutdown(context.Background()); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	for _, name := range []string{"krr", "rappor", "summation"} {
		if opens[name] != 1 {
			t.Errorf("%s opened %d times, want 1", name, opens[name])
		}
	}
	if distinct, _, _ := f.counts(); distinct != 20 {
		t.Errorf("server holds %d reports, want 20 (Shutdown closes the ended period and flushes)", distinct)
	}
}

// TestGivenPlan checks Config.Plan: no fetch, the same verification.
func TestGivenPlan(t *testing.T) {
	f := newFakeServer(t, nil)
	first := newProvider(t, fastConfig(f, t.TempDir()))
	pl := first.Plan()
	cfg, clk := clockConfig(f, "")
	cfg.Outbox, cfg.Plan = client.NewMemoryOutbox(), pl
	p := newProvider(t, cfg)
	if err := p.Meter("app").Categorical("screen").Record(context.Background(), "home"); err != nil {
		t.Fatal(err)
	}
	closeAndFlush(t, p, clk)
	if gets, posts := f.requests(); gets != 1 || posts != 1 {
		t.Errorf("%d plan fetches and %d uploads, want 1 and 1", gets, posts)
	}
	pl.Metrics[0].Eps0 = 9 // Plan returned a copy: p is unaffected
	if got := p.Plan().Metrics[0].Eps0; got != testEps0 {
		t.Errorf("the Provider's plan changed with the caller's copy: eps0 = %v", got)
	}
	cfg.Plan = pl
	if _, err := client.NewProvider(context.Background(), cfg); !errors.Is(err, client.ErrEps0AboveCeiling) {
		t.Errorf("given plan above the ceiling: %v, want ErrEps0AboveCeiling", err)
	}
}
