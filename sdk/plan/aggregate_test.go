package plan_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/blanket-dp/blanket/sdk/plan"
)

// realPlan is a plan of one real-valued metric; a test appends its
// aggregate line to the metric.
const realPlan = "target: {eps: 1, delta: 1e-6}\nn_min: 10000\nmetrics:\n  - name: req/latency\n    plugin: summation\n    lo: 0\n    hi: 10\n    params: {k: \"4\"}\n"

func TestAggregateValidation(t *testing.T) {
	for _, a := range []string{"median", "Mean", "SUM", "' mean'", "avg", "1"} {
		_, err := plan.Parse([]byte(realPlan + "    aggregate: " + a + "\n"))
		if !errors.Is(err, plan.ErrInvalid) || !strings.Contains(err.Error(), "aggregate") || !strings.Contains(err.Error(), "req/latency") {
			t.Errorf("aggregate: %s: err = %v, want ErrInvalid naming the metric and aggregate", a, err)
		}
	}
	// A Go value is validated too (a plan built in code, then Validate).
	p, err := plan.Parse([]byte(realPlan))
	if err != nil {
		t.Fatal(err)
	}
	p.Metrics[0].Aggregate = "median"
	if err := p.Validate(); !errors.Is(err, plan.ErrInvalid) {
		t.Errorf("Validate with aggregate median: %v, want ErrInvalid", err)
	}

	omitted, err := plan.Parse([]byte(realPlan))
	if err != nil {
		t.Fatal(err)
	}
	sum, err := plan.Parse([]byte(realPlan + "    aggregate: sum\n"))
	if err != nil {
		t.Fatal(err)
	}
	mean, err := plan.Parse([]byte(realPlan + "    aggregate: mean\n"))
	if err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]struct {
		p         *plan.Plan
		field     string
		want      string
		inJSON    bool
		sameEpoch bool
	}{
		"omitted": {omitted, "", plan.AggregateSum, false, true},
		"sum":     {sum, "", plan.AggregateSum, false, true}, // canonical: the default is omitted
		"mean":    {mean, "mean", plan.AggregateMean, true, false},
	} {
		m := c.p.Metrics[0]
		if m.Aggregate != c.field || m.Aggregation() != c.want {
			t.Errorf("%s: Aggregate %q, Aggregation %q; want %q, %q", name, m.Aggregate, m.Aggregation(), c.field, c.want)
		}
		j, _ := c.p.JSON()
		if strings.Contains(string(j), `"aggregate"`) != c.inJSON {
			t.Errorf("%s: aggregate in the canonical JSON: %v, want %v\n%s", name, !c.inJSON, c.inJSON, j)
		}
		if (c.p.Digest() == omitted.Digest()) != c.sameEpoch {
			t.Errorf("%s: digest %s, the plan without aggregate %s: same = %v, want %v", name, c.p.Digest(), omitted.Digest(), !c.sameEpoch, c.sameEpoch)
		}
		// The aggregate survives YAML and JSON round trips, digest included.
		y, _ := c.p.YAML()
		for format, b := range map[string][]byte{"YAML": y, "JSON": j} {
			q, err := plan.Parse(b)
			if err != nil {
				t.Fatalf("%s: re-parse %s: %v", name, format, err)
			}
			if q.Metrics[0].Aggregation() != c.want || q.Digest() != c.p.Digest() {
				t.Errorf("%s: %s round trip: aggregate %q, digest changed %v", name, format, q.Metrics[0].Aggregation(), q.Digest() != c.p.Digest())
			}
		}
	}
}

// TestDigestWithoutAggregate pins the digests of plans without an
// aggregate, recorded before the field existed: adding it must not change
// the epoch of any plan already published (its apps' staged values and
// reports are bound to it). Both an uncalibrated plan and one with the
// fields Calibrate sets are pinned, and a key schedule changes the digest
// but not the epoch digest.
func TestDigestWithoutAggregate(t *testing.T) {
	const (
		exampleDigest    = "284878835902722112241c89b769f9a3f8de4baad29be62fa4224d8ec69736fd"
		calibratedDigest = "6d4e03225b54443616e9be1b62bbba4b6f51636a546f1a06156d4abff35e63cf" // without a collector key (the key schedule replaced collector_key)
	)
	for name, src := range map[string]string{
		"omitted": example,
		// Spelling out the default leaves the digest too.
		"sum": strings.Replace(example, "    params: {k: \"20\"}\n", "    params: {k: \"20\"}\n    aggregate: sum\n", 1),
	} {
		p, err := plan.Parse([]byte(src))
		if err != nil {
			t.Fatal(err)
		}
		if name == "sum" && !strings.Contains(src, "aggregate: sum") {
			t.Fatal("the test plan lost its aggregate line")
		}
		if got := p.Digest(); got != exampleDigest {
			t.Errorf("%s: digest %s, want %s", name, got, exampleDigest)
		}
		p.Metrics[2].Eps0, p.Metrics[2].Version, p.Metrics[2].Delta = 1.5, "1", 1e-7
		p.Guarantee = &plan.Guarantee{Eps: 1, Delta: 1e-6, Rule: "by hand"}
		if got := p.Digest(); got != calibratedDigest {
			t.Errorf("%s, calibrated by hand: digest %s, want %s", name, got, calibratedDigest)
		}
		// The collector's key schedule is in the digest, not the epoch.
		p.CollectorKeys = []plan.CollectorKey{{ID: "00112233aabbccdd", Key: "AAAA", From: 0}}
		if p.Digest() == calibratedDigest || p.EpochDigest() != calibratedDigest {
			t.Errorf("%s, with a key schedule: digest %s, epoch digest %s; want a new digest and the epoch digest %s", name, p.Digest(), p.EpochDigest(), calibratedDigest)
		}
		p.CollectorKeys = nil
		p.Metrics[2].Aggregate = plan.AggregateMean
		if p.Digest() == calibratedDigest {
			t.Errorf("%s: aggregate mean is not in the digest", name)
		}
	}
}

// A real-valued metric reports, per period, the total of an app's values
// (the default) or their mean: here the mean latency of the app's requests
// in the period, clamped to [0, 10] seconds.
func ExampleMetric_Aggregation() {
	p, err := plan.Parse([]byte(`
target: {eps: 1, delta: 1e-6}
n_min: 10000
metrics:
  - name: sync/bytes
    plugin: summation
    lo: 0
    hi: 1000000
  - name: req/latency
    plugin: laplace
    lo: 0
    hi: 10
    aggregate: mean
`))
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, m := range p.Metrics {
		fmt.Println(m.Name, m.Aggregation())
	}
	// Output:
	// sync/bytes sum
	// req/latency mean
}
