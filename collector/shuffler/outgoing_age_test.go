package shuffler

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/blanket-dp/blanket/internal/servertest"
	"github.com/blanket-dp/blanket/sdk/report"
)

// TestOldestOutgoingAge: blanket_shuffler_oldest_outgoing_batch_age_seconds
// is 0 with nothing outgoing, grows with a batch the collector refuses
// (by the shuffler's clock on SQLite, the database's on PostgreSQL) and
// falls back to 0 once the batch is acknowledged; a second replica on
// the same PostgreSQL database reads the same batch.
func TestOldestOutgoingAge(t *testing.T) {
	for _, kind := range servertest.StoreKinds {
		t.Run(kind, func(t *testing.T) {
			if kind == "sqlite" {
				// The fixture puts an empty Store on PostgreSQL under
				// BLANKET_TEST_STORE=postgres; make test runs this case.
				servertest.SQLiteOnly(t)
			}
			refuse := make(chan bool, 1)
			refuse <- true
			col := &sink{Status: func(int) int {
				r := <-refuse
				refuse <- r
				if r {
					return http.StatusInternalServerError
				}
				return http.StatusOK
			}}
			colSrv := newServer(t, col)
			clock := &testClock{}
			clock.set(time.Unix(today.Start+3600, 0))
			reg := prometheus.NewRegistry()
			dir := t.TempDir()
			o := Options{Plan: testPlan(t, 4), Dir: dir, Store: servertest.StoreOf(t, kind, dir), Collector: colSrv.URL, Registerer: reg, Now: clock.now}
			f := newShufflerFixture(t, o)
			age := func() float64 { return gathered(t, reg, "blanket_shuffler_oldest_outgoing_batch_age_seconds") }
			if a := age(); a != 0 {
				t.Fatalf("age %v with nothing outgoing, want 0", a)
			}
			var res UploadResult
			if resp := post(t, nil, f.url, report.EncodeEnvelopes(envelopes(todayKey, fakeSealed(4))), &res); resp.StatusCode != http.StatusAccepted || res.Accepted != 4 {
				t.Fatalf("upload: %d %+v", resp.StatusCode, res)
			}
			f.closeAll(t)
			if n, err := f.s.Release(context.Background()); err != nil || n != 1 {
				t.Fatalf("Release: %d batches, %v", n, err)
			}
			f.run(t)
			waitFor(t, "a refused send", func() bool { return gathered(t, reg, "blanket_shuffler_batch_send_failures_total") > 0 })
			clock.set(clock.now().Add(10 * time.Minute))
			switch a := age(); {
			case kind == "sqlite" && a != 600:
				t.Errorf("age %v ten minutes after the release by the shuffler's clock, want 600", a)
			case kind == "postgres" && (a < 0 || a > 120):
				t.Errorf("age %v by the database's clock a moment after the release, want in [0, 120]", a)
			}
			if kind == "postgres" {
				reg2 := prometheus.NewRegistry()
				o.Dir, o.Registerer, o.Collector = t.TempDir(), reg2, "http://127.0.0.1:1"
				newShufflerFixture(t, o)
				time.Sleep(1100 * time.Millisecond) // the database's clock moves on
				if a := gathered(t, reg2, "blanket_shuffler_oldest_outgoing_batch_age_seconds"); a < 1 {
					t.Errorf("another replica reads age %v, want at least 1 s", a)
				}
			}
			<-refuse
			refuse <- false
			waitFor(t, "the batch acknowledged", func() bool { return len(col.Got()) == 1 })
			waitFor(t, "the age back to 0", func() bool { return age() == 0 })
		})
	}
}

// TestOutgoingReleasedAtAdded: a file whose outgoing table predates
// released_at opens, and its batches count as released when it opened.
func TestOutgoingReleasedAtAdded(t *testing.T) {
	ctx := context.Background()
	path := t.TempDir() + "/shuffler.db"
	now := int64(1_000_000)
	st, err := openSQLiteStore(ctx, path, 8, 3600, func() int64 { return now })
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		`ALTER TABLE outgoing DROP COLUMN released_at`,
		`INSERT INTO outgoing (id, metric, n, body) VALUES (x'01', 'm', 1, x'00')`,
	} {
		if _, err := st.db.W.ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	st.close()
	now += 50
	if st, err = openSQLiteStore(ctx, path, 8, 3600, func() int64 { return now }); err != nil {
		t.Fatal(err)
	}
	defer st.close()
	now += 7
	if age, ok, err := st.oldestOutgoing(ctx); err != nil || !ok || age != 7*time.Second {
		t.Errorf("oldestOutgoing = %v, %v, %v; want 7s from the reopening", age, ok, err)
	}
}
