package collector

import (
	"net/http"
	"strings"

	"github.com/blanket-dp/blanket/admission"
	"github.com/blanket-dp/blanket/sdk/plan"
)

// Register adds the collector's routes to mux: GET /v1/plan, POST
// /v1/batches, GET /v1/metrics and GET /v1/metrics/{name...}.
func (c *Collector) Register(mux *http.ServeMux) {
	c.RegisterAPI(mux)
	mux.HandleFunc("POST /v1/batches", c.handleBatches)
}

// RegisterAPI adds the collector's read routes to mux: GET /v1/plan, GET
// /v1/metrics and GET /v1/metrics/{name...} (for an operator's listener
// that shows the dashboard but takes no batches).
func (c *Collector) RegisterAPI(mux *http.ServeMux) {
	mux.HandleFunc("GET /v1/plan", c.handlePlan)
	mux.HandleFunc("GET /v1/metrics", c.handleMetrics)
	mux.HandleFunc("GET /v1/metrics/{name...}", c.handleMetric)
}

func (c *Collector) handlePlan(w http.ResponseWriter, r *http.Request) {
	s := c.served.Load()
	etag := `"` + s.etag + `"`
	w.Header().Set("ETag", etag)
	w.Header().Set("Cache-Control", "no-cache")
	if a := c.o.ShufflerAdmission; a != "" {
		w.Header().Set(admission.AdmissionHeader, a)
	}
	if etagMatch(r.Header.Get("If-None-Match"), etag) {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set(plan.SignatureHeader, s.sig)
	w.Header().Set(plan.SigningKeyHeader, plan.FormatSigningKey(c.signer.public()))
	if s.end != "" {
		w.Header().Set(plan.EndorsementsHeader, s.end)
	}
	w.Write(s.json)
}

// etagMatch reports whether an If-None-Match header value matches etag
// (RFC 9110 13.1.2, weak comparison).
func etagMatch(header, etag string) bool {
	for _, v := range strings.Split(header, ",") {
		v = strings.TrimPrefix(strings.TrimSpace(v), "W/")
		if v == "*" || v == etag {
			return true
		}
	}
	return false
}
