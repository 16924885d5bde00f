package collector

import (
	"context"
	"math"
	"testing"

	"github.com/blanket-dp/blanket/accountant"
	"github.com/blanket-dp/blanket/sdk/plan"
	"github.com/blanket-dp/blanket/sdk/report"
)

// Second review of the collector's accounting of a longitudinal tree
// protocol (guarantee.go, horizon.go composeParts and horizonWindows).
//
// composeParts charges a tree protocol's (epoch, pool) in a window
// min(2 T, span, reports) rounds of its node pairs, T =
// accountant.TreesInWindow(tree, span), span the periods from the first to
// the last with data: a quantity that depends on how the periods with data
// are spread, not only on their number. horizonWindows skips a window when
// another holds, per (epoch, pool), at least as many periods at a batch no
// larger ("dominates" it), which is sound for independent reports but not
// for a tree protocol: a window with fewer periods spread over more trees
// can leak more reports than a window with more periods inside one tree.

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

// reviewLeakRounds is composeParts' charge for one (epoch, pool) of a
// tree protocol in a window: min(2T, span, reports).
func reviewLeakRounds(periods []report.Period) int {
	if len(periods) == 0 {
		return 0
	}
	first, last := periods[0].Start/periods[0].Length, periods[0].Start/periods[0].Length
	for _, p := range periods {
		i := p.Start / p.Length
		first, last = min(first, i), max(last, i)
	}
	span := int(last - first + 1)
	T := accountant.TreesInWindow(reviewTree, span)
	return min(2*T, span, len(periods))
}

// reviewHistory: window A holds days 0..4 of one tree (5 periods, span 5:
// charged 4 rounds, and at most 2 can leak: one aligned tree); window B
// holds days 30, 31 (end of a tree), 32, 33 (start of the next) and 40 (a
// third tree): 5 periods over 3 trees, charged 5 rounds, and 5 can leak (a
// leaf-level user whose changes fall at days 30 vs 31, 32 vs 33, and 40
// vs none). Both hold 5 periods at the same batch, so each "dominates" the
// other and horizonWindows keeps only the earlier, A.
func reviewHistory() (parts []horizonPart, a, b []report.Period) {
	a = reviewDays(0, 1, 2, 3, 4)
	b = reviewDays(30, 31, 32, 33, 40)
	for _, p := range append(append([]report.Period(nil), a...), b...) {
		parts = append(parts, horizonPart{period: p, epoch: "e", pool: "ui/dark", n: 1000})
	}
	return parts, a, b
}

// TestReviewHorizonWindowsTreeSpread: every window's tree-protocol charge
// must be covered by a window the collector composes. Fails: B (5 rounds)
// is skipped as dominated by A (4 rounds).
func TestReviewHorizonWindowsTreeSpread(t *testing.T) {
	const l, h = 86400, 16
	parts, a, b := reviewHistory()
	if ra, rb := reviewLeakRounds(a), reviewLeakRounds(b); ra != 4 || rb != 5 {
		t.Fatalf("charges %d and %d, want 4 and 5", ra, rb)
	}
	ws := horizonWindows(parts, l, h)
	composed := 0
	for _, w := range ws {
		var ps []report.Period
		for _, q := range w.in {
			ps = append(ps, q.period)
		}
		composed = max(composed, reviewLeakRounds(ps))
	}
	most := 0
	first, last := parts[0].period.Start, parts[len(parts)-1].period.End()
	for s := first - h*l; s <= last; s += l {
		var ps []report.Period
		for _, q := range parts {
			if q.period.Start < s+h*l && q.period.End() > s {
				ps = append(ps, q.period)
			}
		}
		most = max(most, reviewLeakRounds(ps))
	}
	if composed < most {
		t.Errorf("the windows composed charge at most %d rounds of the tree protocol's node pairs; a window of the history is charged %d (%d windows composed)", composed, most, len(ws))
	}
}

// TestReviewHorizonGuaranteeTreeSpread: end to end, the horizon guarantee
// stated for the history of reviewHistory is below composeParts' own
// bound for window B, i.e. below what is proven for a window of the
// horizon. Fails with TestReviewHorizonWindowsTreeSpread.
func TestReviewHorizonGuaranteeTreeSpread(t *testing.T) {
	ctx := context.Background()
	p := reviewLongPlan(t, 16)
	f := newCollectorFixture(t, p)
	ep := f.c.Plan().Epoch()
	parts, _, b := reviewHistory()
	for _, q := range parts {
		insertBatch(t, f, "ui/dark", ep, q.period, q.n, q.n)
	}
	h, err := f.c.horizonGuarantee(ctx, []statRow{{}})
	if err != nil {
		t.Fatal(err)
	}
	if h == nil || h.Eps == nil {
		t.Fatalf("horizon %+v", h)
	}
	var bParts []horizonPart
	for _, per := range b {
		bParts = append(bParts, horizonPart{period: per, epoch: ep, pool: "ui/dark", n: 1000})
	}
	epsB, err := f.c.composeParts(ctx, bParts, p.Target.Delta)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("stated %.4f over the window from %v (%d reports); window B's bound %.4f", *h.Eps, h.Window.Start, h.Reports, epsB)
	if *h.Eps < epsB*(1-1e-12) {
		t.Errorf("horizon eps %.5f stated, but window B (days 30..40, 5 reports over 3 trees) is only proven at %.5f", *h.Eps, epsB)
	}
}

// TestReviewComposePartsLongitudinal checks composeParts' wiring for a
// tree protocol against the accountant directly: one window of 5 days of
// one epoch (span 11, 3 trees), its part accountant.LongitudinalPart over
// the span with the window's reports and 5% of delta for the tail, the
// composition at delta minus the tail; and a batch's guarantee
// (computeGuarantee) is LongitudinalEpsilon over one period.
func TestReviewComposePartsLongitudinal(t *testing.T) {
	ctx := context.Background()
	p := reviewLongPlan(t, 16)
	f := newCollectorFixture(t, p)
	pub := f.c.Plan()
	ep := pub.Epoch()
	_, _, b := reviewHistory()
	var bParts []horizonPart
	for _, per := range b {
		bParts = append(bParts, horizonPart{period: per, epoch: ep, pool: "ui/dark", n: 1000})
	}
	got, err := f.c.composeParts(ctx, bParts, p.Target.Delta)
	if err != nil {
		t.Fatal(err)
	}
	mech, eps0, delta, err := pub.BatchMechanism(ctx, openBuiltin, "ui/dark")
	if err != nil {
		t.Fatal(err)
	}
	part, tail, err := accountant.LongitudinalPart(mech, eps0, 1000, 11, 5, 0.05*p.Target.Delta)
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
	g, ok := f.c.computeGuarantee(ctx, f.c.cur, "ui/dark", 1000, nil)
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
