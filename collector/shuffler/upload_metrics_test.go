package shuffler

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/blanket-dp/blanket/sdk/report"
)

// TestShufflerCountsAbandonedUploads posts uploads whose sender has gone
// before the answer (their context canceled): each is counted as
// canceled unless it happened to be answered, and the envelopes the
// commit pooled for them count as accepted, so that the accepted
// envelopes always equal the reports pooled. A final upload, committed
// after every one handed over before it, settles the counts.
func TestShufflerCountsAbandonedUploads(t *testing.T) {
	reg := prometheus.NewRegistry()
	f := newShufflerFixture(t, Options{Plan: testPlan(t, 1000), Collector: "http://127.0.0.1:1", Registerer: reg})
	const abandoned = 20
	sealed := fakeSealed(abandoned + 1)
	for i := range abandoned {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		body := report.EncodeEnvelopes(envelopes(todayKey, sealed[i:i+1]))
		req := httptest.NewRequestWithContext(ctx, http.MethodPost, "/v1/reports", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/octet-stream")
		f.s.handleReports(httptest.NewRecorder(), req)
	}
	if resp := post(t, nil, f.url, report.EncodeEnvelopes(envelopes(todayKey, sealed[abandoned:])), nil); resp.StatusCode != http.StatusAccepted {
		t.Fatalf("last upload: %d", resp.StatusCode)
	}
	st, err := f.s.Stats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var pooled int64
	for _, n := range st.Pools {
		pooled += n
	}
	if st.Accepted != pooled || pooled < 1 {
		t.Errorf("accepted envelopes %d, pooled reports %d: they must agree", st.Accepted, pooled)
	}
	canceled := f.s.c.canceled.Load()
	if canceled+st.Requests != abandoned+1 {
		t.Errorf("%d uploads canceled and %d answered 202, want %d in all", canceled, st.Requests, abandoned+1)
	}
	// Each abandoned upload is canceled unless the commit answered it
	// first, in the race of two ready select cases; that all 20 lose it
	// has probability below 2^-20.
	if canceled == 0 {
		t.Error("no upload counted as canceled")
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var series float64 = -1
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			if mf.GetName() == "blanket_shuffler_uploads_total" && m.GetLabel()[0].GetValue() == "canceled" {
				series = m.GetCounter().GetValue()
			}
		}
	}
	if series != float64(canceled) {
		t.Errorf(`blanket_shuffler_uploads_total{result="canceled"} = %v, want %d`, series, canceled)
	}
}
