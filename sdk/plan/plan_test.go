package plan_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/blanket-dp/blanket/accountant"
	"github.com/blanket-dp/blanket/plugins/builtin"
	"github.com/blanket-dp/blanket/sdk"
	"github.com/blanket-dp/blanket/sdk/plan"
	"github.com/blanket-dp/blanket/sdk/plan/accounting"
)

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

func TestParseErrors(t *testing.T) {
	cases := map[string]string{
		"unknown field":  "target: {eps: 1, delta: 1e-6}\nn_min: 100\nmetrics: [{name: a, plugin: krr}]\nbogus: 1\n",
		"no metrics":     "target: {eps: 1, delta: 1e-6}\nn_min: 100\nmetrics: []\n",
		"bad delta":      "target: {eps: 1, delta: 1.5}\nn_min: 100\nmetrics: [{name: a, plugin: krr}]\n",
		"small n_min":    "target: {eps: 1, delta: 1e-6}\nn_min: 1\nmetrics: [{name: a, plugin: krr}]\n",
		"dup name":       "target: {eps: 1, delta: 1e-6}\nn_min: 100\nmetrics: [{name: a, plugin: krr}, {name: a, plugin: krr}]\n",
		"bad name":       "target: {eps: 1, delta: 1e-6}\nn_min: 100\nmetrics: [{name: 'a b', plugin: krr}]\n",
		"dot segment":    "target: {eps: 1, delta: 1e-6}\nn_min: 100\nmetrics: [{name: 'a/../b', plugin: krr}]\n",
		"empty segment":  "target: {eps: 1, delta: 1e-6}\nn_min: 100\nmetrics: [{name: 'a//b', plugin: krr}]\n",
		"trailing slash": "target: {eps: 1, delta: 1e-6}\nn_min: 100\nmetrics: [{name: 'a/', plugin: krr}]\n",
		"one dot":        "target: {eps: 1, delta: 1e-6}\nn_min: 100\nmetrics: [{name: 'a/./b', plugin: krr}]\n",
		"no plugin":      "target: {eps: 1, delta: 1e-6}\nn_min: 100\nmetrics: [{name: a}]\n",
		"bad travel":     "target: {eps: 1, delta: 1e-6}\nn_min: 100\ntravel: sometimes\nmetrics: [{name: a, plugin: krr}]\n",
		"n_min fraction": "target: {eps: 1, delta: 1e-6}\nn_min: 100.5\nmetrics: [{name: a, plugin: krr}]\n",
	}
	for name, y := range cases {
		if _, err := plan.Parse([]byte(y)); !errors.Is(err, plan.ErrInvalid) {
			t.Errorf("%s: err = %v, want ErrInvalid", name, err)
		}
	}
}

func TestPools(t *testing.T) {
	p, err := plan.Parse([]byte(example))
	if err != nil {
		t.Fatal(err)
	}
	if p.Pooled() || p.Pool("ui/screen") != "ui/screen" || strings.Join(p.Pools(), ",") != "ui/screen,ui/features,sync/bytes" {
		t.Fatalf("separate: pooled %v, pools %v", p.Pooled(), p.Pools())
	}
	for _, travel := range []string{"joint", "parallel"} {
		p.Travel = travel
		if !p.Pooled() || p.Pool("ui/screen") != "@"+travel || len(p.Pools()) != 1 || p.Pools()[0] != "@"+travel {
			t.Fatalf("%s: pooled %v, pool %q, pools %v", travel, p.Pooled(), p.Pool("ui/screen"), p.Pools())
		}
	}
	// A pool name is never a valid metric name.
	p.Metrics[0].Name = p.Pool("")
	if err := p.Validate(); !errors.Is(err, plan.ErrInvalid) {
		t.Fatalf("metric named %q: %v", p.Metrics[0].Name, err)
	}
	// Weights 2, 1 (default), 1 (default) normalise to 1/2, 1/4, 1/4.
	if w := p.Weights(); len(w) != 3 || w[0] != 0.5 || w[1] != 0.25 || w[2] != 0.25 {
		t.Fatalf("weights %v", w)
	}
	if p.MetricIndex("sync/bytes") != 2 || p.MetricIndex("nope") != -1 {
		t.Fatal("MetricIndex")
	}
}
