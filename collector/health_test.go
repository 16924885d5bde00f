package collector

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/blanket-dp/blanket/collector/shuffler"
	"github.com/blanket-dp/blanket/internal/health"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// getText returns the status and body of GET url.
func getText(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// TestReadiness serves /healthz and /readyz for a real collector and
// shuffler: ready at first; when the plugins are closed /readyz names the
// metrics whose randomizer does not answer; when the collector's database
// fails (closed under it) it names the store; /healthz stays 200
// throughout.
func TestReadiness(t *testing.T) {
	ctx := context.Background()
	p := testPlan(t, 10)
	ps := NewPlugins()
	c, err := OpenCollector(ctx, CollectorOptions{Plan: p, Dir: t.TempDir(), Open: ps.Open, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	s, err := shuffler.Open(ctx, shuffler.Options{Plan: c.Plan(), Dir: t.TempDir(), Collector: "http://127.0.0.1:1", Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	mux := http.NewServeMux()
	health.Register(mux, true, append(c.Checks(), s.Checks()...)...)
	srv := newServer(t, mux)
	public := http.NewServeMux()
	health.Register(public, false, append(c.Checks(), s.Checks()...)...)
	pub := newServer(t, public)

	if code, body := getText(t, srv.URL+"/readyz"); code != http.StatusOK || body != "ok\n" {
		t.Fatalf("fresh: /readyz = %d %q", code, body)
	}
	ps.Close()
	code, body := getText(t, srv.URL+"/readyz")
	if code != http.StatusServiceUnavailable || !strings.Contains(body, `plugins: metric "ui/screen" (krr): plugin not running`) {
		t.Errorf("plugins closed: /readyz = %d %q", code, body)
	}
	c.st.close() // the store fails under the running collector
	code, body = getText(t, srv.URL+"/readyz")
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "collector store: the database does not answer") {
		t.Errorf("store closed: /readyz = %d %q", code, body)
	}
	if strings.Contains(body, "shuffler store") {
		t.Errorf("the shuffler's store is fine, /readyz says %q", body)
	}
	// The public listener says which checks fail, not why.
	if code, body := getText(t, pub.URL+"/readyz"); code != http.StatusServiceUnavailable || body != "collector store: not ready\nplugins: not ready\n" {
		t.Errorf("public /readyz = %d %q", code, body)
	}
	if code, body := getText(t, srv.URL+"/healthz"); code != http.StatusOK || body != "ok\n" {
		t.Errorf("/healthz = %d %q", code, body)
	}
	s.Close()
	if code, body := getText(t, srv.URL+"/readyz"); code != http.StatusServiceUnavailable || !strings.Contains(body, "shuffler: shutting down") {
		t.Errorf("shuffler closed: /readyz = %d %q", code, body)
	}
}

// TestPluginRestartsMetric exports the plugins' restarts: a series per
// plugin opened (0 for the built-ins, which run in process), kept after
// Close. The counting itself is tested on real plugin processes in sdk
// (TestRestartAfterKill, TestCallTimeout).
func TestPluginRestartsMetric(t *testing.T) {
	ps := NewPlugins()
	p := testPlan(t, 10)
	for _, m := range p.Metrics {
		if _, err := ps.Open(context.Background(), m.Plugin, m.Config()); err != nil {
			t.Fatal(err)
		}
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(ps.Collector())
	want := `
# HELP blanket_plugin_restarts_total Plugin processes started to replace one that exited, hung past the call timeout or failed, per plugin.
# TYPE blanket_plugin_restarts_total counter
blanket_plugin_restarts_total{plugin="krr"} 0
blanket_plugin_restarts_total{plugin="summation"} 0
`
	for _, when := range []string{"open", "closed"} {
		if err := testutil.GatherAndCompare(reg, strings.NewReader(want)); err != nil {
			t.Errorf("%s: %v", when, err)
		}
		ps.Close()
	}
	lint(t, reg)
}

// TestReadinessAnswersWithinTimeout: a check that waits on something other
// than its context (a lock held by a plugin start or a plan fetch) fails
// as not answering, the other checks' results still show, and GET /readyz
// answers rather than waiting for it.
func TestReadinessAnswersWithinTimeout(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	mux := http.NewServeMux()
	health.Register(mux, true,
		health.Check{Name: "stuck", Ready: func(context.Context) error { <-release; return nil }},
		health.Check{Name: "broken", Ready: func(context.Context) error { return errors.New("down") }},
		health.Check{Name: "fine", Ready: func(context.Context) error { return nil }},
	)
	srv := newServer(t, mux)
	// Far above health.Timeout: only a /readyz that waits for the stuck
	// check runs into it.
	client := &http.Client{Timeout: 10 * health.Timeout}
	resp, err := client.Get(srv.URL + "/readyz")
	if err != nil {
		t.Fatalf("/readyz did not answer: %v", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("stuck: no answer within %v\nbroken: down\n", health.Timeout)
	if resp.StatusCode != http.StatusServiceUnavailable || string(b) != want {
		t.Errorf("/readyz = %d %q, want 503 %q", resp.StatusCode, b, want)
	}
}

// TestPlanRelayReady: a shuffler's relay is ready once it holds a plan of
// its collector's, and stays ready while the collector is down (it serves
// the plan it holds); the check never fetches.
func TestPlanRelayReady(t *testing.T) {
	c := openCollector(t, t.TempDir(), testPlan(t, 10))
	defer c.Close()
	cmux := http.NewServeMux()
	c.Register(cmux)
	csrv := newServer(t, cmux)
	pr := &shuffler.PlanRelay{Collector: csrv.URL}
	if err := pr.Ready(context.Background()); err == nil || !strings.Contains(err.Error(), "no plan fetched") {
		t.Fatalf("before a fetch: %v", err)
	}
	if err := pr.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	csrv.Close()
	if err := pr.Ready(context.Background()); err != nil {
		t.Errorf("after a fetch, collector down: %v", err)
	}
}
