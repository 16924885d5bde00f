package accounting_test

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/blanket-dp/blanket/accountant"
	"github.com/blanket-dp/blanket/plugins/builtin"
	"github.com/blanket-dp/blanket/sdk"
	"github.com/blanket-dp/blanket/sdk/plan"
	"github.com/blanket-dp/blanket/sdk/plan/accounting"
)

// The plans calibrated here (the same fixtures as package plan's tests).

const example = `
target: {eps: 1, delta: 1e-6}
n_min: 10000
travel: separate
metrics:
  - name: ui/screen
    plugin: krr
    categories: [home, search, settings, profile]
    other: other
    weight: 2
  - name: ui/features
    plugin: rappor
    categories: [a, b, c, d, e, f, g, h]
  - name: sync/bytes
    plugin: summation
    lo: 0
    hi: 1000000
    params: {k: "20"}
`

const onePlan = "target: {eps: 1, delta: 1e-6}\nn_min: 10000\nmetrics: [{name: a, plugin: krr, categories: [x, y, z]}]\n"

// realPlan is a plan of one real-valued metric; a test appends its
// aggregate line to the metric.
const realPlan = "target: {eps: 1, delta: 1e-6}\nn_min: 10000\nmetrics:\n  - name: req/latency\n    plugin: summation\n    lo: 0\n    hi: 10\n    params: {k: \"4\"}\n"

func open(ctx context.Context, name string, cfg sdk.Config) (sdk.Randomizer, error) {
	return builtin.Open(ctx, name, cfg)
}

// reevalTol is the relative slack of re-evaluating a calibrated plan's
// batch guarantee: BatchMechanism fixes each metric at its own eps0 (the
// calibrated total times its weight, rounded), and the engine's certified
// upper bound for those slightly different inputs may land a few ulps to
// 1e-5 above the target the calibration met. Both are sound upper bounds.
const reevalTol = 1e-4

// TestCalibrate calibrates the example plan under each travel at n_min =
// 3000, where separate travel calibrates in half the CPU of the example's
// 10,000 (TestCalibrateDeep, make audit).
func TestCalibrate(t *testing.T) {
	y := strings.Replace(example, "n_min: 10000", "n_min: 3000", 1)
	if y == example {
		t.Fatal("the example plan does not say n_min: 10000")
	}
	calibrateTravels(t, y)
}

// calibrateTravels runs TestCalibrate's checks on the plan y (travel:
// separate) under each travel.
func calibrateTravels(t *testing.T, y string) {
	ctx := context.Background()
	for _, travel := range []string{"separate", "joint", "parallel"} {
		t.Run(travel, func(t *testing.T) {
			p, err := plan.Parse([]byte(strings.Replace(y, "travel: separate", "travel: "+travel, 1)))
			if err != nil {
				t.Fatal(err)
			}
			if p.Calibrated() {
				t.Fatal("uncalibrated plan reports Calibrated")
			}
			if err := accounting.Calibrate(ctx, p, open); err != nil {
				t.Fatal(err)
			}
			if !p.Calibrated() {
				t.Fatal("calibrated plan reports not Calibrated")
			}
			if p.Guarantee.Eps > p.Target.Eps || p.Guarantee.Delta > p.Target.Delta*(1+1e-12) {
				t.Errorf("guarantee %+v exceeds target %+v", p.Guarantee, p.Target)
			}
			// Independently re-check each batch's guarantee at n_min
			// through the accountant.
			var parts []accountant.Part
			for _, m := range p.Metrics {
				if m.Version == "" {
					t.Errorf("metric %q: no plugin version recorded", m.Name)
				}
				mech, eps0, delta, err := accounting.BatchMechanism(ctx, p, open, m.Name)
				if err != nil {
					t.Fatal(err)
				}
				r, err := accountant.Epsilon(mech, eps0, p.NMin, delta)
				if err != nil {
					t.Fatal(err)
				}
				if travel == "separate" {
					parts = append(parts, accountant.Part{Mech: mech, Eps0: eps0, N: p.NMin})
				} else if r.Upper > p.Target.Eps*(1+reevalTol) {
					t.Errorf("%s: batch eps %g > target %g", m.Name, r.Upper, p.Target.Eps)
				}
			}
			// Separate travel: the metrics' reports compose (PLDs); the
			// composition of one report of each meets the target.
			if travel == "separate" {
				c, err := accountant.ComposeEpsilon(parts, p.Target.Delta)
				if err != nil {
					t.Fatal(err)
				}
				if c.Upper > p.Target.Eps {
					t.Errorf("separate: composed eps %g > target %g", c.Upper, p.Target.Eps)
				}
			}
			// The calibrated plan round-trips through YAML.
			y, err := p.YAML()
			if err != nil {
				t.Fatal(err)
			}
			q, err := plan.Parse(y)
			if err != nil {
				t.Fatalf("re-parse: %v\n%s", err, y)
			}
			if q.Digest() != p.Digest() {
				t.Errorf("digest changed across YAML round trip")
			}
		})
	}
}

// TestCalibrateHorizon: Calibrate covers the plan's horizon (the guarantee
// records it) and a longer horizon gets a smaller eps0. On a k-RR metric
// of 10 categories; on onePlan's 3 both calibrations take three times the
// CPU (TestCalibrateHorizonDeep, make audit).
func TestCalibrateHorizon(t *testing.T) {
	calibrateHorizon(t, "target: {eps: 1, delta: 1e-6}\nn_min: 10000\nmetrics: [{name: a, plugin: krr, categories: [a, b, c, d, e, f, g, h, i, j]}]\n")
}

// calibrateHorizon runs TestCalibrateHorizon on the plan y (one metric,
// no horizon).
func calibrateHorizon(t *testing.T, y string) {
	ctx := context.Background()
	var eps0 []float64
	for _, h := range []int{1, 30} {
		p, err := plan.Parse([]byte(y))
		if err != nil {
			t.Fatal(err)
		}
		p.Horizon = h
		if err := accounting.Calibrate(ctx, p, open); err != nil {
			t.Fatal(err)
		}
		g := p.Guarantee
		if want := map[int]int{1: 0, 30: 30}[h]; g.Rounds != want || !(g.Eps <= 1) || g.Delta > 1e-6 {
			t.Errorf("horizon %d: guarantee %+v", h, g)
		}
		eps0 = append(eps0, p.Metrics[0].Eps0)
	}
	if !(eps0[1] < eps0[0]) {
		t.Errorf("eps0 over 30 periods %v not below one period's %v", eps0[1], eps0[0])
	}
}

// TestCalibrateAggregate checks that Calibrate takes an aggregate on a
// real-valued metric (the aggregate is applied on the device, before the
// randomizer, so the mechanism is the same) and refuses one on a
// categorical metric, which the plan's Validate cannot tell (it does not
// open plugins).
func TestCalibrateAggregate(t *testing.T) {
	ctx := context.Background()
	// n_min 1000 and k 1 calibrate in a fraction of a second.
	src := strings.NewReplacer("n_min: 10000", "n_min: 1000", `k: "4"`, `k: "1"`).Replace(realPlan)
	p, err := plan.Parse([]byte(src + "    aggregate: mean\n"))
	if err != nil {
		t.Fatal(err)
	}
	if err := accounting.Calibrate(ctx, p, open); err != nil || !p.Calibrated() || p.Metrics[0].Aggregate != plan.AggregateMean {
		t.Fatalf("real metric with aggregate mean: %v; calibrated %v, aggregate %q", err, p.Calibrated(), p.Metrics[0].Aggregate)
	}
	for _, a := range []string{"mean", "sum"} {
		p, err := plan.Parse([]byte(onePlan))
		if err != nil {
			t.Fatal(err)
		}
		p.Metrics[0].Aggregate = a
		if a == "sum" {
			// Validate unsets the default: nothing to refuse (calibrating
			// would take as long as any krr plan).
			if err := p.Validate(); err != nil || p.Metrics[0].Aggregate != "" {
				t.Errorf("categorical metric with aggregate sum: %v, aggregate %q after Validate", err, p.Metrics[0].Aggregate)
			}
			continue
		}
		err = accounting.Calibrate(ctx, p, open)
		if !errors.Is(err, plan.ErrInvalid) || !strings.Contains(err.Error(), "aggregate") || !strings.Contains(err.Error(), "categorical") {
			t.Errorf("categorical metric with aggregate %s: %v, want ErrInvalid naming aggregate and the input kind", a, err)
		}
		if p.Calibrated() {
			t.Errorf("categorical metric with aggregate %s: the plan was calibrated", a)
		}
	}
}

// TestCalibrateFakeFraction: a plan with max_fake_fraction 0.1 and n_min
// 100 is calibrated at its honest floor, 90 reports. The reference is
// the accountant's own calibration of the metric's mechanism, built here
// from the plugin's declarations (not through accounting.Mechanism), at n
// = 90 directly; it must match within calibrateTol and be farther than
// that from the calibration at 100 (eps0 1.61 and 1.67 here), so the
// check tells the two apart. Joint travel with one metric is one
// accountant.Calibrate (separate travel adds a factor search to relative
// 1e-3), and a k-RR of 3 categories at n 100 calibrates in 30 ms.
func TestCalibrateFakeFraction(t *testing.T) {
	// calibrateTol: accountant.Calibrate is not bit-for-bit reproducible
	// (it sums in parallel), and its search stops within relative 1e-6 of
	// the largest proven eps0; two calibrations of one target agree to
	// well within 1e-5.
	const calibrateTol = 1e-5
	ctx := context.Background()
	y := "target: {eps: 1, delta: 1e-6}\nn_min: 100\ntravel: joint\nmax_fake_fraction: 0.1\nmetrics: [{name: a, plugin: krr, categories: [x, y, z]}]\n"
	p, err := plan.Parse([]byte(y))
	if err != nil {
		t.Fatal(err)
	}
	if err := accounting.Calibrate(ctx, p, open); err != nil {
		t.Fatal(err)
	}
	r, err := open(ctx, "krr", p.Metrics[0].Config())
	if err != nil {
		t.Fatal(err)
	}
	krr := accountant.FuncMech{Name: "krr", Declare: func(e float64) (*accountant.Declaration, error) { return r.Declare(ctx, e) }}
	mech := accountant.JointMech{Parts: []accountant.Mechanism{krr}, Weights: []float64{1}}
	at := func(n int) float64 {
		c, err := accountant.Calibrate(mech, accountant.Target{Eps: 1, Delta: 1e-6, N: n})
		if err != nil {
			t.Fatal(err)
		}
		return c.Eps0
	}
	honest, all := at(90), at(100)
	got := p.Metrics[0].Eps0
	if math.Abs(got-honest) > calibrateTol*honest {
		t.Errorf("eps0 %v with max_fake_fraction 0.1 of n_min 100; the accountant at n = 90 gives %v", got, honest)
	}
	if math.Abs(all-honest) <= 2*calibrateTol*honest {
		t.Fatalf("eps0 at n = 100 (%v) and 90 (%v) are too close to tell apart", all, honest)
	}
	// The guarantee recorded meets the target, and the batch of n_min
	// re-evaluated at its 90 honest reports meets it.
	bm, eps0, delta, err := accounting.BatchMechanism(ctx, p, open, "a")
	if err != nil {
		t.Fatal(err)
	}
	e, err := accountant.Epsilon(bm, eps0, 90, delta)
	if err != nil {
		t.Fatal(err)
	}
	if e.Upper > p.Target.Eps*(1+reevalTol) || p.Guarantee.Eps > p.Target.Eps {
		t.Errorf("at 90 honest reports: eps %v, recorded %v; target %v", e.Upper, p.Guarantee.Eps, p.Target.Eps)
	}
	if p.Guarantee.Honest != 90 || !p.Calibrated() {
		t.Errorf("guarantee %+v, calibrated %v; want honest 90 and calibrated", p.Guarantee, p.Calibrated())
	}
}

// TestCalibratedPlanGivenFakesIsRecalibrated: a plan calibrated with no
// fakes, given a max_fake_fraction by hand, is not Calibrated (a collector
// then calibrates it again), since its eps0 and guarantee hold only for
// all-honest batches (the review of issue 25 found one published with eps
// 0.9998 where its batches of n_min gave 1.23). YAML round trips keep
// a calibrated plan calibrated.
func TestCalibratedPlanGivenFakesIsRecalibrated(t *testing.T) {
	ctx := context.Background()
	y := "target: {eps: 1, delta: 1e-6}\nn_min: 100\ntravel: joint\nmetrics: [{name: a, plugin: krr, categories: [x, y, z]}]\n"
	p, err := plan.Parse([]byte(y))
	if err != nil {
		t.Fatal(err)
	}
	if err := accounting.Calibrate(ctx, p, open); err != nil {
		t.Fatal(err)
	}
	if !p.Calibrated() || p.Guarantee.Honest != 0 {
		t.Fatalf("calibrated without fakes: %v, guarantee %+v", p.Calibrated(), p.Guarantee)
	}
	b, err := p.YAML()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), "honest") {
		t.Errorf("a plan without fakes writes honest: the digest of plans written before the field would change:\n%s", b)
	}
	edited, err := plan.Parse(append(b, []byte("max_fake_fraction: 0.3\n")...))
	if err != nil {
		t.Fatal(err)
	}
	if edited.Calibrated() {
		t.Error("a plan calibrated for all-honest batches, given max_fake_fraction 0.3, counts as calibrated")
	}
	edited.Metrics[0].Eps0, edited.Guarantee = 0, nil
	if err := accounting.Calibrate(ctx, edited, open); err != nil {
		t.Fatal(err)
	}
	b, err = edited.YAML()
	if err != nil {
		t.Fatal(err)
	}
	again, err := plan.Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	if !again.Calibrated() || again.Guarantee.Honest != 70 {
		t.Errorf("recalibrated at 0.3, written and read: calibrated %v, guarantee %+v; want honest 70", again.Calibrated(), again.Guarantee)
	}
}
