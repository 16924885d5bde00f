package dashboard

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/blanket-dp/blanket/internal/browser"
	"github.com/blanket-dp/blanket/internal/testdeps"
)

// Edge cases of the API the page must draw without an error: a metric
// named like a property of every JavaScript object (plan names may be
// "toString" or "constructor"), a latest period without estimates, a metric without periods, a horizon
// with an unknown eps, a name with a slash, many categories, and a label
// that is markup (it must show as text).
const (
	edgePlan = `{"version":1,"target":{"eps":1,"delta":1e-6},"n_min":100,"floor":1000,"period":"24h0m0s","horizon":7,"max_fake_fraction":0.1,"metrics":[
		{"name":"toString","plugin":"krr","categories":["a","b"],"eps0":0.5},
		{"name":"constructor","plugin":"krr","categories":["a","b"],"eps0":0.5},
		{"name":"empty","plugin":"krr","categories":["a","b"],"eps0":0.5},
		{"name":"net/latency_ms","plugin":"summation","eps0":1},
		{"name":"many","plugin":"krr","eps0":2}]}`
	edgePools = `{"n_min":100,"settle_seconds":10,"outgoing":0,"batches_released":1,"reports_released":100,"pools":[
		{"pool":"toString","epoch":"00000000000000e1","period":{"start":"2024-01-01T00:00:00Z","end":"2024-01-02T00:00:00Z"},"reports":3},
		{"pool":"net/latency_ms","epoch":"00000000000000e1","period":{"start":"2024-01-02T00:00:00Z","end":"2024-01-03T00:00:00Z"},"reports":250}]}`
	edgeList = `{"epoch":"00000000000000e1","ingest":{"batches":3,"duplicates":0,"bad":0,"refused":0,"reports":400,"malformed":1},
		"stored":{"batches":7,"reports":900,"malformed":2,"periods":[
		{"start":"2024-01-01T00:00:00Z","end":"2024-01-02T00:00:00Z","batches":3,"held":0,"reports":400,"malformed":1},
		{"start":"2024-01-02T00:00:00Z","end":"2024-01-03T00:00:00Z","batches":4,"held":1,"reports":500,"malformed":1}]},"metrics":[
		{"name":"constructor","plugin":"krr","in_plan":true,"epochs":["00000000000000e1"],"n":200,"malformed":0,"batches":2},
		{"name":"empty","plugin":"krr","in_plan":true,"epochs":[],"n":0,"malformed":0,"batches":0},
		{"name":"many","plugin":"krr","in_plan":true,"epochs":["00000000000000e1"],"n":100,"malformed":0,"batches":1},
		{"name":"net/latency_ms","plugin":"summation","in_plan":true,"epochs":["00000000000000e1"],"n":100,"malformed":1,"batches":1},
		{"name":"toString","plugin":"krr","in_plan":true,"epochs":["00000000000000e1"],"n":200,"malformed":0,"batches":2}],
		"scope":{"against":"the collector and the public","provided":["the shuffler is honest","<b id=scopeinjected>x</b>"],"local_only":"one operator of both roles","same_operator":true,"admission":"open","doc":"docs/threat-model.md"}}`
)

// edgePeriod returns a period's JSON, estimates "" for null (with an
// estimate_error).
func edgePeriod(start, estimates string, n int) string {
	s := fmt.Sprintf("%q", start)
	e := fmt.Sprintf("%q", strings.Replace(start, "-02T", "-03T", 1))
	est := `"estimates":null,"estimate_error":"bad statistic: no valid report"`
	if estimates != "" {
		est = `"confidence":0.95,"estimates":` + estimates
	}
	return fmt.Sprintf(`{"start":%s,"end":%s,"epoch":"00000000000000e1","current":true,"plugin":"krr","version":"1","eps0":0.5,"n":%d,"malformed":0,"draws":1000,"batches":1,%s,"max_fake_fraction":0.1,"guarantee":{"eps":0.3,"delta":1e-7,"n":%d,"messages":%d,"honest":%d,"draws":1000,"batch":"00"},"floor":{"eps":0.21,"delta":1e-7,"draws":1000,"batch":"00"},"batch_list":[]}`,
		s, e, n, est, n, n, n-n/10)
}

// categories returns estimates of labels, value i+1 each.
func categories(labels ...string) string {
	var out []string
	for i, l := range labels {
		v := float64(i + 1)
		b, _ := json.Marshal(l)
		out = append(out, fmt.Sprintf(`{"label":%s,"value":%g,"variance":1,"lo":%g,"hi":%g,"post":%g,"post_lo":%g,"post_hi":%g}`, b, v, v-1, v+1, v, v-1, v+1))
	}
	return "[" + strings.Join(out, ",") + "]"
}

func edgeDetail(name string) (string, bool) {
	ab := categories("a", "b")
	var periods []string
	horizon := "null"
	switch name {
	case "toString", "constructor":
		periods = []string{edgePeriod("2024-01-01T00:00:00Z", ab, 100), edgePeriod("2024-01-02T00:00:00Z", ab, 100)}
		horizon = `{"periods":7,"period":"24h0m0s","eps":null,"delta":1e-6,"reports":2,"target_eps":1,"target_delta":1e-6,"max_fake_fraction":0.1,"note":"not composed","floor":{"eps":0.84,"delta":1e-6,"draws":1000,"note":"the draws alone"}}`
	case "empty":
	case "net/latency_ms":
		periods = []string{edgePeriod("2024-01-01T00:00:00Z", categories("sum", "mean"), 50), edgePeriod("2024-01-02T00:00:00Z", "", 50)}
	case "many":
		labels := []string{`<img src=x id=injected>`}
		for i := 1; i < 150; i++ {
			labels = append(labels, fmt.Sprintf("c%03d", i))
		}
		periods = []string{edgePeriod("2024-01-02T00:00:00Z", categories(labels...), 100)}
	default:
		return "", false
	}
	b, _ := json.Marshal(name)
	return fmt.Sprintf(`{"name":%s,"in_plan":true,"periods":[%s],"horizon":%s}`, b, strings.Join(periods, ","), horizon), true
}

// TestPageEdgeCases draws the page in a headless Chromium against an API
// of edge cases and checks that it shows every metric, reports no error
// and logs no problem, and that no label became markup.
func TestPageEdgeCases(t *testing.T) {
	mux := http.NewServeMux()
	Register(mux, Roles{Collector: true, Shuffler: true})
	serve := func(body string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.Write([]byte(body))
		}
	}
	mux.HandleFunc("GET /v1/plan", serve(edgePlan))
	mux.HandleFunc("GET /v1/pools", serve(edgePools))
	mux.HandleFunc("GET /v1/metrics", serve(edgeList))
	var mu sync.Mutex
	var asked []string
	mux.HandleFunc("GET /v1/metrics/{name...}", func(w http.ResponseWriter, r *http.Request) {
		name := r.PathValue("name")
		mu.Lock()
		asked = append(asked, name)
		mu.Unlock()
		body, ok := edgeDetail(name)
		if !ok {
			http.Error(w, `{"error":"no such metric"}`, http.StatusNotFound)
			return
		}
		serve(body)(w, r)
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	b, err := browser.Start(ctx)
	if errors.Is(err, browser.ErrNoChromium) {
		testdeps.Missing(t, err)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	page, err := b.Open(ctx, srv.URL+"/", 1200, 900)
	if err != nil {
		t.Fatal(err)
	}
	defer page.Close()
	if err := page.WaitRenders(ctx, 1); err != nil {
		t.Fatal(err)
	}
	var got struct {
		Error    string   `json:"error"`
		Metrics  []string `json:"metrics"`
		Series   int      `json:"series"`
		Injected bool     `json:"injected"`
		Scope    string   `json:"scope"`
		Provided []string `json:"provided"`
		Warn     bool     `json:"warn"`
		Plan     string   `json:"plan"`
		Latest   string   `json:"latest"`
		Floor    string   `json:"floor"`
		Lines    int      `json:"lines"`
		Stored   []string `json:"stored"`
		Ingest   string   `json:"ingest"`
	}
	const read = `(() => ({
		error: document.getElementById("error").hidden ? "" : document.getElementById("error").textContent,
		plan: document.getElementById("plan-body").textContent,
		latest: [...document.querySelectorAll('section.metric[data-metric="toString"] .eps-panel p')].map((p) => p.textContent).join(" "),
		metrics: [...document.querySelectorAll("section.metric")].map((s) => s.dataset.metric),
		series: document.querySelectorAll('section.metric[data-metric="toString"] .series-panel svg g.series-group').length,
		injected: document.getElementById("injected") !== null || document.getElementById("scopeinjected") !== null,
		scope: (document.querySelector("#privacy .scope-against") || {}).textContent || "",
		provided: [...document.querySelectorAll("#privacy .scope li")].map((li) => li.textContent),
		warn: !!document.querySelector("#privacy .scope-local.warn"),
		floor: (document.querySelector("#privacy .floor-eps") || {}).textContent || "",
		lines: document.querySelectorAll('section.metric[data-metric="toString"] .eps-panel svg g.series-group').length,
		stored: [...document.querySelectorAll("#ingest table.stored tr[data-period]")].map((r) => [...r.children].map((td) => td.textContent).join(" ")),
		ingest: document.getElementById("ingest-body").textContent,
	}))()`
	if err := page.Eval(ctx, read, &got); err != nil {
		t.Fatal(err)
	}
	if got.Error != "" {
		t.Errorf("the page shows an error: %s", got.Error)
	}
	want := []string{"constructor", "empty", "many", "net/latency_ms", "toString"}
	if !slices.Equal(got.Metrics, want) {
		t.Errorf("the page draws metrics %q, want %q", got.Metrics, want)
	}
	if got.Series == 0 {
		t.Error(`metric "toString": no series drawn`)
	}
	if got.Injected {
		t.Error("a category label or a scope line was inserted as markup")
	}
	// The privacy card says against whom the guarantee holds, and warns
	// when one operator runs both roles.
	if got.Scope != "Holds against the collector and the public, provided that:" || !slices.Equal(got.Provided, []string{"the shuffler is honest", "<b id=scopeinjected>x</b>"}) || !got.Warn {
		t.Errorf("scope on the page: %q %q, warning %v", got.Scope, got.Provided, got.Warn)
	}
	// The plan's max_fake_fraction and a batch's honest count are shown.
	if !strings.Contains(got.Plan, "max fake fraction") || !strings.Contains(got.Plan, "0.1 of a batch's valid reports may be fake") {
		t.Errorf("the plan panel does not show max_fake_fraction 0.1: %q", got.Plan)
	}
	// A floor: the plan's, the horizon's and a period's floor alone, and
	// the latest guarantee's draws.
	if !strings.Contains(got.Plan, "adds 1000 blanket draws") || got.Floor != "ε = 0.84" || !strings.Contains(got.Latest, "and 1000 blanket draws") || !strings.Contains(got.Latest, "floor alone: (ε, δ) = (0.21") || got.Lines != 2 {
		t.Errorf("the floor on the page: plan %q, horizon %q, latest %q, %d lines in the eps chart (want 2)", got.Plan, got.Floor, got.Latest, got.Lines)
	}
	// The cluster view: the shared store's periods, latest first, and
	// this process's counters apart.
	if len(got.Stored) != 2 || !strings.HasSuffix(got.Stored[0], " 4 1 500 1") || !strings.HasSuffix(got.Stored[1], " 3 0 400 1") ||
		!strings.Contains(got.Ingest, "Stored: every replica") || !strings.Contains(got.Ingest, "This process, since it started") {
		t.Errorf("the ingest card: stored rows %q, text %q", got.Stored, got.Ingest)
	}
	if !strings.Contains(got.Latest, "counted as 90 honest") {
		t.Errorf("the latest guarantee does not show its honest count: %q", got.Latest)
	}
	mu.Lock()
	defer mu.Unlock()
	slices.Sort(asked)
	if !slices.Equal(asked, want) {
		t.Errorf("the page asked for metrics %q, want %q", asked, want)
	}
	for _, p := range page.Problems() {
		t.Errorf("the page logged: %s", p)
	}
}
