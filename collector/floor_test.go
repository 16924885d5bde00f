package collector

import (
	"context"
	"errors"
	"math"
	"net/http"
	"slices"
	"testing"

	"github.com/blanket-dp/blanket/accountant"
	"github.com/blanket-dp/blanket/collector/shuffler"
	"github.com/blanket-dp/blanket/sdk"
	"github.com/blanket-dp/blanket/sdk/plan/accounting"
	"github.com/blanket-dp/blanket/sdk/report"
)

// TestFloorAttack is the attack of issue 27 over loopback: a period whose
// one batch holds the victim's report, the shuffler's m blanket draws and
// n_min - 1 reports of an attacker who knows their values. A real
// shuffler with the plan's floor adds the draws; the collector ingests
// the batch over HTTP. What it states must hold:
//
//   - the floor alone is at least the exact eps of the victim's report
//     among m uniform draws (exactKRRFloorEps, computed here by the
//     sufficient counts, independently of the accountant), and within 2%
//     of it (the floor alone is the exact value, bracketed);
//   - the batch's guarantee with its apps' reports counts the draws:
//     below the guarantee of its apps' reports alone;
//   - the draws count toward neither n_min nor N, and the estimates take
//     them out: every category within 4 standard errors of the truth,
//     where counting the draws as apps' reports would put each m/k off;
//   - the horizon states the floor alone too, no smaller than the one
//     period's.
func TestFloorAttack(t *testing.T) {
	const nMin, m = 100, 1000
	p := testPlan(t, nMin)
	p.Floor = m
	f := newCollectorFixture(t, p)
	s := newShufflerFixture(t, shuffler.Options{Plan: f.c.Plan(), Open: openBuiltin, Collector: f.srv.URL, Token: testToken})

	values := []string{"home"} // the victim
	for range nMin - 1 {
		values = append(values, "search") // the attacker's, known
	}
	post(t, nil, s.url, report.EncodeEnvelopes(envelopes(periodKey(metric, f.c.Epoch()), sealKRR(t, f.c.Plan(), metric, f.c.PublicKey(), values, 7))), nil)
	closeAll(t, s.s)
	ctx := context.Background()
	if n, err := s.s.Release(ctx); err != nil || n != 1 {
		t.Fatalf("Release = %d, %v", n, err)
	}
	s.run(t)
	waitFor(t, "the batch acknowledged", func() bool {
		st, _ := s.s.Stats(ctx)
		return st.BatchesForwarded == 1
	})

	d := f.metric(t, metric)
	if len(d.Periods) != 1 {
		t.Fatalf("%d periods, want 1", len(d.Periods))
	}
	e := d.Periods[0]
	if e.N != nMin || e.Draws != m || e.Malformed != 0 || len(e.BatchList) != 1 || e.BatchList[0].N != nMin || e.BatchList[0].Draws != m {
		t.Fatalf("period: n = %d, draws = %d, malformed = %d, batches %+v; want %d apps' reports and %d draws in one batch", e.N, e.Draws, e.Malformed, e.BatchList, nMin, m)
	}
	if st := f.c.Stats(); st.Reports != nMin || st.Draws != m || st.Malformed != 0 {
		t.Fatalf("ingest counters: %+v, want %d reports and %d draws", st, nMin, m)
	}

	// The floor alone against the exact divergence.
	if e.Floor == nil || e.Floor.Eps == nil || e.Floor.Draws != m {
		t.Fatalf("floor = %+v, want one with eps for %d draws", e.Floor, m)
	}
	pm := f.c.Plan().Metric(metric)
	k := len(pm.Categories) + 1
	exact := exactKRRFloorEps(k, pm.Eps0, m, e.Floor.Delta)
	if got := *e.Floor.Eps; got < exact*(1-1e-9) || got > exact*1.02 {
		t.Fatalf("stated floor eps = %.6f, exact eps of the victim among %d draws = %.6f: want at least it, within 2%%", got, m, exact)
	}
	t.Logf("floor alone: stated %.6f, exact %.6f (k = %d, eps0 = %g, m = %d, delta = %g)", *e.Floor.Eps, exact, k, pm.Eps0, m, e.Floor.Delta)

	// The guarantee with the apps' reports counts the draws.
	mech, eps0, delta, err := accounting.BatchMechanism(ctx, f.c.Plan(), openBuiltin, metric)
	if err != nil {
		t.Fatal(err)
	}
	alone, err := accountant.Epsilon(mech, eps0, nMin, delta)
	if err != nil {
		t.Fatal(err)
	}
	with, err := accountant.FloorEpsilon(mech, eps0, nMin, m, delta)
	if err != nil {
		t.Fatal(err)
	}
	if e.Guarantee == nil || e.Guarantee.Draws != m || e.Guarantee.Messages != nMin || math.Abs(e.Guarantee.Eps-with.Upper) > 1e-12*with.Upper ||
		e.Guarantee.Eps >= alone.Upper || e.Guarantee.Eps > *e.Floor.Eps {
		t.Fatalf("guarantee %+v; want the accountant's for %d apps' reports and %d draws, %.6f, below %.6f (the apps' reports alone) and %.6f (the draws alone)", e.Guarantee, nMin, m, with.Upper, alone.Upper, *e.Floor.Eps)
	}

	// The estimates, the draws taken out.
	if e.EstimateError != "" {
		t.Fatalf("estimate error: %s", e.EstimateError)
	}
	want := truth(values)
	for _, it := range e.Estimates {
		sd := math.Sqrt(it.Variance)
		if off := math.Abs(it.Value - float64(want[it.Label])); off > 4*sd || 4*sd > float64(m)/float64(k) {
			t.Errorf("%s: estimate %.1f ± %.1f, truth %d: want within 4 sd, and 4 sd below the draws' m/k = %d", it.Label, it.Value, sd, want[it.Label], m/k)
		}
	}

	// The horizon (one period of one metric with data, at the plan's
	// target delta): the floor alone over it, no smaller than the one
	// report's among the draws.
	h := d.Horizon
	if h == nil {
		t.Fatal("no horizon")
	}
	one, err := accountant.FloorEpsilon(mech, eps0, 1, m, h.Delta)
	if err != nil {
		t.Fatal(err)
	}
	if h == nil || h.Floor == nil || h.Floor.Eps == nil || h.Floor.Draws != m || *h.Floor.Eps < one.Upper*(1-1e-9) || *h.Floor.Eps > one.Upper*1.02 {
		t.Fatalf("horizon %+v, floor %+v; want the floor alone of %d draws, at least %.6f and within 2%% of it", h, h.Floor, m, one.Upper)
	}
}

// exactKRRFloorEps returns the smallest eps (to 1e-7) at which the
// hockey-stick divergence of the victim's k-RR report at eps0 among m
// uniform draws (the k-RR blanket), for inputs x != x', is at most delta:
// the sufficient statistic is the pair of counts (c_x, c_x') of the m + 1
// outputs, whose law under x is
//
//	P(i, j) = a M(i-1, j) + b M(i, j-1) + (k-2) b M(i, j),
//
// a = e^eps0 / (e^eps0 + k - 1), b = 1 / (e^eps0 + k - 1), M the
// multinomial law of the draws' counts (1/k, 1/k, (k-2)/k), and under x'
// the same with a and b swapped.
func exactKRRFloorEps(k int, eps0 float64, m int, delta float64) float64 {
	a := math.Exp(eps0) / (math.Exp(eps0) + float64(k) - 1)
	b := 1 / (math.Exp(eps0) + float64(k) - 1)
	lk, lrest := math.Log(1/float64(k)), math.Log(float64(k-2)/float64(k))
	lg := func(n int) float64 { v, _ := math.Lgamma(float64(n) + 1); return v }
	M := func(i, j int) float64 {
		if i < 0 || j < 0 || i+j > m {
			return 0
		}
		return math.Exp(lg(m) - lg(i) - lg(j) - lg(m-i-j) + float64(i+j)*lk + float64(m-i-j)*lrest)
	}
	var P, Q []float64
	for i := 0; i <= m+1; i++ {
		for j := 0; i+j <= m+1; j++ {
			mi, mj, mij := M(i-1, j), M(i, j-1), M(i, j)
			P = append(P, a*mi+b*mj+float64(k-2)*b*mij)
			Q = append(Q, b*mi+a*mj+float64(k-2)*b*mij)
		}
	}
	div := func(eps float64) float64 {
		e, s := math.Exp(eps), 0.0
		for i := range P {
			s += max(P[i]-e*Q[i], 0)
		}
		return s
	}
	lo, hi := 0.0, eps0
	if div(lo) <= delta {
		return 0
	}
	for hi-lo > 1e-7 {
		mid := (lo + hi) / 2
		if div(mid) <= delta {
			hi = mid
		} else {
			lo = mid
		}
	}
	return hi
}

// TestFloorFewestDraws: a period and the horizon state the floor alone
// at the fewest draws of the period's batches, and each batch's guarantee
// at its own counts. Three batches of one period, a floor of 1000: one
// with 100 apps' reports, its 1000 draws and 5 reports that do not open
// (995 draws counted: any of the 5 may have been one); one of 100 apps'
// reports whose drawing failed (no draws: the floor alone is the local
// guarantee); one of 1000 draws and 100 reports that do not open (no
// report of an app: it changes nothing published).
func TestFloorFewestDraws(t *testing.T) {
	const nMin, m = 100, 1000
	p := testPlan(t, nMin)
	p.Floor = m
	f := newCollectorFixture(t, p)
	cp := f.c.Plan()
	apps := func(seed uint64) [][]byte {
		return sealKRR(t, cp, metric, f.c.PublicKey(), krrValues(nMin, seed), seed)
	}
	post := func(sealed [][]byte, draws int) IngestResult {
		t.Helper()
		code, res := f.postBatch(t, report.EncodeBatch(report.Batch{ID: report.NewID(), Metric: periodKey(metric, f.c.Epoch()), Suite: report.SuiteX25519ChaCha, Sealed: sealed, Draws: draws}))
		if code != http.StatusOK {
			t.Fatalf("batch of %d reports with %d draws: %d", len(sealed), draws, code)
		}
		return res
	}
	a := post(slices.Concat(apps(1), sealDraws(t, f, m), fakeSealed(5)), m)
	b := post(apps(2), 0)
	c := post(slices.Concat(sealDraws(t, f, m), fakeSealed(nMin)), m)
	if a.N != nMin || a.Draws != m || a.Malformed != 5 || b.N != nMin || b.Draws != 0 || c.N != 0 || c.Draws != m || c.Malformed != nMin {
		t.Fatalf("results %+v, %+v, %+v", a, b, c)
	}

	ctx := context.Background()
	mech, eps0, delta, err := accounting.BatchMechanism(ctx, cp, openBuiltin, metric)
	if err != nil {
		t.Fatal(err)
	}
	want := func(honest, draws int) float64 {
		r, err := accountant.FloorEpsilon(mech, eps0, honest, draws, delta)
		if err != nil {
			t.Fatal(err)
		}
		return r.Upper
	}
	d := f.metric(t, metric)
	e := d.Periods[0]
	if e.N != 2*nMin || e.Draws != m || len(e.BatchList) != 3 {
		t.Fatalf("period n = %d, draws = %d, %d batches; want %d, %d (the third batch's emptied), 3", e.N, e.Draws, len(e.BatchList), 2*nMin, m)
	}
	first := e.BatchList[0]
	if first.Draws != m-5 || first.Eps == nil || math.Abs(*first.Eps-want(nMin, m-5)) > 1e-12 {
		t.Errorf("first batch %+v: want 995 draws counted and the accountant's %.6f", first, want(nMin, m-5))
	}
	local := want(1, 0)
	if e.Floor == nil || e.Floor.Draws != 0 || e.Floor.Eps == nil || math.Abs(*e.Floor.Eps-local) > 1e-12 || local < eps0*(1-1e-9) {
		t.Errorf("period floor %+v: want no draws, the local %.6f (eps0 %g)", e.Floor, local, eps0)
	}
	plain, err := accountant.Epsilon(mech, eps0, nMin, delta)
	if err != nil {
		t.Fatal(err)
	}
	if e.Guarantee == nil || e.Guarantee.Draws != 0 || math.Abs(e.Guarantee.Eps-plain.Upper) > 1e-12 {
		t.Errorf("period guarantee %+v: want the batch without draws', %.6f", e.Guarantee, plain.Upper)
	}
	if h := d.Horizon; h == nil || h.Floor == nil || h.Floor.Draws != 0 || h.Floor.Eps == nil || *h.Floor.Eps < local*(1-1e-9) {
		t.Errorf("horizon %+v: want its floor alone at no draws, at least %.6f", h, local)
	}
}

// sealDraws returns n draws of the test plan's k-RR blanket at its eps0,
// sealed for today's period as the shuffler seals them.
func sealDraws(t *testing.T, f *collectorFixture, n int) [][]byte {
	t.Helper()
	p := f.c.Plan()
	pm := p.Metric(metric)
	r, err := openBuiltin(context.Background(), pm.Plugin, pm.Config())
	if err != nil {
		t.Fatal(err)
	}
	reps, err := r.(sdk.BlanketSampler).SampleBlanket(context.Background(), pm.Eps0, n)
	if err != nil {
		t.Fatal(err)
	}
	b := p.Binding(metric)
	b.Period = today
	out := make([][]byte, n)
	for i, rep := range reps {
		if out[i], err = report.Seal(f.c.PublicKey(), b, rep); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// TestFloorCounts: the draws a batch says it holds are set apart from its
// valid reports by the rules of floor.go, whatever failed to open.
func TestFloorCounts(t *testing.T) {
	for _, tc := range []struct {
		reports, valid, draws int
		apps, counted         int64
		emptied, refused      bool
	}{
		{reports: 150, valid: 150, draws: 50, apps: 100, counted: 50},
		// Five reports failed to open: perhaps draws, so five fewer are
		// counted.
		{reports: 150, valid: 145, draws: 50, apps: 95, counted: 45},
		{reports: 150, valid: 90, draws: 50, apps: 40, counted: 0},
		// No report of an app: the statistic changes no estimate.
		{reports: 150, valid: 50, draws: 50, apps: 0, counted: 0, emptied: true},
		// Fewer valid reports than draws: a shuffler's draws always open.
		{reports: 150, valid: 30, draws: 50, refused: true},
		{reports: 150, valid: 150, draws: 0, apps: 150, counted: 0},
	} {
		in := &ingestion{b: report.Batch{Sealed: make([][]byte, tc.reports), Draws: tc.draws}, res: IngestResult{Reports: tc.reports}}
		stat := &sdk.Statistic{N: int64(tc.valid), Counts: []int64{int64(tc.valid)}}
		parts := []metricBatch{{rec: batchRecord{n: int64(tc.valid)}, stat: stat}}
		counted, err := in.takeDraws(parts, int64(tc.valid))
		if tc.refused {
			if !errors.Is(err, ErrBatchRefused) {
				t.Errorf("%+v: err = %v, want ErrBatchRefused", tc, err)
			}
			continue
		}
		wantStat := sdk.Statistic{N: int64(tc.valid), Counts: []int64{int64(tc.valid)}, Draws: int64(tc.draws)}
		if tc.emptied {
			wantStat = sdk.Statistic{Counts: []int64{0}}
		}
		if err != nil || counted != tc.counted || parts[0].rec.draws != tc.counted || parts[0].rec.n != tc.apps || in.res.Draws != int64(tc.draws) ||
			stat.N != wantStat.N || stat.Draws != wantStat.Draws || stat.Counts[0] != wantStat.Counts[0] {
			t.Errorf("%+v: counted %d, %v, row %+v, statistic %+v, result draws %d", tc, counted, err, parts[0].rec, stat, in.res.Draws)
		}
	}
}

// TestFloorBatchRefusals: a batch is refused when its draws are not its
// epoch's plan's floor (nor 0), when its reports less its draws are
// fewer than n_min, and when fewer of its reports open than it has
// draws; a plan with no floor takes no draws.
func TestFloorBatchRefusals(t *testing.T) {
	p := testPlan(t, 10)
	p.Floor = 2
	f := newCollectorFixture(t, p)
	sealed := sealKRR(t, f.c.Plan(), metric, f.c.PublicKey(), krrValues(12, 6), 6)
	junk := append(fakeSealed(11), sealed[0])
	for _, tc := range []struct {
		name   string
		sealed [][]byte
		draws  int
		want   int
	}{
		{"9 apps' reports", sealed[:11], 2, http.StatusUnprocessableEntity},
		{"not the floor", sealed, 3, http.StatusUnprocessableEntity},
		{"one report opens, two draws", junk, 2, http.StatusUnprocessableEntity},
		{"the floor", sealed, 2, http.StatusOK},
		{"drawing failed", sealed, 0, http.StatusOK},
	} {
		body := report.EncodeBatch(report.Batch{ID: report.NewID(), Metric: periodKey(metric, f.c.Epoch()), Suite: report.SuiteX25519ChaCha, Sealed: tc.sealed, Draws: tc.draws})
		code, res := f.postBatch(t, body)
		if code != tc.want || (code == http.StatusOK && (res.N != int64(12-tc.draws) || res.Draws != int64(tc.draws))) {
			t.Errorf("%s: %d %+v, want %d", tc.name, code, res, tc.want)
		}
	}

	g := newCollectorFixture(t, testPlan(t, 10))
	body := report.EncodeBatch(report.Batch{ID: report.NewID(), Metric: periodKey(metric, g.c.Epoch()), Suite: report.SuiteX25519ChaCha, Sealed: sealKRR(t, g.c.Plan(), metric, g.c.PublicKey(), krrValues(12, 6), 6), Draws: 2})
	if code, _ := g.postBatch(t, body); code != http.StatusUnprocessableEntity {
		t.Errorf("draws under a plan without a floor: %d, want 422", code)
	}
}
