package main

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/blanket-dp/blanket/collector"
)

// opsRoutes are the operational routes every server command serves.
var opsRoutes = []string{
	"GET  /metrics              Prometheus metrics (counts and latencies; nothing about senders)",
	"GET  /healthz              200 while the process serves",
	"GET  /readyz               200 when the store, plan and plugins are ready, else 503 with the reason",
}

// newRegistry returns a server command's Prometheus registry with the Go
// runtime's and the process's metrics, and the restarts of the plugin
// processes ps opens (when ps is not nil). The roles register their own
// metrics on it (ShufflerOptions.Registerer, CollectorOptions.Registerer).
func newRegistry(ps *collector.Plugins) *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	if ps != nil {
		reg.MustRegister(ps.Collector())
	}
	return reg
}

// registerOps adds GET /metrics (from reg), GET /healthz and GET /readyz
// (running checks) to mux. A metric that cannot be read (the store fails)
// is left out of the scrape and the rest served, so that the failure
// shows in /readyz and in the missing series rather than as a failed
// scrape of everything.
func registerOps(mux *http.ServeMux, reg *prometheus.Registry, checks ...collector.Check) {
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError, Registry: reg}))
	collector.RegisterHealth(mux, checks...)
}
