package collector

import (
	"context"
	"net/http"
	"net/url"
	"slices"
	"testing"

	"github.com/blanket-dp/blanket/internal/servertest"
)

// TestScopeInAPI checks that GET /v1/metrics and GET /v1/metrics/{name}
// say against whom their guarantees hold, and that a collector inside
// blanket serve (SameOperator) says that against its operator only each
// report's local eps0 holds.
func TestScopeInAPI(t *testing.T) {
	p := testPlan(t, 10)
	f := newCollectorFixture(t, p)
	honest := scopeHonest
	check := func(name string, s Scope, same bool) {
		t.Helper()
		if s.Against != scopeAgainst || s.LocalOnly != scopeLocalOnly || s.Doc != "docs/threat-model.md" {
			t.Errorf("%s: scope %+v", name, s)
		}
		if s.SameOperator != same || slices.Contains(s.Provided, scopeSameOp) != same {
			t.Errorf("%s: same operator %v, provided %q; want %v", name, s.SameOperator, s.Provided, same)
		}
		// No admission yet: the scope must say that nothing keeps fake
		// reports out.
		if s.Admission != admissionNone || !slices.Contains(s.Provided, scopeNoAdmit) || !slices.Contains(s.Provided, scopeShuffler) || !slices.Contains(s.Provided, honest) {
			t.Errorf("%s: admission %q, provided %q", name, s.Admission, s.Provided)
		}
	}
	var list MetricList
	getJSON(t, f.srv.URL+"/v1/metrics", &list)
	check("list", list.Scope, false)
	var d MetricDetail
	getJSON(t, f.srv.URL+"/v1/metrics/"+url.PathEscape(metric), &d)
	check("detail", d.Scope, false)

	dir := t.TempDir()
	c, err := OpenCollector(context.Background(), CollectorOptions{Plan: p, Dir: dir, Store: servertest.Store(t, dir), Open: openBuiltin, Token: testToken, Logger: testLogger(t), SameOperator: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	mux := http.NewServeMux()
	c.Register(mux)
	srv := newServer(t, mux)
	getJSON(t, srv.URL+"/v1/metrics", &list)
	check("list, same operator", list.Scope, true)
	getJSON(t, srv.URL+"/v1/metrics/"+url.PathEscape(metric), &d)
	check("detail, same operator", d.Scope, true)

	// Under a max_fake_fraction the scope states the honest floor
	// instead of an all-honest batch.
	pf := testPlan(t, 10)
	pf.MaxFakeFraction = 0.1
	ff := newCollectorFixture(t, pf)
	honest = "at most a fraction 0.1 of each batch's valid reports is fake (the plan's max_fake_fraction), and the rest come from honest devices running the plan's randomizer: every guarantee counts only that honest floor"
	getJSON(t, ff.srv.URL+"/v1/metrics", &list)
	check("list, max_fake_fraction 0.1", list.Scope, false)
}
