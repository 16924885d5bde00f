package shuffler

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/blanket-dp/blanket/sdk/report"
)

// replica is a collector replica on loopback: a sink for batches and a
// GET /readyz that answers 503 while down is set.
type replica struct {
	sink
	down  atomic.Bool
	srv   *httptest.Server
	probe atomic.Int64 // GET /readyz asked
}

func newReplica(t *testing.T, status func(call int) int) *replica {
	r := &replica{}
	r.Status = status
	mux := http.NewServeMux()
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		r.probe.Add(1)
		if r.down.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	})
	mux.Handle("POST /v1/batches", &r.sink)
	r.srv = newServer(t, mux)
	return r
}

// releaseBatches releases k batches of n_min = 5 reports each: the open
// period's pool keeps its last n_min reports (posted first, when first
// is set), and each Release after 5 more takes 5.
func releaseBatches(t *testing.T, f *shufflerFixture, k int, first bool) {
	t.Helper()
	if first {
		post(t, nil, f.url, report.EncodeEnvelopes(envelopes(todayKey, fakeSealed(5))), nil)
	}
	for range k {
		post(t, nil, f.url, report.EncodeEnvelopes(envelopes(todayKey, fakeSealed(5))), nil)
		if n, err := f.s.Release(context.Background()); err != nil || n != 1 {
			t.Fatalf("Release = %d, %v; want one batch", n, err)
		}
	}
}

// TestCollectorsShareAndFailOver: with two ready collector URLs the
// batches go to both in turn; with one answering 503 to batches, every
// batch goes to the other at once (no batch waits for a retry); with one
// gone (connection refused), likewise; and the probes of GET /readyz mark
// a replica that says it is not ready, so that batches skip it.
func TestCollectorsShareAndFailOver(t *testing.T) {
	t.Run("share", func(t *testing.T) {
		a, b := newReplica(t, nil), newReplica(t, nil)
		f := newShufflerFixture(t, Options{Plan: testPlan(t, 5), Collector: a.srv.URL, Collectors: []string{b.srv.URL}, Settle: -1})
		releaseBatches(t, f, 8, true)
		f.run(t)
		waitFor(t, "8 batches delivered", func() bool { return len(a.Got())+len(b.Got()) == 8 })
		if len(a.Got()) == 0 || len(b.Got()) == 0 {
			t.Errorf("batches %d and %d: both ready replicas should take some", len(a.Got()), len(b.Got()))
		}
	})
	t.Run("503", func(t *testing.T) {
		a := newReplica(t, func(int) int { return http.StatusServiceUnavailable })
		b := newReplica(t, nil)
		// A long backoff: a batch that waited for a retry would not
		// arrive within the test.
		f := newShufflerFixture(t, Options{Plan: testPlan(t, 5), Collector: a.srv.URL, Collectors: []string{b.srv.URL}, Settle: -1,
			RetryMin: time.Hour, RetryMax: time.Hour})
		releaseBatches(t, f, 6, true)
		f.run(t)
		waitFor(t, "6 batches delivered to the replica that takes them", func() bool { return len(b.Got()) == 6 })
		if n := f.s.c.forwardFailures.Load(); n != 0 {
			t.Errorf("%d failed deliveries: a batch waited for a retry instead of failing over", n)
		}
	})
	t.Run("gone", func(t *testing.T) {
		a, b := newReplica(t, nil), newReplica(t, nil)
		a.srv.Close()
		f := newShufflerFixture(t, Options{Plan: testPlan(t, 5), Collector: a.srv.URL, Collectors: []string{b.srv.URL}, Settle: -1,
			RetryMin: time.Hour, RetryMax: time.Hour})
		releaseBatches(t, f, 6, true)
		f.run(t)
		waitFor(t, "6 batches delivered to the live replica", func() bool { return len(b.Got()) == 6 })
	})
	t.Run("not ready", func(t *testing.T) {
		a, b := newReplica(t, nil), newReplica(t, nil)
		a.down.Store(true)
		f := newShufflerFixture(t, Options{Plan: testPlan(t, 5), Collector: a.srv.URL, Collectors: []string{b.srv.URL}, Settle: -1,
			ProbeInterval: 10 * time.Millisecond})
		f.run(t)
		waitFor(t, "a probe of each replica", func() bool { return a.probe.Load() > 0 && b.probe.Load() > 0 })
		releaseBatches(t, f, 6, true)
		waitFor(t, "6 batches delivered", func() bool { return len(b.Got()) == 6 })
		if n := len(a.Got()); n != 0 {
			t.Errorf("the replica whose /readyz answers 503 got %d batches", n)
		}
		// Ready again: it takes its turn.
		a.down.Store(false)
		waitFor(t, "the replica probed ready", func() bool { return f.s.col.ready[0].Load() })
		releaseBatches(t, f, 6, false)
		waitFor(t, "12 batches delivered", func() bool { return len(a.Got())+len(b.Got()) == 12 })
		if len(a.Got()) == 0 {
			t.Error("the replica ready again got no batch")
		}
	})
	t.Run("refused", func(t *testing.T) {
		// A refusal (422: the collector's answer on the batch) is not
		// sent to another replica of the same collector.
		a := newReplica(t, func(int) int { return http.StatusUnprocessableEntity })
		b := newReplica(t, nil)
		f := newShufflerFixture(t, Options{Plan: testPlan(t, 5), Collector: a.srv.URL, Collectors: []string{b.srv.URL}, Settle: -1,
			RetryMin: time.Hour, RetryMax: time.Hour})
		f.s.col.turn.Store(1) // the first send goes to a
		releaseBatches(t, f, 1, true)
		f.run(t)
		waitFor(t, "a failed delivery", func() bool { return f.s.c.forwardFailures.Load() == 1 })
		if n := len(b.Got()); n != 0 {
			t.Errorf("a batch refused by one replica went to the other (%d)", n)
		}
	})
}

// TestPlanRelayFailsOver: the relay fetches the plan from the next
// collector URL when the first is gone, and keeps asking the one that
// answered first.
func TestPlanRelayFailsOver(t *testing.T) {
	gone := newServer(t, http.NotFoundHandler())
	gone.Close()
	var asked atomic.Int64
	live := newServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		asked.Add(1)
		w.Header().Set("ETag", `"p1"`)
		w.Write([]byte(`{"plan":"as relayed"}`))
	}))
	pr := &PlanRelay{Collector: gone.URL, Collectors: []string{live.URL}, MaxAge: time.Nanosecond}
	for range 3 {
		rec := httptest.NewRecorder()
		pr.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/v1/plan", nil))
		if rec.Code != http.StatusOK || rec.Body.String() != `{"plan":"as relayed"}` || rec.Header().Get("ETag") != `"p1"` {
			t.Fatalf("relayed %d %q (ETag %q), want the live collector's plan", rec.Code, rec.Body.String(), rec.Header().Get("ETag"))
		}
	}
	if pr.good != 1 || asked.Load() != 3 {
		t.Errorf("good = %d after %d fetches from the live URL, want 1 and 3", pr.good, asked.Load())
	}
}
