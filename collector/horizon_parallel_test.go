package collector

import (
	"context"
	"math"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/blanket-dp/blanket/accountant"
	"github.com/blanket-dp/blanket/sdk/plan"
	"github.com/blanket-dp/blanket/sdk/report"
)

// insertMixBatch stores the rows ingest stores for a parallel batch with
// counts valid reports of each metric (plan order): one row per metric
// with reports, under one batch id, each with the batch's valid messages
// (their sum).
func insertMixBatch(t *testing.T, f *collectorFixture, epoch string, period report.Period, counts []int64) {
	t.Helper()
	id := report.NewID()
	var n int64
	for _, c := range counts {
		n += c
	}
	for i, m := range f.c.Plan().Metrics {
		if counts[i] == 0 {
			continue
		}
		if _, err := rawExec(t, f.c, `INSERT INTO batches (id, metric, epoch, n, malformed, messages, period_start, period_len) VALUES (?, ?, ?, ?, 0, ?, ?, ?)`,
			id[:], m.Name, epoch, counts[i], n, period.Start, period.Length); err != nil {
			t.Fatal(err)
		}
	}
}

// parallelPlan returns the test plan (k-RR and summation, each at eps0 =
// 2) with parallel travel and a horizon of h days.
func parallelPlan(t *testing.T, h int) *plan.Plan {
	p := testPlan(t, 50)
	p.Travel, p.Horizon = "parallel", h
	return p
}

// batchEps is the guarantee the collector states for a parallel batch of
// counts (computeGuarantee: the weaker of the plan's weights and the mix).
func batchEps(t *testing.T, f *collectorFixture, counts []int64) float64 {
	t.Helper()
	var n int64
	for _, c := range counts {
		n += c
	}
	g, ok := f.c.computeGuarantee(context.Background(), f.c.cur, epsKey{pool: f.c.Plan().Pool(""), n: n}, counts)
	if !ok {
		t.Fatalf("no guarantee for %v", counts)
	}
	return g.eps
}

// horizonOf returns the collector's horizon guarantee, which must be
// stated.
func horizonOf(t *testing.T, f *collectorFixture) *HorizonGuarantee {
	t.Helper()
	h, err := f.c.horizonGuarantee(context.Background(), []statRow{{}})
	if err != nil {
		t.Fatal(err)
	}
	if h == nil || h.Eps == nil {
		t.Fatalf("horizon %+v: not stated", h)
	}
	return h
}

// parallelHistory is three days of a parallel plan's batches: two on day
// 0, one on each of days 1 and 2, of about 500 messages with different
// mixes of the two metrics.
var parallelHistory = []struct {
	day    int
	counts []int64
}{
	{0, []int64{300, 200}}, {0, []int64{250, 260}}, {1, []int64{280, 240}}, {2, []int64{260, 250}},
}

// TestHorizonParallelSkewedMixRaises: one more batch on day 1, of k-RR
// reports only (its guarantee is the weaker k-RR alone, well above the
// plan's weights at the same size), raises the horizon: the window's
// rounds must dominate that batch's mechanism too. The margin asked, twice
// HorizonTolerance, is what both compositions' certification leaves; the
// batch's own guarantee is about 9% above the others'.
func TestHorizonParallelSkewedMixRaises(t *testing.T) {
	f := newCollectorFixture(t, parallelPlan(t, 3))
	pub := f.c.Plan()
	for _, b := range parallelHistory {
		insertMixBatch(t, f, pub.Epoch(), day(b.day), b.counts)
	}
	before := *horizonOf(t, f).Eps
	skewed := []int64{520, 0}
	if e, o := batchEps(t, f, skewed), batchEps(t, f, parallelHistory[0].counts); !(e > o*(1+2*accountant.HorizonTolerance)) {
		t.Fatalf("the skewed batch's guarantee %.6g is not above a balanced one's %.6g", e, o)
	}
	insertMixBatch(t, f, pub.Epoch(), day(1), skewed)
	after := *horizonOf(t, f).Eps
	t.Logf("horizon %.4f, with the skewed batch %.4f", before, after)
	if !(after > before*(1+2*accountant.HorizonTolerance)) {
		t.Errorf("horizon eps %.6g with a batch of k-RR only, %.6g without: not raised", after, before)
	}
}

// manyMixesHorizon stores maxHorizonMixes+4 parallel batches of one day,
// batch i of the mix counts(i), and returns the horizon, which must say
// the mixes are bounded together, and the largest batch's guarantee.
func manyMixesHorizon(t *testing.T, counts func(i int64) []int64) (*HorizonGuarantee, float64) {
	t.Helper()
	f := newCollectorFixture(t, parallelPlan(t, 1))
	pub := f.c.Plan()
	largest := 0.0
	for i := range int64(maxHorizonMixes + 4) {
		insertMixBatch(t, f, pub.Epoch(), day(0), counts(i))
		largest = math.Max(largest, batchEps(t, f, counts(i)))
	}
	h := horizonOf(t, f)
	t.Logf("horizon %.4f; largest batch %.4f", *h.Eps, largest)
	if !strings.Contains(h.Note, "bounded together") {
		t.Errorf("note %q: want it to say the mixes are bounded together", h.Note)
	}
	return h, largest
}

// TestHorizonParallelManySkewedMixes: many batches whose mixes all give
// the second metric about a tenth of the messages (which states more than
// the plan's even weights) are bounded together by a floor that must
// follow the plan's order of the metrics: the horizon is at least the
// largest batch's guarantee. A floor handed to the wrong metrics (the
// floors reversed) states 0.4355, below the batches' 0.4763.
func TestHorizonParallelManySkewedMixes(t *testing.T) {
	h, largest := manyMixesHorizon(t, func(i int64) []int64 { return []int64{450 - i, 50 + i} })
	if *h.Eps < largest/(1+accountant.Tolerance) {
		t.Errorf("horizon eps %.6g below the largest batch's guarantee %.6g", *h.Eps, largest)
	}
}

// TestHorizonParallelIngested: batches ingested with parallel travel (real
// messages, one metric each) on two days give a horizon over both, and
// the mixes it reads back from the stored rows are the batches' own
// (IngestResult.Parts).
func TestHorizonParallelIngested(t *testing.T) {
	ctx := context.Background()
	pf := newPooledFixtureWith(t, "parallel", 50, func(p *plan.Plan) { p.Horizon = 2 })
	pub := pf.pub
	bs := pub.Bindings()
	var want []string
	for d, every := range []int{3, 2} { // day 0: a third summation; day 1: half
		for i := range bs {
			bs[i].Period = day(d)
		}
		b := report.PoolBinding(pub.Pool(""), pub.Travel, bs)
		var sealed [][]byte
		for i, s := range krrValues(120, uint64(d)) {
			a, c := pf.randomize(t, s, float64(i))
			part := report.Part{Metric: 0, Report: a}
			if i%every == 0 {
				part = report.Part{Metric: 1, Report: c}
			}
			sealed = append(sealed, mustSeal(t, pf.c.PublicKey(), b, report.EncodeMessage([]report.Part{part})))
		}
		code, res := pf.postBatch(t, batchBody(report.PeriodPoolKey(pub.Pool(""), pub.Epoch(), day(d)), sealed))
		if code != http.StatusOK || res.N != 120 || res.Eps == nil {
			t.Fatalf("day %d: %d %+v", d, code, res)
		}
		k := mixKey([]int64{res.Parts[pub.Metrics[0].Name], res.Parts[pub.Metrics[1].Name]})
		got, err := pf.c.periodMixes(ctx, pub, pub.Epoch(), day(d))
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, []string{k}) {
			t.Errorf("day %d: mixes read back %v, the batch's %v", d, got, k)
		}
		want = append(want, k)
	}
	if want[0] != "2,1" || want[1] != "1,1" {
		t.Errorf("mixes %v, want 2,1 and 1,1", want)
	}
	h := pf.metric(t, pub.Metrics[0].Name).Horizon
	if h == nil || h.Eps == nil || h.Reports != 2 {
		t.Fatalf("horizon %+v, want one over 2 reports", h)
	}
}

// TestMixKey: a mix is written divided by the greatest common divisor of
// its counts, so that mixes of the same proportions (the same weights,
// to the last bit) share it, and parseMix reads it back.
func TestMixKey(t *testing.T) {
	for _, c := range []struct {
		counts []int64
		want   string
	}{
		{[]int64{200, 100}, "2,1"},
		{[]int64{2, 1}, "2,1"},
		{[]int64{0, 35}, "0,1"},
		{[]int64{6, 10, 0, 14}, "3,5,0,7"},
		{[]int64{7, 5}, "7,5"},
		{[]int64{0, 0}, "0,0"},
	} {
		k := mixKey(c.counts)
		if k != c.want {
			t.Errorf("mixKey(%v) = %q, want %q", c.counts, k, c.want)
		}
		back, err := parseMix(k)
		if err != nil || len(back) != len(c.counts) {
			t.Errorf("parseMix(%q) = %v, %v", k, back, err)
		}
	}
	for _, bad := range []string{"", "1,,2", "1,-2", "a,1"} {
		if _, err := parseMix(bad); err == nil {
			t.Errorf("parseMix(%q): no error", bad)
		}
	}
}

// TestParallelBound: up to maxHorizonMixes mixes are kept as they are;
// beyond, one floor per set of metrics present, each metric's smallest
// weight rounded down to a multiple of 1/floorGrid (one below 1/floorGrid
// kept). A floor covers (mixCover) the mixes of its metrics whose
// weights are all at least it, and no other; parseBound reads both forms
// back. And a round that keeps its mixes covers those only.
func TestParallelBound(t *testing.T) {
	few := []string{"1,1", "2,1", "3,2", "5,4"}
	if got := parallelBound(few); !slices.Equal(got, few) {
		t.Errorf("parallelBound(%v) = %v, want them unchanged", few, got)
	}
	// The smallest weight of metric a is 95/300 = 0.3167 -> 81/256; of b
	// 100/300 = 0.3333 -> 85/256; of c 98/300 = 0.3267 -> 83/256. The
	// k-RR-only batch is its own floor (1), and the one with no c its own:
	// 0.999 -> 255/256, and b's 1/1000, below 1/256, kept.
	many := []string{"100,100,100", "95,105,100", "102,100,98", "100,105,100", "101,101,99", "1,0,0", "999,1,0"}
	got := parallelBound(many)
	want := []string{"floor:100:1", "floor:110:0.99609375,0.001", "floor:111:0.31640625,0.33203125,0.32421875"}
	if !slices.Equal(got, want) {
		t.Fatalf("parallelBound(%v) = %v, want %v", many, got, want)
	}
	for _, c := range []struct {
		mix  string
		want bool
	}{
		{"100,100,100", true},    // every weight above the floor
		{"82,86,84", true},       // 0.3254, 0.3413, 0.3333: above too
		{"80,90,90", false},      // a at 0.3077, below 81/256
		{"1,1,0", false},         // the floor of (a, b) is (0.996, 0.001)
		{"999,1,0", true},        // the mix itself
		{"5,0,0", true},          // k-RR only
		{"0,0,1", false},         // no floor of c alone
		{"100,100,100,1", false}, // another plan's length
	} {
		round := newMixCover(poolLoad{mixes: many, bound: got})
		batch := newMixCover(poolLoad{mixes: []string{c.mix}, bound: []string{c.mix}})
		if cov := round.covers(batch, []string{c.mix}); cov != c.want {
			t.Errorf("the round of %v covers %q: %v, want %v", got, c.mix, cov, c.want)
		}
	}
	kept := newMixCover(poolLoad{mixes: few, bound: few})
	if !kept.covers(newMixCover(poolLoad{mixes: few[:2]}), few[:2]) || kept.covers(newMixCover(poolLoad{mixes: []string{"1,2"}}), []string{"1,2"}) {
		t.Error("a round keeping its mixes covers other mixes, or not its own")
	}
	for _, k := range want {
		counts, floor, err := parseBound(k)
		if err != nil || floor == nil || len(counts) != 3 {
			t.Errorf("parseBound(%q) = %v, %v, %v", k, counts, floor, err)
		}
	}
	for _, bad := range []string{"floor:11", "floor:12:0.5,0.5", "floor:11:0.5", "floor:11:0.5,0", "floor:11:0.5,x", "1,,1"} {
		if _, _, err := parseBound(bad); err == nil {
			t.Errorf("parseBound(%q): no error", bad)
		}
	}
}
