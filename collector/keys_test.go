package collector

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/blanket-dp/blanket/collector/shuffler"
	"github.com/blanket-dp/blanket/internal/pgdb"
	"github.com/blanket-dp/blanket/internal/servertest"
	"github.com/blanket-dp/blanket/internal/sqlitedb"
	"github.com/blanket-dp/blanket/sdk/client"
	"github.com/blanket-dp/blanket/sdk/plan"
	"github.com/blanket-dp/blanket/sdk/report"
	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"
)

// fakeClock is a settable clock the collector, the shuffler and the apps
// share.
type fakeClock struct{ ns atomic.Int64 }

func (c *fakeClock) Now() time.Time  { return time.Unix(0, c.ns.Load()).UTC() }
func (c *fakeClock) set(t time.Time) { c.ns.Store(t.UnixNano()) }
func (c *fakeClock) at(p report.Period, d time.Duration) {
	c.set(time.Unix(p.Start, 0).Add(d))
}

// logBuffer collects log lines for a test to search.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// privateKeyKept reports whether c's store (its key directory, or its
// database) still holds the private half of report key id.
func privateKeyKept(t *testing.T, c *Collector, id string) bool {
	t.Helper()
	if c.keys.files != nil {
		_, err := os.Stat(c.keys.files.path(id))
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			t.Fatal(err)
		}
		return err == nil
	}
	var kept bool
	err := c.st.(*pgStore).pool.QueryRow(context.Background(), `SELECT private IS NOT NULL FROM report_keys WHERE id = $1`, id).Scan(&kept)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) { // a withdrawn key has no row
		t.Fatal(err)
	}
	return kept
}

// rotationRig is a collector rotating its report key (KeyRotation
// every) and a real shuffler on loopback HTTP, on one fake clock, and
// apps (SDK Providers with their own outboxes) reporting through them
// one value a day; every step runs half an hour after a day's start.
type rotationRig struct {
	t    *testing.T
	c    *Collector
	clk  *fakeClock
	apps []*client.Provider
	// sw serves mux, the collector's routes, unless a test swaps it.
	sw   *swapHandler
	mux  *http.ServeMux
	logs *logBuffer
	reg  *prometheus.Registry
}

// rigOffset is when in a day the rig's steps run.
const rigOffset = 30 * time.Minute

// newRotationRig starts a rig of apps on the test plan with n_min nMin and
// one period of grace, the key slack an hour, on the store
// BLANKET_TEST_STORE names; the collector has looked at its keys once.
func newRotationRig(t *testing.T, nMin, apps int, every time.Duration) *rotationRig {
	t.Helper()
	ctx := context.Background()
	r := &rotationRig{t: t, clk: &fakeClock{}, logs: &logBuffer{}, reg: prometheus.NewRegistry(), sw: &swapHandler{}, mux: http.NewServeMux()}
	r.clk.at(day(0), rigOffset)
	p := testPlan(t, nMin)
	p.Grace = 1
	dir := t.TempDir()
	var err error
	r.c, err = OpenCollector(ctx, CollectorOptions{Plan: p, Dir: dir, Store: servertest.Store(t, dir), Open: openBuiltin, Token: testToken,
		Logger: slog.New(slog.NewTextHandler(r.logs, nil)), Epsilon: quickEpsilon, Registerer: r.reg,
		Now: r.clk.Now, KeyRotation: every, KeySlack: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		r.c.Close()
		if t.Failed() {
			t.Logf("the collector's log:\n%s", r.logs)
		}
	})
	r.c.Register(r.mux)
	r.sw.set(r.mux)
	csrv := newServer(t, r.sw)
	sf := newShufflerFixture(t, shuffler.Options{Plan: r.c.Plan(), Collector: csrv.URL, Token: testToken, Now: r.clk.Now, ReleaseInterval: 5 * time.Millisecond})
	sf.run(t)
	r.keep() // publishes the second key
	r.apps = make([]*client.Provider, apps)
	for i := range r.apps {
		pr, err := client.NewProvider(ctx, client.Config{
			Mode: client.ModeOn, Endpoint: sf.srv.URL, PlanEndpoint: csrv.URL, PlanKey: plan.FormatSigningKey(r.c.PlanSigningKey()),
			DataDir: t.TempDir(), MaxEps0: 10, UploadDelay: time.Millisecond, RetryMin: 5 * time.Millisecond, RetryMax: 50 * time.Millisecond,
			PlanRefresh: -1, Now: r.clk.Now,
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { pr.Shutdown(context.Background()) })
		r.apps[i] = pr
	}
	return r
}

// keep is one pass of the collector's Run.
func (r *rotationRig) keep() {
	r.t.Helper()
	if err := r.c.keepKeys(context.Background()); err != nil {
		r.t.Fatal(err)
	}
}

// record has every app record a value in day d.
func (r *rotationRig) record(d int) {
	r.t.Helper()
	for i, pr := range r.apps {
		if err := pr.Meter("").Categorical(metric).Record(context.Background(), []string{"home", "search", "settings", "profile"}[(i+d)%4]); err != nil {
			r.t.Fatal(err)
		}
	}
}

// nextDay moves the clock to day d+1; the apps refresh the plan and send
// day d.
func (r *rotationRig) nextDay(d int) {
	r.t.Helper()
	r.clk.at(day(d+1), rigOffset)
	for _, pr := range r.apps {
		if _, err := pr.RefreshPlan(context.Background()); err != nil {
			r.t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		if err := pr.Flush(ctx); err != nil {
			r.t.Fatal(err)
		}
		cancel()
	}
}

// ingested reports whether period's batches hold n reports, valid or
// malformed.
func (r *rotationRig) ingested(period report.Period, n int64) bool {
	r.t.Helper()
	batches, err := r.c.st.batchList(context.Background(), metric, r.c.Epoch(), period)
	if err != nil {
		r.t.Fatal(err)
	}
	var got int64
	for _, b := range batches {
		got += b.n + b.malformed
	}
	return got == n
}

// settle, at step d (day d+1), waits until day d-1 is ingested (its
// deadline, its end and one period of grace, has passed: the shuffler
// releases it), then has the collector look at its keys, and checks that
// the next key is published ahead of its first period.
func (r *rotationRig) settle(d int) {
	r.t.Helper()
	if d >= 1 {
		waitFor(r.t, fmt.Sprintf("day %d ingested", d-1), func() bool { return r.ingested(day(d-1), int64(len(r.apps))) })
	}
	r.keep()
	if ks := r.c.Plan().CollectorKeys; ks[len(ks)-1].From <= r.clk.Now().Unix() {
		r.t.Fatalf("day %d: the plan lists no pending key: %+v", d, ks)
	}
}

// TestKeyRotationMidStream is attack (d) of issue 25: a thief who steals
// the collector's keys later must not open old batches, while apps
// reporting across scheduled rotations lose nothing. Six apps (SDK
// Providers with their own outboxes) report one value a day for seven
// days through a real shuffler and collector on loopback HTTP (SQLite, or
// PostgreSQL under BLANKET_TEST_STORE=postgres), all on one fake clock;
// the collector rotates its report key every two days (a key starts every
// other period boundary; the plan's grace is one period, the key slack
// an hour). The collector is unreachable while the shuffler releases the
// fifth day's batch, until after that day's key was erased. Then:
//
//   - the plan's epoch never changes, and each key is published before
//     its first period;
//   - every report the shuffler acknowledged of every other day is
//     counted, and none is malformed: each opened under its period's key;
//   - the fifth day's batch, delivered once the collector is back, does
//     not open: acknowledged, every report counted malformed and in
//     blanket_collector_reports_key_deleted_total, with a log line saying
//     why;
//   - the erased keys' private halves are gone from the key directory
//     (or the database), and the plan no longer lists them.
func TestKeyRotationMidStream(t *testing.T) {
	const nMin, apps, days = 4, 6, 7
	ctx := context.Background()
	r := newRotationRig(t, nMin, apps, 48*time.Hour)
	c, ps, sw, mux, ingested, keep := r.c, r.apps, r.sw, r.mux, r.ingested, r.keep
	epoch := c.Epoch()
	first := c.Plan().CollectorKeys
	if len(first) != 2 || first[0].From != 0 || first[1].From != day(3).Start {
		t.Fatalf("after the first look the plan lists %+v; want the first key and the next from day 3", first)
	}
	// down answers 503 to batches (the plan is still served).
	down := func(w http.ResponseWriter, req *http.Request) {
		if req.URL.Path == "/v1/batches" {
			http.Error(w, "collector down", http.StatusServiceUnavailable)
			return
		}
		mux.ServeHTTP(w, req)
	}
	const lost = 4 // the day whose batch comes after its key's erasure
	for d := range days + 1 {
		if d < days {
			r.record(d)
		}
		if d == lost+1 {
			sw.set(http.HandlerFunc(down)) // before the shuffler releases day 4
		}
		r.nextDay(d)
		if d == lost+2 {
			// Day 4's key (from day 3) is erased at day 5's boundary plus
			// the grace and the slack, before its batch comes.
			keep()
			ks, err := c.ReportKeys(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if ks[1].From.Unix() != day(3).Start || ks[1].State != KeyDeleted || privateKeyKept(t, c, ks[1].ID) {
				t.Fatalf("the key of days 3-4: %+v, private half kept: %v; want it deleted", ks[1], privateKeyKept(t, c, ks[1].ID))
			}
			sw.set(mux)
			waitFor(t, "day 4's batch delivered", func() bool { return ingested(day(lost), apps) })
		}
		if d-1 != lost {
			r.settle(d)
		} else {
			keep()
		}
	}

	// Every report acknowledged is counted, but day 4's.
	var acked int64
	for _, pr := range ps {
		acked += pr.Stats().Accepted
	}
	if acked != apps*days {
		t.Fatalf("the shuffler acknowledged %d reports, want %d", acked, apps*days)
	}
	for d := range days {
		batches, err := c.st.batchList(ctx, metric, epoch, day(d))
		if err != nil {
			t.Fatal(err)
		}
		var n, malformed int64
		for _, b := range batches {
			n, malformed = n+b.n, malformed+b.malformed
		}
		want := [2]int64{apps, 0}
		if d == lost {
			want = [2]int64{0, apps}
		}
		if n != want[0] || malformed != want[1] {
			t.Errorf("day %d: %d valid, %d malformed; want %d, %d", d, n, malformed, want[0], want[1])
		}
	}
	rows, err := c.st.statistics(ctx, metric)
	if err != nil {
		t.Fatal(err)
	}
	for _, row := range rows {
		if row.epoch != epoch {
			t.Errorf("a statistic of epoch %s: the rotations made a new epoch (the plan's is %s)", row.epoch, epoch)
		}
	}
	if c.Epoch() != epoch || ps[0].Plan().Epoch() != epoch {
		t.Errorf("epochs %s (collector), %s (app), want %s throughout", c.Epoch(), ps[0].Plan().Epoch(), epoch)
	}
	if st := c.Stats(); st.KeyDeleted != apps || servertest.Gathered(t, r.reg, "blanket_collector_reports_key_deleted_total") != apps {
		t.Errorf("stats %+v: want the %d reports of day %d counted as sealed to a deleted key", st, apps, lost)
	}
	if !strings.Contains(r.logs.String(), "batch of a period whose report key was deleted") {
		t.Error("no log line says why day 4's batch did not open")
	}

	// The schedule: days 0-2 under the first key, 3-4 the second, 5-6
	// the third, each published before it started; the first two erased.
	ks, err := c.ReportKeys(ctx)
	if err != nil {
		t.Fatal(err)
	}
	wantFrom := []int64{0, day(3).Start, day(5).Start, day(7).Start}
	wantState := []string{KeyDeleted, KeyDeleted, KeyRetired, KeyActive}
	if len(ks) < len(wantFrom) {
		t.Fatalf("report keys %+v", ks)
	}
	for i, want := range wantFrom {
		if ks[i].From.Unix() != want || ks[i].State != wantState[i] {
			t.Errorf("key %d: from %v, %s; want from %v, %s", i, ks[i].From, ks[i].State, time.Unix(want, 0).UTC(), wantState[i])
		}
		if kept := privateKeyKept(t, c, ks[i].ID); kept != (wantState[i] != KeyDeleted) {
			t.Errorf("key %d (%s): private half kept = %v", i, ks[i].State, kept)
		}
	}
	for _, k := range ps[0].Plan().CollectorKeys {
		if k.ID == ks[0].ID || k.ID == ks[1].ID {
			t.Errorf("the app's plan still lists the deleted key %s", k.ID)
		}
	}
}

// TestReplicasShareTheKeySchedule, on either store: two collectors on one
// database (on SQLite one collector, looked at twice at once) that find a
// rotation due at the same moment add one key between them; both open a
// period's batch under its key, and a key rotate-key adds is picked up by
// both; the private halves of keys rotate-key withdrew or the collectors
// erased are gone.
func TestReplicasShareTheKeySchedule(t *testing.T) {
	for _, kind := range servertest.StoreKinds {
		t.Run(kind, func(t *testing.T) {
			ctx := context.Background()
			var clk fakeClock
			clk.at(day(0), time.Hour)
			dir := t.TempDir()
			store := servertest.StoreOf(t, kind, dir)
			n := replicaCount(kind)
			cs := make([]*Collector, n)
			for i := range cs {
				d := dir
				if store != "" {
					d = t.TempDir()
				}
				p := testPlan(t, 10)
				p.Grace = 1
				c, err := OpenCollector(ctx, CollectorOptions{Plan: p, Dir: d, Store: store, Open: openBuiltin, Token: testToken, Logger: testLogger(t),
					Epsilon: quickEpsilon, Now: clk.Now, KeyRotation: 48 * time.Hour, KeySlack: time.Hour})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { c.Close() })
				cs[i] = c
			}
			keepAll := func() {
				t.Helper()
				var wg sync.WaitGroup
				errs := make([]error, 2)
				start := make(chan struct{})
				for i, c := range ingesters(cs) {
					wg.Go(func() {
						<-start
						errs[i] = c.keepKeys(ctx)
					})
				}
				close(start)
				wg.Wait()
				if err := errors.Join(errs...); err != nil {
					t.Fatal(err)
				}
				for _, c := range cs { // a replica that lost the race reads the winner's key
					if err := c.keepKeys(ctx); err != nil {
						t.Fatal(err)
					}
				}
			}
			keepAll()
			for _, c := range cs {
				ks := c.Plan().CollectorKeys
				if len(ks) != 2 || ks[1].From != day(3).Start || ks[1].ID != cs[0].Plan().CollectorKeys[1].ID {
					t.Fatalf("keys %+v: want one key due from day 3, the same at every replica", ks)
				}
			}
			pending := cs[0].Plan().CollectorKeys[1].ID

			// rotate-key withdraws the pending key and adds one from the
			// first boundary a period (and an hour) from now: day 2.
			res, err := RotateReportKey(ctx, KeyOptions{Dir: dir, Store: store, KeyDir: cs[0].o.KeyDir, Now: clk.Now})
			if err != nil {
				t.Fatal(err)
			}
			if res.Added.From.Unix() != day(2).Start || len(res.Withdrawn) != 1 || res.Withdrawn[0] != pending || len(res.Schedule) != 2 {
				t.Fatalf("RotateReportKey = %+v; want a key from day 2 replacing %s", res, pending)
			}
			if privateKeyKept(t, cs[0], pending) {
				t.Errorf("the withdrawn key %s kept its private half", pending)
			}
			keepAll()
			for _, c := range cs {
				if ks := c.Plan().CollectorKeys; len(ks) != 2 || ks[1].ID != res.Added.ID {
					t.Fatalf("after rotate-key a replica serves %+v; want the new key %s", ks, res.Added.ID)
				}
			}

			// A batch of day 2, ingested by either replica, opens under the
			// new key; one of day 1 under the first.
			for i, d := range []int{1, 2} {
				c := cs[i%len(cs)]
				pub := c.Plan()
				body := batchBody(report.PeriodPoolKey(metric, pub.Epoch(), day(d)), sealKRRIn(t, pub, metric, servertest.KeyOf(t, pub, day(d)), krrValues(10, uint64(d)), uint64(d), day(d)))
				res, err := c.Ingest(ctx, body)
				if err != nil || res.N != 10 || res.Malformed != 0 {
					t.Fatalf("day %d: Ingest = %+v, %v", d, res, err)
				}
			}
			// Past day 3 the new key is active and the next is due: 48 h
			// after its start is day 4, but a period ahead of now is day 5;
			// the first is erased at day 2 plus a period of grace and the
			// hour of slack.
			clk.at(day(3), 2*time.Hour)
			keepAll()
			for _, c := range cs {
				ks, err := c.ReportKeys(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if len(ks) != 3 || ks[0].State != KeyDeleted || ks[1].State != KeyActive || ks[2].State != KeyPending || ks[2].From.Unix() != day(5).Start {
					t.Fatalf("keys %+v: want the first deleted, the second active, the third from day 5", ks)
				}
				if privateKeyKept(t, c, ks[0].ID) {
					t.Errorf("the deleted key %s kept its private half", ks[0].ID)
				}
			}
		})
	}
}

// TestKeyDirKeepsPrivateKeysOutOfTheDatabase: a PostgreSQL collector run
// with a key directory keeps its report keys' private halves there and
// none in the database: no row of any table of its schema holds one. A
// collector that ran without one moves the private halves out at its
// first start with one; run without it again, it refuses to start rather
// than lose them, and so does rotate-key given no key directory.
func TestKeyDirKeepsPrivateKeysOutOfTheDatabase(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	store := servertest.StoreOf(t, "postgres", dir)
	keyDir := filepath.Join(t.TempDir(), "keys")
	open := func(keyDir string) (*Collector, error) {
		return OpenCollector(ctx, CollectorOptions{Plan: testPlan(t, 10), Dir: dir, Store: store, KeyDir: keyDir, Open: openBuiltin, Token: testToken, Logger: testLogger(t), Epsilon: quickEpsilon})
	}
	c, err := open("") // the private halves in the database
	if err != nil {
		t.Fatal(err)
	}
	first := c.Plan().CollectorKeys[0].ID
	c.Close()
	if _, err := RotateReportKey(ctx, KeyOptions{Dir: dir, Store: store, KeyDir: keyDir}); !errors.Is(err, ErrKeyStore) {
		t.Fatalf("rotate-key with a key directory the collector does not use: %v, want ErrKeyStore", err)
	}
	if c, err = open(keyDir); err != nil { // moves them out
		t.Fatal(err)
	}
	res, err := RotateReportKey(ctx, KeyOptions{Dir: dir, Store: store, KeyDir: keyDir})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.keepKeys(ctx); err != nil {
		t.Fatal(err)
	}
	privs := map[string][]byte{}
	for _, id := range []string{first, res.Added.ID} {
		fi, err := os.Stat(filepath.Join(keyDir, ReportKeyFile(id)))
		if err != nil || fi.Mode().Perm() != 0o600 {
			t.Fatalf("key file of %s: %v, %v; want mode 0600", id, fi, err)
		}
		if privs[id], err = (keyFiles{dir: keyDir}).read(id); err != nil {
			t.Fatal(err)
		}
	}
	// What a dump of the schema holds: every row of every table, as text.
	pool := c.st.(*pgStore).pool
	tables, err := pgx.CollectRows(mustQuery(t, pool, `SELECT table_name FROM information_schema.tables WHERE table_schema = 'blanket_collector'`), pgx.RowTo[string])
	if err != nil || len(tables) < 5 {
		t.Fatalf("tables %v, %v", tables, err)
	}
	var dump strings.Builder
	for _, table := range tables {
		rows, err := pgx.CollectRows(mustQuery(t, pool, `SELECT t::text FROM `+pgx.Identifier{table}.Sanitize()+` t`), pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		dump.WriteString(strings.Join(rows, "\n"))
	}
	for id, priv := range privs {
		if strings.Contains(dump.String(), fmt.Sprintf("%x", priv)) || strings.Contains(dump.String(), base64.StdEncoding.EncodeToString(priv)) {
			t.Errorf("the database holds the private half of %s", id)
		}
	}
	if !strings.Contains(dump.String(), fmt.Sprintf("%x", servertest.KeyOf(t, c.Plan(), today).Bytes())) {
		t.Error("the search finds no public key either: it could not have found a private one")
	}
	c.Close()
	if _, err := open(""); !errors.Is(err, ErrKeyStore) || !strings.Contains(err.Error(), "--key-dir") {
		t.Fatalf("reopened without the key directory: %v, want ErrKeyStore naming --key-dir", err)
	}
	if _, err := RotateReportKey(ctx, KeyOptions{Dir: dir, Store: store}); !errors.Is(err, ErrKeyStore) {
		t.Fatalf("rotate-key without the key directory: %v, want ErrKeyStore", err)
	}
}

func mustQuery(t *testing.T, q interface {
	Query(context.Context, string, ...any) (pgx.Rows, error)
}, sql string) pgx.Rows {
	t.Helper()
	rows, err := q.Query(context.Background(), sql)
	if err != nil {
		t.Fatal(err)
	}
	return rows
}

// TestEarlierBuildsKeysRefused: the one report key of an earlier build
// (its key file, a SQLite database whose plans carried it, a PostgreSQL
// schema with it in collector_key) is refused with a message that says
// so, not started with a new key beside it.
func TestEarlierBuildsKeysRefused(t *testing.T) {
	ctx := context.Background()
	for name, prepare := range map[string]func(t *testing.T, dir string) (store string){
		"key file": func(t *testing.T, dir string) string {
			if err := os.WriteFile(filepath.Join(dir, legacyKeyFile), []byte("AAAA"), 0o600); err != nil {
				t.Fatal(err)
			}
			return ""
		},
		"sqlite": func(t *testing.T, dir string) string {
			db, err := sqlitedb.Open(ctx, filepath.Join(dir, DBFile), sqlitedb.Schema{Statements: []string{`CREATE TABLE epochs (epoch TEXT PRIMARY KEY, source TEXT NOT NULL, key TEXT NOT NULL, plan BLOB NOT NULL)`}})
			if err != nil {
				t.Fatal(err)
			}
			db.Close()
			return ""
		},
		"postgres": func(t *testing.T, dir string) string {
			store := servertest.StoreOf(t, "postgres", dir)
			pool, err := pgdb.Open(ctx, store, pgSchema, pgMigrations[:3], 0)
			if err != nil {
				t.Fatal(err)
			}
			defer pool.Close()
			if _, err := pool.Exec(ctx, `INSERT INTO collector_key (id, key) VALUES (1, 'AAAA')`); err != nil {
				t.Fatal(err)
			}
			return store
		},
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			store := prepare(t, dir)
			_, err := OpenCollector(ctx, CollectorOptions{Plan: testPlan(t, 10), Dir: dir, Store: store, Open: openBuiltin, Logger: testLogger(t)})
			if err == nil || !strings.Contains(err.Error(), "earlier build") {
				t.Fatalf("OpenCollector = %v; want a refusal naming the earlier build", err)
			}
		})
	}
}
