package main

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	neturl "net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/blanket-dp/blanket/collector/shuffler"
	"github.com/blanket-dp/blanket/internal/httpserver"

	"github.com/blanket-dp/blanket/collector"
	"github.com/blanket-dp/blanket/collector/dashboard"
	"github.com/blanket-dp/blanket/sdk/plan"
)

// planKeys holds the plan-signing key of each server startServer started,
// by URL (planKey).
var planKeys sync.Map

// planKey returns the plan-signing key of the server at url, which apps
// pin.
func planKey(url string) string {
	k, _ := planKeys.Load(url)
	s, _ := k.(string)
	return s
}

// startServer runs the shuffler and the collector in process on one
// loopback address, as `blanket serve` does, for plan p.
func startServer(t testing.TB, p *plan.Plan) string {
	t.Helper()
	return startServerSettled(t, p, 0)
}

// startServerSettled is startServer with a shuffler that holds a pool until
// no report has joined it for settle (0: releases as soon as it can).
func startServerSettled(t testing.TB, p *plan.Plan, settle time.Duration) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	dir := t.TempDir()
	plugins := collector.NewPlugins()
	t.Cleanup(func() { plugins.Close() })
	mux := http.NewServeMux()
	srv := httptest.NewUnstartedServer(nil)
	hs := httpserver.New(mux, nil)
	srv.Config.Handler, srv.Config.ConnContext = hs.Handler, hs.ConnContext
	srv.Start()
	t.Cleanup(srv.Close)
	c, err := collector.OpenCollector(ctx, collector.CollectorOptions{Plan: p, Dir: dir + "/collector", Open: plugins.Open})
	if err != nil {
		t.Fatal(err)
	}
	planKeys.Store(srv.URL, plan.FormatSigningKey(c.PlanSigningKey()))
	t.Cleanup(func() { c.Close() })
	s, err := shuffler.Open(ctx, shuffler.Options{
		Plan: p, Dir: dir + "/shuffler", Collector: srv.URL, ReleaseInterval: 200 * time.Millisecond,
		PeriodGrace: 8 * 24 * time.Hour, // the fleet simulates the last week
		Settle:      settle,
	})
	if err != nil {
		t.Fatal(err)
	}
	// One mux for both listeners of blanket serve: the tests are the
	// operator.
	c.Register(mux)
	s.Register(mux)
	s.RegisterAdmin(mux)
	dashboard.Register(mux, dashboard.Roles{Collector: true, Shuffler: true})
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.Run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
		s.Close()
	})
	return srv.URL
}

// loadPlan reads examples/plan.yaml with a smaller n_min for the test.
func loadPlan(t testing.TB, nMin int) *plan.Plan {
	t.Helper()
	p, err := plan.Load("../plan.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if nMin > 0 {
		p.NMin = nMin
	}
	return p
}

// fleetCase is one configuration of runFleet.
type fleetCase struct {
	n, nMin int // simulated instances; the plan's n_min
	days    int // simulated reporting periods
	horizon int // the plan's horizon in periods; 0 keeps examples/plan.yaml's (30)
	// dashboard checks the dashboard in a headless Chromium afterwards
	// (checkDashboard).
	dashboard bool
	// split sends the apps through a front that serves only a
	// shuffler's paths (POST /v1/reports, GET /v1/plan), and gives the
	// fleet the collector's URL apart (-collector).
	split bool
}

// TestFleet runs a small fleet end to end through the real shuffler and
// collector over one day. The plan's n_min is lowered so that 1400
// instances (about 560 active) make a batch of each metric with a small
// top-up, and its horizon to 2 periods
// (still longer than the day simulated, so no window is full): the
// collector calibrates the three metrics' composition at n_min = 600 in
// seconds, while the demo plan's 30 periods at n_min = 300 take tens of
// seconds of CPU; TestFleetDeep (make audit) runs that plan over 4 days.
// The estimates must pass the fleet's own check (false-failure rate about
// 1e-6 per metric, see check). The server's dashboard is then drawn in a
// headless Chromium and checked against the API (checkDashboard).
func TestFleet(t *testing.T) {
	c := fleetCase{n: 1400, nMin: 600, days: 1, horizon: 2, dashboard: true, split: true}
	if testing.Short() {
		c.n = 1000
	}
	runFleet(t, c)
}

// runFleet runs the fleet of c against startServer and checks its verdict
// and report.
func runFleet(t *testing.T, c fleetCase) {
	n, nMin := c.n, c.nMin
	if v := os.Getenv("BLANKET_FLEET_N"); v != "" { // for measuring: BLANKET_FLEET_N=100000
		n, _ = strconv.Atoi(v)
		nMin = 0
	}
	p := loadPlan(t, nMin)
	if c.horizon > 0 {
		p.Horizon = c.horizon
	}
	url := startServer(t, p)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	var out, log bytes.Buffer
	workers := 16
	if v := os.Getenv("BLANKET_FLEET_WORKERS"); v != "" {
		workers, _ = strconv.Atoi(v)
	}
	endpoint, collectorURL := url, ""
	if c.split {
		endpoint, collectorURL = shufflerFront(t, url), url
	}
	ok, err := run(ctx, config{endpoint: endpoint, collector: collectorURL, admin: url, planKey: planKey(url), n: n, workers: workers, seed: 7, zipfS: 1.1, maxEps0: 8, days: c.days, active: 0.4, records: 3, poll: 50 * time.Millisecond}, &out, &log)
	t.Log("\n" + out.String())
	if err != nil {
		t.Fatal(err)
	}
	if !ok {
		t.Fatal("estimates off")
	}
	for _, want := range []string{"demo/screen", "demo/feature", "demo/sync-bytes", "guarantee per user over the horizon", "generic clone bound", "all reports estimated", "estimates of all days"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q", want)
		}
	}
	if c.dashboard {
		checkDashboard(t, url, p)
	}
}

// shufflerFront serves on loopback what a shuffler apart from the
// collector serves apps, POST /v1/reports and GET /v1/plan, by passing
// them to the server at url, and 404 to anything else (the collector's
// /v1/metrics): the fleet must ask the collector apart for its estimates.
func shufflerFront(t *testing.T, url string) string {
	target, err := neturl.Parse(url)
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(target)
	mux := http.NewServeMux()
	mux.Handle("POST /v1/reports", proxy)
	mux.Handle("GET /v1/plan", proxy)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv.URL
}

func TestBinomialAllowance(t *testing.T) {
	// P(Binomial(20, 0.05) > 7) = 3.3e-6 and P(> 8) = 2.6e-7 (exact sums
	// of the pmf), so 8 misses of 20 are allowed at 1e-6.
	if got := binomialAllowance(20, 0.05, 1e-6); got != 8 {
		t.Errorf("binomialAllowance(20, 0.05, 1e-6) = %d, want 8", got)
	}
	if got := binomialAllowance(1, 0.05, 1e-6); got != 1 {
		t.Errorf("binomialAllowance(1, 0.05, 1e-6) = %d, want 1", got)
	}
}

func TestShortDuration(t *testing.T) {
	for in, want := range map[string]string{"24h0m0s": "24h", "1h30m0s": "1h30m", "1m0s": "1m", "30s": "30s", "1h0m30s": "1h0m30s"} {
		if got := shortDuration(in); got != want {
			t.Errorf("shortDuration(%q) = %q, want %q", in, got, want)
		}
	}
}
