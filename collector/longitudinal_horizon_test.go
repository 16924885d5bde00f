package collector

import (
	"context"
	"math"
	"testing"

	"github.com/blanket-dp/blanket/accountant"
	"github.com/blanket-dp/blanket/sdk/plan"
	"github.com/blanket-dp/blanket/sdk/plan/accounting"
	"github.com/blanket-dp/blanket/sdk/report"
)

// Second review of the collector's accounting of a longitudinal tree
// protocol (guarantee.go, horizon.go composeParts and horizonWindows).
//
// A tree protocol's (epoch, pool) is charged, in a window, the node pairs
// of the trees that can hold a report the window's data changes: two per
// tree, at most one per period with data from the window's first period to
// the end of the last tree it meets (accountant/longitudinal.go, proof
// point 3; issue 22). The charge depends on how the periods with data are
// spread over trees, not only on their number: a window with fewer
// periods spread over more trees can leak more reports than a window with
// more periods inside one tree, and horizonWindows must not skip it as
// dominated. (The review first found this with the count of issue 13,
// min(2T, span, reports) over the window's own periods; the tests below
// pin the count of issue 22.)

const reviewTree = 8

// reviewLongPlan returns the test plan with one longitudinal metric (trees
// of reviewTree periods) at eps0 = 1 set by hand, and a horizon of h
// periods of a day.
func reviewLongPlan(t *testing.T, h int) *plan.Plan {
	t.Helper()
	p := testPlan(t, 1000)
	p.Horizon = h
	p.Metrics = []plan.Metric{{Name: "ui/dark", Plugin: "longitudinal", Params: map[string]string{"tree": "8", "changes": "2"}}}
	r, err := openBuiltin(context.Background(), "longitudinal", p.Metrics[0].Config())
	if err != nil {
		t.Fatal(err)
	}
	d, _ := r.Describe(context.Background())
	p.Metrics[0].Version, p.Metrics[0].Eps0, p.Metrics[0].Delta = d.Version, 1, p.Target.Delta
	return p
}

// reviewDays returns the periods (days) with the given indices counted
// from a day index that is a multiple of the tree (a tree boundary).
func reviewDays(idx ...int64) []report.Period {
	const l = 86400
	d0 := (day(0).Start/l + 64) / 64 * 64 // a multiple of 64 days
	out := make([]report.Period, len(idx))
	for i, x := range idx {
		out[i] = report.Period{Start: (d0 + x) * l, Length: l}
	}
	return out
}

// reviewLeakRounds is the rounds of node pairs a tree protocol's (epoch,
// pool) is charged in the window [s, e) of a history of its periods with
// data, counted here apart from horizon.go: min(2 trees, reports), over
// the periods from the window's first to the end of the last tree it
// meets.
func reviewLeakRounds(periods []report.Period, s, e int64) int {
	trees, reports := map[int64]bool{}, 0
	for _, p := range periods {
		i, first, last := p.Start/p.Length, s/p.Length, (e-1)/p.Length
		if i >= first && i < (last/reviewTree+1)*reviewTree {
			trees[i/reviewTree] = true
			reports++
		}
	}
	return min(2*len(trees), reports)
}

// reviewHistory: window A holds days 0..4 of one tree (5 periods: 2
// rounds can leak, one tree); window B holds days 30, 31 (end of a tree),
// 32, 33 (start of the next) and 40 (a third tree): 5 periods over 3
// trees, 5 rounds can leak (a leaf-level user whose changes fall at days
// 30 vs 31, 32 vs 33, and 40 vs none). Both hold 5 periods at the same
// batch: a dominance that compared only periods and batches would keep
// only the earlier, A.
func reviewHistory() (parts []horizonPart, a, b []report.Period) {
	a = reviewDays(0, 1, 2, 3, 4)
	b = reviewDays(30, 31, 32, 33, 40)
	for _, p := range append(append([]report.Period(nil), a...), b...) {
		parts = append(parts, horizonPart{period: p, epoch: "e", pool: "ui/dark", n: 1000, tree: reviewTree})
	}
	return parts, a, b
}

// TestHorizonWindowsTreeSpread: every window's tree-protocol charge
// must be covered by a window the collector composes (B's 5 rounds, not
// only A's 2).
func TestHorizonWindowsTreeSpread(t *testing.T) {
	const l, h = 86400, 16
	parts, a, b := reviewHistory()
	if ra, rb := reviewLeakRounds(a, a[0].Start, a[0].Start+h*l), reviewLeakRounds(b, b[0].Start, b[0].Start+h*l); ra != 2 || rb != 5 {
		t.Fatalf("charges %d and %d, want 2 and 5", ra, rb)
	}
	var all []report.Period
	for _, q := range parts {
		all = append(all, q.period)
	}
	ws := horizonWindows(parts, l, h)
	composed := 0
	for _, w := range ws {
		composed = max(composed, reviewLeakRounds(all, w.start, w.end))
	}
	most := 0
	first, last := parts[0].period.Start, parts[len(parts)-1].period.End()
	for s := first - h*l; s <= last; s += l {
		most = max(most, reviewLeakRounds(all, s, s+h*l))
	}
	if composed < most {
		t.Errorf("the windows composed charge at most %d rounds of the tree protocol's node pairs; a window of the history is charged %d (%d windows composed)", composed, most, len(ws))
	}
}

// TestHorizonGuaranteeTreeSpread: end to end, the horizon guarantee
// stated for the history of reviewHistory is at least composeParts' own
// bound for window B (16 days from day 30), what is proven for a window
// of the horizon.
func TestHorizonGuaranteeTreeSpread(t *testing.T) {
	ctx := context.Background()
	p := reviewLongPlan(t, 16)
	f := newCollectorFixture(t, p)
	ep := f.c.Plan().Epoch()
	parts, _, b := reviewHistory()
	for i, q := range parts {
		insertBatch(t, f, "ui/dark", ep, q.period, q.n, q.n)
		parts[i].epoch = ep
	}
	h, err := f.c.horizonGuarantee(ctx, []statRow{{}})
	if err != nil {
		t.Fatal(err)
	}
	if h == nil || h.Eps == nil {
		t.Fatalf("horizon %+v", h)
	}
	epsB, err := f.c.composeParts(ctx, chargedWindow(parts, b[0].Start, b[0].Start+16*86400).loads, p.Target.Delta, false)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("stated %.4f over the window from %v (%d reports); window B's bound %.4f", *h.Eps, h.Window.Start, h.Reports, epsB)
	if *h.Eps < epsB*(1-1e-12) {
		t.Errorf("horizon eps %.5f stated, but window B (days 30..40, 5 reports over 3 trees) is only proven at %.5f", *h.Eps, epsB)
	}
}

// TestComposePartsLongitudinal checks composeParts' wiring for a
// tree protocol against the accountant directly: window B, 16 days from
// day 30 of reviewHistory, reaches days 30..47 (to the end of the tree of
// day 40): 5 periods with data in 3 trees, its part
// accountant.LongitudinalPart over 3 trees and 5 reports with 5% of delta
// for the tail (5 rounds: min(2 x 3, 5)), the composition at delta minus
// the tail; and a batch's guarantee (computeGuarantee) is
// LongitudinalEpsilon over one period.
func TestComposePartsLongitudinal(t *testing.T) {
	ctx := context.Background()
	p := reviewLongPlan(t, 16)
	f := newCollectorFixture(t, p)
	pub := f.c.Plan()
	ep := pub.Epoch()
	parts, _, b := reviewHistory()
	for i := range parts {
		parts[i].epoch = ep
	}
	loads := chargedWindow(parts, b[0].Start, b[0].Start+16*86400).loads
	if ld := loads[poolKey{ep, "ui/dark"}]; len(loads) != 1 || ld.trees != 3 || ld.reports != 5 || ld.n != 1000 {
		t.Fatalf("window B's loads %+v, want 3 trees, 5 reports at 1000", loads)
	}
	got, err := f.c.composeParts(ctx, loads, p.Target.Delta, false)
	if err != nil {
		t.Fatal(err)
	}
	mech, eps0, delta, err := accounting.BatchMechanism(ctx, pub, openBuiltin, "ui/dark")
	if err != nil {
		t.Fatal(err)
	}
	part, tail, err := accountant.LongitudinalPart(mech, eps0, 1000, 3, 5, 0.05*p.Target.Delta)
	if err != nil {
		t.Fatal(err)
	}
	if part.Rounds != 5 {
		t.Errorf("part rounds %d, want 5", part.Rounds)
	}
	c, err := accountant.NewComposition(part)
	if err != nil {
		t.Fatal(err)
	}
	want, err := c.Epsilon(p.Target.Delta - tail)
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(got-want.Upper) > 1e-12*want.Upper {
		t.Errorf("composeParts %.6f, the accountant's composition %.6f", got, want.Upper)
	}
	g, ok := f.c.computeGuarantee(ctx, f.c.cur, epsKey{pool: "ui/dark", n: 1000}, nil)
	if !ok {
		t.Fatal("no batch guarantee")
	}
	one, err := accountant.LongitudinalEpsilon(mech, eps0, 1000, 1, delta)
	if err != nil {
		t.Fatal(err)
	}
	if g.eps != one.Upper || g.delta != delta {
		t.Errorf("batch guarantee (%g, %g), LongitudinalEpsilon over one period (%g, %g)", g.eps, g.delta, one.Upper, delta)
	}
}
