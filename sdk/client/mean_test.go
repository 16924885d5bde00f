package client_test

import (
	"context"
	"encoding/binary"
	"errors"
	"math"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/blanket-dp/blanket/plugins/builtin"
	"github.com/blanket-dp/blanket/plugins/laplace"
	"github.com/blanket-dp/blanket/sdk"
	"github.com/blanket-dp/blanket/sdk/client"
	"github.com/blanket-dp/blanket/sdk/plan"
	"github.com/blanket-dp/blanket/sdk/report"
)

// latencyMetric is the test plan's mean metric: a Laplace randomizer over
// [0, 100] whose period value is the mean of the app's values.
const latencyMetric = "app/latency"

// newMeanServer starts a fake server whose plan is the test plan with
// travel and a fourth metric, app/latency (laplace over [0, 100],
// aggregate mean), calibrated by hand like the others.
func newMeanServer(t testing.TB, travel string) *fakeServer {
	t.Helper()
	f := newFakeServer(t, nil)
	pl := testPlan(nil)
	pl.CollectorKeys = fakeKeys(t, f)
	pl.Travel = travel
	pl.Metrics = append(pl.Metrics, plan.Metric{Name: latencyMetric, Plugin: "laplace", Lo: 0, Hi: 100, Aggregate: plan.AggregateMean,
		Version: "1", Eps0: testEps0, Delta: 1e-6 / 4})
	f.setPlan(pl)
	return f
}

// outputSpy records, per plugin, what every randomizer it opened was asked
// to randomize and the reports it returned, so that a test can tie the
// report the collector opened to the value it was made of.
type outputSpy struct {
	mu   sync.Mutex
	ins  map[string][]sdk.Inputs
	outs map[string][][]byte
}

// withLaplace returns a randomizer cache of the default randomizers and
// laplace, in process: how an app whose plan names laplace opts in (see
// client.DefaultRandomizers).
func withLaplace(t testing.TB) *client.RandomizerCache {
	f := client.DefaultRandomizers()
	f[laplace.Name] = sdk.FactoryOf(laplace.FromConfig)
	c := client.NewRandomizerCache(client.InProcess(f))
	t.Cleanup(func() { c.Close() })
	return c
}

func (s *outputSpy) cache(t *testing.T) *client.RandomizerCache {
	s.ins, s.outs = map[string][]sdk.Inputs{}, map[string][][]byte{}
	c := client.NewRandomizerCache(func(ctx context.Context, name string, cfg sdk.Config) (sdk.Randomizer, error) {
		r, err := client.InProcess(builtin.Factories())(ctx, name, cfg)
		if err != nil {
			return nil, err
		}
		return outputSpied{Randomizer: r, s: s, name: name}, nil
	})
	t.Cleanup(func() { c.Close() })
	return c
}

func (s *outputSpy) got(name string) ([]sdk.Inputs, [][]byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.ins[name]), slices.Clone(s.outs[name])
}

type outputSpied struct {
	sdk.Randomizer
	s    *outputSpy
	name string
}

func (r outputSpied) Randomize(ctx context.Context, eps0 float64, in sdk.Inputs) ([][]byte, error) {
	reps, err := r.Randomizer.Randomize(ctx, eps0, in)
	r.s.mu.Lock()
	defer r.s.mu.Unlock()
	r.s.ins[r.name] = append(r.s.ins[r.name], in)
	if len(reps) == 1 {
		r.s.outs[r.name] = append(r.s.outs[r.name], reps[0])
	}
	return reps, err
}

// TestMeanRecordsOnePeriod records a mean metric 100 times in each of
// four periods: the outbox stages the period's unclamped total and the
// number of values; nothing is sent while the period is open; once it has
// closed, exactly one report of the period goes out, pooled under the
// period's key, and the report the collector opens is the randomizer's
// output for the period's mean clamped to [0, 100] — not the total, the
// last value, the mean of the clamped values, or a mean over another
// count. The values are integers and halves, so every total and mean is
// exact in floating point. Each Record is a SQLite transaction, most of
// the test's CPU under -race: TestMeanThousandRecordsOnePeriod (make
// audit) records 1000 times per period.
func TestMeanRecordsOnePeriod(t *testing.T) {
	meanRecordsOnePeriod(t, 100)
}

// meanRecordsOnePeriod runs TestMeanRecordsOnePeriod with n Records per
// period (a multiple of 100).
func meanRecordsOnePeriod(t *testing.T, n int) {
	f := newMeanServer(t, "separate")
	dir := t.TempDir()
	cfg, clk := clockConfig(f, dir)
	var sp outputSpy
	cfg.Randomizers = sp.cache(t)
	o := sqliteOutbox(t, dir)
	cfg.Outbox = o
	p := newProvider(t, cfg)
	ctx := context.Background()
	latency := p.Meter("app").Mean("latency")
	cases := []struct {
		value      func(i int) float64
		mean, sent float64 // the period's total is mean * n
	}{
		// In range: the total (49.5 n) would be clamped to 100, the last
		// value is 99.
		{value: func(i int) float64 { return float64(i % 100) }, mean: 49.5, sent: 49.5},
		// The mean of the clamped values would be 50, the clamped total
		// 100, the clamped last value 0.
		{value: func(i int) float64 { return []float64{250, -100}[i%2] }, mean: 75, sent: 75},
		// Above the range.
		{value: func(i int) float64 { return 120 + float64(i%10) }, mean: 124.5, sent: 100},
		// Below the range.
		{value: func(i int) float64 { return -0.5 - float64(i%2) }, mean: -1, sent: 0},
	}
	pl := p.Plan()
	var periods []report.Period
	for k, c := range cases {
		periods = append(periods, pl.ReportPeriod(clk.Now()))
		for i := range n {
			if err := latency.Record(ctx, c.value(i)); err != nil {
				t.Fatal(err)
			}
		}
		staged, err := o.Staged(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if total := c.mean * float64(n); len(staged) != 1 || staged[0].Metric != latencyMetric || staged[0].Sum != total || staged[0].Count != int64(n) {
			t.Fatalf("case %d: staged %+v, want the total %v of %d values", k, staged, total, n)
		}
		if k == 0 {
			flush(t, p)
			if _, raw, _ := f.counts(); raw != 0 {
				t.Fatalf("the server got %d envelopes while the period was open", raw)
			}
		}
		clk.Advance(day) // the next Record, or the Flush below, closes it
	}
	flush(t, p)
	flush(t, p) // closing again sends nothing more

	if st := p.Stats(); st.Recorded != int64(n*len(cases)) || st.Messages != int64(len(cases)) || st.Uploaded != int64(len(cases)) {
		t.Fatalf("stats %+v, want %d recorded, one report per period sealed and uploaded", st, n*len(cases))
	}
	keys := f.keyCounts()
	for k, period := range periods {
		if c := keys[report.PeriodPoolKey(latencyMetric, pl.Epoch(), period)]; c != 1 {
			t.Errorf("case %d: %d reports of period %s, want 1", k, c, period)
		}
	}
	ins, outs := sp.got("laplace")
	if len(ins) != len(cases) || len(outs) != len(cases) {
		t.Fatalf("%d values randomized, %d reports made; want %d", len(ins), len(outs), len(cases))
	}
	f.mu.Lock()
	opened := slices.Clone(f.opened[latencyMetric])
	f.mu.Unlock()
	if len(opened) != len(cases) {
		t.Fatalf("the collector opened %d reports, want %d", len(opened), len(cases))
	}
	for k, c := range cases {
		if got := ins[k].Reals; len(got) != 1 || got[0] != c.sent {
			t.Errorf("case %d: randomized %v, want the clamped mean %v", k, got, c.sent)
		}
		// Reports upload in the order their periods closed.
		if !slices.Equal(opened[k], outs[k]) {
			t.Errorf("case %d: the opened report is not the randomizer's output for the clamped mean", k)
		}
		if y := math.Float64frombits(binary.BigEndian.Uint64(opened[k])); len(opened[k]) != 8 || math.IsNaN(y) || math.IsInf(y, 0) {
			t.Errorf("case %d: opened report %x is not a laplace report", k, opened[k])
		}
	}
	l, err := p.Ledger(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(l) != len(cases) {
		t.Errorf("ledger %+v, want one report per period", l)
	}
	for _, e := range l {
		if e.Metric != latencyMetric || e.Reports != 1 || e.Eps0 != testEps0 {
			t.Errorf("ledger entry %+v, want one report of %s at eps0 %v", e, latencyMetric, testEps0)
		}
	}
	f.checkReports(t, pl)
}

// TestMeanPeriodEstimate checks the clamped mean end to end with the real
// laplace randomizer and its estimator: 1000 periods, each with the values
// -300, 100, 100, 100, 100, must estimate a mean of 20 (their mean), not 80
// (the mean of the values clamped to [0, 100]) nor 100 (their total, or
// the last value, clamped). z-test at a two-sided false-failure rate of
// 1e-6: |z| <= 4.89 (the normal quantile of 1 - 5e-7), with the
// estimator's own variance (about 2.2 here: (Hi-Lo)·sqrt(2)/eps0 per
// report over sqrt(1000)); the test also checks that the nearest wrong
// answer would fail it.
func TestMeanPeriodEstimate(t *testing.T) {
	f := newMeanServer(t, "separate")
	cfg, clk := clockConfig(f, "")
	cfg.Randomizers = withLaplace(t)
	cfg.Outbox, cfg.UploadDelay = client.NewMemoryOutbox(), time.Hour
	p := newProvider(t, cfg)
	ctx := context.Background()
	latency := p.Meter("app").Mean("latency")
	const periods = 1000
	recordPeriods(t, clk, periods, func(int) error {
		var errs []error
		for _, x := range []float64{-300, 100, 100, 100, 100} {
			errs = append(errs, latency.Record(ctx, x))
		}
		return errors.Join(errs...)
	})
	flush(t, p)
	pl := p.Plan()
	m := pl.Metric(latencyMetric)
	r, err := client.InProcess(builtin.Factories())(ctx, m.Plugin, m.Config())
	if err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	reps := f.opened[latencyMetric]
	f.mu.Unlock()
	if len(reps) != periods {
		t.Fatalf("%d reports, want %d", len(reps), periods)
	}
	st, err := r.Accumulate(ctx, m.Eps0, reps)
	if err != nil {
		t.Fatal(err)
	}
	est, err := r.Estimate(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	const zCrit = 4.89
	const want, nearestWrong = 20, 80
	for _, it := range est.Items {
		if it.Label != "mean" {
			continue
		}
		sd := math.Sqrt(it.Variance)
		t.Logf("mean %.2f ± %.2f (sd)", it.Value, sd)
		if math.Abs(it.Value-want)/sd > zCrit {
			t.Errorf("estimated mean %.2f, sd %.2f: |z| > %v from %v", it.Value, sd, zCrit, want)
		}
		if (nearestWrong-want)/sd <= 2*zCrit {
			t.Fatalf("sd %.2f is too large for the test to tell %v from %v", sd, want, nearestWrong)
		}
		return
	}
	t.Fatalf("no mean in %+v", est.Items)
}

// TestMeanInstrumentErrors checks that a Mean takes only a real metric of
// aggregate mean and a Sum only one of aggregate sum, both failing with
// ErrWrongKind otherwise and staging nothing, and that a Mean checks its
// values as a Sum does.
func TestMeanInstrumentErrors(t *testing.T) {
	f := newMeanServer(t, "separate")
	cfg := fastConfig(f, "")
	cfg.Randomizers = withLaplace(t)
	o := client.NewMemoryOutbox()
	cfg.Outbox = o
	p := newProvider(t, cfg)
	ctx := context.Background()
	m := p.Meter("app")
	wrong := map[string]interface {
		Err() error
		Enabled(context.Context) bool
	}{
		"Sum on a mean metric":          m.Sum("latency"),
		"Mean on a sum metric":          m.Mean("bytes"),
		"Mean on a categorical metric":  m.Mean("screen"),
		"Categorical on a mean metric":  m.Categorical("latency"),
		"Mean on a metric not the plan": m.Mean("nope"),
	}
	for what, in := range wrong {
		want := client.ErrWrongKind
		if what == "Mean on a metric not the plan" {
			want = client.ErrUnknownMetric
		}
		if !errors.Is(in.Err(), want) || in.Enabled(ctx) {
			t.Errorf("%s: Err = %v, Enabled = %v; want %v, false", what, in.Err(), in.Enabled(ctx), want)
		}
	}
	if err := m.Sum("latency").Record(ctx, 1); !errors.Is(err, client.ErrWrongKind) {
		t.Errorf("Sum.Record on a mean metric: %v, want ErrWrongKind", err)
	} else {
		t.Log(err)
	}
	if err := m.Mean("bytes").Record(ctx, 1); !errors.Is(err, client.ErrWrongKind) {
		t.Errorf("Mean.Record on a sum metric: %v, want ErrWrongKind", err)
	} else {
		t.Log(err)
	}
	if err := m.Mean("screen").Record(ctx, 1); !errors.Is(err, client.ErrWrongKind) {
		t.Errorf("Mean.Record on a categorical metric: %v, want ErrWrongKind", err)
	}
	if err := m.Categorical("latency").Record(ctx, "x"); !errors.Is(err, client.ErrWrongKind) {
		t.Errorf("Categorical.Record on a mean metric: %v, want ErrWrongKind", err)
	}
	if err := m.Mean("nope").Record(ctx, 1); !errors.Is(err, client.ErrUnknownMetric) {
		t.Errorf("Mean.Record on a metric not in the plan: %v, want ErrUnknownMetric", err)
	}
	for _, v := range []float64{math.NaN(), math.Inf(1), math.Inf(-1)} {
		if err := m.Mean("latency").Record(ctx, v); !errors.Is(err, client.ErrBadValue) || !errors.Is(err, sdk.ErrBadInput) {
			t.Errorf("Mean.Record(%v): %v, want ErrBadValue", v, err)
		}
	}
	if staged, _ := o.Staged(ctx); len(staged) != 0 || p.Stats().Recorded != 0 {
		t.Fatalf("failed Records staged %+v (recorded %d)", staged, p.Stats().Recorded)
	}
	// The right instruments work, side by side.
	mean, sum := m.Mean("latency"), m.Sum("bytes")
	if mean.Err() != nil || !mean.Enabled(ctx) || mean.Name() != latencyMetric || sum.Err() != nil {
		t.Errorf("Mean: Err %v, Enabled %v, Name %q; Sum: Err %v", mean.Err(), mean.Enabled(ctx), mean.Name(), sum.Err())
	}
	if err := errors.Join(mean.Record(ctx, 1e9), sum.Record(ctx, 3)); err != nil {
		t.Errorf("out-of-range mean value (clamped at closing) and a sum: %v", err)
	}
	if st := p.Stats(); st.Recorded != 2 {
		t.Errorf("recorded %d, want 2", st.Recorded)
	}
	// A nil or off Provider's Mean records nothing, without error.
	var nilp *client.Provider
	if err := nilp.Meter("app").Mean("latency").Record(ctx, 1); err != nil || nilp.Meter("app").Mean("latency").Err() != nil {
		t.Errorf("nil Provider: %v", err)
	}
}

// TestMeanPlanRefusals checks that a plan giving a categorical metric an
// aggregate, or any metric an unknown one, is refused (the plan's Validate
// cannot tell a metric's input kind; verifyPlan opens its randomizer).
func TestMeanPlanRefusals(t *testing.T) {
	_, pub, err := report.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	cache := client.NewRandomizerCache(nil)
	t.Cleanup(func() { cache.Close() })
	for what, edit := range map[string]func(p *plan.Plan){
		"mean on a categorical metric": func(p *plan.Plan) { p.Metrics[0].Aggregate = plan.AggregateMean },
		"unknown aggregate":            func(p *plan.Plan) { p.Metrics[2].Aggregate = "median" },
	} {
		pl := testPlan(pub)
		edit(pl)
		b, err := pl.JSON()
		if err != nil {
			t.Fatal(err)
		}
		err = client.DecodeAndVerifyPlan(context.Background(), b, 8, cache)
		if !errors.Is(err, client.ErrPlanRefused) || !errors.Is(err, plan.ErrInvalid) {
			t.Errorf("%s: %v, want ErrPlanRefused and plan.ErrInvalid", what, err)
		}
	}
	// Mean on the sum metric and sum spelled out are fine.
	for _, a := range []string{plan.AggregateMean, plan.AggregateSum} {
		pl := testPlan(pub)
		pl.Metrics[2].Aggregate = a
		b, _ := pl.JSON()
		if err := client.DecodeAndVerifyPlan(context.Background(), b, 8, cache); err != nil {
			t.Errorf("summation with aggregate %s: %v", a, err)
		}
	}
}

// TestMeanJoint checks a mean metric under joint travel: a period without
// a value of it sends no message (Stats.Incomplete), as for a categorical
// metric, since the mean of no values is no number; a period with values
// sends one message carrying the clamped mean with the other metrics.
func TestMeanJoint(t *testing.T) {
	f := newMeanServer(t, "joint")
	cfg, clk := clockConfig(f, "")
	var sp outputSpy
	cfg.Randomizers = sp.cache(t)
	cfg.Outbox = client.NewMemoryOutbox()
	p := newProvider(t, cfg)
	ctx := context.Background()
	m := p.Meter("app")
	others := func() error {
		return errors.Join(m.Categorical("screen").Record(ctx, "home"), m.Categorical("feature").Record(ctx, "a"), m.Sum("bytes").Record(ctx, 5))
	}
	if err := others(); err != nil {
		t.Fatal(err)
	}
	closeAndFlush(t, p, clk)
	if st := p.Stats(); st.Incomplete != 1 || st.Messages != 0 {
		t.Fatalf("period without the mean: stats %+v, want it incomplete, no message", st)
	}
	if err := others(); err != nil {
		t.Fatal(err)
	}
	for _, x := range []float64{10, 20, 36} {
		if err := m.Mean("latency").Record(ctx, x); err != nil {
			t.Fatal(err)
		}
	}
	closeAndFlush(t, p, clk)
	if st := p.Stats(); st.Incomplete != 1 || st.Messages != 1 || st.Uploaded != 1 {
		t.Fatalf("period with the mean: stats %+v, want one message", st)
	}
	f.mu.Lock()
	msgs := slices.Clone(f.messages)
	f.mu.Unlock()
	if len(msgs) != 1 || len(msgs[0]) != 4 {
		t.Fatalf("messages %+v, want one of the 4 metrics", msgs)
	}
	ins, outs := sp.got("laplace")
	if len(ins) != 1 || len(ins[0].Reals) != 1 || ins[0].Reals[0] != 22 {
		t.Fatalf("laplace randomized %+v, want the mean 22", ins)
	}
	if part := msgs[0][3]; part.Metric != 3 || !slices.Equal(part.Report, outs[0]) {
		t.Errorf("the message's fourth part %+v is not the mean's report", part)
	}
	f.checkReports(t, p.Plan())
}
