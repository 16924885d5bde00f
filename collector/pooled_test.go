package collector

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/blanket-dp/blanket/accountant"
	"github.com/blanket-dp/blanket/collector/shuffler"
	"github.com/blanket-dp/blanket/internal/servertest"
	"github.com/blanket-dp/blanket/plugins/krr"
	"github.com/blanket-dp/blanket/plugins/summation"
	"github.com/blanket-dp/blanket/sdk"
	"github.com/blanket-dp/blanket/sdk/plan"
	"github.com/blanket-dp/blanket/sdk/report"
	"gonum.org/v1/gonum/stat/distuv"
)

// pooledFixture is a collector for the test plan under joint or parallel
// travel, and seeded randomizers of its two metrics (k-RR, summation).
type pooledFixture struct {
	*collectorFixture
	pub     *plan.Plan
	binding report.Binding
	krr     sdk.Randomizer
	sum     sdk.Randomizer
}

func newPooledFixture(t testing.TB, travel string, nMin int) *pooledFixture {
	t.Helper()
	return newPooledFixtureWith(t, travel, nMin, nil)
}

// newPooledFixtureWith is newPooledFixture with the test plan changed by
// edit (when not nil) before the collector publishes it.
func newPooledFixtureWith(t testing.TB, travel string, nMin int, edit func(*plan.Plan)) *pooledFixture {
	t.Helper()
	p := testPlan(t, nMin)
	p.Travel = travel
	if edit != nil {
		edit(p)
	}
	f := &pooledFixture{collectorFixture: newCollectorFixture(t, p)}
	f.pub = f.c.Plan()
	f.binding = f.pub.PoolBinding(today)
	m0, m1 := f.pub.Metrics[0], f.pub.Metrics[1]
	var err error
	if f.krr, err = krr.New(krr.Options{Categories: m0.Categories, Other: m0.Other, Rand: rand.NewChaCha8([32]byte{1})}); err != nil {
		t.Fatal(err)
	}
	if f.sum, err = summation.New(summation.Options{Lo: m1.Lo, Hi: m1.Hi, K: 10, Rand: rand.NewChaCha8([32]byte{2})}); err != nil {
		t.Fatal(err)
	}
	return f
}

// seal seals a message of the given parts under the pool's binding.
func (f *pooledFixture) seal(t testing.TB, parts []report.Part) []byte {
	t.Helper()
	s, err := report.Seal(f.c.PublicKey(), f.binding, report.EncodeMessage(parts))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// randomize returns one report of each metric for a screen and a latency.
func (f *pooledFixture) randomize(t testing.TB, screen string, latency float64) (krrRep, sumRep []byte) {
	t.Helper()
	ctx := context.Background()
	a, err := f.krr.Randomize(ctx, f.pub.Metrics[0].Eps0, sdk.Inputs{Categories: []string{screen}})
	if err != nil {
		t.Fatal(err)
	}
	b, err := f.sum.Randomize(ctx, f.pub.Metrics[1].Eps0, sdk.Inputs{Reals: []float64{latency}})
	if err != nil {
		t.Fatal(err)
	}
	return a[0], b[0]
}

// checkGuarantee checks a batch guarantee against the accountant's, for a
// mechanism built here from the plugins' own declarations, each fixed at its
// metric's eps0 (independently of accounting.BatchMechanism): the joint
// composition, or for parallel travel the weaker of the composition
// weighted by the batch's mix counts (metrics with no message left out) and
// the one weighted by the plan's weights.
func (f *pooledFixture) checkGuarantee(t *testing.T, eps, delta *float64, counts []int64) {
	t.Helper()
	ctx := context.Background()
	rs := []sdk.Randomizer{f.krr, f.sum}
	part := func(i int) accountant.Mechanism {
		r, m := rs[i], f.pub.Metrics[i]
		return accountant.FuncMech{Name: m.Plugin, Eps0: m.Eps0, Declare: func(e float64) (*accountant.Declaration, error) { return r.Declare(ctx, e) }}
	}
	var mech accountant.Mechanism
	var n int64
	if f.pub.Travel == "joint" {
		mech = accountant.JointMech{Parts: []accountant.Mechanism{part(0), part(1)}, Weights: []float64{f.pub.Metrics[0].Eps0, f.pub.Metrics[1].Eps0}}
		n = counts[0]
	} else {
		var parts []accountant.Mechanism
		var ws []float64
		for _, c := range counts {
			n += c
		}
		for i, c := range counts {
			if c > 0 {
				parts = append(parts, part(i))
				ws = append(ws, float64(c)/float64(n))
			}
		}
		mech = accountant.ParallelMech{Weights: ws, Parts: parts}
	}
	eps0 := f.pub.Metrics[0].Eps0 + f.pub.Metrics[1].Eps0
	ref, err := accountant.Epsilon(mech, eps0, int(n), f.pub.Target.Delta)
	if err != nil {
		t.Fatal(err)
	}
	if f.pub.Travel == "parallel" {
		// The weaker of the batch's mix and the plan's weights.
		ws := f.pub.Weights()
		planMech := accountant.ParallelMech{Weights: ws, Parts: []accountant.Mechanism{part(0), part(1)}}
		byPlan, err := accountant.Epsilon(planMech, eps0, int(n), f.pub.Target.Delta)
		if err != nil {
			t.Fatal(err)
		}
		ref.Upper = math.Max(ref.Upper, byPlan.Upper)
	}
	if eps == nil || delta == nil || math.Abs(*eps-ref.Upper) > 1e-9*ref.Upper || *delta != f.pub.Target.Delta {
		t.Fatalf("guarantee (%v, %v), accountant (%g, %g) for %v", eps, delta, ref.Upper, f.pub.Target.Delta, counts)
	}
}

// TestCollectorJointBatch ingests a joint batch: every valid message feeds
// both metrics; messages that do not carry both metrics in plan order, or
// are sealed under a metric's own binding, are malformed as a whole; the
// guarantee is the accountant's for the joint mechanism at the number of
// valid messages.
func TestCollectorJointBatch(t *testing.T) {
	f := newPooledFixture(t, "joint", 50)
	screens := krrValues(400, 3)
	var sealed [][]byte
	var latencySum float64
	for i, s := range screens {
		lat := float64(i % 1000)
		latencySum += lat
		a, b := f.randomize(t, s, lat)
		sealed = append(sealed, f.seal(t, []report.Part{{Metric: 0, Report: a}, {Metric: 1, Report: b}}))
	}
	a, b := f.randomize(t, "home", 1)
	m0 := f.pub.Metrics[0]
	ownBinding := f.pub.Binding(m0.Name)
	ownBinding.Period = today
	own, err := report.Seal(f.c.PublicKey(), ownBinding, a)
	if err != nil {
		t.Fatal(err)
	}
	bad := [][]byte{
		f.seal(t, []report.Part{{Metric: 1, Report: b}, {Metric: 0, Report: a}}),                         // wrong order
		f.seal(t, []report.Part{{Metric: 0, Report: a}}),                                                 // a metric missing
		f.seal(t, []report.Part{{Metric: 0, Report: a}, {Metric: 1, Report: b}, {Metric: 1, Report: b}}), // one too many
		f.seal(t, []report.Part{{Metric: 0, Report: append(a, 0)}, {Metric: 1, Report: b}}),              // wrong length
		f.seal(t, []report.Part{{Metric: 0, Report: []byte{200}}, {Metric: 1, Report: b}}),               // plugin rejects
		mustSeal(t, f.c.PublicKey(), f.binding, []byte("not a message")),                                 // undecodable
		own, // a separate report
	}
	// The message whose k-RR part the plugin rejects still has a valid
	// latency part, which counts; the message does not count toward the
	// batch's messages.
	code, res := f.postBatch(t, todayBody(f.pub, f.pub.Pool(""), append(sealed, bad...)))
	if code != http.StatusOK || res.N != 400 || res.Malformed != int64(len(bad)) || res.Parts[m0.Name] != 400 || res.Parts["net/latency_ms"] != 401 {
		t.Fatalf("status %d, result %+v; want 400 messages, %d malformed, 400 and 401 reports", code, res, len(bad))
	}
	f.checkGuarantee(t, res.Eps, res.Delta, []int64{400})

	d := f.metric(t, m0.Name)
	e := d.Periods[0]
	// The k-RR part of the message the plugin rejects counts as malformed
	// for its metric; the other bad messages never reach a plugin.
	if e.N != 400 || e.Malformed != 1 || e.Guarantee == nil || e.Guarantee.Messages != 400 || e.BatchList[0].Messages != 400 {
		t.Fatalf("metric %s: %+v", m0.Name, e)
	}
	z := distuv.UnitNormal.Quantile(1 - 1e-6/(2*6))
	want := truth(screens)
	for _, it := range e.Estimates {
		if dev := math.Abs(it.Value - float64(want[it.Label])); dev > z*math.Sqrt(it.Variance) {
			t.Errorf("%s: estimate %.1f, truth %d, sd %.1f", it.Label, it.Value, want[it.Label], math.Sqrt(it.Variance))
		}
	}
	lat := f.metric(t, "net/latency_ms").Periods[0]
	latencySum++ // the latency part of the message with the rejected k-RR part
	if lat.N != 401 || lat.Estimates[0].Label != "sum" {
		t.Fatalf("latency: %+v", lat)
	}
	if s := lat.Estimates[0]; math.Abs(s.Value-latencySum) > z*math.Sqrt(s.Variance) {
		t.Errorf("latency sum %.0f, truth %.0f, sd %.0f", s.Value, latencySum, math.Sqrt(s.Variance))
	}
	// Idempotent by batch id across both metrics; a batch named after one
	// metric is refused under pooled travel.
	body := todayBody(f.pub, f.pub.Pool(""), sealed[:60])
	if code, res := f.postBatch(t, body); code != http.StatusOK || res.Duplicate {
		t.Fatalf("second batch: %d %+v", code, res)
	}
	if code, res := f.postBatch(t, body); code != http.StatusOK || !res.Duplicate {
		t.Fatalf("repeated batch: %d %+v", code, res)
	}
	if code, _ := f.postBatch(t, todayBody(f.pub, m0.Name, sealed[:60])); code != http.StatusUnprocessableEntity {
		t.Fatalf("a metric's batch under joint travel: status %d, want 422", code)
	}
	if e := f.metric(t, m0.Name).Periods[0]; e.N != 460 || e.Batches != 2 {
		t.Fatalf("after the second batch: %+v", e)
	}
}

// TestCollectorPooledBatchNothingOpensOnce: a batch of pooled travel in
// which no message opens stores no row per metric; sent again, it is still
// a duplicate, and its malformed reports are counted once.
func TestCollectorPooledBatchNothingOpensOnce(t *testing.T) {
	f := newPooledFixture(t, "joint", 50)
	var junk [][]byte
	for i := range 60 { // n_min is 50
		junk = append(junk, mustSeal(t, f.c.PublicKey(), f.binding, []byte(fmt.Sprintf("not a message %d", i))))
	}
	body := todayBody(f.pub, f.pub.Pool(""), junk)
	if code, res := f.postBatch(t, body); code != http.StatusOK || res.Duplicate || res.N != 0 || res.Malformed != 60 {
		t.Fatalf("first: status %d, %+v; want 0 valid, 60 malformed", code, res)
	}
	if code, res := f.postBatch(t, body); code != http.StatusOK || !res.Duplicate {
		t.Fatalf("again: status %d, %+v; want a duplicate", code, res)
	}
	if st := f.c.Stats(); st.Malformed != 60 || st.Batches != 1 || st.Duplicates != 1 {
		t.Errorf("stats %+v; want 60 malformed reports in 1 batch, 1 duplicate", st)
	}
}

func mustSeal(t *testing.T, pk *report.PublicKey, b report.Binding, pt []byte) []byte {
	t.Helper()
	s, err := report.Seal(pk, b, pt)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestCollectorParallelBatch ingests a parallel batch: each message
// carries one metric; each metric's statistic counts its own, and the
// guarantee is the accountant's for the parallel mechanism at the number
// of messages.
func TestCollectorParallelBatch(t *testing.T) {
	f := newPooledFixture(t, "parallel", 50)
	var sealed [][]byte
	screens := krrValues(300, 4)
	for i, s := range screens {
		a, b := f.randomize(t, s, float64(i))
		if i%3 == 0 {
			sealed = append(sealed, f.seal(t, []report.Part{{Metric: 1, Report: b}}))
		} else {
			sealed = append(sealed, f.seal(t, []report.Part{{Metric: 0, Report: a}}))
		}
	}
	a, b := f.randomize(t, "home", 1)
	bad := [][]byte{
		f.seal(t, []report.Part{{Metric: 0, Report: a}, {Metric: 1, Report: b}}), // two metrics
		f.seal(t, []report.Part{{Metric: 2, Report: a}}),                         // no such metric
	}
	code, res := f.postBatch(t, todayBody(f.pub, f.pub.Pool(""), append(sealed, bad...)))
	if code != http.StatusOK || res.N != 300 || res.Malformed != 2 || res.Parts["ui/screen"] != 200 || res.Parts["net/latency_ms"] != 100 {
		t.Fatalf("status %d, result %+v", code, res)
	}
	f.checkGuarantee(t, res.Eps, res.Delta, []int64{200, 100})
	if e := f.metric(t, "ui/screen").Periods[0]; e.N != 200 || e.Guarantee == nil || e.Guarantee.Messages != 300 || e.Guarantee.N != 200 {
		t.Fatalf("ui/screen: %+v", e)
	}
	// A batch of one metric only gets that metric's guarantee at the
	// whole batch: the others gave it no cover.
	var onlyKRR [][]byte
	for i, s := range sealed {
		if i%3 != 0 {
			onlyKRR = append(onlyKRR, s)
		}
	}
	code, res = f.postBatch(t, todayBody(f.pub, f.pub.Pool(""), onlyKRR[:60]))
	if code != http.StatusOK || res.N != 60 || res.Parts["net/latency_ms"] != 0 {
		t.Fatalf("k-RR-only batch: %d %+v", code, res)
	}
	f.checkGuarantee(t, res.Eps, res.Delta, []int64{60, 0})
}

// TestCollectorParallelUnequalEps0 publishes a parallel plan whose metrics
// have different eps0 (a hand-made plan; AllocatePlan gives them all the
// same): each component must be accounted at its own eps0, not at one of
// them.
func TestCollectorParallelUnequalEps0(t *testing.T) {
	f := newPooledFixtureWith(t, "parallel", 50, func(p *plan.Plan) { p.Metrics[1].Eps0 = 6 })
	var sealed [][]byte
	for i := range 100 {
		a, b := f.randomize(t, "home", float64(i))
		sealed = append(sealed, f.seal(t, []report.Part{{Metric: i % 2, Report: [][]byte{a, b}[i%2]}}))
	}
	code, res := f.postBatch(t, todayBody(f.pub, f.pub.Pool(""), sealed))
	if code != http.StatusOK || res.N != 100 {
		t.Fatalf("%d %+v", code, res)
	}
	f.checkGuarantee(t, res.Eps, res.Delta, []int64{50, 50})
	// The same batch accounted at the k-RR metric's eps0 = 2 for both
	// would claim less: the check above is not vacuous.
	low := f.pub.Metrics[1].Eps0
	f.pub.Metrics[1].Eps0 = f.pub.Metrics[0].Eps0
	ctx := context.Background()
	part := func(r sdk.Randomizer, e0 float64) accountant.Mechanism {
		return accountant.FuncMech{Name: "m", Eps0: e0, Declare: func(e float64) (*accountant.Declaration, error) { return r.Declare(ctx, e) }}
	}
	wrong, err := accountant.Epsilon(accountant.ParallelMech{Weights: []float64{0.5, 0.5}, Parts: []accountant.Mechanism{part(f.krr, 2), part(f.sum, 2)}}, 2, 100, f.pub.Target.Delta)
	if err != nil {
		t.Fatal(err)
	}
	if !(*res.Eps > wrong.Upper) {
		t.Fatalf("eps %g with a metric at eps0 %g, not above %g with both at 2", *res.Eps, low, wrong.Upper)
	}
}

// TestShufflerPoolsPerPlan checks that under pooled travel the shuffler
// takes envelopes of the plan's pool only and releases them as one batch.
func TestShufflerPoolsPerPlan(t *testing.T) {
	p := testPlan(t, 100)
	p.Travel = "joint"
	sink := &sink{}
	srv := newServer(t, sink)
	f := newShufflerFixture(t, shuffler.Options{Plan: p, Collector: srv.URL})
	var res shuffler.UploadResult
	joint := periodKey("@joint", p.Epoch())
	envs := append(envelopes(joint, fakeSealed(100)), envelopes(periodKey("ui/screen", p.Epoch()), fakeSealed(1))...)
	if resp := post(t, nil, f.url, report.EncodeEnvelopes(envs), &res); resp.StatusCode != http.StatusAccepted || res.Accepted != 100 || res.Rejected != 1 {
		t.Fatalf("upload: %d %+v", resp.StatusCode, res)
	}
	closeAll(t, f.s)
	f.run(t)
	waitFor(t, "one batch", func() bool { return len(sink.Got()) == 1 })
	if b := sink.Got()[0]; b.Metric != joint || len(b.Sealed) != 100 {
		t.Fatalf("batch of %q with %d reports", b.Metric, len(b.Sealed))
	}
}

// TestShufflerPoolsPerEpoch checks that envelopes tagged with a plan epoch
// (report.PeriodPoolKey) pool apart: once the period is closed a batch is
// released of the epoch that has n_min reports, holding that epoch's
// only, and the other's, below n_min, is not; a malformed tag is
// refused.
func TestShufflerPoolsPerEpoch(t *testing.T) {
	p := testPlan(t, 100)
	sink := &sink{}
	srv := newServer(t, sink)
	f := newShufflerFixture(t, shuffler.Options{Plan: p, Collector: srv.URL, ReleaseInterval: 10 * time.Millisecond})
	a, b := periodKey(metric, "00000000000000aa"), periodKey(metric, "00000000000000bb")
	upload := func(envs []report.Envelope, accepted, rejected int) {
		t.Helper()
		var res shuffler.UploadResult
		if resp := post(t, nil, f.url, report.EncodeEnvelopes(envs), &res); resp.StatusCode != http.StatusAccepted || res.Accepted != accepted || res.Rejected != rejected {
			t.Fatalf("upload: %d %+v", resp.StatusCode, res)
		}
	}
	upload(append(envelopes(a, fakeSealed(60)), envelopes(b, fakeSealed(60))...), 120, 0)
	upload(append(envelopes(periodKey(metric, "nothex"), fakeSealed(1)), envelopes(periodKey(metric, "00aa"), fakeSealed(1))...), 0, 2)
	f.run(t)
	time.Sleep(100 * time.Millisecond)
	if got := sink.Got(); len(got) != 0 {
		t.Fatalf("released %d batches with 60 reports of each epoch, n_min 100", len(got))
	}
	upload(envelopes(a, fakeSealed(40)), 40, 0)
	closeAll(t, f.s)
	waitFor(t, "the epoch-a batch", func() bool { return len(sink.Got()) == 1 })
	if got := sink.Got()[0]; got.Metric != a || len(got.Sealed) != 100 {
		t.Fatalf("batch of %q with %d reports, want %q with 100", got.Metric, len(got.Sealed), a)
	}
}

// TestCollectorTaggedEpoch checks that a batch tagged with an earlier epoch
// is opened under that epoch only: its reports count there, and reports of
// another epoch in it are malformed; an epoch the collector never
// published is refused.
func TestCollectorTaggedEpoch(t *testing.T) {
	p := testPlan(t, 10)
	f := newCollectorFixture(t, p)
	oldPlan := f.c.Plan()
	old := f.c.Epoch()
	f.p = testPlan(t, 10)
	f.p.Metrics[0].Categories = []string{"search", "home", "settings", "profile"} // same eps0, another epoch
	f.restart(t)
	cur := f.c.Plan()
	late := sealKRR(t, oldPlan, metric, f.c.PublicKey(), krrValues(30, 11), 11)
	now := sealKRR(t, cur, metric, f.c.PublicKey(), krrValues(5, 12), 12)
	code, res := f.postBatch(t, todayBody(oldPlan, metric, append(late, now...)))
	if code != http.StatusOK || res.Epoch != old || res.N != 30 || res.Malformed != 5 {
		t.Fatalf("batch tagged with the earlier epoch: %d %+v", code, res)
	}
	d := f.metric(t, metric)
	if len(d.Periods) != 1 || d.Periods[0].Epoch != old || d.Periods[0].N != 30 || d.Periods[0].Current {
		t.Fatalf("epochs %+v", d.Periods)
	}
	// Tagged with the current epoch, the late reports do not open.
	code, res = f.postBatch(t, todayBody(cur, metric, late))
	if code != http.StatusOK || res.Epoch != cur.Epoch() || res.N != 0 || res.Malformed != 30 {
		t.Fatalf("late reports tagged with the current epoch: %d %+v", code, res)
	}
	// An epoch this collector never published: nothing in it can open.
	// The batch is acknowledged once with every report malformed, so that
	// a shuffler does not retry it forever.
	body := batchBody(periodKey(metric, "0123456789abcdef"), late)
	code, res = f.postBatch(t, body)
	if code != http.StatusOK || res.N != 0 || res.Malformed != int64(len(late)) || res.Duplicate {
		t.Fatalf("unknown epoch: %d %+v, want 200 with every report malformed", code, res)
	}
	if code, res = f.postBatch(t, body); code != http.StatusOK || !res.Duplicate {
		t.Fatalf("unknown epoch again: %d %+v, want a duplicate", code, res)
	}
}

// TestCollectorTravelChange switches a collector from separate to joint
// travel: late reports of the separate plan, tagged with its epoch, are
// still ingested there, and EarlierPlans gives the shuffler their pools.
func TestCollectorTravelChange(t *testing.T) {
	f := newCollectorFixture(t, testPlan(t, 10))
	oldPlan, old := f.c.Plan(), f.c.Epoch()
	f.p = testPlan(t, 10)
	f.p.Travel = "joint"
	f.restart(t)
	earlier, err := f.c.EarlierPlans(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(earlier) != 1 || strings.Join(earlier[0].Pools(), ",") != "ui/screen,net/latency_ms" {
		t.Fatalf("earlier plans %+v", earlier)
	}
	late := sealKRR(t, oldPlan, metric, f.c.PublicKey(), krrValues(20, 13), 13)
	code, res := f.postBatch(t, todayBody(oldPlan, metric, late))
	if code != http.StatusOK || res.N != 20 || res.Epoch != old {
		t.Fatalf("late separate batch under joint travel: %d %+v", code, res)
	}
	s := newShufflerFixture(t, shuffler.Options{Plan: f.c.Plan(), EarlierPlans: earlier, Collector: f.srv.URL})
	var up shuffler.UploadResult
	envs := append(envelopes(periodKey(metric, old), fakeSealed(2)), envelopes(periodKey("@joint", f.c.Epoch()), fakeSealed(2))...)
	if resp := post(t, nil, s.url, report.EncodeEnvelopes(envs), &up); resp.StatusCode != http.StatusAccepted || up.Accepted != 4 {
		t.Fatalf("upload of late and current envelopes: %d %+v", resp.StatusCode, up)
	}
}

// TestShufflerTakesRelayedPools runs a shuffler started with a separate
// plan in front of a collector that publishes a joint one: once an app
// fetched the plan through the shuffler's relay, the shuffler takes the
// joint pool too, and still the earlier ones.
func TestShufflerTakesRelayedPools(t *testing.T) {
	joint := testPlan(t, 10)
	joint.Travel = "joint"
	cf := newCollectorFixture(t, joint)
	sep := testPlan(t, 10)
	f := newShufflerFixture(t, shuffler.Options{Plan: sep, Collector: cf.srv.URL})
	mux := http.NewServeMux()
	(&shuffler.PlanRelay{Collector: cf.srv.URL, OnPlan: f.s.AddPlan}).Register(mux)
	relay := newServer(t, mux)
	envs := envelopes(periodKey("@joint", cf.c.Epoch()), fakeSealed(1))
	var res shuffler.UploadResult
	if resp := post(t, nil, f.url, report.EncodeEnvelopes(envs), &res); resp.StatusCode != http.StatusAccepted || res.Rejected != 1 {
		t.Fatalf("before the relay: %d %+v, want the joint envelope rejected", resp.StatusCode, res)
	}
	var pub plan.Plan
	if code := getJSON(t, relay.URL+"/v1/plan", &pub); code != http.StatusOK || pub.Travel != "joint" {
		t.Fatalf("relayed plan: %d %q", code, pub.Travel)
	}
	envs = append(envelopes(periodKey("@joint", cf.c.Epoch()), fakeSealed(1)), envelopes(periodKey(metric, sep.Epoch()), fakeSealed(1))...)
	if resp := post(t, nil, f.url, report.EncodeEnvelopes(envs), &res); resp.StatusCode != http.StatusAccepted || res.Accepted != 2 {
		t.Fatalf("after the relay: %d %+v, want both taken", resp.StatusCode, res)
	}
}

// TestShufflerEpochCapAndLearnedPools checks MaxEpochsPerPool (an envelope
// of one epoch too many is rejected until an epoch is released) and that
// pools and period lengths learned with AddPlan survive a restart, and
// a period of another length is refused until a plan brings it.
func TestShufflerEpochCapAndLearnedPools(t *testing.T) {
	p := testPlan(t, 10)
	sink := &sink{}
	srv := newServer(t, sink)
	dir := t.TempDir()
	f := newShufflerFixture(t, shuffler.Options{Plan: p, Dir: dir, Collector: srv.URL, MaxEpochsPerPool: 2, ReleaseInterval: 10 * time.Millisecond})
	key := func(e string) string { return periodKey(metric, "00000000000000"+e) }
	upload := func(url string, envs []report.Envelope, accepted, rejected int) {
		t.Helper()
		var res shuffler.UploadResult
		if resp := post(t, nil, url, report.EncodeEnvelopes(envs), &res); resp.StatusCode != http.StatusAccepted || res.Accepted != accepted || res.Rejected != rejected {
			t.Fatalf("upload: %d %+v, want %d accepted and %d rejected", resp.StatusCode, res, accepted, rejected)
		}
	}
	// Epoch a1 pools yesterday's reports, a2 today's.
	yesterday := report.Period{Start: today.Start - today.Length, Length: today.Length}
	a1 := report.PeriodPoolKey(metric, "00000000000000a1", yesterday)
	upload(f.url, append(envelopes(a1, fakeSealed(3)), envelopes(key("a2"), fakeSealed(3))...), 6, 0)
	upload(f.url, envelopes(key("a3"), fakeSealed(1)), 0, 1)
	// Another period of an epoch already pooled is not another epoch.
	upload(f.url, envelopes(report.PeriodPoolKey(metric, "00000000000000a2", yesterday), fakeSealed(1)), 1, 0)
	f.run(t)
	upload(f.url, envelopes(a1, fakeSealed(7)), 7, 0) // a1 reaches n_min
	// Yesterday closes: a1's pool goes out whole (a2's one report of
	// yesterday, below n_min, is deleted; a2 keeps today's).
	if _, err := f.s.ClosePeriods(context.Background(), time.Unix(yesterday.End(), 0)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the a1 batch", func() bool { return len(sink.Got()) == 1 })
	waitFor(t, "a free epoch slot", func() bool {
		var res shuffler.UploadResult
		post(t, nil, f.url, report.EncodeEnvelopes(envelopes(key("a3"), fakeSealed(1))), &res)
		return res.Accepted == 1
	})

	hourly := testPlan(t, 10)
	hourly.Travel, hourly.Period = "joint", "1h"
	hour := report.Period{Start: time.Now().Unix() / 3600 * 3600, Length: 3600}
	upload(f.url, envelopes(report.PeriodPoolKey(metric, "00000000000000a1", hour), fakeSealed(1)), 0, 1)
	f.s.AddPlan(hourly)
	f.s.Close()
	g := newShufflerFixture(t, shuffler.Options{Plan: p, Dir: dir, Collector: srv.URL})
	upload(g.url, envelopes(periodKey("@joint", "00000000000000b1"), fakeSealed(1)), 1, 0)
	upload(g.url, envelopes(report.PeriodPoolKey("@joint", "00000000000000b1", hour), fakeSealed(1)), 1, 0)
}

// TestCollectorEpochThatDoesNotOpenHere: a batch of an epoch this
// collector published but whose plugin does not open here (a replica
// still on the old plugin during a rolling upgrade, or a plugin gone for
// a while) is refused with 500 and nothing is stored, so that the
// shuffler retries it; once the plugin opens it is counted. (It was
// acknowledged as all malformed, and lost.)
func TestCollectorEpochThatDoesNotOpenHere(t *testing.T) {
	f := newCollectorFixture(t, testPlan(t, 10))
	oldPlan := f.c.Plan()
	f.c.Close()
	p2 := testPlan(t, 10)
	p2.Metrics[0].Categories = []string{"search", "home", "settings", "profile"} // another epoch
	refuseOld := func(ctx context.Context, name string, cfg sdk.Config) (sdk.Randomizer, error) {
		if name == "krr" && cfg.Categories[0] == "home" {
			return nil, errors.New("plugin krr of the old epoch is not installed here")
		}
		return openBuiltin(ctx, name, cfg)
	}
	c, err := OpenCollector(context.Background(), CollectorOptions{Plan: p2, Dir: f.dir, Store: servertest.Store(t, f.dir), Open: refuseOld, Token: testToken, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	f.c = c
	t.Cleanup(func() { c.Close() })
	f.install()
	body := todayBody(oldPlan, metric, sealKRR(t, oldPlan, metric, c.PublicKey(), krrValues(20, 3), 3))
	if code, res := f.postBatch(t, body); code != http.StatusInternalServerError {
		t.Fatalf("batch of an epoch that does not open here: %d %+v, want 500", code, res)
	}
	f.p = oldPlan
	f.restart(t) // the plugin opens again
	if code, res := f.postBatch(t, body); code != http.StatusOK || res.N != 20 || res.Duplicate {
		t.Fatalf("the same batch once the plugin opens: %d %+v, want 20 counted", code, res)
	}
}
