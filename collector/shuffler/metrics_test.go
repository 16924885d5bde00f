package shuffler

import (
	"context"
	"maps"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/blanket-dp/blanket/sdk/report"
)

// TestShufflerMetrics drives a real shuffler through the upload outcomes
// accepted, bad_request and too_large, every envelope outcome and a batch
// released, refused once by the collector and then acknowledged, and
// checks each Prometheus series, the upload latency's observations and
// the names against promlint. TestShufflerMetricsUnavailable and
// TestShufflerCountsAbandonedUploads drive the other upload outcomes.
func TestShufflerMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	col := &sink{Status: func(call int) int {
		if call == 1 {
			return http.StatusInternalServerError
		}
		return http.StatusOK
	}}
	colSrv := newServer(t, col)
	f := newShufflerFixture(t, Options{
		Plan: testPlan(t, 4), Collector: colSrv.URL, Registerer: reg,
		MaxEnvelopes: 20, MaxEpochsPerPool: 1,
	})
	day := int64(86400)
	key := func(epoch string, start, length int64) string {
		return report.PeriodPoolKey(metric, epoch, report.Period{Start: start, Length: length})
	}
	good := envelopes(todayKey, fakeSealed(3))
	bad := envelopes(todayKey, fakeSealed(8))
	bad[0].Metric = "no/such/metric"                                 // unknown_pool
	bad[1].Metric = metric                                           // no_period
	bad[2].Metric = key("00000000000000e1", today.Start, 3600)       // unknown_period_length
	bad[3].Metric = key("00000000000000e1", today.Start-10*day, day) // late
	bad[4].Metric = key("00000000000000e1", today.Start+5*day, day)  // early
	bad[5].Metric = periodKey(metric, "00000000000000e2")            // too_many_epochs (e1 is pooled)
	bad[6].Suite = 99                                                // unsupported_suite
	bad[7].Sealed = bad[7].Sealed[:MinSealedLen-1]                   // too_short
	var res UploadResult
	// The good ones first, so that epoch e1 is pooled when e2 arrives.
	if resp := post(t, nil, f.url, report.EncodeEnvelopes(good), &res); resp.StatusCode != http.StatusAccepted || res.Accepted != 3 {
		t.Fatalf("good upload: %d %+v", resp.StatusCode, res)
	}
	if resp := post(t, nil, f.url, report.EncodeEnvelopes(append(bad, good[0])), &res); resp.StatusCode != http.StatusAccepted || res.Rejected != 8 || res.Duplicates != 1 {
		t.Fatalf("bad upload: %d %+v", resp.StatusCode, res)
	}
	if resp := post(t, nil, f.url, []byte("garbage"), nil); resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("garbage: %d", resp.StatusCode)
	}
	if resp := post(t, nil, f.url, report.EncodeEnvelopes(envelopes(todayKey, fakeSealed(21))), nil); resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Fatalf("21 envelopes: %d", resp.StatusCode)
	}
	more := envelopes(todayKey, fakeSealed(4)[3:])
	if resp := post(t, nil, f.url, report.EncodeEnvelopes(more), &res); resp.StatusCode != http.StatusAccepted || res.Accepted != 1 {
		t.Fatalf("fourth report: %d %+v", resp.StatusCode, res)
	}

	// Before the release: the pool holds 4 (n_min), nothing released.
	if err := testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP blanket_shuffler_pool_reports Reports waiting in each pool (summed over epochs and periods).
# TYPE blanket_shuffler_pool_reports gauge
blanket_shuffler_pool_reports{pool="net/latency_ms"} 0
blanket_shuffler_pool_reports{pool="ui/screen"} 4
# HELP blanket_shuffler_pool_min_reports n_min: the smallest batch the shuffler releases.
# TYPE blanket_shuffler_pool_min_reports gauge
blanket_shuffler_pool_min_reports 4
# HELP blanket_shuffler_period_reports Reports waiting in the pools, by reporting period (its start, RFC 3339; only periods still open to reports have pools), summed over pools and epochs; read from the store every replica shares, like pool_reports and outgoing_batches.
# TYPE blanket_shuffler_period_reports gauge
blanket_shuffler_period_reports{period="`+time.Unix(today.Start, 0).UTC().Format(time.RFC3339)+`"} 4
`), "blanket_shuffler_pool_reports", "blanket_shuffler_pool_min_reports", "blanket_shuffler_period_reports"); err != nil {
		t.Error(err)
	}

	// Its period closed: the pool goes out whole.
	f.closeAll(t)
	f.run(t)
	waitFor(t, "the batch acknowledged", func() bool { return len(col.Got()) == 1 })
	waitFor(t, "the acknowledgement counted", func() bool {
		return gathered(t, reg, "blanket_shuffler_batches_acknowledged_total") == 1
	})

	want := `
# HELP blanket_shuffler_uploads_total Uploads (POST /v1/reports) by result: accepted (202), bad_request, too_large, rate_limited, unavailable (503), canceled (the sender left before the answer).
# TYPE blanket_shuffler_uploads_total counter
blanket_shuffler_uploads_total{result="accepted"} 3
blanket_shuffler_uploads_total{result="bad_request"} 1
blanket_shuffler_uploads_total{result="canceled"} 0
blanket_shuffler_uploads_total{result="rate_limited"} 0
blanket_shuffler_uploads_total{result="too_large"} 1
blanket_shuffler_uploads_total{result="unavailable"} 0
# HELP blanket_shuffler_envelopes_total Envelopes committed to a pool (accepted) or found there already (duplicate), counted at the commit.
# TYPE blanket_shuffler_envelopes_total counter
blanket_shuffler_envelopes_total{result="accepted"} 4
blanket_shuffler_envelopes_total{result="duplicate"} 1
# HELP blanket_shuffler_envelopes_rejected_total Envelopes refused for good, by reason (counted when their upload is answered 202; late also at the commit).
# TYPE blanket_shuffler_envelopes_rejected_total counter
blanket_shuffler_envelopes_rejected_total{reason="early"} 1
blanket_shuffler_envelopes_rejected_total{reason="late"} 1
blanket_shuffler_envelopes_rejected_total{reason="no_period"} 1
blanket_shuffler_envelopes_rejected_total{reason="token_invalid"} 0
blanket_shuffler_envelopes_rejected_total{reason="token_missing"} 0
blanket_shuffler_envelopes_rejected_total{reason="token_spent"} 0
blanket_shuffler_envelopes_rejected_total{reason="too_many_epochs"} 1
blanket_shuffler_envelopes_rejected_total{reason="too_short"} 1
blanket_shuffler_envelopes_rejected_total{reason="unknown_period_length"} 1
blanket_shuffler_envelopes_rejected_total{reason="unknown_pool"} 1
blanket_shuffler_envelopes_rejected_total{reason="unsupported_suite"} 1
# HELP blanket_shuffler_batches_released_total Batches released from the pools (each of at least n_min reports, shuffled).
# TYPE blanket_shuffler_batches_released_total counter
blanket_shuffler_batches_released_total 1
# HELP blanket_shuffler_reports_released_total Reports released in batches.
# TYPE blanket_shuffler_reports_released_total counter
blanket_shuffler_reports_released_total 4
# HELP blanket_shuffler_batch_sends_total Requests forwarding a released batch to the collector.
# TYPE blanket_shuffler_batch_sends_total counter
blanket_shuffler_batch_sends_total 2
# HELP blanket_shuffler_batch_send_failures_total Forwarding attempts that failed (the batch unreadable, the request failed or was refused, or the acknowledged batch not deleted); the batch is retried with backoff.
# TYPE blanket_shuffler_batch_send_failures_total counter
blanket_shuffler_batch_send_failures_total 1
# HELP blanket_shuffler_batches_acknowledged_total Released batches the collector acknowledged and the shuffler deleted.
# TYPE blanket_shuffler_batches_acknowledged_total counter
blanket_shuffler_batches_acknowledged_total 1
# HELP blanket_shuffler_outgoing_batches Released batches not yet acknowledged by the collector.
# TYPE blanket_shuffler_outgoing_batches gauge
blanket_shuffler_outgoing_batches 0
# HELP blanket_shuffler_pool_reports Reports waiting in each pool (summed over epochs and periods).
# TYPE blanket_shuffler_pool_reports gauge
blanket_shuffler_pool_reports{pool="net/latency_ms"} 0
blanket_shuffler_pool_reports{pool="ui/screen"} 0
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want),
		"blanket_shuffler_uploads_total", "blanket_shuffler_envelopes_total", "blanket_shuffler_envelopes_rejected_total",
		"blanket_shuffler_batches_released_total", "blanket_shuffler_reports_released_total", "blanket_shuffler_batch_sends_total",
		"blanket_shuffler_batch_send_failures_total", "blanket_shuffler_batches_acknowledged_total", "blanket_shuffler_outgoing_batches",
		"blanket_shuffler_pool_reports"); err != nil {
		t.Error(err)
	}
	// The JSON stats read the same counters.
	st, err := f.s.Stats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if st.Rejected != 8 || st.Late != 1 || st.Requests != 3 || st.BatchesForwarded != 1 || st.ForwardFailures != 1 {
		t.Errorf("stats %+v", st)
	}
	if n := histogramCount(t, reg, "blanket_shuffler_upload_duration_seconds"); n != 5 {
		t.Errorf("upload latency has %d observations, want one per upload (5)", n)
	}
	lint(t, reg)
}

// TestShufflerMetricsUnavailable counts the uploads refused for the
// connection's rate, for a store that fails to commit (its write handle
// closed under the running shuffler) and for a shuffler shutting down,
// and checks that a scrape of a closed shuffler's store reports
// blanket_shuffler_pool_reports as an error instead of dropping it.
func TestShufflerMetricsUnavailable(t *testing.T) {
	reg := prometheus.NewRegistry()
	f := newShufflerFixture(t, Options{Plan: testPlan(t, 1000), Collector: "http://127.0.0.1:1", Registerer: reg, ConnRate: 1, MaxEnvelopes: 10})
	one := &http.Client{Transport: &http.Transport{MaxConnsPerHost: 1}}
	upload := func(c *http.Client, n, want int) {
		t.Helper()
		if resp := post(t, c, f.url, report.EncodeEnvelopes(envelopes(todayKey, fakeSealed(n))), nil); resp.StatusCode != want {
			t.Fatalf("upload of %d: %d, want %d", n, resp.StatusCode, want)
		}
	}
	upload(one, 10, http.StatusAccepted)
	upload(one, 5, http.StatusTooManyRequests) // the connection's burst is spent
	sqliteDB(t, f.s).W.Close()                 // commits fail from now on
	upload(nil, 3, http.StatusServiceUnavailable)
	f.s.Close()
	upload(nil, 3, http.StatusServiceUnavailable)

	mfs, err := reg.Gather()
	if err == nil || !strings.Contains(err.Error(), "blanket_shuffler_pool_reports") {
		t.Errorf("gathering from a closed store: %v, want an error naming blanket_shuffler_pool_reports", err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != "blanket_shuffler_uploads_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			got[m.GetLabel()[0].GetValue()] = m.GetCounter().GetValue()
		}
	}
	want := map[string]float64{"accepted": 1, "bad_request": 0, "too_large": 0, "rate_limited": 1, "unavailable": 2, "canceled": 0}
	if !maps.Equal(got, want) {
		t.Errorf("blanket_shuffler_uploads_total = %v, want %v", got, want)
	}
}
