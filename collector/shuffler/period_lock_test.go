package shuffler

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/blanket-dp/blanket/internal/pgdb"
	"github.com/blanket-dp/blanket/internal/pgtest"
	"github.com/blanket-dp/blanket/sdk/report"
)

// TestPGPeriodLock pins, deterministically, the PostgreSQL rule of
// release.go that no report of a period is pooled after its closing
// returned: an accept of a period waits for a closing in progress (it
// holds the period's lock shared, the closing exclusive) and then refuses
// the period's envelopes as closed; a closing does not wait behind an
// accept that holds on (it would queue every later accept of the period
// behind it) but gives up with errPeriodBusy, recording nothing, and
// succeeds once the accept has ended. A side transaction stands in for
// the other replica's closing and for a stalled accept.
func TestPGPeriodLock(t *testing.T) {
	const nMin = 10
	ctx := context.Background()
	url := pgtest.URL(t)
	clock := &testClock{}
	clock.set(time.Unix(day(1).End(), 0).Add(10 * time.Minute)) // day 1 ended, within its grace
	s, err := Open(ctx, Options{Plan: testPlan(t, nMin), Dir: t.TempDir(), Store: url, Collector: "http://127.0.0.1:1",
		Logger: testLogger(t), PeriodGrace: time.Hour, Now: clock.now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	u := serveUploads(t, s)
	side, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { side.Close(ctx) })
	if _, err := side.Exec(ctx, "SET search_path = "+pgSchema); err != nil {
		t.Fatal(err)
	}
	p := day(1)
	key := report.PeriodPoolKey(metric, "00000000000000e1", p)
	envs := func(from, n int) []report.Envelope {
		out := make([]report.Envelope, n)
		for i := range out {
			out[i] = report.Envelope{ID: report.NewID(), Metric: key, Suite: report.SuiteX25519ChaCha, Sealed: uniqueSealed(7_000_000, from+i)}
		}
		return out
	}
	pooled := func() int64 {
		t.Helper()
		st, err := s.Stats(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return st.Pools[key]
	}

	// A stalled accept: the period's lock held shared. The closing gives
	// up, records nothing, and the period still takes reports.
	tx, err := side.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock_shared($1, hashtext($2))`, pgdb.PeriodLockClass, periodLock(p)); err != nil {
		t.Fatal(err)
	}
	if err := s.st.closePeriod(ctx, p); !errors.Is(err, errPeriodBusy) {
		t.Fatalf("closing under a held accept: %v, want errPeriodBusy", err)
	}
	if res, err := uploadEnvs(&http.Client{}, u, envs(0, 3)); err != nil || res.Accepted != 3 {
		t.Fatalf("an upload while the closing gave up: %+v, %v; want taken (shared with the held accept)", res, err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}

	// Another replica closing: the lock held exclusive, the period not
	// yet recorded. An accept of the period waits, then reads it closed.
	tx, err = side.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1, hashtext($2))`, pgdb.PeriodLockClass, periodLock(p)); err != nil {
		t.Fatal(err)
	}
	type answer struct {
		res UploadResult
		err error
	}
	done := make(chan answer, 1)
	go func() {
		res, err := uploadEnvs(&http.Client{}, u, envs(100, 4))
		done <- answer{res, err}
	}()
	select {
	case a := <-done:
		t.Fatalf("an accept answered while the period was being closed: %+v, %v; want it to wait for the closing", a.res, a.err)
	case <-time.After(500 * time.Millisecond): // well under acceptLockTimeout
	}
	if _, err := tx.Exec(ctx, `INSERT INTO forgotten (period_len, period_end) VALUES ($1, $2)
		ON CONFLICT (period_len) DO UPDATE SET period_end = greatest(forgotten.period_end, excluded.period_end)`, p.Length, p.End()); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	a := <-done
	if a.err != nil || a.res.Accepted != 0 || a.res.Rejected != 4 {
		t.Fatalf("the accept after the closing: %+v, %v; want its 4 envelopes refused as closed", a.res, a.err)
	}
	if n := pooled(); n != 3 {
		t.Errorf("%d reports pooled, want the 3 taken before the closing", n)
	}
	// The closing by this shuffler now succeeds at once.
	if err := s.st.closePeriod(ctx, p); err != nil {
		t.Fatalf("closing with no accept holding on: %v", err)
	}
}
