package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/blanket-dp/blanket/collector"
	"github.com/blanket-dp/blanket/internal/browser"
	"github.com/blanket-dp/blanket/internal/testdeps"
	"github.com/blanket-dp/blanket/sdk/plan"
)

// shownDigits is the significant digits the dashboard shows of an
// estimate (format.js fmt.num): a shown number s matches a value v when
// |s - v| <= 5e-4 |v| (half a unit in the fourth digit).
const shownRel = 5e-4

// pageMetric is what the test reads back from one metric's section of the
// drawn page.
type pageMetric struct {
	Name string `json:"name"`
	// Rows is the latest period's table: label, estimate, low, high as
	// shown.
	Rows [][4]string `json:"rows"`
	// Bars are the latest period's bars (label, data-value); ErrorBars
	// counts their error bars.
	Bars      []pageBar `json:"bars"`
	ErrorBars int       `json:"errorBars"`
	// Counts are the bars of valid reports per period.
	Counts []pageBar `json:"counts"`
	// NMinLine is the label of the reference line of the counts chart.
	NMinLine string `json:"nMinLine"`
	// Series are the series drawn over periods, Checked the boxes ticked.
	Series  []string `json:"series"`
	Checked []string `json:"checked"`
	// EpsDots counts the points of the per-period eps chart.
	EpsDots int `json:"epsDots"`
}

type pageBar struct {
	Label string  `json:"label"`
	Value float64 `json:"value"`
}

// readPage extracts the metrics' sections, the plan's eps0 cells and the
// horizon's eps from the drawn page.
const readPage = `(() => {
  const num = (s) => s;
  const metrics = [...document.querySelectorAll("section.metric")].map((sec) => ({
    name: sec.dataset.metric,
    rows: [...sec.querySelectorAll("table.estimates tr[data-label]")].map((tr) =>
      [tr.dataset.label, tr.querySelector(".value").textContent, tr.querySelector(".lo").textContent, tr.querySelector(".hi").textContent]),
    bars: [...sec.querySelectorAll(".latest svg rect.bar")].map((r) => ({ label: r.dataset.label, value: Number(r.dataset.value) })),
    errorBars: sec.querySelectorAll(".latest svg g.err").length,
    counts: [...sec.querySelectorAll(".counts svg rect.bar")].map((r) => ({ label: r.dataset.label, value: Number(r.dataset.value) })),
    nMinLine: (sec.querySelector(".counts svg .ref-label") || {}).textContent || "",
    series: [...sec.querySelectorAll(".series-panel svg g.series-group")].map((g) => g.dataset.series),
    checked: [...sec.querySelectorAll(".series-panel input:checked")].map((i) => i.dataset.series),
    epsDots: sec.querySelectorAll(".eps-panel svg circle").length,
  }));
  const eps0 = Object.fromEntries([...document.querySelectorAll("table.plan-metrics tr[data-metric]")].map((tr) => [tr.dataset.metric, tr.querySelector(".eps0").textContent]));
  const h = document.querySelector(".horizon-eps");
  return { metrics, eps0, horizon: h ? h.textContent : "", shuffler: !document.getElementById("shuffler").hidden, error: document.getElementById("error").hidden ? "" : document.getElementById("error").textContent };
})()`

type pageState struct {
	Metrics  []pageMetric      `json:"metrics"`
	Eps0     map[string]string `json:"eps0"`
	Horizon  string            `json:"horizon"`
	Shuffler bool              `json:"shuffler"`
	Error    string            `json:"error"`
}

// checkDashboard opens the server's dashboard in a real headless Chromium
// after a fleet has reported, and checks that the page draws every metric
// of the plan and that the numbers it shows are the API's: the latest
// period's estimates and intervals against GET /v1/metrics/{name}, the bars
// against the estimates and the counts per period, the reference line at
// n_min, eps0 against GET /v1/plan, the horizon's eps; that ticking a
// category draws its series; and that the page logged no error and made no
// failing request. It writes a screenshot to demo-out/dashboard-test.png.
func checkDashboard(t *testing.T, url string, p *plan.Plan) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	b, err := browser.Start(ctx)
	if errors.Is(err, browser.ErrNoChromium) {
		testdeps.Missing(t, err)
	}
	if err != nil {
		t.Fatalf("dashboard: %v", err)
	}
	defer b.Close()
	page, err := b.Open(ctx, url+"/", dashboardWidth, dashboardHeight)
	if err != nil {
		t.Fatal(err)
	}
	defer page.Close()
	if err := page.WaitRenders(ctx, 1); err != nil {
		t.Fatal(err)
	}
	var got pageState
	if err := page.Eval(ctx, readPage, &got); err != nil {
		t.Fatal(err)
	}
	if got.Error != "" {
		t.Errorf("the page shows an error: %s", got.Error)
	}
	if !got.Shuffler {
		t.Error("the shuffler's panel is hidden on a server that plays both roles")
	}
	var pub plan.Plan
	getJSON(t, url+"/v1/plan", &pub)
	if len(got.Metrics) != len(p.Metrics) {
		t.Fatalf("the page draws %d metrics, the plan has %d", len(got.Metrics), len(p.Metrics))
	}
	for _, m := range pub.Metrics {
		if !shownAs(got.Eps0[m.Name], m.Eps0, 5e-3) {
			t.Errorf("%s: the plan panel shows eps0 %q, the plan says %g", m.Name, got.Eps0[m.Name], m.Eps0)
		}
	}
	var horizon *collector.HorizonGuarantee
	for _, pm := range got.Metrics {
		var d collector.MetricDetail
		getJSON(t, url+"/v1/metrics/"+pm.Name, &d)
		if d.Horizon != nil && horizon == nil {
			horizon = d.Horizon
		}
		latest := latestPeriod(d)
		if latest == nil {
			t.Errorf("%s: no period with data in the API", pm.Name)
			continue
		}
		if len(pm.Rows) != len(latest.Estimates) {
			t.Errorf("%s: the page shows %d estimates, the API has %d", pm.Name, len(pm.Rows), len(latest.Estimates))
			continue
		}
		categorical := pub.Metric(pm.Name).Categories != nil
		if categorical && (len(pm.Bars) != len(latest.Estimates) || pm.ErrorBars != len(latest.Estimates)) {
			t.Errorf("%s: %d bars and %d error bars for %d categories", pm.Name, len(pm.Bars), pm.ErrorBars, len(latest.Estimates))
		}
		for i, e := range latest.Estimates {
			row := pm.Rows[i]
			if row[0] != e.Label || !shownAs(row[1], e.Value, shownRel) || !shownAs(row[2], e.Lo, shownRel) || !shownAs(row[3], e.Hi, shownRel) {
				t.Errorf("%s: the page shows %v, the API %s %g [%g, %g]", pm.Name, row, e.Label, e.Value, e.Lo, e.Hi)
			}
			if categorical && i < len(pm.Bars) && (pm.Bars[i].Label != e.Label || pm.Bars[i].Value != e.Value) {
				t.Errorf("%s: bar %d is %+v, the API's estimate %s = %g", pm.Name, i, pm.Bars[i], e.Label, e.Value)
			}
		}
		periods := withData(d)
		if len(pm.Counts) != len(periods) {
			t.Errorf("%s: %d count bars for %d periods", pm.Name, len(pm.Counts), len(periods))
		} else {
			for i, pe := range periods {
				if pm.Counts[i].Value != float64(pe.N) {
					t.Errorf("%s: period %d shows n = %g, the API %d", pm.Name, i, pm.Counts[i].Value, pe.N)
				}
			}
		}
		if want := fmt.Sprintf("n_min %d", p.NMin); pm.NMinLine != want {
			t.Errorf("%s: the counts' reference line says %q, want %q", pm.Name, pm.NMinLine, want)
		}
		if len(pm.Series) == 0 || len(pm.Series) != len(pm.Checked) {
			t.Errorf("%s: %d series drawn for %d boxes ticked", pm.Name, len(pm.Series), len(pm.Checked))
		}
		if pm.EpsDots != len(periods) {
			t.Errorf("%s: %d points of eps per period for %d periods", pm.Name, pm.EpsDots, len(periods))
		}
	}
	if horizon == nil || horizon.Eps == nil {
		t.Error("the API has no horizon guarantee to compare")
	} else if !strings.HasPrefix(got.Horizon, "ε = ") || !shownAs(strings.TrimPrefix(got.Horizon, "ε = "), *horizon.Eps, 5e-3) {
		t.Errorf("the page shows the horizon as %q, the API's eps is %g", got.Horizon, *horizon.Eps)
	}

	// Ticking an unticked category draws one more series.
	screen := p.Metrics[0].Name
	var before, after int
	count := fmt.Sprintf(`document.querySelectorAll('section.metric[data-metric=%q] .series-panel svg g.series-group').length`, screen)
	if err := page.Eval(ctx, count, &before); err != nil {
		t.Fatal(err)
	}
	click := fmt.Sprintf(`(() => { const cb = document.querySelector('section.metric[data-metric=%q] .series-panel input:not(:checked)'); if (!cb) return false; cb.click(); return true; })()`, screen)
	var clicked bool
	if err := page.Eval(ctx, click, &clicked); err != nil {
		t.Fatal(err)
	}
	if err := page.Eval(ctx, count, &after); err != nil {
		t.Fatal(err)
	}
	if !clicked || after != before+1 {
		t.Errorf("%s: ticking a category (found one: %v) took the series from %d to %d", screen, clicked, before, after)
	}

	if err := os.MkdirAll("../../demo-out", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := page.Screenshot(ctx, "../../demo-out/dashboard-test.png"); err != nil {
		t.Error(err)
	}
	if probs := page.Problems(); len(probs) > 0 {
		t.Errorf("the page logged %d problem(s):\n%s", len(probs), strings.Join(probs, "\n"))
	}
}

// shownAs reports whether the text s, a number as the page shows it, is v
// within relative tolerance rel (absolute rel for v = 0).
func shownAs(s string, v, rel float64) bool {
	f, err := strconv.ParseFloat(strings.ReplaceAll(strings.TrimSpace(s), "−", "-"), 64)
	if err != nil {
		return false
	}
	return math.Abs(f-v) <= rel*math.Max(math.Abs(v), 1e-12)
}

// withData returns the periods of d as the page draws them: one per start,
// the one with more reports, oldest first (d's are ordered by epoch, then
// period).
func withData(d collector.MetricDetail) []collector.PeriodEstimate {
	var out []collector.PeriodEstimate
	at := map[string]int{}
	for _, p := range d.Periods {
		k := p.Start.UTC().Format(time.RFC3339)
		if i, ok := at[k]; ok {
			if p.N > out[i].N {
				out[i] = p
			}
			continue
		}
		at[k] = len(out)
		out = append(out, p)
	}
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && out[j].Start.Before(out[j-1].Start); j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out
}

func latestPeriod(d collector.MetricDetail) *collector.PeriodEstimate {
	ps := withData(d)
	if len(ps) == 0 {
		return nil
	}
	return &ps[len(ps)-1]
}

func getJSON(t *testing.T, url string, v any) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", url, resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
}
