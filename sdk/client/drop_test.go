package client_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/blanket-dp/blanket/sdk/client"
	"github.com/blanket-dp/blanket/sdk/report"
)

// logCapture is a slog.Logger whose records a test can read back.
type logCapture struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (c *logCapture) Write(b []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.buf.Write(b)
}

func (c *logCapture) logger() *slog.Logger {
	return slog.New(slog.NewJSONHandler(c, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// records returns the logged records whose message is msg.
func (c *logCapture) records(t *testing.T, msg string) []map[string]any {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []map[string]any
	for line := range strings.SplitSeq(strings.TrimSpace(c.buf.String()), "\n") {
		if line == "" {
			continue
		}
		var r map[string]any
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		if r["msg"] == msg {
			out = append(out, r)
		}
	}
	return out
}

// dropMsg is the message of a Drop's log line.
const dropMsg = "blanket telemetry dropped"

// dropSink collects the Drops passed to Config.OnDrop.
type dropSink struct {
	mu    sync.Mutex
	drops []client.Drop
}

func (s *dropSink) add(d client.Drop) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.drops = append(s.drops, d)
}

func (s *dropSink) got() []client.Drop {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]client.Drop(nil), s.drops...)
}

// TestDropsReachApp checks that a late Record, an expired period and a
// report the shuffler refused each reach the app: as a warning through
// Config.Logger naming the reason, the metric and the period, and as a
// Drop passed to Config.OnDrop, which may call the Provider (it runs with
// no lock held) and has seen every Drop when Shutdown returns.
func TestDropsReachApp(t *testing.T) {
	ctx := context.Background()
	f := newFakeServer(t, nil)
	f.setRefuse(func(e report.Envelope) string {
		if pool, _, _, _ := report.ParsePoolKey(e.Metric); pool == "app/bytes" {
			return "period past its grace"
		}
		return ""
	}, 0)
	var logs logCapture
	var sink dropSink
	cfg, clk := clockConfig(f, t.TempDir())
	cfg.Logger = logs.logger()
	var p *client.Provider
	reentered := make(chan error, 16)
	cfg.OnDrop = func(d client.Drop) {
		sink.add(d)
		// A callback calling the Provider must not deadlock: Flush takes
		// the locks a Record takes, and closes periods as it does.
		reentered <- p.Flush(ctx)
	}
	p, err := client.NewProvider(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	screen, bytesM := p.Meter("app").Categorical("screen"), p.Meter("app").Sum("bytes")
	period0 := f.pl.ReportPeriod(t0)
	// Period 0: screen and bytes. Period 1 closes period 0: screen goes
	// through, bytes is refused.
	if err := screen.Record(ctx, "home"); err != nil {
		t.Fatal(err)
	}
	if err := bytesM.Record(ctx, 7); err != nil {
		t.Fatal(err)
	}
	clk.Advance(day)
	flush(t, p)
	// Back in period 0, closed: late.
	clk.Advance(-day)
	if err := screen.Record(ctx, "search"); err != nil {
		t.Fatalf("late Record: %v, want nil", err)
	}
	// Period 1 recorded, then the app stays away past the grace: expired.
	clk.Advance(day)
	if err := screen.Record(ctx, "home"); err != nil {
		t.Fatal(err)
	}
	clk.Advance(3 * day)
	flush(t, p)
	if err := p.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}

	day0 := time.Unix(period0.Start, 0).UTC()
	want := []client.Drop{
		{Reason: client.DropRefused, Metric: "app/bytes", Start: day0, End: day0.Add(day), Detail: "period past its grace"},
		{Reason: client.DropLate, Metric: "app/screen", Start: day0, End: day0.Add(day)},
		{Reason: client.DropExpired, Metric: "app/screen", Start: day0.Add(day), End: day0.Add(2 * day)},
	}
	got := sink.got()
	if len(got) != len(want) {
		t.Fatalf("OnDrop got %+v, want %+v", got, want)
	}
	for i := range want {
		got[i].Detail, want[i].Detail = strings.TrimSpace(got[i].Detail), strings.TrimSpace(want[i].Detail)
		if want[i].Detail == "" {
			got[i].Detail = "" // the wording of late and expired drops is free
		}
		if got[i] != want[i] {
			t.Errorf("drop %d = %+v, want %+v", i, got[i], want[i])
		}
	}
	for range want {
		if err := <-reentered; err != nil && !errors.Is(err, client.ErrShutdown) {
			t.Errorf("Flush from OnDrop: %v", err)
		}
	}
	lines := logs.records(t, dropMsg)
	if len(lines) != len(want) {
		t.Fatalf("%d drop log lines, want %d: %v", len(lines), len(want), lines)
	}
	for i, w := range want {
		l := lines[i]
		if l["level"] != "WARN" || l["reason"] != string(w.Reason) || l["metric"] != w.Metric || l["period_start"] != w.Start.Format(time.RFC3339) || l["period_end"] != w.End.Format(time.RFC3339) {
			t.Errorf("log line %d = %v, want a warning with reason %s, metric %s, period [%v, %v)", i, l, w.Reason, w.Metric, w.Start, w.End)
		}
	}
	if st := p.Stats(); st.Late != 1 || st.Expired != 1 || st.Rejected != 1 || st.Uploaded != 1 {
		t.Errorf("stats = %+v, want 1 late, 1 expired, 1 rejected, 1 uploaded", st)
	}
}

// TestRefusedReportNotCharged checks the ledger of a report the shuffler
// refused in its 202 answer: deleted from the outbox, not charged (its
// eps0 kept apart) and marked refused, while the reports it acknowledged
// stay charged and are marked acknowledged; the window sums the charged
// ones only.
func TestRefusedReportNotCharged(t *testing.T) {
	ctx := context.Background()
	f := newFakeServer(t, nil)
	pl := f.pl
	pl.Horizon = 2 // the window holds the period of both reports
	f.setPlan(pl)
	f.setRefuse(func(e report.Envelope) string {
		if pool, _, _, _ := report.ParsePoolKey(e.Metric); pool == "app/bytes" {
			return "period past its grace"
		}
		return ""
	}, 0)
	dir := t.TempDir()
	cfg, clk := clockConfig(f, dir)
	cfg.UploadDelay = time.Hour // only Flush uploads
	o := sqliteOutbox(t, dir)
	cfg.Outbox = o
	p := newProvider(t, cfg)
	m := p.Meter("app")
	if err := m.Categorical("screen").Record(ctx, "home"); err != nil {
		t.Fatal(err)
	}
	if err := m.Sum("bytes").Record(ctx, 7); err != nil {
		t.Fatal(err)
	}
	clk.Advance(day)
	// Before the upload both reports are charged, pending.
	if err := m.Categorical("screen").Record(ctx, "home"); err != nil {
		t.Fatal(err)
	}
	l, err := p.Ledger(ctx)
	if err != nil || len(l) != 2 || l[0].Upload != client.UploadPending || l[1].Upload != client.UploadPending || l[0].Eps0 != testEps0 {
		t.Fatalf("ledger before the upload = %+v, %v; want two pending charged reports", l, err)
	}
	flush(t, p)
	l, err = p.Ledger(ctx)
	if err != nil {
		t.Fatal(err)
	}
	d0 := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	epoch := p.Plan().Epoch()
	want := []client.LedgerEntry{
		{Start: d0, End: d0.Add(day), Metric: "app/bytes", Epoch: epoch, Upload: client.UploadRefused, RefusedEps0: testEps0},
		{Start: d0, End: d0.Add(day), Metric: "app/screen", Epoch: epoch, Reports: 1, Eps0: testEps0, Upload: client.UploadAcknowledged},
	}
	if len(l) != len(want) || l[0] != want[0] || l[1] != want[1] {
		t.Fatalf("ledger = %+v, want %+v", l, want)
	}
	w, err := p.LedgerWindow(ctx)
	if err != nil || w.Reports != 1 || w.LocalEps0 != testEps0 {
		t.Errorf("window = %+v, %v; want the acknowledged report alone", w, err)
	}
	if pending, err := o.Pending(ctx, 10); err != nil || len(pending) != 0 {
		t.Errorf("pending after the answer: %d, %v; want none (the refused report is not retried)", len(pending), err)
	}
	if st := p.Stats(); st.Rejected != 1 || st.Uploaded != 1 || st.Accepted != 1 {
		t.Errorf("stats = %+v, want 1 rejected, 1 uploaded, 1 accepted", st)
	}
}

// TestUnnamedRefusals checks answers that refuse more envelopes than they
// name (the shuffler names only the first few). When the refusals not
// named are all the envelopes not named, every one is refused, not
// charged; otherwise the client cannot tell them from the acknowledged
// reports, and every envelope not named leaves the outbox charged, its
// state unknown. Every refusal is a Drop.
func TestUnnamedRefusals(t *testing.T) {
	const periods = 5
	for _, c := range []struct {
		name    string
		refused func(pool string) bool
		// want is the upload state of the entries of each metric, the
		// named refusal apart.
		want map[string]client.UploadState
		// named is the number of refused, uncharged entries.
		named int
	}{
		{"all refused", func(string) bool { return true },
			map[string]client.UploadState{"app/screen": client.UploadRefused, "app/bytes": client.UploadRefused}, 2 * periods},
		{"some refused", func(pool string) bool { return pool == "app/bytes" },
			map[string]client.UploadState{"app/screen": client.UploadUnknown, "app/bytes": client.UploadUnknown}, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			f := newFakeServer(t, nil)
			f.setRefuse(func(e report.Envelope) string {
				if pool, _, _, _ := report.ParsePoolKey(e.Metric); c.refused(pool) {
					return "period past its grace"
				}
				return ""
			}, 1)
			dir := t.TempDir()
			cfg, clk := clockConfig(f, dir)
			cfg.UploadDelay = time.Hour // only Flush uploads, all at once
			var sink dropSink
			cfg.OnDrop = sink.add
			o := sqliteOutbox(t, dir)
			cfg.Outbox = o
			p := newProvider(t, cfg)
			m := p.Meter("app")
			recordPeriods(t, clk, periods, func(int) error {
				return errors.Join(m.Categorical("screen").Record(ctx, "home"), m.Sum("bytes").Record(ctx, 3))
			})
			flush(t, p)
			l, err := p.Ledger(ctx)
			if err != nil || len(l) != 2*periods {
				t.Fatalf("ledger = %+v, %v; want %d entries", l, err, 2*periods)
			}
			var refused int
			for _, e := range l {
				want := c.want[e.Metric]
				if e.Upload == client.UploadRefused && e.Metric == "app/bytes" && want == client.UploadUnknown && refused == 0 {
					want = client.UploadRefused // the one named
				}
				charged := want != client.UploadRefused
				switch {
				case e.Upload != want:
					t.Errorf("%+v: upload state %q, want %q", e, e.Upload, want)
				case charged && (e.Reports != 1 || e.Eps0 != testEps0):
					t.Errorf("%+v: want charged", e)
				case !charged && (e.Reports != 0 || e.Eps0 != 0 || e.RefusedEps0 != testEps0):
					t.Errorf("%+v: want not charged", e)
				}
				if e.Upload == client.UploadRefused {
					refused++
				}
			}
			if refused != c.named {
				t.Errorf("%d entries refused, want %d", refused, c.named)
			}
			nRefused := 0
			for _, pool := range []string{"app/screen", "app/bytes"} {
				if c.refused(pool) {
					nRefused += periods
				}
			}
			if distinct, _, _ := f.counts(); distinct != 2*periods-nRefused {
				t.Errorf("server stored %d reports, want %d", distinct, 2*periods-nRefused)
			}
			if st := p.Stats(); st.Rejected != int64(nRefused) || st.Uploaded != int64(2*periods-nRefused) {
				t.Errorf("stats = %+v, want %d rejected and %d uploaded", st, nRefused, 2*periods-nRefused)
			}
			if pending, _ := o.Pending(ctx, 100); len(pending) != 0 {
				t.Errorf("%d reports still pending, want none", len(pending))
			}
			if err := p.Shutdown(ctx); err != nil {
				t.Fatal(err)
			}
			if drops := sink.got(); len(drops) != nRefused {
				t.Errorf("%d drops, want %d: %+v", len(drops), nRefused, drops)
			}
		})
	}
}

// TestRefusedRetryStaysCharged checks a report whose first upload reached
// the shuffler but whose answer was lost, and which the shuffler refuses
// when it is sent again (as it refuses a retry after the period's
// deadline, whether or not it holds the first copy): its charge stays, its
// state is unknown, and it is a Drop.
func TestRefusedRetryStaysCharged(t *testing.T) {
	ctx := context.Background()
	f := newFakeServer(t, nil)
	var late atomic.Bool
	f.setHooks(nil, func(n int) {
		if n == 1 {
			late.Store(true)
			panic(http.ErrAbortHandler) // stored; the answer is lost
		}
	})
	f.setRefuse(func(report.Envelope) string {
		if late.Load() {
			return "period past its grace"
		}
		return ""
	}, 0)
	dir := t.TempDir()
	cfg, clk := clockConfig(f, dir)
	cfg.UploadDelay = time.Hour // only Flush uploads
	var sink dropSink
	cfg.OnDrop = sink.add
	p := newProvider(t, cfg)
	if err := p.Meter("app").Categorical("screen").Record(ctx, "home"); err != nil {
		t.Fatal(err)
	}
	closeAndFlush(t, p, clk)
	l, err := p.Ledger(ctx)
	if err != nil || len(l) != 1 || l[0].Upload != client.UploadUnknown || l[0].Reports != 1 || l[0].Eps0 != testEps0 {
		t.Fatalf("ledger = %+v, %v; want the report charged, its state unknown", l, err)
	}
	if distinct, _, _ := f.counts(); distinct != 1 {
		t.Errorf("server stored %d reports, want the first copy", distinct)
	}
	if err := p.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if drops := sink.got(); len(drops) != 1 || drops[0].Reason != client.DropRefused || drops[0].Metric != "app/screen" {
		t.Errorf("drops %+v, want the refusal", drops)
	}
}
