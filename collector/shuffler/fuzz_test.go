package shuffler

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/blanket-dp/blanket/internal/httpserver"
	"github.com/blanket-dp/blanket/sdk/report"
)

// FuzzUpload feeds arbitrary bytes to POST /v1/reports: the handler never
// panics and answers 202, 400 or 413.
func FuzzUpload(f *testing.F) {
	s, err := Open(context.Background(), Options{Plan: testPlan(f, 1000), Dir: f.TempDir(), Collector: "http://127.0.0.1:1", MaxEnvelopes: 100})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { s.Close() })
	mux := http.NewServeMux()
	s.Register(mux)
	h := httpserver.New(mux, testLogger(f)).Handler

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
