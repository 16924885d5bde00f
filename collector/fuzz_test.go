package collector

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

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
	h := recoverer(testLogger(f), mux)

	good := sealKRR(f, c.Plan(), metric, c.PublicKey(), krrValues(3, 1), 1)
	f.Add(batchBody(metric, good))
	f.Add(batchBody(metric, [][]byte{good[0], []byte("garbage"), {}}))
	f.Add(batchBody("no/such", good))
	f.Add(report.EncodeBatch(report.Batch{Metric: metric, Suite: report.SuiteX25519ChaCha, Sealed: [][]byte{{}, {}}}))
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

// FuzzUpload feeds arbitrary bytes to POST /v1/reports: the handler never
// panics and answers 202, 400 or 413.
func FuzzUpload(f *testing.F) {
	s, err := OpenShuffler(context.Background(), ShufflerOptions{Plan: testPlan(f, 1000), Dir: f.TempDir(), Collector: "http://127.0.0.1:1", MaxEnvelopes: 100})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { s.Close() })
	mux := http.NewServeMux()
	s.Register(mux)
	h := recoverer(testLogger(f), mux)

	envs := envelopes(metric, fakeSealed(3))
	envs[1].Metric = "no/such"
	f.Add(report.EncodeEnvelopes(envs))
	f.Add(report.EncodeEnvelopes(nil))
	f.Add([]byte("BLU1\xff\xff\xff\xff"))
	f.Fuzz(func(t *testing.T, body []byte) {
		req := httptest.NewRequest(http.MethodPost, "/v1/reports", bytes.NewReader(body))
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		switch rec.Code {
		case http.StatusAccepted, http.StatusBadRequest, http.StatusRequestEntityTooLarge:
		default:
			t.Fatalf("status %d: %s", rec.Code, rec.Body)
		}
	})
}
