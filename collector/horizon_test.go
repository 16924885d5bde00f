package collector

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/blanket-dp/blanket/accountant"
	"github.com/blanket-dp/blanket/sdk/plan"
	"github.com/blanket-dp/blanket/sdk/plan/accounting"
	"github.com/blanket-dp/blanket/sdk/report"
)

// windowLoad is, per (epoch, pool), the periods a window holds and their
// smallest batch rounded as composeParts rounds it: computed here apart
// from horizonWindows, to check its claims.
type windowLoad map[[2]string][2]int64

func loadOf(parts []horizonPart, start, end int64) windowLoad {
	m := windowLoad{}
	for _, q := range parts {
		if q.period.Start >= end || q.period.End() <= start {
			continue
		}
		k := [2]string{q.epoch, q.pool}
		v, ok := m[k]
		if !ok || q.n < v[1] {
			v[1] = q.n
		}
		v[0]++
		m[k] = v
	}
	for k, v := range m {
		m[k] = [2]int64{v[0], roundDown2(v[1])}
	}
	return m
}

// covers reports whether a's composition bounds b's: a holds at least b's
// periods of every (epoch, pool) of b, at batches no larger.
func (a windowLoad) covers(b windowLoad) bool {
	for k, vb := range b {
		va, ok := a[k]
		if !ok || va[0] < vb[0] || va[1] > vb[1] {
			return false
		}
	}
	return true
}

// TestHorizonWindowsCover checks horizonWindows against every window of
// the current plan's periods, by brute force: for random histories of
// periods of several lengths (epochs whose plans had 1 h, 24 h or 48 h
// periods), every window is covered by one the collector composes. The
// first history is the review's case: a 48 h period, then 24 h ones, where
// the weakest window starts in the middle of the 48 h period.
func TestHorizonWindowsCover(t *testing.T) {
	const l = 86400
	d0 := time.Date(2026, 11, 2, 0, 0, 0, 0, time.UTC).Unix() // a multiple of 48 h
	histories := [][]horizonPart{{
		{period: report.Period{Start: d0, Length: 2 * l}, epoch: "a", pool: "m", n: 150},
		{period: report.Period{Start: d0 + 2*l, Length: l}, epoch: "b", pool: "m", n: 1000},
		{period: report.Period{Start: d0 + 3*l, Length: l}, epoch: "b", pool: "m", n: 1000},
	}}
	r := rand.New(rand.NewPCG(1, 2))
	for range 200 {
		var parts []horizonPart
		at := d0
		for range 2 + r.IntN(12) {
			length := []int64{3600, l, 2 * l}[r.IntN(3)]
			at = (at + length - 1) / length * length // aligned to its length
			at += int64(r.IntN(3)) * length          // gaps without data
			for _, pool := range []string{"m", "k"}[:1+r.IntN(2)] {
				parts = append(parts, horizonPart{period: report.Period{Start: at, Length: length}, epoch: fmt.Sprint(length), pool: pool, n: 50 + r.Int64N(5000)})
			}
			at += length
		}
		histories = append(histories, parts)
	}
	for i, parts := range histories {
		slices.SortStableFunc(parts, func(a, b horizonPart) int { return int(a.period.Start - b.period.Start) })
		for _, h := range []int64{1, 2, 3, 7} {
			ws := horizonWindows(parts, l, h)
			var loads []windowLoad
			for _, w := range ws {
				if w.start%l != 0 || w.end != w.start+h*l {
					t.Fatalf("history %d, h %d: window [%d, %d) not of the periods", i, h, w.start, w.end)
				}
				loads = append(loads, loadOf(parts, w.start, w.end))
			}
			first, last := parts[0].period.Start, parts[len(parts)-1].period.End()
			for s := (first/l - h) * l; s <= last; s += l {
				want := loadOf(parts, s, s+h*l)
				if len(want) == 0 {
					continue
				}
				if !slices.ContainsFunc(loads, func(a windowLoad) bool { return a.covers(want) }) {
					t.Fatalf("history %d, h %d: the window from %d (%v) is covered by none of %d windows composed", i, h, s, want, len(ws))
				}
			}
			if i == 0 && h == 2 && len(ws) != 2 {
				t.Errorf("review history: %d windows composed, want 2 (48 h period with the first day, and the two days)", len(ws))
			}
		}
	}
}

// TestCollectorHorizonAcrossPlans: a plan of 48 h periods, then one of
// 24 h periods (each a plan epoch). The weakest 2-day window holds the
// second half of the 48 h period (a small batch) and the first day after
// it; the horizon finds it, and its eps is at least the accountant's
// composition of those two reports at their own batch sizes and plans.
func TestCollectorHorizonAcrossPlans(t *testing.T) {
	ctx := context.Background()
	pa := testPlan(t, 100)
	pa.Period, pa.Horizon = "48h", 2
	f := newCollectorFixture(t, pa)
	planA, pub := f.c.Plan(), f.c.PublicKey()
	const l = 86400
	long := report.Period{Start: day(0).Start / (2 * l) * (2 * l), Length: 2 * l}
	code, res := f.postBatch(t, batchBody(report.PeriodPoolKey(metric, planA.Epoch(), long), sealKRRIn(t, planA, metric, pub, krrValues(150, 1), 1, long)))
	if code != http.StatusOK || res.N != 150 {
		t.Fatalf("48 h batch: %d %+v", code, res)
	}
	f.p = testPlan(t, 100)
	f.p.Horizon = 2
	f.restart(t)
	planB := f.c.Plan()
	for i := range int64(2) {
		d := report.Period{Start: long.End() + i*l, Length: l}
		if code, res := f.postBatch(t, batchBody(report.PeriodPoolKey(metric, planB.Epoch(), d), sealKRRIn(t, planB, metric, pub, krrValues(500, 2+uint64(i)), 2+uint64(i), d))); code != http.StatusOK || res.N != 500 {
			t.Fatalf("day %d: %d %+v", i, code, res)
		}
	}
	h := f.metric(t, metric).Horizon
	if h == nil || h.Eps == nil || h.Window == nil || h.Reports != 2 || !h.Window.Start.Equal(time.Unix(long.Start+l, 0)) {
		t.Fatalf("horizon %+v, want the window from the second day of the 48 h period", h)
	}
	mechA, eps0A, _, err := accounting.BatchMechanism(ctx, planA, openBuiltin, metric)
	if err != nil {
		t.Fatal(err)
	}
	mechB, eps0B, _, err := accounting.BatchMechanism(ctx, planB, openBuiltin, metric)
	if err != nil {
		t.Fatal(err)
	}
	c, err := accountant.NewComposition(accountant.Part{Mech: mechA, Eps0: eps0A, N: 150, Rounds: 1}, accountant.Part{Mech: mechB, Eps0: eps0B, N: 500, Rounds: 1})
	if err != nil {
		t.Fatal(err)
	}
	want, err := c.Epsilon(planB.Target.Delta)
	if err != nil {
		t.Fatal(err)
	}
	if *h.Eps < want.Upper*(1-1e-12) || *h.Eps > 1.5*want.Upper {
		t.Errorf("horizon eps %v, want in [%v, 1.5 x that] (the two reports composed at their batch sizes)", *h.Eps, want.Upper)
	}
}

// insertBatch stores a batch row as the collector does, for the horizon to
// compose (its statistics are not needed there).
func insertBatch(t *testing.T, f *collectorFixture, metric, epoch string, period report.Period, n, messages int64) {
	t.Helper()
	id := report.NewID()
	if _, err := rawExec(t, f.c, `INSERT INTO batches (id, metric, epoch, n, malformed, messages, period_start, period_len) VALUES (?, ?, ?, ?, 0, ?, ?, ?)`,
		id[:], metric, epoch, n, messages, period.Start, period.Length); err != nil {
		t.Fatal(err)
	}
}

// TestCollectorHorizonMetrics: with separate travel a user's window holds
// one report per metric per period; with joint travel one message per
// period, whatever the number of metrics. The horizon's eps is at least
// the accountant's composition of exactly those reports, at their batch
// sizes.
func TestCollectorHorizonMetrics(t *testing.T) {
	ctx := context.Background()
	for _, travel := range []string{"separate", "joint"} {
		t.Run(travel, func(t *testing.T) {
			p := testPlan(t, 100)
			p.Travel, p.Horizon = travel, 2
			f := newCollectorFixture(t, p)
			pub := f.c.Plan()
			ep := pub.Epoch()
			// One real batch gives the metric its statistics; the others
			// are stored rows.
			if travel == "separate" {
				if code, res := f.postBatch(t, batchBody(report.PeriodPoolKey(metric, ep, day(0)), sealKRRIn(t, pub, metric, f.c.PublicKey(), krrValues(120, 1), 1, day(0)))); code != http.StatusOK || res.N != 120 {
					t.Fatalf("batch: %d %+v", code, res)
				}
				insertBatch(t, f, metric, ep, day(1), 120, 120)
				insertBatch(t, f, "net/latency_ms", ep, day(0), 150, 150)
				insertBatch(t, f, "net/latency_ms", ep, day(1), 150, 150)
			} else {
				pf := &pooledFixture{collectorFixture: f, pub: pub}
				g := newPooledFixtureWith(t, "joint", 100, func(q *plan.Plan) { q.Horizon = 2 }) // its plugins
				pf.krr, pf.sum = g.krr, g.sum
				bs := pub.Bindings()
				for i := range bs {
					bs[i].Period = day(0)
				}
				b := report.PoolBinding(pub.Pool(""), pub.Travel, bs)
				var sealed [][]byte
				for i, s := range krrValues(120, 1) {
					a, c := pf.randomize(t, s, float64(i))
					sealed = append(sealed, mustSeal(t, f.c.PublicKey(), b, report.EncodeMessage([]report.Part{{Metric: 0, Report: a}, {Metric: 1, Report: c}})))
				}
				if code, res := f.postBatch(t, batchBody(report.PeriodPoolKey(pub.Pool(""), ep, day(0)), sealed)); code != http.StatusOK || res.N != 120 {
					t.Fatalf("joint batch: %d %+v", code, res)
				}
				insertBatch(t, f, metric, ep, day(1), 120, 120)
				insertBatch(t, f, "net/latency_ms", ep, day(1), 120, 120)
			}
			h := f.metric(t, metric).Horizon
			var parts []accountant.Part
			if travel == "separate" {
				for _, m := range []struct {
					name string
					n    int
				}{{metric, 120}, {"net/latency_ms", 150}} {
					mech, eps0, _, err := accounting.BatchMechanism(ctx, pub, openBuiltin, m.name)
					if err != nil {
						t.Fatal(err)
					}
					parts = append(parts, accountant.Part{Mech: mech, Eps0: eps0, N: m.n, Rounds: 2})
				}
			} else {
				mech, eps0, _, err := accounting.BatchMechanism(ctx, pub, openBuiltin, metric)
				if err != nil {
					t.Fatal(err)
				}
				parts = append(parts, accountant.Part{Mech: mech, Eps0: eps0, N: 120, Rounds: 2})
			}
			wantReports := map[string]int{"separate": 4, "joint": 2}[travel]
			if h == nil || h.Eps == nil || h.Reports != wantReports {
				t.Fatalf("horizon %+v, want %d reports composed", h, wantReports)
			}
			c, err := accountant.NewComposition(parts...)
			if err != nil {
				t.Fatal(err)
			}
			want, err := c.Epsilon(pub.Target.Delta)
			if err != nil {
				t.Fatal(err)
			}
			if *h.Eps < want.Upper*(1-1e-12) || *h.Eps > 1.5*want.Upper {
				t.Errorf("horizon eps %v, want in [%v, 1.5 x that]", *h.Eps, want.Upper)
			}
		})
	}
}
