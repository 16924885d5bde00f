package collector

import (
	"context"
	"math"
	"net/http"
	"strings"
	"testing"

	"github.com/blanket-dp/blanket/accountant"
	"github.com/blanket-dp/blanket/sdk/plan"
	"github.com/blanket-dp/blanket/sdk/plan/accounting"
)

// Under a plan's max_fake_fraction f every guarantee the collector states
// is the accountant's at the honest floor n - floor(f n) of the batch
// (accountant/declare/fakes.go). The references below are computed here:
// the honest counts by hand, the mechanisms from the plugins' own
// declarations, each fixed at its metric's eps0.

// fakeTol: a reference runs the same engine on the same mechanism and
// count as the collector, so the two agree to floating point; 1e-9
// leaves room for summation order only.
const fakeTol = 1e-9

// declared returns metric i of p as a mechanism built from its plugin's
// declaration, fixed at its eps0.
func declared(t *testing.T, p *plan.Plan, i int) accountant.Mechanism {
	t.Helper()
	ctx := context.Background()
	m := p.Metrics[i]
	r, err := openBuiltin(ctx, m.Plugin, m.Config())
	if err != nil {
		t.Fatal(err)
	}
	return accountant.FuncMech{Name: m.Plugin, Eps0: m.Eps0, Declare: func(e float64) (*accountant.Declaration, error) { return r.Declare(ctx, e) }}
}

// epsilonAt is the accountant's single-report eps of mech at n.
func epsilonAt(t *testing.T, mech accountant.Mechanism, eps0 float64, n int, delta float64) float64 {
	t.Helper()
	r, err := accountant.Epsilon(mech, eps0, n, delta)
	if err != nil {
		t.Fatal(err)
	}
	return r.Upper
}

// TestBatchGuaranteeAtHonestFloor: with max_fake_fraction 0.1 a batch of
// 50 valid k-RR reports is stated at 45 honest ones, which
// GET /v1/metrics/{name} shows next to the fraction; the horizon (one
// period) composes that one report at 45 too.
func TestBatchGuaranteeAtHonestFloor(t *testing.T) {
	p := testPlan(t, 10)
	p.MaxFakeFraction = 0.1
	f := newCollectorFixture(t, p)
	pub := f.c.Plan()
	code, res := f.postBatch(t, todayBody(pub, metric, sealKRR(t, pub, metric, f.c.PublicKey(), krrValues(50, 1), 1)))
	if code != http.StatusOK || res.N != 50 || res.Eps == nil {
		t.Fatalf("batch: %d %+v", code, res)
	}
	i := pub.MetricIndex(metric)
	mech, eps0, delta := declared(t, pub, i), pub.Metrics[i].Eps0, pub.Metrics[i].Delta
	honest := epsilonAt(t, mech, eps0, 45, delta) // 50 - floor(0.1 x 50)
	all := epsilonAt(t, mech, eps0, 50, delta)
	if !(honest > all*(1+1e-6)) {
		t.Fatalf("the accountant's eps at 45 (%v) and 50 (%v) are too close to tell apart", honest, all)
	}
	if math.Abs(*res.Eps-honest) > fakeTol*honest || *res.Delta != delta {
		t.Errorf("batch guarantee (%v, %v), want the accountant's at 45 honest reports (%v, %v); at all 50: %v", *res.Eps, *res.Delta, honest, delta, all)
	}
	d := f.metric(t, metric)
	if len(d.Periods) != 1 {
		t.Fatalf("periods %+v", d.Periods)
	}
	e := d.Periods[0]
	if e.MaxFakeFraction != 0.1 || e.Guarantee == nil || e.Guarantee.Messages != 50 || e.Guarantee.Honest != 45 || len(e.BatchList) != 1 || e.BatchList[0].Honest != 45 {
		t.Errorf("period %+v, guarantee %+v: want max_fake_fraction 0.1 and 45 honest of 50 messages", e, e.Guarantee)
	}
	h := d.Horizon
	if h == nil || h.Eps == nil || h.MaxFakeFraction != 0.1 || !strings.Contains(h.Note, "honest floor") {
		t.Fatalf("horizon %+v: want an eps, max_fake_fraction 0.1 and a note on the honest floor", h)
	}
	c, err := accountant.ComposeEpsilon([]accountant.Part{{Mech: mech, Eps0: eps0, N: 45, Rounds: 1}}, pub.Target.Delta)
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(*h.Eps-c.Upper) > fakeTol*c.Upper {
		t.Errorf("horizon eps %v, want the composition of one report at 45 honest: %v", *h.Eps, c.Upper)
	}
}

// TestHorizonAtHonestFloor: two days of k-RR batches of 123 reports, f =
// 0.1: the window composes two reports at the honest floor of the
// smallest batch rounded down to two digits, 108 of 120 (the rounding
// comes first; both only lower the count). All 120 would give less.
func TestHorizonAtHonestFloor(t *testing.T) {
	p := testPlan(t, 100)
	p.Horizon, p.MaxFakeFraction = 2, 0.1
	f := newCollectorFixture(t, p)
	pub := f.c.Plan()
	for d := range 2 {
		insertBatch(t, f, metric, pub.Epoch(), day(d), 123, 123)
	}
	h := horizonOf(t, f)
	i := pub.MetricIndex(metric)
	compose := func(n int) float64 {
		c, err := accountant.ComposeEpsilon([]accountant.Part{{Mech: declared(t, pub, i), Eps0: pub.Metrics[i].Eps0, N: n, Rounds: 2}}, pub.Target.Delta)
		if err != nil {
			t.Fatal(err)
		}
		return c.Upper
	}
	want, all := compose(108), compose(120)
	if h.Reports != 2 || math.Abs(*h.Eps-want) > fakeTol*want || !(want > all) {
		t.Errorf("horizon eps %v over %d reports, want %v over 2 (at 120, all honest: %v)", *h.Eps, h.Reports, want, all)
	}
}

// TestTreeGuaranteesAtHonestFloor: a tree protocol's batch of 1200 with
// n_min 1000 infers its level-mates at the honest floor of the smaller,
// 900 at f = 0.1, and the horizon's part of a window of two such days
// too.
func TestTreeGuaranteesAtHonestFloor(t *testing.T) {
	ctx := context.Background()
	p := reviewLongPlan(t, 2)
	p.MaxFakeFraction = 0.1
	f := newCollectorFixture(t, p)
	pub := f.c.Plan()
	mech, eps0, delta, err := accounting.BatchMechanism(ctx, pub, openBuiltin, "ui/dark")
	if err != nil {
		t.Fatal(err)
	}
	g, ok := f.c.computeGuarantee(ctx, f.c.cur, epsKey{pool: "ui/dark", n: 1200}, nil)
	if !ok {
		t.Fatal("no guarantee")
	}
	r, err := accountant.LongitudinalEpsilon(mech, eps0, 900, 1, delta)
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(g.eps-r.Upper) > fakeTol*r.Upper {
		t.Errorf("tree batch of 1200: eps %v, want the accountant's with mates among 900 honest: %v", g.eps, r.Upper)
	}
	for _, d := range reviewDays(0, 1) {
		insertBatch(t, f, "ui/dark", pub.Epoch(), d, 1000, 1000)
	}
	h := horizonOf(t, f)
	want, _ := treePartEps(t, f, 900, 1, 2)
	if h.Reports != 2 || math.Abs(*h.Eps-want) > treeHorizonTol*want {
		t.Errorf("tree horizon eps %v over %d reports, want %v over 2 at 900 honest of 1000", *h.Eps, h.Reports, want)
	}
}

// parallelFakes returns the test's parallel plan at f = 0.1 with a
// horizon of one day, its collector, and its two metrics' mechanisms.
func parallelFakes(t *testing.T) (*collectorFixture, *plan.Plan, []accountant.Mechanism) {
	t.Helper()
	p := parallelPlan(t, 1)
	p.MaxFakeFraction = 0.1
	f := newCollectorFixture(t, p)
	pub := f.c.Plan()
	return f, pub, []accountant.Mechanism{declared(t, pub, 0), declared(t, pub, 1)}
}

// TestParallelGuaranteeAtHonestShares: a parallel batch of 30 k-RR and 20
// summation messages at f = 0.1 may hold 5 fakes, all of either metric
// (they can skew the visible mix), so its honest messages are at least 45,
// at least 25 and 15 of each: its guarantee is the weaker of the plan's
// weights at 45 and accountant.ParallelFloor of (25/45, 15/45) at 45. A
// batch of 48 and 2 may have no honest summation message but one user's:
// its guarantee is the local one, each randomizer alone at one report.
func TestParallelGuaranteeAtHonestShares(t *testing.T) {
	f, pub, parts := parallelFakes(t)
	delta, eps0 := pub.Target.Delta, math.Max(pub.Metrics[0].Eps0, pub.Metrics[1].Eps0)
	byPlan := epsilonAt(t, accountant.ParallelMech{Weights: pub.Weights(), Parts: parts}, eps0, 45, delta)

	// The least honest shares, rounded down (accounting.HonestShares: the
	// floor must not exceed the true share).
	shares := []float64{math.Nextafter(25.0/45, 0), math.Nextafter(15.0/45, 0)}
	floor := epsilonAt(t, accountant.ParallelFloor(shares, parts...), eps0, 45, delta)
	visible := epsilonAt(t, accountant.ParallelMech{Weights: []float64{0.6, 0.4}, Parts: parts}, eps0, 45, delta)
	want := math.Max(byPlan, floor)
	if !(want > math.Max(byPlan, visible)*(1+1e-6)) {
		t.Fatalf("the honest floor's eps %v is not above the visible mix's %v (plan weights %v): the check cannot tell them apart", floor, visible, byPlan)
	}
	if got := batchEps(t, f, []int64{30, 20}); math.Abs(got-want) > fakeTol*want {
		t.Errorf("batch of (30, 20): eps %v, want %v (the plan's weights at 45: %v, the honest floor: %v, the visible mix: %v)", got, want, byPlan, floor, visible)
	}

	local := math.Max(epsilonAt(t, parts[0], pub.Metrics[0].Eps0, 1, delta), epsilonAt(t, parts[1], pub.Metrics[1].Eps0, 1, delta))
	if want := math.Max(byPlan, local); !(local > byPlan) {
		t.Fatalf("the local eps %v is not above the plan's weights' %v at 45", local, byPlan)
	} else if got := batchEps(t, f, []int64{48, 2}); math.Abs(got-want) > fakeTol*want {
		t.Errorf("batch of (48, 2): eps %v, want the local %v", got, want)
	}
}

// TestParallelHorizonAtHonestShares: the horizon of one day with the batch
// of (30, 20) bounds its round by the plan's weights and the honest floor
// of its mix rounded down to 1/256 (142/256, 85/256), at 45 honest
// messages; with the batch of (48, 2) too, the day's round is every
// randomizer alone at one report, and the note says so.
func TestParallelHorizonAtHonestShares(t *testing.T) {
	f, pub, parts := parallelFakes(t)
	eps0 := math.Max(pub.Metrics[0].Eps0, pub.Metrics[1].Eps0)
	compose := func(mech accountant.Mechanism, n int) float64 {
		c, err := accountant.ComposeEpsilon([]accountant.Part{{Mech: mech, Eps0: eps0, N: n, Rounds: 1}}, pub.Target.Delta)
		if err != nil {
			t.Fatal(err)
		}
		return c.Upper
	}
	insertMixBatch(t, f, pub.Epoch(), day(0), []int64{30, 20})
	round := accountant.WorstOf(accountant.ParallelMech{Weights: pub.Weights(), Parts: parts}, accountant.ParallelFloor([]float64{142.0 / 256, 85.0 / 256}, parts...))
	want := compose(round, 45)
	if h := horizonOf(t, f); math.Abs(*h.Eps-want) > fakeTol*want {
		t.Errorf("horizon eps %v, want %v", *h.Eps, want)
	}
	insertMixBatch(t, f, pub.Epoch(), day(0), []int64{48, 2})
	local := compose(accountant.WorstOf(parts...), 1)
	h := horizonOf(t, f)
	if math.Abs(*h.Eps-local) > fakeTol*local || !strings.Contains(h.Note, "unshuffled") {
		t.Errorf("horizon eps %v (%s), want the local %v and a note saying so", *h.Eps, h.Note, local)
	}
}

// TestHonestMixKeys: a parallel batch's key is its mix when no message
// may be fake (f = 0, or f n < 1), the floor of its honest shares, or
// localMix; a window with localMix is covered only by one with localMix.
func TestHonestMixKeys(t *testing.T) {
	p := &plan.Plan{Metrics: []plan.Metric{{Name: "a"}, {Name: "b"}, {Name: "c"}}}
	if k := honestMixKey(p, []int64{30, 20, 0}); k != "3,2,0" {
		t.Errorf("f = 0: key %q, want the mix 3,2,0", k)
	}
	p.MaxFakeFraction = 0.01
	if k := honestMixKey(p, []int64{30, 20, 0}); k != "3,2,0" {
		t.Errorf("f = 0.01 of 50 (no fake): key %q, want the mix 3,2,0", k)
	}
	p.MaxFakeFraction = 0.1
	if k := honestMixKey(p, []int64{30, 20, 0}); k != "floor:110:0.5546875,0.33203125" {
		t.Errorf("f = 0.1: key %q, want the floor of 25/45 and 15/45 on the grid of 1/256", k)
	}
	if k := honestMixKey(p, []int64{30, 5, 15}); k != localMix {
		t.Errorf("f = 0.1, a metric of 5 messages and 5 fakes: key %q, want %q", k, localMix)
	}
	cover := func(mixes ...string) mixCover {
		return newMixCover(poolLoad{mixes: mixes, bound: parallelBound(mixes)})
	}
	mixed := []string{"floor:110:0.5546875,0.33203125", localMix}
	if cover("floor:110:0.5546875,0.33203125").covers(cover(mixed...), mixed) {
		t.Error("a window without localMix covers one with it")
	}
	if !cover(mixed...).covers(cover(localMix), []string{localMix}) {
		t.Error("a window with localMix does not cover one with localMix only")
	}
}
