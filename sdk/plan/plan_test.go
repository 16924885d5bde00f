package plan_test

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/blanket-dp/blanket/sdk/plan"
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

// TestMaxFakeFraction checks the plan's max_fake_fraction: a fraction in
// [0, 1) is taken, and anything else is refused with an error naming the
// field; 0, -0 and no field are one plan (the same digest, hence epoch),
// and a fraction above 0 is another.
func TestMaxFakeFraction(t *testing.T) {
	const base = "target: {eps: 1, delta: 1e-6}\nn_min: 100\nmetrics: [{name: a, plugin: krr}]\n"
	for _, v := range []string{"1", "1.0", "1.5", "-0.1", "-1", ".nan", ".inf", "-.inf"} {
		_, err := plan.Parse([]byte(base + "max_fake_fraction: " + v + "\n"))
		if !errors.Is(err, plan.ErrInvalid) || !strings.Contains(err.Error(), "max_fake_fraction") {
			t.Errorf("max_fake_fraction: %s: err = %v, want ErrInvalid naming max_fake_fraction", v, err)
		}
	}
	// Not a number: the YAML decoder's error (it names the line).
	if _, err := plan.Parse([]byte(base + "max_fake_fraction: 10%\n")); !errors.Is(err, plan.ErrInvalid) {
		t.Errorf("max_fake_fraction: 10%%: err = %v, want ErrInvalid", err)
	}
	none, err := plan.Parse([]byte(base))
	if err != nil {
		t.Fatal(err)
	}
	if none.MaxFakeFraction != 0 || none.HonestReports(100) != 100 {
		t.Errorf("no max_fake_fraction: %v, honest floor of 100 = %d, want 0 and 100", none.MaxFakeFraction, none.HonestReports(100))
	}
	for _, v := range []string{"0", "0.0", "-0", "-0.0"} {
		p, err := plan.Parse([]byte(base + "max_fake_fraction: " + v + "\n"))
		if err != nil {
			t.Fatalf("max_fake_fraction: %s: %v", v, err)
		}
		if p.Digest() != none.Digest() {
			t.Errorf("max_fake_fraction: %s: digest differs from the plan without the field", v)
		}
		y, err := p.YAML()
		if err != nil || strings.Contains(string(y), "max_fake_fraction") {
			t.Errorf("max_fake_fraction: %s: YAML %v writes the field:\n%s", v, err, y)
		}
	}
	p, err := plan.Parse([]byte(base + "max_fake_fraction: 0.1\n"))
	if err != nil {
		t.Fatal(err)
	}
	if p.MaxFakeFraction != 0.1 || p.HonestReports(100) != 90 || p.HonestReports(10000) != 9000 {
		t.Errorf("max_fake_fraction 0.1: %v, honest floors %d, %d; want 90 of 100 and 9000 of 10000", p.MaxFakeFraction, p.HonestReports(100), p.HonestReports(10000))
	}
	if p.Digest() == none.Digest() {
		t.Error("max_fake_fraction 0.1 leaves the digest (the epoch) unchanged")
	}
	y, err := p.YAML()
	if err != nil {
		t.Fatal(err)
	}
	q, err := plan.Parse(y)
	if err != nil || q.MaxFakeFraction != 0.1 || q.Digest() != p.Digest() {
		t.Errorf("YAML round trip: %v, max_fake_fraction %v, same digest %v\n%s", err, q.MaxFakeFraction, q.Digest() == p.Digest(), y)
	}
	// Set in code, Validate checks it too.
	p.MaxFakeFraction = math.NaN()
	if err := p.Validate(); !errors.Is(err, plan.ErrInvalid) || !strings.Contains(err.Error(), "max_fake_fraction") {
		t.Errorf("NaN set in code: Validate = %v, want ErrInvalid naming max_fake_fraction", err)
	}
}
