package collector

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/blanket-dp/blanket/internal/httpserver"
	"github.com/blanket-dp/blanket/sdk/report"
)

// FuzzIngestBatch feeds arbitrary bytes to POST /v1/batches: the handler
// never panics, answers 200, 400 or 422, and never fails internally.
// Seeds: testdata/fuzz/FuzzIngestBatch and the batches added below.
func FuzzIngestBatch(f *testing.F) {
	p := testPlan(f, 2)
	c := openCollector(f, f.TempDir(), p)
	f.Cleanup(func() { c.Close() })
	mux := http.NewServeMux()
	c.Register(mux)
	h := httpserver.New(mux, testLogger(f)).Handler

	good := sealKRR(f, c.Plan(), metric, c.PublicKey(), krrValues(3, 1), 1)
	f.Add(todayBody(c.Plan(), metric, good))
	f.Add(todayBody(c.Plan(), metric, [][]byte{good[0], []byte("garbage"), {}}))
	f.Add(todayBody(c.Plan(), "no/such", good))
	f.Add(batchBody(metric, good))
	f.Add(report.EncodeBatch(report.Batch{Metric: periodKey(metric, c.Epoch()), Suite: report.SuiteX25519ChaCha, Sealed: [][]byte{{}, {}}}))
	f.Add([]byte("BLB1"))
	f.Fuzz(func(t *testing.T, body []byte) {
		req := httptest.NewRequest(http.MethodPost, "/v1/batches", bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+testToken)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		switch rec.Code {
		case http.StatusOK, http.StatusBadRequest, http.StatusUnprocessableEntity:
		default:
			t.Fatalf("status %d: %s", rec.Code, rec.Body)
		}
	})
}
