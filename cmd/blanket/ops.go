package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"

	"github.com/blanket-dp/blanket/internal/health"
	"github.com/blanket-dp/blanket/internal/httpserver"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/blanket-dp/blanket/collector"
)

// The operator's listener (--admin-addr, loopback by default) serves what
// only the operator may see: the shuffler's pool fill over time (GET
// /v1/pools, the dashboard's pool panel) and its upload counters (GET
// /metrics) show when reports arrive, which the shuffler exists to hide
// from everyone else; /readyz there says why a check fails (file paths,
// peers). The public listener keeps the apps' and the collector's API, a
// dashboard of the collector's estimates, /healthz, and a /readyz that
// names failing checks only.

// publicHealthRoutes are the health routes of the public listener.
var publicHealthRoutes = []string{
	"GET  /healthz              200 while the process serves",
	"GET  /readyz               200 when ready, else 503 naming the failing checks",
}

// adminOpsRoutes are the operational routes of the admin listener.
var adminOpsRoutes = []string{
	"GET  /metrics              Prometheus metrics",
	"GET  /healthz              200 while the process serves",
	"GET  /readyz               200 when the store, plan and plugins are ready, else 503 with the reasons",
}

// newRegistry returns a server command's Prometheus registry with the Go
// runtime's and the process's metrics, and the restarts of the plugin
// processes ps opens (when ps is not nil). The roles register their own
// metrics on it (shuffler.Options.Registerer, CollectorOptions.Registerer).
func newRegistry(ps *collector.Plugins) *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	if ps != nil {
		reg.MustRegister(ps.Collector())
	}
	return reg
}

// registerAdminOps adds GET /metrics (from reg), GET /healthz and GET
// /readyz (running checks, with reasons) to the admin mux. A metric that
// cannot be read (the store fails) is left out of the scrape and the rest
// served, so that the failure shows in /readyz and in the missing series
// rather than as a failed scrape of everything.
func registerAdminOps(mux *http.ServeMux, reg *prometheus.Registry, checks ...health.Check) {
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError, Registry: reg}))
	health.Register(mux, true, checks...)
}

// startAdmin listens on addr and serves h there until the returned stop
// is called (which shuts it down gracefully). It returns the listener's
// URL.
func startAdmin(logger *slog.Logger, addr string, h http.Handler) (url string, stop func(), err error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", nil, fmt.Errorf("--admin-addr: %w", err)
	}
	srv := httpserver.New(h, logger.With("listener", "admin"))
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(ln); err != nil && err != http.ErrServerClosed {
			logger.Error("admin listener", "error", err)
		}
	}()
	return loopbackURL(ln.Addr()), func() {
		ctx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
		defer cancel()
		srv.Shutdown(ctx)
		<-done
	}, nil
}
