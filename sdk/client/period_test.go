package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/blanket-dp/blanket/plugins/builtin"
	"github.com/blanket-dp/blanket/sdk/client"
	"github.com/blanket-dp/blanket/sdk/plan"
	"github.com/blanket-dp/blanket/sdk/report"
)

// sqliteOutbox opens the SQLite outbox of dir for a test to read beside a
// Provider (Config.Outbox), closed at the end of the test.
func sqliteOutbox(t *testing.T, dir string) *client.SQLiteOutbox {
	t.Helper()
	o, err := client.OpenSQLiteOutbox(context.Background(), filepath.Join(dir, client.OutboxFile))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { o.Close() })
	return o
}

// TestRecordsOnePeriod records one metric 200 times in one period:
// nothing is sent while the period is open; once it has closed, exactly
// one report goes out, made of the last value, pooled under the period's
// key and opening only under the period's binding.
// TestThousandRecordsOnePeriod (make audit) records 1000 times.
func TestRecordsOnePeriod(t *testing.T) {
	recordsOnePeriod(t, 200)
}

// recordsOnePeriod runs TestRecordsOnePeriod with n Records (a multiple of
// 4, the number of values cycled through).
func recordsOnePeriod(t *testing.T, n int) {
	f := newFakeServer(t, nil)
	cfg, clk := clockConfig(f, t.TempDir())
	var sp spy
	cfg.Randomizers = sp.cache(t)
	var got []report.Envelope
	f.setHooks(func(n int, envs []report.Envelope) (int, http.Header, bool) {
		got = append(got, envs...)
		return 0, nil, true
	}, nil)
	p := newProvider(t, cfg)
	ctx := context.Background()
	screen := p.Meter("app").Categorical("screen")
	values := []string{"home", "search", "settings", "elsewhere"}
	for i := range n {
		clk.Set(t0.Add(time.Duration(i) * time.Second)) // all in t0's period
		if err := screen.Record(ctx, values[i%len(values)]); err != nil {
			t.Fatal(err)
		}
	}
	flush(t, p)
	if st := p.Stats(); st.Recorded != int64(n) || st.Messages != 0 {
		t.Fatalf("while the period is open: stats %+v, want %d recorded, nothing sealed", st, n)
	}
	if _, raw, _ := f.counts(); raw != 0 {
		t.Fatalf("the server got %d envelopes while the period was open", raw)
	}
	closeAndFlush(t, p, clk)
	flush(t, p) // closing again sends nothing more
	if st := p.Stats(); st.Messages != 1 || st.Uploaded != 1 {
		t.Fatalf("stats %+v, want one report sealed and uploaded", st)
	}
	if len(got) != 1 {
		t.Fatalf("the server got %d envelopes, want 1", len(got))
	}
	pl := p.Plan()
	period := pl.ReportPeriod(t0)
	if want := report.PeriodPoolKey("app/screen", pl.Epoch(), period); got[0].Metric != want {
		t.Errorf("pool key %q, want %q", got[0].Metric, want)
	}
	b := pl.Binding("app/screen")
	b.Period = period
	if _, err := report.Open(f.priv, b, got[0].Sealed); err != nil {
		t.Errorf("opening under the period's binding: %v", err)
	}
	b.Period = pl.ReportPeriod(t0.Add(-day))
	if _, err := report.Open(f.priv, b, got[0].Sealed); !errors.Is(err, report.ErrOpen) {
		t.Errorf("opening under the period before: %v, want ErrOpen", err)
	}
	// The last value, "elsewhere" (index n-1, n a multiple of 4), is the
	// one randomized.
	if in := sp.got("krr"); len(in) != 1 || in[0].Categories[0] != "elsewhere" {
		t.Errorf("randomized %+v, want the last value alone", in)
	}
	f.checkReports(t, pl)
}

// TestSumPeriodTotal checks that a sum's period stages the total of its
// values, unclamped, and is randomized at closing as that total clamped to
// the metric's range [0, 100]: neither the sum of clamped values nor the
// last value. The spy sees the randomizer's input, which is deterministic;
// its report is not.
func TestSumPeriodTotal(t *testing.T) {
	f := newFakeServer(t, nil)
	dir := t.TempDir()
	cfg, clk := clockConfig(f, dir)
	var sp spy
	cfg.Randomizers = sp.cache(t)
	o := sqliteOutbox(t, dir)
	cfg.Outbox = o
	p := newProvider(t, cfg)
	ctx := context.Background()
	bytes := p.Meter("app").Sum("bytes")
	cases := []struct {
		values      []float64
		total, sent float64
	}{
		{values: []float64{30, 50, 40}, total: 120, sent: 100},               // above the range
		{values: []float64{150, -100}, total: 50, sent: 50},                  // clamping each value would give 100
		{values: []float64{-20, -30}, total: -50, sent: 0},                   // below the range
		{values: []float64{7.25}, total: 7.25, sent: 7.25},                   // within
		{values: []float64{1e308, 1e308}, total: math.MaxFloat64, sent: 100}, // saturates, never +Inf
	}
	for i, c := range cases {
		for _, x := range c.values {
			if err := bytes.Record(ctx, x); err != nil {
				t.Fatal(err)
			}
		}
		staged, err := o.Staged(ctx)
		if err != nil {
			t.Fatal(err)
		}
		// Sums of these few values are exact in floating point.
		if len(staged) != 1 || staged[0].Sum != c.total {
			t.Errorf("case %d: staged %+v, want the total %v", i, staged, c.total)
		}
		clk.Advance(day)
	}
	flush(t, p)
	in := sp.got("summation")
	if len(in) != len(cases) {
		t.Fatalf("%d sums randomized, want %d", len(in), len(cases))
	}
	for i, c := range cases {
		if got := in[i].Reals; len(got) != 1 || got[0] != c.sent {
			t.Errorf("case %d: randomized %v, want the clamped total %v", i, got, c.sent)
		}
	}
}

// TestSumPeriodEstimate checks the clamped total end to end with the real
// summation randomizer: 1000 periods, each with the values 150 and -100,
// must estimate a mean of 50 (their total), not 100 (the sum of the
// clamped values) nor 0 (the last value, clamped). z-test at a two-sided
// false-failure rate of 1e-6: |z| <= 4.89 (the normal quantile of
// 1 - 5e-7), with the estimator's own variance; the test also checks that
// the two wrong answers would fail it.
func TestSumPeriodEstimate(t *testing.T) {
	f := newFakeServer(t, nil)
	cfg, clk := clockConfig(f, "")
	cfg.Outbox, cfg.UploadDelay = client.NewMemoryOutbox(), time.Hour
	p := newProvider(t, cfg)
	ctx := context.Background()
	bytes := p.Meter("app").Sum("bytes")
	const periods = 1000
	recordPeriods(t, clk, periods, func(int) error {
		return errors.Join(bytes.Record(ctx, 150), bytes.Record(ctx, -100))
	})
	flush(t, p)
	pl := p.Plan()
	m := pl.Metric("app/bytes")
	r, err := client.InProcess(builtin.Factories())(ctx, m.Plugin, m.Config())
	if err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	reps := f.opened["app/bytes"]
	f.mu.Unlock()
	if len(reps) != periods {
		t.Fatalf("%d reports, want %d", len(reps), periods)
	}
	st, err := r.Accumulate(ctx, m.Eps0, reps)
	if err != nil {
		t.Fatal(err)
	}
	est, err := r.Estimate(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	const zCrit = 4.89
	for _, it := range est.Items {
		if it.Label != "mean" {
			continue
		}
		sd := math.Sqrt(it.Variance)
		t.Logf("mean %.2f ± %.2f (sd)", it.Value, sd)
		if math.Abs(it.Value-50)/sd > zCrit {
			t.Errorf("estimated mean %.2f, sd %.2f: |z| > %v from 50", it.Value, sd, zCrit)
		}
		if 50/sd <= 2*zCrit {
			t.Fatalf("sd %.2f is too large for the test to tell 50 from 0 and 100", sd)
		}
		return
	}
	t.Fatalf("no mean in %+v", est.Items)
}

// TestClosingTriggers checks the three moments a period closes: the next
// Record, the uploader's tick, and the next start (a Provider shut down in
// the period, reopened after it): its report goes out once.
func TestClosingTriggers(t *testing.T) {
	ctx := context.Background()
	t.Run("next Record", func(t *testing.T) {
		f := newFakeServer(t, nil)
		cfg, clk := clockConfig(f, t.TempDir())
		p := newProvider(t, cfg)
		screen := p.Meter("app").Categorical("screen")
		if err := screen.Record(ctx, "home"); err != nil {
			t.Fatal(err)
		}
		clk.Advance(day)
		if st := p.Stats(); st.Messages != 0 {
			t.Fatalf("stats %+v: sealed before the next Record", st)
		}
		if err := screen.Record(ctx, "search"); err != nil {
			t.Fatal(err)
		}
		if st := p.Stats(); st.Messages != 1 {
			t.Fatalf("stats %+v, want the first period sealed by the Record in the next", st)
		}
	})
	t.Run("upload tick", func(t *testing.T) {
		f := newFakeServer(t, nil)
		cfg, clk := clockConfig(f, t.TempDir())
		cfg.UploadInterval = 10 * time.Millisecond
		p := newProvider(t, cfg)
		if err := p.Meter("app").Categorical("screen").Record(ctx, "home"); err != nil {
			t.Fatal(err)
		}
		time.Sleep(50 * time.Millisecond) // a few ticks: the period is open
		if _, raw, _ := f.counts(); raw != 0 {
			t.Fatalf("the server got %d envelopes while the period was open", raw)
		}
		clk.Advance(day)
		deadline := time.Now().Add(10 * time.Second)
		for {
			if distinct, _, _ := f.counts(); distinct == 1 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("no report after the period ended; stats %+v", p.Stats())
			}
			time.Sleep(5 * time.Millisecond)
		}
	})
	t.Run("restart", func(t *testing.T) {
		f := newFakeServer(t, nil)
		dir := t.TempDir()
		cfg, clk := clockConfig(f, dir)
		p := newProvider(t, cfg)
		if err := p.Meter("app").Sum("bytes").Record(ctx, 12); err != nil {
			t.Fatal(err)
		}
		if err := p.Shutdown(ctx); err != nil { // in the period: nothing to send
			t.Fatal(err)
		}
		clk.Advance(day)
		for i := range 2 {
			p = newProvider(t, cfg)
			if st := p.Stats(); st.Messages != int64(1-i) {
				t.Fatalf("start %d: stats %+v, want %d sealed", i, st, 1-i)
			}
			flush(t, p)
			p.Shutdown(ctx)
		}
		if distinct, _, _ := f.counts(); distinct != 1 {
			t.Fatalf("server holds %d reports, want the period's one", distinct)
		}
	})
}

// TestClockSkew checks that a period never sends two reports whatever the
// clock does: a Record into a period already closed (the clock went back,
// or another process closed it) is dropped and counted as late; a Record
// into an earlier period that was never closed for its metric is staged
// for it (the documented choice), and sent once.
func TestClockSkew(t *testing.T) {
	f := newFakeServer(t, nil)
	dir := t.TempDir()
	cfg, clk := clockConfig(f, dir)
	cfg.PeriodGrace = 7 * day
	p := newProvider(t, cfg)
	ctx := context.Background()
	m := p.Meter("app")
	at := func(period int) { clk.Set(t0.Add(time.Duration(period) * day)) }
	const screen, bytes = "screen", "bytes"
	rec := func(metric string, period int) {
		t.Helper()
		at(period)
		var err error
		if metric == bytes {
			err = m.Sum(bytes).Record(ctx, 1)
		} else {
			err = m.Categorical(metric).Record(ctx, "home")
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	rec(screen, 0)
	rec(screen, 1) // closes period 0
	rec(screen, 0) // back into the closed period: late
	if st := p.Stats(); st.Late != 1 || st.Recorded != 2 || st.Messages != 1 {
		t.Fatalf("stats %+v, want 2 recorded, 1 late, 1 sealed", st)
	}
	rec(screen, 2) // closes period 1
	rec(screen, 1) // late
	rec(screen, 0) // late
	// Period 2 is staged for screen; bytes was never recorded in period
	// 1, which is not closed for it: going back there stages it.
	rec(bytes, 1)
	if st := p.Stats(); st.Late != 3 || st.Recorded != 4 || st.Messages != 2 {
		t.Fatalf("stats %+v, want 4 recorded, 3 late, 2 sealed", st)
	}

	// A second process on the outbox, its clock a period behind.
	cfg2, clk2 := clockConfig(f, dir)
	cfg2.PeriodGrace = 7 * day
	at(4)
	clk2.Set(t0.Add(3 * day))
	q := newProvider(t, cfg2) // its start closes what ended by its clock: screen's period 2, bytes' 1
	if err := q.Meter("app").Categorical("screen").Record(ctx, "search"); err != nil {
		t.Fatal(err)
	}
	flush(t, p) // period 3 has ended by p's clock: p closes it, with q's value
	if err := q.Meter("app").Categorical("screen").Record(ctx, "settings"); err != nil {
		t.Fatal(err)
	}
	if st := q.Stats(); st.Recorded != 1 || st.Late != 1 {
		t.Fatalf("second process: stats %+v, want 1 recorded, then 1 late (the first closed its period)", st)
	}
	at(5)
	flush(t, p)
	flush(t, q)
	// screen: periods 0, 1, 2, 3; bytes: period 1. One report each.
	keys := f.keyCounts()
	pl := p.Plan()
	want := map[string]int{}
	for _, i := range []int{0, 1, 2, 3} {
		want[report.PeriodPoolKey("app/screen", pl.Epoch(), pl.ReportPeriod(t0.Add(time.Duration(i)*day)))] = 1
	}
	want[report.PeriodPoolKey("app/bytes", pl.Epoch(), pl.ReportPeriod(t0.Add(day)))] = 1
	if len(keys) != len(want) {
		t.Errorf("pool keys %v, want %v", keys, want)
	}
	for k, n := range want {
		if keys[k] != n {
			t.Errorf("pool key %q: %d reports, want %d", k, keys[k], n)
		}
	}
	f.checkReports(t, pl)
}

// TestPeriodGrace checks that a period that could not close within the
// grace of its end is dropped and counted, never sent, and one that
// closes within it is sent (the grace included). Without
// Config.PeriodGrace the plan's grace decides: DefaultGrace (8) periods
// when it sets none, so that an app opened once a week under a daily plan
// still sends the day it was last used.
func TestPeriodGrace(t *testing.T) {
	end := time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC) // t0's period ends
	cases := []struct {
		plan         int // the plan's grace in periods (testPlan's is 1)
		grace, after time.Duration
		expired      bool
	}{
		{plan: 1, grace: 0, after: day, expired: false}, // the plan's: one period
		{plan: 1, grace: 0, after: day + time.Second, expired: true},
		{plan: 0, grace: 0, after: 7*day + 12*time.Hour, expired: false}, // the default: 8 periods
		{plan: 0, grace: 0, after: 8 * day, expired: false},
		{plan: 0, grace: 0, after: 8*day + time.Second, expired: true},
		{plan: 3, grace: 0, after: 3 * day, expired: false},
		{plan: 3, grace: 0, after: 3*day + time.Second, expired: true},
		{plan: 1, grace: time.Hour, after: 30 * time.Minute, expired: false},
		{plan: 1, grace: time.Hour, after: 2 * time.Hour, expired: true},
		{plan: 0, grace: time.Hour, after: 2 * time.Hour, expired: true}, // the Config overrides the plan
		{plan: 1, grace: 3 * day, after: 2 * day, expired: false},
	}
	ctx := context.Background()
	for _, c := range cases {
		t.Run(fmt.Sprintf("plan%d+%v+%v", c.plan, c.grace, c.after), func(t *testing.T) {
			f := newFakeServer(t, nil)
			if c.plan != 1 {
				var pl plan.Plan
				if err := json.Unmarshal(f.plan, &pl); err != nil {
					t.Fatal(err)
				}
				pl.Grace = c.plan
				f.setPlan(&pl)
			}
			cfg, clk := clockConfig(f, t.TempDir())
			cfg.PeriodGrace = c.grace
			p := newProvider(t, cfg)
			if err := p.Meter("app").Categorical("screen").Record(ctx, "home"); err != nil {
				t.Fatal(err)
			}
			p.Shutdown(ctx)
			clk.Set(end.Add(c.after))
			p = newProvider(t, cfg)
			flush(t, p)
			st := p.Stats()
			distinct, _, _ := f.counts()
			ledger, err := p.Ledger(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if c.expired {
				if st.Expired != 1 || st.Messages != 0 || distinct != 0 || len(ledger) != 0 {
					t.Errorf("stats %+v, %d reports, ledger %+v: want the period expired, nothing sent or charged", st, distinct, ledger)
				}
			} else if st.Expired != 0 || st.Messages != 1 || distinct != 1 || len(ledger) != 1 {
				t.Errorf("stats %+v, %d reports, ledger %+v: want the period sent", st, distinct, ledger)
			}
		})
	}
}

// TestJointPeriods checks what a joint period sends: every metric in one
// message; a sum not recorded in the period counts 0; a categorical
// metric not recorded leaves the period without a message
// (Stats.Incomplete), and nothing is charged for it.
func TestJointPeriods(t *testing.T) {
	f := newPooledServer(t, "joint")
	cfg, clk := clockConfig(f, t.TempDir())
	var sp spy
	cfg.Randomizers = sp.cache(t)
	p := newProvider(t, cfg)
	ctx := context.Background()
	m := p.Meter("app")
	screen, feature, bytes := m.Categorical("screen"), m.Categorical("feature"), m.Sum("bytes")
	recordPeriods(t, clk, 4, func(i int) error {
		switch i {
		case 0: // complete
			return errors.Join(screen.Record(ctx, "home"), feature.Record(ctx, "a"), bytes.Record(ctx, 9))
		case 1: // no sum: 0
			return errors.Join(screen.Record(ctx, "home"), feature.Record(ctx, "a"))
		case 2: // no categorical values: nothing
			return bytes.Record(ctx, 9)
		default: // no feature: nothing
			return errors.Join(screen.Record(ctx, "home"), bytes.Record(ctx, 9))
		}
	})
	flush(t, p)
	if st := p.Stats(); st.Messages != 2 || st.Incomplete != 2 {
		t.Fatalf("stats %+v, want 2 messages and 2 incomplete periods", st)
	}
	f.mu.Lock()
	msgs := f.messages
	f.mu.Unlock()
	if len(msgs) != 2 || len(msgs[0]) != 3 || len(msgs[1]) != 3 {
		t.Fatalf("messages %v, want 2 of 3 parts", msgs)
	}
	if in := sp.got("summation"); len(in) != 2 || in[0].Reals[0] != 9 || in[1].Reals[0] != 0 {
		t.Errorf("sums randomized %+v, want 9 then 0", in)
	}
	pl := p.Plan()
	keys := f.keyCounts()
	for i := range 2 {
		if k := report.PeriodPoolKey("@joint", pl.Epoch(), pl.ReportPeriod(t0.Add(time.Duration(i)*day))); keys[k] != 1 {
			t.Errorf("period %d: %d messages, want 1 (keys %v)", i, keys[k], keys)
		}
	}
	if l, _ := p.Ledger(ctx); len(l) != 6 {
		t.Errorf("ledger %+v, want 3 metrics in 2 periods", l)
	}
}

// TestClosedPeriodPerMetric checks that a period closed by a joint
// message is closed for every metric the message carried: after the plan
// changes to separate travel and the clock goes back into that period, a
// Record of one of those metrics is late, not sent as a second report of
// the metric in the period. The same holds on both outboxes.
func TestClosedPeriodPerMetric(t *testing.T) {
	for _, name := range []string{"sqlite", "memory"} {
		t.Run(name, func(t *testing.T) {
			f := newPooledServer(t, "joint")
			cfg, clk := clockConfig(f, t.TempDir())
			cfg.PlanRefresh = -1
			if name == "memory" {
				cfg.Outbox = client.NewMemoryOutbox()
			}
			p := newProvider(t, cfg)
			ctx := context.Background()
			m := p.Meter("app")
			if err := errors.Join(m.Categorical("screen").Record(ctx, "home"), m.Categorical("feature").Record(ctx, "a")); err != nil {
				t.Fatal(err)
			}
			closeAndFlush(t, p, clk) // period of t0: one joint message
			if st := p.Stats(); st.Messages != 1 {
				t.Fatalf("stats %+v, want the joint message", st)
			}
			next := p.Plan()
			next.Travel = "separate"
			f.setPlan(next)
			if changed, err := p.RefreshPlan(ctx); !changed || err != nil {
				t.Fatalf("new plan: changed %v, %v", changed, err)
			}
			clk.Set(t0) // back into the closed period
			if err := m.Categorical("screen").Record(ctx, "search"); err != nil {
				t.Fatal(err)
			}
			closeAndFlush(t, p, clk)
			if st := p.Stats(); st.Late != 1 || st.Messages != 1 {
				t.Errorf("stats %+v, want the Record late and no second message", st)
			}
			period := next.ReportPeriod(t0)
			if k := report.PeriodPoolKey("app/screen", next.Epoch(), period); f.keyCounts()[k] != 0 {
				t.Errorf("pool keys %v: app/screen reported again in the period of the joint message", f.keyCounts())
			}
		})
	}
}
