package collector

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/blanket-dp/blanket/accountant"
	"github.com/blanket-dp/blanket/sdk/plan/accounting"
)

// treeHorizonTol: the horizon of these histories is one composition
// (composeParts) of the part checked here, computed the same way by the
// accountant, so the two agree to floating point; 1e-9 leaves room for
// summation order only.
const treeHorizonTol = 1e-9

// treePartEps returns the accountant's eps at the plan's delta of one
// tree protocol's part over trees trees and reports reports at batch n,
// as composeParts composes it (5% of delta for the tail of the mates).
func treePartEps(t *testing.T, f *collectorFixture, n, trees, reports int) (eps float64, rounds int) {
	t.Helper()
	ctx := context.Background()
	pub := f.c.Plan()
	mech, eps0, _, err := accounting.BatchMechanism(ctx, pub, openBuiltin, "ui/dark")
	if err != nil {
		t.Fatal(err)
	}
	part, tail, err := accountant.LongitudinalPart(mech, eps0, n, trees, reports, 0.05*pub.Target.Delta)
	if err != nil {
		t.Fatal(err)
	}
	r, err := accountant.ComposeEpsilon([]accountant.Part{part}, pub.Target.Delta-tail)
	if err != nil {
		t.Fatal(err)
	}
	return r.Upper, part.Rounds
}

// TestHorizonTreeOnePeriodWindowTwoRounds: with a horizon of one period, a
// window holding day 3 of a tree of 8 days whose day 4 has data too is
// charged the two node reports a change on day 3 can alter (days 3 and 4,
// both in the tree the window meets): two rounds, not one.
func TestHorizonTreeOnePeriodWindowTwoRounds(t *testing.T) {
	ctx := context.Background()
	f := newCollectorFixture(t, reviewLongPlan(t, 1))
	ep := f.c.Plan().Epoch()
	for _, d := range reviewDays(3, 4) {
		insertBatch(t, f, "ui/dark", ep, d, 1000, 1000)
	}
	h, err := f.c.horizonGuarantee(ctx, []statRow{{}})
	if err != nil {
		t.Fatal(err)
	}
	if h == nil || h.Eps == nil || h.Window == nil {
		t.Fatalf("horizon %+v", h)
	}
	two, rounds := treePartEps(t, f, 1000, 1, 2)
	one, _ := treePartEps(t, f, 1000, 1, 1)
	if rounds != 2 || !(two > one) {
		t.Fatalf("the accountant's part: %d rounds, eps %g against %g for one report", rounds, two, one)
	}
	if h.Reports != 2 || !h.Window.Start.Equal(time.Unix(reviewDays(3)[0].Start, 0)) || math.Abs(*h.Eps-two) > treeHorizonTol*two {
		t.Errorf("horizon eps %.6g over %d reports from %v, want %.6g over 2 from day 3 (one report's: %.6g)", *h.Eps, h.Reports, h.Window.Start, two, one)
	}
}

// TestHorizonTreeChargesPeriodsAfterWindow: a 2-day window at the start of
// a tree of 8 days (days 0 and 1, batches of 1000) whose tree has data
// after it (day 5, a batch of 200) is charged the reports its change can
// reach there: its node pairs over 3 periods at the smallest batch of
// those, 200. No window's own periods alone give as much (day 5's
// windows hold one report; days 0 and 1 are at 1000); day 8 starts the
// next tree, which the window does not meet.
func TestHorizonTreeChargesPeriodsAfterWindow(t *testing.T) {
	ctx := context.Background()
	f := newCollectorFixture(t, reviewLongPlan(t, 2))
	ep := f.c.Plan().Epoch()
	days := reviewDays(0, 1, 5, 8)
	for i, n := range []int64{1000, 1000, 200, 1000} {
		insertBatch(t, f, "ui/dark", ep, days[i], n, n)
	}
	h, err := f.c.horizonGuarantee(ctx, []statRow{{}})
	if err != nil {
		t.Fatal(err)
	}
	if h == nil || h.Eps == nil || h.Window == nil {
		t.Fatalf("horizon %+v", h)
	}
	want, rounds := treePartEps(t, f, 200, 1, 3)
	inWindow, _ := treePartEps(t, f, 1000, 1, 2) // days 0 and 1 alone
	after, _ := treePartEps(t, f, 200, 1, 1)     // day 5 alone
	if rounds != 2 || !(want > inWindow) || !(want > after) {
		t.Fatalf("the accountant's parts: %d rounds, eps %g, not above %g and %g", rounds, want, inWindow, after)
	}
	if h.Reports != 3 || !h.Window.Start.Equal(time.Unix(days[0].Start, 0)) || math.Abs(*h.Eps-want) > treeHorizonTol*want {
		t.Errorf("horizon eps %.6g over %d reports from %v, want %.6g over 3 from day 0 (the window's own periods: %.6g, day 5 alone: %.6g)",
			*h.Eps, h.Reports, h.Window.Start, want, inWindow, after)
	}
}
