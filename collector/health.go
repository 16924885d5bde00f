package collector

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// HealthTimeout bounds one readiness check (GET /readyz answers within
// it, ready or not).
const HealthTimeout = 3 * time.Second

// Check is one readiness check of GET /readyz: Name says what it checks,
// Ready returns nil when that part is ready, else why not.
type Check struct {
	Name  string
	Ready func(ctx context.Context) error
}

// RegisterHealth adds GET /healthz and GET /readyz to mux. /healthz
// answers 200 "ok" while the process serves HTTP at all (liveness: restart
// it otherwise). /readyz runs every check concurrently, all bounded by
// HealthTimeout (a check that has not answered by then fails), and
// answers 200 "ok" when all pass, else 503 with one line per failing check,
// so that a load balancer sends no traffic to a replica that cannot take
// it. With detailed, each line says why ("collector store: the database
// does not answer: …", for the operator's listener); without, only which
// check failed ("collector store: not ready", for a public listener: the
// reasons name files and peers).
func RegisterHealth(mux *http.ServeMux, detailed bool, checks ...Check) {
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

// runChecks runs checks concurrently under one HealthTimeout and returns
// a line per failing check, in the order of checks. A check still running
// at the deadline (one waiting on a lock rather than on its context: a
// plugin process being started, a plan fetch in flight) fails as not
// answering; it is left to finish in the background, so that GET /readyz
// answers within HealthTimeout whatever the checks do.
func runChecks(ctx context.Context, checks []Check, detailed bool) []string {
	ctx, cancel := context.WithTimeout(ctx, HealthTimeout)
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
			failed = append(failed, fmt.Sprintf("%s: no answer within %v", c.Name, HealthTimeout))
		case errs[i] != nil && detailed:
			failed = append(failed, fmt.Sprintf("%s: %v", c.Name, errs[i]))
		case !answered[i] || errs[i] != nil:
			failed = append(failed, c.Name+": not ready")
		}
	}
	return failed
}

// ready checks that the database answers a query on its read handle and
// that its write handle takes the write lock (a transaction begun and
// rolled back, nothing written). A writer wedged past the probe's
// deadline (a transaction that never ends, the lock held by another
// process) refuses every upload or batch while reads still answer. A
// long legitimate write (the release of a very large pool) can fail one
// probe; load balancers act on consecutive failures.
func (db *database) ready(ctx context.Context) error {
	var n int
	if err := db.r.QueryRowContext(ctx, `SELECT COUNT(*) FROM sqlite_master`).Scan(&n); err != nil {
		return fmt.Errorf("the database does not answer: %w", err)
	}
	if n == 0 {
		return errors.New("the database has no tables")
	}
	tx, err := db.w.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("the database does not answer writes: %w", err)
	}
	return tx.Rollback()
}

// Checks are the collector's readiness checks: "collector store" (its
// database answers), "plan" (the published plan is calibrated) and
// "plugins" (every metric of the current plan has its plugin running). A
// plugin process that died is restarted in the background, under the
// host's own start timeout, never inside the probe: a probe's short
// deadline would kill a slow start over and over.
func (c *Collector) Checks() []Check {
	return []Check{
		{Name: "collector store", Ready: c.st.db.ready},
		{Name: "plan", Ready: func(context.Context) error {
			if c.plan == nil || !c.plan.Calibrated() {
				return errors.New("not calibrated")
			}
			return nil
		}},
		{Name: "plugins", Ready: func(ctx context.Context) error {
			var errs []error
			for _, m := range c.plan.Metrics {
				ms := c.cur.metrics[m.Name]
				if ms == nil {
					errs = append(errs, fmt.Errorf("metric %q: not opened", m.Name))
					continue
				}
				if err := ms.ready(ctx); err != nil {
					errs = append(errs, fmt.Errorf("metric %q (%s): %w", m.Name, m.Plugin, err))
				}
			}
			return errors.Join(errs...)
		}},
	}
}

// Checks are the shuffler's readiness checks: "shuffler store" (its database
// answers) and "shuffler" (not shutting down).
func (s *Shuffler) Checks() []Check {
	return []Check{
		{Name: "shuffler store", Ready: s.db.ready},
		{Name: "shuffler", Ready: func(context.Context) error {
			s.runMu.Lock()
			defer s.runMu.Unlock()
			if s.isClosed {
				return errors.New("shutting down")
			}
			return nil
		}},
	}
}

// pluginRestartTimeout bounds a restart the readiness check starts.
const pluginRestartTimeout = time.Minute

// ready returns nil when the metric's randomizer answers without starting
// anything: a plugin (sdk.Plugin) reports whether it runs, and one that
// does not is restarted in the background (one restart at a time); any
// other randomizer is asked to Describe itself under ctx.
func (ms *metricState) ready(ctx context.Context) error {
	r, ok := ms.r.(interface{ Running() bool })
	if !ok {
		_, err := ms.r.Describe(ctx)
		return err
	}
	if r.Running() {
		return nil
	}
	if ms.restarting.CompareAndSwap(false, true) {
		go func() {
			defer ms.restarting.Store(false)
			ctx, cancel := context.WithTimeout(context.Background(), pluginRestartTimeout)
			defer cancel()
			ms.r.Describe(ctx) // starts a process if it can; a failure shows at the next probe
		}()
	}
	return errors.New("plugin not running (restarting it in the background)")
}

// Ready returns nil when the relay holds a plan of the collector's to
// serve, else why not. It never fetches (the relay's refresh does), so
// it answers at once: a shuffler takes and stores uploads whether or not
// its collector is reachable, and once a plan was fetched the relay
// serves it even when the collector is down.
func (pr *PlanRelay) Ready(context.Context) error {
	if !pr.held.Load() {
		return errors.New("no plan fetched from the collector yet")
	}
	return nil
}
