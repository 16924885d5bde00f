package collector

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/blanket-dp/blanket/accountant"
	"github.com/blanket-dp/blanket/sdk/plan/accounting"
	"github.com/blanket-dp/blanket/sdk/report"
)

// TestCollectorPeriods: batches of different periods are estimated apart,
// with the period's span and its weakest batch; a report sealed for one
// period does not open in another period's batch; a batch of a period
// length the plan does not have is all malformed; ?from= and ?to= filter; and
// the horizon guarantee is the accountant's composition of each period's
// smallest batch over the weakest window.
func TestCollectorPeriods(t *testing.T) {
	p := testPlan(t, 100)
	p.Horizon = 2
	f := newCollectorFixture(t, p)
	pub, ep := f.c.PublicKey(), f.c.Plan().Epoch()
	key := func(d report.Period) string { return report.PeriodPoolKey(metric, ep, d) }
	post := func(k string, sealed [][]byte) IngestResult {
		t.Helper()
		code, res := f.postBatch(t, batchBody(k, sealed))
		if code != http.StatusOK {
			t.Fatalf("batch of %s: status %d", k, code)
		}
		return res
	}
	if res := post(key(day(0)), sealKRRIn(t, f.c.Plan(), metric, pub, krrValues(300, 1), 1, day(0))); res.N != 300 || res.Period == nil || !res.Period.Start.Equal(time.Unix(day(0).Start, 0)) {
		t.Fatalf("day 0: %+v", res)
	}
	post(key(day(1)), sealKRRIn(t, f.c.Plan(), metric, pub, krrValues(200, 2), 2, day(1)))
	post(key(day(1)), sealKRRIn(t, f.c.Plan(), metric, pub, krrValues(150, 3), 3, day(1)))
	// Day 0's reports replayed in a batch of day 2: none opens.
	if res := post(key(day(2)), sealKRRIn(t, f.c.Plan(), metric, pub, krrValues(120, 4), 4, day(0))); res.N != 0 || res.Malformed != 120 {
		t.Fatalf("replayed into another period: %+v", res)
	}
	// A period of another length than the plan's 24h: no report of it
	// can open (the epoch's SDKs never seal for it), so it is
	// acknowledged once, all malformed, rather than refused for ever.
	hour := report.Period{Start: day(3).Start, Length: 3600}
	if code, res := f.postBatch(t, batchBody(key(hour), sealKRRIn(t, f.c.Plan(), metric, pub, krrValues(100, 5), 5, hour))); code != http.StatusOK || res.N != 0 || res.Malformed != 100 {
		t.Errorf("an hour-long period: status %d %+v, want 200 with every report malformed", code, res)
	}
	if code, _ := f.postBatch(t, batchBody(metric+"#"+ep+"#1+0", fakeSealed(100))); code != http.StatusBadRequest {
		t.Errorf("a malformed period tag: status %d, want %d", code, http.StatusBadRequest)
	}

	d := f.metric(t, metric)
	// Day 2 has a row of its own (all malformed, no estimate needed).
	if len(d.Periods) != 3 {
		t.Fatalf("periods: %+v", d.Periods)
	}
	p0, p1 := d.Periods[0], d.Periods[1]
	if !p0.Start.Equal(time.Unix(day(0).Start, 0)) || !p0.End.Equal(time.Unix(day(0).End(), 0)) || p0.N != 300 || p0.Batches != 1 {
		t.Errorf("day 0: %+v", p0)
	}
	if !p1.Start.Equal(time.Unix(day(1).Start, 0)) || p1.N != 350 || p1.Batches != 2 || p1.Guarantee == nil || p1.Guarantee.N != 150 || len(p1.Estimates) == 0 {
		t.Errorf("day 1: %+v", p1)
	}

	var filtered MetricDetail
	from := time.Unix(day(1).Start, 0).UTC().Format(time.RFC3339)
	to := time.Unix(day(2).Start, 0).UTC().Format(time.RFC3339)
	if code := getJSON(t, f.srv.URL+"/v1/metrics/"+metric+"?from="+from+"&to="+to, &filtered); code != http.StatusOK || len(filtered.Periods) != 1 || filtered.Periods[0].N != 350 {
		t.Errorf("from day 1 to day 2: %d %+v", code, filtered.Periods)
	}
	for _, q := range []string{"?from=yesterday", "?to=2026-11-02", "?from=" + to + "&to=" + from} {
		if code := getJSON(t, f.srv.URL+"/v1/metrics/"+metric+q, nil); code != http.StatusBadRequest {
			t.Errorf("%s: status %d, want 400", q, code)
		}
	}

	// The horizon: windows of 2 days; the weakest is days 0-1 with
	// batches of 300 and 150 (day 1's smaller one, not 200); days 1-2
	// hold only day 1 (day 2 has no valid report).
	h := d.Horizon
	if h == nil || h.Eps == nil || h.Periods != 2 || h.Reports != 2 || h.Window == nil || !h.Window.Start.Equal(time.Unix(day(0).Start, 0)) {
		t.Fatalf("horizon %+v", h)
	}
	mech, eps0, _, err := accounting.BatchMechanism(context.Background(), f.c.Plan(), openBuiltin, metric)
	if err != nil {
		t.Fatal(err)
	}
	// Independently: the two days at their own smallest batches (300 and
	// 150). The horizon may only be weaker (it composes both at 150), and
	// not much: at most the composition of two reports at 150 each.
	c, err := accountant.NewComposition(accountant.Part{Mech: mech, Eps0: eps0, N: 300, Rounds: 1}, accountant.Part{Mech: mech, Eps0: eps0, N: 150, Rounds: 1})
	if err != nil {
		t.Fatal(err)
	}
	own, err := c.Epsilon(p.Target.Delta)
	if err != nil {
		t.Fatal(err)
	}
	if *h.Eps < own.Upper*(1-1e-12) || *h.Eps > 1.5*own.Upper || h.Delta != p.Target.Delta {
		t.Errorf("horizon (%v, %v), want eps in [%v, 1.5 x that] (the composition at each day's own smallest batch) at delta %v", *h.Eps, h.Delta, own.Upper, p.Target.Delta)
	}
	// A stored batch with valid reports but no message counted fully
	// valid (a pooled batch's refused parts are subtracted from its
	// messages, a lower bound that may reach 0) may still hold an honest
	// user's report: the horizon composes it at one message, so the window
	// of day 5 alone is at least as weak as one report at n = 1.
	if _, err := rawExec(t, f.c, `INSERT INTO batches (id, metric, epoch, n, malformed, messages, period_start, period_len) VALUES (?, ?, ?, 5, 0, 0, ?, ?)`,
		[]byte("0123456789abcdef"), metric, ep, day(5).Start, day(5).Length); err != nil {
		t.Fatal(err)
	}
	alone, err := accountant.Epsilon(mech, eps0, 1, p.Target.Delta)
	if err != nil {
		t.Fatal(err)
	}
	if d2 := f.metric(t, metric); d2.Horizon == nil || d2.Horizon.Eps == nil || *d2.Horizon.Eps < alone.Lower || *d2.Horizon.Eps <= *h.Eps ||
		d2.Horizon.Window == nil || !d2.Horizon.Window.Start.Equal(time.Unix(day(5).Start, 0)) {
		t.Errorf("horizon with a batch of no message counted valid: %+v, want eps >= %v (one report at n = 1) in the window of day 5", d2.Horizon, alone.Lower)
	}
	// A period tag needs an epoch tag.
	if code, _ := f.postBatch(t, batchBody(metric+"##"+day(4).String(), fakeSealed(100))); code != http.StatusUnprocessableEntity {
		t.Errorf("a period without an epoch: status %d, want 422", code)
	}
	// One period alone is weaker than none and stronger than both.
	one, err := accountant.Epsilon(mech, eps0, 150, p.Target.Delta)
	if err != nil {
		t.Fatal(err)
	}
	if !(one.Upper < *h.Eps) {
		t.Errorf("day 1 alone %v not below the two-day window %v", one.Upper, *h.Eps)
	}
}
