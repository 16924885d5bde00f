package collector

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"testing"

	"github.com/blanket-dp/blanket/admission"
	"github.com/blanket-dp/blanket/internal/servertest"
)

// TestScopeInAPI checks that GET /v1/metrics and GET /v1/metrics/{name}
// say against whom their guarantees hold, that a collector inside
// blanket serve (SameOperator) says that against its operator only each
// report's local eps0 holds, and that the scope says what keeps fake
// reports out as ShufflerAdmission declares it: nothing, unless the
// shufflers take only envelopes with admission tokens.
func TestScopeInAPI(t *testing.T) {
	p := testPlan(t, 10)
	f := newCollectorFixture(t, p)
	honest := scopeHonest
	admits := admission.AdmissionOpen
	check := func(name string, s Scope, same bool) {
		t.Helper()
		if s.Against != scopeAgainst || s.LocalOnly != scopeLocalOnly || s.Doc != "docs/threat-model.md" {
			t.Errorf("%s: scope %+v", name, s)
		}
		if s.SameOperator != same || slices.Contains(s.Provided, scopeSameOp) != same {
			t.Errorf("%s: same operator %v, provided %q; want %v", name, s.SameOperator, s.Provided, same)
		}
		// Open: the scope must say that nothing keeps fake reports
		// out; tokens: what they do, and not the warning.
		tokens := admits == admission.AdmissionTokens
		if s.Admission != admits || slices.Contains(s.Provided, scopeNoAdmit) == tokens || slices.Contains(s.Provided, scopeTokens) != tokens ||
			!slices.Contains(s.Provided, scopeShuffler) || !slices.Contains(s.Provided, honest) {
			t.Errorf("%s: admission %q, provided %q", name, s.Admission, s.Provided)
		}
	}
	var list MetricList
	getJSON(t, f.srv.URL+"/v1/metrics", &list)
	check("list", list.Scope, false)
	var d MetricDetail
	getJSON(t, f.srv.URL+"/v1/metrics/"+url.PathEscape(metric), &d)
	check("detail", d.Scope, false)

	// What blanket serve opens, with admission on and off; the plan
	// route says which in the Blanket-Admission header.
	for _, admits = range []string{admission.AdmissionTokens, admission.AdmissionOpen} {
		dir := t.TempDir()
		c, err := OpenCollector(context.Background(), CollectorOptions{Plan: p, Dir: dir, Store: servertest.Store(t, dir), Open: openBuiltin, Token: testToken, Logger: testLogger(t), SameOperator: true, ShufflerAdmission: admits})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		mux := http.NewServeMux()
		c.Register(mux)
		srv := newServer(t, mux)
		getJSON(t, srv.URL+"/v1/metrics", &list)
		check("list, same operator, "+admits, list.Scope, true)
		getJSON(t, srv.URL+"/v1/metrics/"+url.PathEscape(metric), &d)
		check("detail, same operator, "+admits, d.Scope, true)
		resp, err := http.Get(srv.URL + "/v1/plan")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if got := resp.Header.Get(admission.AdmissionHeader); got != admits {
			t.Errorf("GET /v1/plan of a collector of %s shufflers: %s %q", admits, admission.AdmissionHeader, got)
		}
	}
	admits = admission.AdmissionOpen
	if _, err := OpenCollector(context.Background(), CollectorOptions{Plan: p, Dir: t.TempDir(), Open: openBuiltin, ShufflerAdmission: "none"}); !errors.Is(err, ErrOptions) {
		t.Errorf("ShufflerAdmission none: %v, want ErrOptions", err)
	}

	// Under a max_fake_fraction the scope states the honest floor
	// instead of an all-honest batch.
	pf := testPlan(t, 10)
	pf.MaxFakeFraction = 0.1
	ff := newCollectorFixture(t, pf)
	honest = "at most a fraction 0.1 of each batch's valid reports is fake (the plan's max_fake_fraction), and the rest come from honest devices running the plan's randomizer: every guarantee counts only that honest floor"
	getJSON(t, ff.srv.URL+"/v1/metrics", &list)
	check("list, max_fake_fraction 0.1", list.Scope, false)
}
