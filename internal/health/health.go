// Package health serves the liveness and readiness probes of the blanket
// servers: GET /healthz and GET /readyz over a list of Checks.
package health

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// Timeout bounds one readiness check (GET /readyz answers within
// it, ready or not).
const Timeout = 3 * time.Second

// Check is one readiness check of GET /readyz: Name says what it checks,
// Ready returns nil when that part is ready, else why not.
type Check struct {
	Name  string
	Ready func(ctx context.Context) error
}

// Register adds GET /healthz and GET /readyz to mux. /healthz
// answers 200 "ok" while the process serves HTTP at all (liveness: restart
// it otherwise). /readyz runs every check concurrently, all bounded by
// Timeout (a check that has not answered by then fails), and
// answers 200 "ok" when all pass, else 503 with one line per failing check,
// so that a load balancer sends no traffic to a replica that cannot take
// it. With detailed, each line says why ("collector store: the database
// does not answer: …", for the operator's listener); without, only which
// check failed ("collector store: not ready", for a public listener: the
// reasons name files and peers).
func Register(mux *http.ServeMux, detailed bool, checks ...Check) {
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		failed := runChecks(r.Context(), checks, detailed)
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		if len(failed) > 0 {
			w.WriteHeader(http.StatusServiceUnavailable)
			w.Write([]byte(strings.Join(failed, "\n") + "\n"))
			return
		}
		w.Write([]byte("ok\n"))
	})
}

// runChecks runs checks concurrently under one Timeout and returns
// a line per failing check, in the order of checks. A check still running
// at the deadline (one waiting on a lock rather than on its context: a
// plugin process being started, a plan fetch in flight) fails as not
// answering; it is left to finish in the background, so that GET /readyz
// answers within Timeout whatever the checks do.
func runChecks(ctx context.Context, checks []Check, detailed bool) []string {
	ctx, cancel := context.WithTimeout(ctx, Timeout)
	defer cancel()
	type result struct {
		i   int
		err error
	}
	results := make(chan result, len(checks)) // late checks never block
	for i, c := range checks {
		go func() { results <- result{i, c.Ready(ctx)} }()
	}
	errs := make([]error, len(checks))
	answered := make([]bool, len(checks))
wait:
	for range checks {
		select {
		case res := <-results:
			errs[res.i], answered[res.i] = res.err, true
		case <-ctx.Done():
			break wait
		}
	}
	var failed []string
	for i, c := range checks {
		switch {
		case !answered[i] && detailed:
			failed = append(failed, fmt.Sprintf("%s: no answer within %v", c.Name, Timeout))
		case errs[i] != nil && detailed:
			failed = append(failed, fmt.Sprintf("%s: %v", c.Name, errs[i]))
		case !answered[i] || errs[i] != nil:
			failed = append(failed, c.Name+": not ready")
		}
	}
	return failed
}
