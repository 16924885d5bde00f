package plan_test

import (
	"errors"
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
