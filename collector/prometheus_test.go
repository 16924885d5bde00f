package collector

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestCollectorMetrics posts a real collector every batch outcome over
// HTTP, asks it for an estimate, and checks the series, the latencies'
// observations and the names against promlint.
func TestCollectorMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	p := testPlan(t, 10)
	f := &collectorFixture{dir: t.TempDir(), p: p, swap: &swapHandler{}}
	c, err := OpenCollector(context.Background(), CollectorOptions{Plan: p, Dir: f.dir, Open: openBuiltin, Token: testToken, Logger: testLogger(t), Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	f.c = c
	f.install()
	f.srv = newServer(t, f.swap)

	sealed := sealKRR(t, c.Plan(), metric, c.PublicKey(), krrValues(12, 3), 3)
	sealed[0] = sealed[0][:len(sealed[0])-1] // malformed: does not open
	good := todayBody(c.Plan(), metric, sealed)
	for _, tc := range []struct {
		body []byte
		want int
	}{
		{good, http.StatusOK},
		{good, http.StatusOK}, // duplicate
		{[]byte("garbage"), http.StatusBadRequest},
		{todayBody(c.Plan(), metric, sealed[:9]), http.StatusUnprocessableEntity},
	} {
		if code, _ := f.postBatch(t, tc.body); code != tc.want {
			t.Fatalf("status %d, want %d", code, tc.want)
		}
	}
	if resp := post(t, nil, f.srv.URL+"/v1/batches", good, nil); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("no token: %d", resp.StatusCode)
	}
	f.metric(t, metric)

	want := fmt.Sprintf(`
# HELP blanket_collector_batches_total Batches posted (POST /v1/batches) by result: ingested, duplicate (acknowledged, not counted again), bad (unreadable, too large or undecodable), refused (422), unauthorized (401), failed (500, retried by the shuffler).
# TYPE blanket_collector_batches_total counter
blanket_collector_batches_total{result="bad"} 1
blanket_collector_batches_total{result="duplicate"} 1
blanket_collector_batches_total{result="failed"} 0
blanket_collector_batches_total{result="ingested"} 1
blanket_collector_batches_total{result="refused"} 1
blanket_collector_batches_total{result="unauthorized"} 1
# HELP blanket_collector_reports_total Reports of ingested batches by pool (a metric with separate travel, the plan's pool with joint or parallel; other: a pool of no current plan) and result: valid (counted), malformed (dropped) or draw (the shuffler's blanket draws of a plan's floor, taken out of the estimates).
# TYPE blanket_collector_reports_total counter
blanket_collector_reports_total{pool="ui/screen",result="malformed"} 1
blanket_collector_reports_total{pool="ui/screen",result="valid"} 11
# HELP blanket_collector_plan_info The plan epoch the collector publishes (value 1).
# TYPE blanket_collector_plan_info gauge
blanket_collector_plan_info{epoch=%q} 1
# HELP blanket_collector_calibration_duration_seconds Time the collector took to calibrate its plan at start (0 when the plan came calibrated or a stored calibration was reused).
# TYPE blanket_collector_calibration_duration_seconds gauge
blanket_collector_calibration_duration_seconds 0
`, c.Epoch())
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want),
		"blanket_collector_batches_total", "blanket_collector_reports_total", "blanket_collector_plan_info", "blanket_collector_calibration_duration_seconds"); err != nil {
		t.Error(err)
	}
	// The JSON stats sum the same counters.
	if st := c.Stats(); st.Batches != 1 || st.Duplicates != 1 || st.Bad != 1 || st.Refused != 1 || st.Reports != 11 || st.Malformed != 1 {
		t.Errorf("stats %+v", st)
	}
	// Both 200 answers were timed (the duplicate too); one estimate.
	if n := histogramCount(t, reg, "blanket_collector_ingest_duration_seconds"); n != 2 {
		t.Errorf("ingest latency has %d observations, want 2", n)
	}
	if n := histogramCount(t, reg, "blanket_collector_estimate_duration_seconds"); n != 1 {
		t.Errorf("estimate latency has %d observations, want 1", n)
	}
	lint(t, reg)
	// A second collector on the same registry is refused with an error
	// naming the clash, not a panic.
	if _, err := OpenCollector(context.Background(), CollectorOptions{Plan: p, Dir: t.TempDir(), Open: openBuiltin, Registerer: reg}); err == nil || !strings.Contains(err.Error(), "registering") {
		t.Errorf("a second collector on one registry: %v", err)
	}
}
