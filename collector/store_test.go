package collector

// Replica-concurrency tests of the collector's stores: what
// store_postgres.go argues holds with several replicas sharing one
// PostgreSQL database (and, where the property is not about replicas, what
// the SQLite store does under the same concurrency within one process).
// Concurrency is real: goroutines released together by a barrier, over
// many rounds.

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/blanket-dp/blanket/accountant"
	"github.com/blanket-dp/blanket/internal/pgtest"
	"github.com/blanket-dp/blanket/internal/servertest"
	"github.com/blanket-dp/blanket/sdk"
	"github.com/blanket-dp/blanket/sdk/plan"
	"github.com/blanket-dp/blanket/sdk/report"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// storeRounds returns the rounds of a concurrency test on a store of kind:
// pg on PostgreSQL, fewer on SQLite, whose one writer serializes the
// ingests anyway (and syncs every commit).
func storeRounds(kind string, pg int) int {
	if kind == "postgres" {
		return pg
	}
	return max(2, pg/4)
}

// replicaCount is how many collector processes share a store of kind:
// two on PostgreSQL; one on SQLite (a SQLite store belongs to one
// process, whose goroutines then stand in for the replicas).
func replicaCount(kind string) int {
	if kind == "postgres" {
		return 2
	}
	return 1
}

// openReplicas opens n collectors on one store of kind, concurrently
// (their migrations, key generation and publication race), each with its
// own data directory and its own plan from mkPlan (a process's own).
func openReplicas(t *testing.T, kind string, n int, mkPlan func() *plan.Plan) []*Collector {
	t.Helper()
	dir := t.TempDir()
	store := servertest.StoreOf(t, kind, dir)
	return openOn(t, store, dir, n, mkPlan)
}

// openOn is openReplicas on store (a PostgreSQL URL, or "" for SQLite in
// dir).
func openOn(t *testing.T, store, dir string, n int, mkPlan func() *plan.Plan) []*Collector {
	t.Helper()
	plans := make([]*plan.Plan, n)
	for i := range plans {
		plans[i] = mkPlan()
	}
	out := make([]*Collector, n)
	errs := make([]error, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			<-start
			d := dir
			if store != "" {
				d = t.TempDir()
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			out[i], errs[i] = OpenCollector(ctx, CollectorOptions{Plan: plans[i], Dir: d, Store: store, Open: openBuiltin, Token: testToken, Logger: testLogger(t), Epsilon: quickEpsilon})
		})
	}
	close(start)
	wg.Wait()
	for i, c := range out {
		if errs[i] != nil {
			t.Fatalf("replica %d: %v", i, errs[i])
		}
		t.Cleanup(func() { c.Close() })
	}
	return out
}

// quickEpsilon stands in for accountant.Epsilon: these tests are about
// what is stored, not the guarantee, which takes the accountant seconds
// per batch size under the race detector (joint travel most).
func quickEpsilon(accountant.Mechanism, float64, int, float64) (accountant.EpsilonResult, error) {
	return accountant.EpsilonResult{Upper: 1, LocalEps: 2, Amplified: true, Tight: true}, nil
}

// ingesters returns the collectors that ingest at once: every replica,
// or on SQLite the one collector twice.
func ingesters(cs []*Collector) []*Collector {
	if len(cs) == 1 {
		return []*Collector{cs[0], cs[0]}
	}
	return cs
}

// statOf returns the stored statistic of metric in epoch and period, and
// its number of batches (nil, 0 when there is none).
func statOf(t testing.TB, c *Collector, metric, epoch string, period report.Period) (*sdk.Statistic, int64) {
	t.Helper()
	rows, err := c.st.statistics(context.Background(), metric)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		if r.epoch == epoch && r.period == period {
			return r.stat, r.batches
		}
	}
	return nil, 0
}

// ingestAll runs Ingest(bodies[i]) on cs[i] at once and returns the
// results and errors.
func ingestAll(cs []*Collector, bodies [][]byte) ([]IngestResult, []error) {
	res := make([]IngestResult, len(cs))
	errs := make([]error, len(cs))
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i, c := range cs {
		wg.Go(func() {
			<-start
			res[i], errs[i] = c.Ingest(context.Background(), bodies[i])
		})
	}
	close(start)
	wg.Wait()
	return res, errs
}

// TestStoreReplicasIngestSameBatch ingests each batch on every replica at
// once (on SQLite: twice at once on the one process), over many rounds,
// each of a new period (so that the replicas also race to create its
// statistic): exactly one ingest counts it, the other is a duplicate, and
// the stored statistic has every batch once.
func TestStoreReplicasIngestSameBatch(t *testing.T) {
	for _, kind := range servertest.StoreKinds {
		t.Run(kind, func(t *testing.T) {
			storeSameBatch(t, kind, storeRounds(kind, 8), 12)
		})
	}
}

// storeSameBatch runs TestStoreReplicasIngestSameBatch with rounds
// batches of n reports.
func storeSameBatch(t *testing.T, kind string, rounds, n int) {
	cs := openReplicas(t, kind, replicaCount(kind), func() *plan.Plan { return testPlan(t, 10) })
	c := cs[0]
	ep := c.Epoch()
	for _, o := range cs[1:] {
		if o.Epoch() != ep || string(o.PublicKey().Bytes()) != string(c.PublicKey().Bytes()) {
			t.Fatal("replicas serve different plans or keys")
		}
	}
	ins := ingesters(cs)
	for r := range rounds {
		p := day(r % 7) // a new statistic for the first 7 rounds, merges after
		body := batchBody(report.PeriodPoolKey(metric, ep, p), sealKRRIn(t, c.Plan(), metric, c.PublicKey(), krrValues(n, uint64(r)), uint64(r), p))
		res, errs := ingestAll(ins, [][]byte{body, body})
		counted := 0
		for i := range ins {
			if errs[i] != nil {
				t.Fatalf("round %d, ingest %d: %v", r, i, errs[i])
			}
			if !res[i].Duplicate {
				counted++
				if res[i].N != int64(n) {
					t.Fatalf("round %d: counted %+v, want N = %d", r, res[i], n)
				}
			}
		}
		if counted != 1 {
			t.Fatalf("round %d: counted by %d ingests, want 1", r, counted)
		}
	}
	var batches, total int64
	for d := range min(rounds, 7) {
		stat, b := statOf(t, c, metric, ep, day(d))
		if stat == nil {
			t.Fatalf("no statistic for day %d", d)
		}
		batches += b
		total += stat.N
		if want := int64((rounds - d + 6) / 7); b != want || stat.N != want*int64(n) {
			t.Errorf("day %d: %d batches, n = %d; want %d and %d", d, b, stat.N, want, want*int64(n))
		}
	}
	if batches != int64(rounds) || total != int64(rounds*n) {
		t.Fatalf("%d batches, n = %d; want %d and %d", batches, total, rounds, rounds*n)
	}
	var counted, dups int64
	for _, c := range cs {
		st := c.Stats()
		counted += st.Batches
		dups += st.Duplicates
	}
	if counted != int64(rounds) || dups != int64(rounds) {
		t.Fatalf("counters: %d batches, %d duplicates; want %d each", counted, dups, rounds)
	}
}

// TestStoreReplicasIngestDifferentBatches ingests two batches of one
// metric and period at once, one per replica (on SQLite: both on the one
// process), over many rounds, alternately of a new period (both create
// its statistic at once) and of an existing one (both merge into it):
// no update is lost.
func TestStoreReplicasIngestDifferentBatches(t *testing.T) {
	for _, kind := range servertest.StoreKinds {
		t.Run(kind, func(t *testing.T) {
			storeDifferentBatches(t, kind, storeRounds(kind, 14), 12)
		})
	}
}

// storeDifferentBatches runs TestStoreReplicasIngestDifferentBatches
// with rounds pairs of batches of n reports.
func storeDifferentBatches(t *testing.T, kind string, rounds, n int) {
	cs := openReplicas(t, kind, replicaCount(kind), func() *plan.Plan { return testPlan(t, 10) })
	c := cs[0]
	ep := c.Epoch()
	ins := ingesters(cs)
	want := map[report.Period][2]int64{} // batches, n
	for r := range rounds {
		p := day(r / 2) // two rounds per period: create, then merge
		key := report.PeriodPoolKey(metric, ep, p)
		bodies := [][]byte{
			batchBody(key, sealKRRIn(t, c.Plan(), metric, c.PublicKey(), krrValues(n, uint64(2*r)), uint64(2*r), p)),
			batchBody(key, sealKRRIn(t, c.Plan(), metric, c.PublicKey(), krrValues(n+1, uint64(2*r+1)), uint64(2*r+1), p)),
		}
		res, errs := ingestAll(ins, bodies)
		for i := range ins {
			if errs[i] != nil {
				t.Fatalf("round %d, ingest %d: %v", r, i, errs[i])
			}
			if res[i].Duplicate || res[i].N != int64(n+i) {
				t.Fatalf("round %d, ingest %d: %+v", r, i, res[i])
			}
		}
		w := want[p]
		want[p] = [2]int64{w[0] + 2, w[1] + int64(2*n+1)}
	}
	for p, w := range want {
		stat, b := statOf(t, c, metric, ep, p)
		if stat == nil || b != w[0] || stat.N != w[1] {
			t.Errorf("period %v: statistic %+v of %d batches; want %d batches, n = %d (an update lost)", p, stat, b, w[0], w[1])
		}
		list, err := c.st.batchList(context.Background(), metric, ep, p)
		if err != nil {
			t.Fatal(err)
		}
		if int64(len(list)) != w[0] {
			t.Errorf("period %v: %d batch rows, want %d", p, len(list), w[0])
		}
	}
}

// uncalibratedJoint returns the collector's test plan file under joint
// travel: not calibrated, so that opening a collector calibrates it (a
// tenth of the CPU of its separate travel).
func uncalibratedJoint(t *testing.T) *plan.Plan {
	t.Helper()
	p, err := plan.Load("testdata/plan.yaml")
	if err != nil {
		t.Fatal(err)
	}
	p.Travel = "joint"
	if p.Calibrated() {
		t.Fatal("testdata/plan.yaml is calibrated")
	}
	return p
}

// TestPGReplicasOpenTogether opens two collectors at once on one empty
// database with a plan that needs calibration: both end with the same
// key, the same plan and epoch, one epoch is stored, and exactly one of
// them calibrated (the other reused the stored calibration).
func TestPGReplicasOpenTogether(t *testing.T) {
	pgOpenTogether(t)
}

// pgOpenTogether runs one case of TestPGReplicasOpenTogether.
func pgOpenTogether(t *testing.T) {
	cs := openReplicas(t, "postgres", 2, func() *plan.Plan { return uncalibratedJoint(t) })
	a, b := cs[0], cs[1]
	if string(a.PublicKey().Bytes()) != string(b.PublicKey().Bytes()) {
		t.Fatal("the replicas have different keys")
	}
	if a.Epoch() != b.Epoch() || a.Plan().Digest() != b.Plan().Digest() || !a.Plan().Calibrated() {
		t.Fatalf("epochs %s and %s: the replicas publish different plans", a.Epoch(), b.Epoch())
	}
	var epochs int
	if err := a.st.(*pgStore).pool.QueryRow(context.Background(), `SELECT count(*) FROM epochs`).Scan(&epochs); err != nil {
		t.Fatal(err)
	}
	calibrated := 0
	for _, c := range cs {
		if testutil.ToFloat64(c.m.calibration) > 0 {
			calibrated++
		}
	}
	if epochs != 1 || calibrated != 1 {
		t.Fatalf("%d epochs stored, %d replicas calibrated; want 1 and 1", epochs, calibrated)
	}
}

// jointBatch returns a batch body of the joint plan pub (published by c)
// of n messages of period p, each carrying both metrics.
func jointBatch(t *testing.T, c *Collector, pub *plan.Plan, n int, p report.Period) []byte {
	t.Helper()
	ctx := context.Background()
	pool := pub.Pool("")
	binding, _, ok := c.cur.binding(pool, p)
	if !ok {
		t.Fatalf("no binding for pool %q", pool)
	}
	var rs []sdk.Randomizer
	for _, m := range pub.Metrics {
		r, err := openBuiltin(ctx, m.Plugin, m.Config())
		if err != nil {
			t.Fatal(err)
		}
		rs = append(rs, r)
	}
	screens, err := rs[0].Randomize(ctx, pub.Metrics[0].Eps0, sdk.Inputs{Categories: krrValues(n, 5)})
	if err != nil {
		t.Fatal(err)
	}
	lats := make([]float64, n)
	for i := range lats {
		lats[i] = float64(i % 1000)
	}
	latencies, err := rs[1].Randomize(ctx, pub.Metrics[1].Eps0, sdk.Inputs{Reals: lats})
	if err != nil {
		t.Fatal(err)
	}
	sealed := make([][]byte, n)
	for i := range sealed {
		sealed[i] = mustSeal(t, c.PublicKey(), binding, report.EncodeMessage([]report.Part{{Metric: 0, Report: screens[i]}, {Metric: 1, Report: latencies[i]}}))
	}
	return batchBody(report.PeriodPoolKey(pool, pub.Epoch(), p), sealed)
}

// isDeadlock reports whether err is PostgreSQL's deadlock_detected.
func isDeadlock(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "40P01"
}

// TestStoreReplicasJointIngest ingests batches of a joint plan (each
// merges into the statistics of both metrics) on every replica at once
// (on SQLite: twice at once on the one process), over many rounds,
// alternately of a new period and of the previous one: no ingest fails
// (PostgreSQL would abort one of two transactions that lock the two
// statistics in opposite orders with a deadlock, an error the shuffler
// retries; the store locks them in one order, so none is expected), and
// both metrics count every batch once.
func TestStoreReplicasJointIngest(t *testing.T) {
	for _, kind := range servertest.StoreKinds {
		t.Run(kind, func(t *testing.T) {
			storeJointIngest(t, kind, storeRounds(kind, 10), 12)
		})
	}
}

// storeJointIngest runs TestStoreReplicasJointIngest with rounds pairs of
// batches of n messages.
func storeJointIngest(t *testing.T, kind string, rounds, n int) {
	mk := func() *plan.Plan {
		p := testPlan(t, 10)
		p.Travel = "joint"
		return p
	}
	cs := openReplicas(t, kind, replicaCount(kind), mk)
	c := cs[0]
	pub := c.Plan()
	ins := ingesters(cs)
	want := map[report.Period][2]int64{} // batches, n
	deadlocks := 0
	for r := range rounds {
		p := day(r / 2)
		bodies := [][]byte{jointBatch(t, c, pub, n, p), jointBatch(t, c, pub, n+1, p)}
		res, errs := ingestAll(ins, bodies)
		for i := range ins {
			if isDeadlock(errs[i]) {
				// What the shuffler does on a 500: deliver again.
				deadlocks++
				res[i], errs[i] = ins[i].Ingest(context.Background(), bodies[i])
			}
			if errs[i] != nil {
				t.Fatalf("round %d, ingest %d: %v", r, i, errs[i])
			}
			if res[i].Duplicate || res[i].N != int64(n+i) {
				t.Fatalf("round %d, ingest %d: %+v", r, i, res[i])
			}
		}
		w := want[p]
		want[p] = [2]int64{w[0] + 2, w[1] + int64(2*n+1)}
		// Both delivered again at once, each to the other replica: both
		// duplicates.
		res, errs = ingestAll(ins, [][]byte{bodies[1], bodies[0]})
		for i := range ins {
			if errs[i] != nil || !res[i].Duplicate {
				t.Fatalf("round %d, delivery %d again: %+v, %v", r, i, res[i], errs[i])
			}
		}
	}
	if deadlocks > 0 {
		t.Errorf("%d ingests aborted by a deadlock (their retries succeeded)", deadlocks)
	}
	for p, w := range want {
		for _, m := range pub.Metrics {
			stat, b := statOf(t, c, m.Name, pub.Epoch(), p)
			if stat == nil || b != w[0] || stat.N != w[1] {
				t.Errorf("%s, period %v: statistic %+v of %d batches; want %d batches, n = %d", m.Name, p, stat, b, w[0], w[1])
			}
		}
	}
}

// TestPGPublishWithOnePooledConnection opens a collector on a database
// URL that limits its connection pool to one connection (pgxpool's
// pool_max_conns, which an operator may set to bound connections across
// many replicas). The publication holds one connection with its session
// advisory lock while its queries run on another, so one connection
// cannot work: the open must fail at once with an error naming
// pool_max_conns (it waited for ever before), and two must do.
func TestPGPublishWithOnePooledConnection(t *testing.T) {
	for _, conns := range []string{"1", "2"} {
		u, err := url.Parse(pgtest.URL(t))
		if err != nil {
			t.Fatal(err)
		}
		q := u.Query()
		q.Set("pool_max_conns", conns)
		u.RawQuery = q.Encode()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		c, err := OpenCollector(ctx, CollectorOptions{Plan: testPlan(t, 10), Dir: t.TempDir(), Store: u.String(), Open: openBuiltin, Logger: testLogger(t)})
		cancel()
		switch {
		case conns == "1" && (err == nil || !strings.Contains(err.Error(), "pool_max_conns = 1, must be at least 2")):
			t.Errorf("pool_max_conns=1: %v, want an error naming pool_max_conns", err)
		case conns == "2" && err != nil:
			t.Errorf("pool_max_conns=2: %v", err)
		}
		if c != nil {
			c.Close()
		}
	}
}
