package collector

import (
	"context"
	"crypto/rand"
	"net/http"
	"slices"
	"testing"

	"github.com/blanket-dp/blanket/internal/servertest"
	"github.com/blanket-dp/blanket/sdk/plan"
	"github.com/blanket-dp/blanket/sdk/report"
	"github.com/prometheus/client_golang/prometheus"
)

// junk returns n sealed-report look-alikes of 60 bytes: long enough for
// the shuffler's length check, opening under no key (the reports of issue
// 23's finding that padded a batch to n_min).
func junk(t testing.TB, n int) [][]byte {
	t.Helper()
	out := make([][]byte, n)
	for i := range out {
		out[i] = make([]byte, 60)
		rand.Read(out[i])
	}
	return out
}

// TestIngestPublishesNoBatchBelowNMinValid: a batch of n_min sealed
// reports of which fewer than n_min are valid (the rest junk that passed
// the shuffler's length check) is stored and counted, visible in the
// period's batch list, the ingest counters and the Prometheus metrics, but
// in no estimate; later batches of the same pool, epoch and period are
// held with it until their valid reports reach n_min together, and are
// then published in one step, all of them, with the weakest batch's
// guarantee; a batch of n_min valid reports publishes at once, taking the
// held ones with it. Before issue 23 the collector checked only the sealed
// count, and published an estimate of the 60 valid reports of the first
// batch.
func TestIngestPublishesNoBatchBelowNMinValid(t *testing.T) {
	const nMin = 100
	reg := prometheus.NewRegistry()
	p := testPlan(t, nMin)
	f := &collectorFixture{dir: t.TempDir(), p: p, swap: &swapHandler{}}
	c, err := OpenCollector(context.Background(), CollectorOptions{Plan: p, Dir: f.dir, Store: servertest.Store(t, f.dir), Open: openBuiltin, Token: testToken, Logger: testLogger(t), Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	f.c = c
	f.install()
	f.srv = newServer(t, f.swap)
	pub, ep := c.Plan(), c.Epoch()
	key := func(d report.Period) string { return report.PeriodPoolKey(metric, ep, d) }
	seed := uint64(100)
	// batch returns a batch of day d with valid reports and junk.
	batch := func(d report.Period, valid, bad int) []byte {
		seed++
		return batchBody(key(d), append(sealKRRIn(t, pub, metric, c.PublicKey(), krrValues(valid, seed), seed, d), junk(t, bad)...))
	}
	ingest := func(body []byte, n, held int64) IngestResult {
		t.Helper()
		code, res := f.postBatch(t, body)
		if code != http.StatusOK || res.Duplicate || res.N != n || res.Held != held {
			t.Fatalf("status %d, %+v; want %d valid, %d of them held", code, res, n, held)
		}
		return res
	}
	period := func(d report.Period) PeriodEstimate {
		t.Helper()
		for _, e := range f.metric(t, metric).Periods {
			if e.Start.Unix() == d.Start {
				return e
			}
		}
		t.Fatalf("no period %s in the metric", d)
		return PeriodEstimate{}
	}
	heldFlags := func(e PeriodEstimate) []bool {
		var out []bool
		for _, b := range e.BatchList {
			out = append(out, b.Held)
		}
		return out
	}

	// Day 1: 60 valid and 40 junk: stored, counted, no estimate.
	first := batch(day(1), 60, 40)
	ingest(first, 60, 60)
	e := period(day(1))
	if e.N != 0 || e.Held != 60 || e.Estimates != nil || e.EstimateError == "" || !slices.Equal(heldFlags(e), []bool{true}) {
		t.Fatalf("day 1 after a batch of 60 valid reports: %+v; want no estimate, 60 held, the batch listed as held", e)
	}
	if st := c.Stats(); st.Batches != 1 || st.Held != 1 || st.HeldReports != 60 || st.Reports != 60 || st.Malformed != 40 {
		t.Fatalf("ingest counters %+v", st)
	}
	var list MetricList
	if getJSON(t, f.srv.URL+"/v1/metrics", &list); list.Ingest.Held != 1 || !slices.ContainsFunc(list.Metrics, func(m MetricSummary) bool { return m.Name == metric && m.Held == 60 && m.N == 0 }) {
		t.Fatalf("GET /v1/metrics: %+v", list)
	}
	if got := gathered(t, reg, "blanket_collector_batches_held_total"); got != 1 {
		t.Errorf("blanket_collector_batches_held_total = %v, want 1", got)
	}
	// Its retry is a duplicate: nothing moves.
	if code, res := f.postBatch(t, first); code != http.StatusOK || !res.Duplicate {
		t.Fatalf("retry: %d %+v", code, res)
	}
	// 30 more valid: 90 held in all, still none published.
	ingest(batch(day(1), 30, 70), 30, 30)
	if e := period(day(1)); e.N != 0 || e.Held != 90 || e.Estimates != nil || !slices.Equal(heldFlags(e), []bool{true, true}) {
		t.Fatalf("day 1 at 90 valid reports: %+v", e)
	}
	// 20 more: 110, all three published together.
	ingest(batch(day(1), 20, 80), 20, 0)
	e = period(day(1))
	if e.N != 110 || e.Held != 0 || e.Batches != 3 || e.Malformed != 190 || len(e.Estimates) == 0 || e.EstimateError != "" || !slices.Equal(heldFlags(e), []bool{false, false, false}) {
		t.Fatalf("day 1 at 110 valid reports: %+v; want the three batches in the estimate", e)
	}
	// Against the collector, which received them apart, each batch has
	// its own size's guarantee: the period states the weakest, the 20's.
	if e.Guarantee == nil || e.Guarantee.N != 20 {
		t.Fatalf("day 1's guarantee %+v, want that of the batch of 20", e.Guarantee)
	}

	// Day 2: 50 held, then a batch of 120 valid publishes both.
	ingest(batch(day(2), 50, 50), 50, 50)
	ingest(batch(day(2), 120, 0), 120, 0)
	if e := period(day(2)); e.N != 170 || e.Held != 0 || e.Batches != 2 || len(e.Estimates) == 0 {
		t.Fatalf("day 2: %+v, want 170 published in 2 batches", e)
	}
	// Day 3: a batch of n_min valid reports publishes at once; a batch
	// of no valid report changes no estimate and holds nothing.
	ingest(batch(day(3), 100, 0), 100, 0)
	ingest(batch(day(3), 0, 100), 0, 0)
	if e := period(day(3)); e.N != 100 || e.Held != 0 || e.Batches != 2 || e.Malformed != 100 {
		t.Fatalf("day 3: %+v", e)
	}
	if st := c.Stats(); st.Batches != 7 || st.Held != 3 || st.HeldReports != 140 {
		t.Fatalf("ingest counters at the end %+v", st)
	}
}

// TestStoreReplicasIngestHeldBatches ingests, on every replica at once
// (on SQLite: twice at once in the one process), batches of 40 valid
// reports (and 60 junk) of one pool, epoch and period, n_min 100, three
// pairs a round: whatever the order the ingests commit in, the first two
// are held, the third publishes the three, and so again, so that the 240
// reports are published once each, in 6 batches, none held, and the
// answers held 4 of the 6. Without the pool key's lock
// (store_postgres.go), two replicas could both publish the same held
// batch, or hold one behind a publication.
func TestStoreReplicasIngestHeldBatches(t *testing.T) {
	for _, kind := range servertest.StoreKinds {
		t.Run(kind, func(t *testing.T) { storeHeldBatches(t, kind, storeRounds(kind, 8)) })
	}
}

// storeHeldBatches runs TestStoreReplicasIngestHeldBatches over rounds
// periods.
func storeHeldBatches(t *testing.T, kind string, rounds int) {
	const nMin, per = 100, 40
	cs := openReplicas(t, kind, replicaCount(kind), func() *plan.Plan { return testPlan(t, nMin) })
	c := cs[0]
	ep := c.Epoch()
	ins := ingesters(cs)
	for r := range rounds {
		d := day(r)
		key := report.PeriodPoolKey(metric, ep, d)
		var held int64
		for k := range 3 {
			bodies := make([][]byte, len(ins))
			for i := range bodies {
				s := uint64(1000*r + 10*k + i)
				bodies[i] = batchBody(key, append(sealKRRIn(t, c.Plan(), metric, c.PublicKey(), krrValues(per, s), s, d), junk(t, nMin-per)...))
			}
			res, errs := ingestAll(ins, bodies)
			for i := range ins {
				if errs[i] != nil {
					t.Fatalf("round %d, ingest %d: %v", r, i, errs[i])
				}
				if res[i].N != per || res[i].Duplicate {
					t.Fatalf("round %d, ingest %d: %+v", r, i, res[i])
				}
				held += res[i].Held
			}
		}
		stat, batches := statOf(t, c, metric, ep, d)
		rows, err := c.st.heldStatistics(context.Background(), metric)
		if err != nil {
			t.Fatal(err)
		}
		var stillHeld int64
		for _, h := range rows {
			if h.epoch == ep && h.period == d {
				stillHeld += h.stat.N
			}
		}
		var n int64
		if stat != nil {
			n = stat.N
		}
		want := int64(3 * len(ins) * per)
		if n != want || batches != 6 || stillHeld != 0 || held != 4*per {
			t.Errorf("round %d: %d published in %d batches, %d still held, %d answered held; want %d in 6, none held, %d answered held",
				r, n, batches, stillHeld, held, want, 4*per)
		}
		list, err := c.st.batchList(context.Background(), metric, ep, d)
		if err != nil {
			t.Fatal(err)
		}
		heldRows := 0
		for _, b := range list {
			if b.held {
				heldRows++
			}
		}
		if len(list) != 6 || heldRows != 0 {
			t.Errorf("round %d: %d batch rows, %d flagged held; want 6, none held", r, len(list), heldRows)
		}
	}
}
