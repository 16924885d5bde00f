package plan_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/blanket-dp/blanket/sdk/plan"
)

// TestFloor: a plan's floor is a whole number of draws in [0, MaxFloor],
// under separate travel only, part of the digest when set and absent from
// the canonical JSON and YAML when not (a plan written before the field
// keeps its epoch).
func TestFloor(t *testing.T) {
	const base = "target: {eps: 1, delta: 1e-6}\nn_min: 100\nmetrics: [{name: a, plugin: krr}]\n"
	for line, why := range map[string]string{
		"floor: -1":  "negative",
		"floor: 2.5": "not whole",
		fmt.Sprintf("floor: %d", plan.MaxFloor+1): "past MaxFloor",
		"floor: 10\ntravel: joint":                "joint travel",
		"floor: 10\ntravel: parallel":             "parallel travel",
	} {
		_, err := plan.Parse([]byte(base + line + "\n"))
		if !errors.Is(err, plan.ErrInvalid) || !strings.Contains(err.Error(), "floor") {
			t.Errorf("%q (%s): err = %v, want ErrInvalid naming floor", line, why, err)
		}
	}
	none, err := plan.Parse([]byte(base))
	if err != nil {
		t.Fatal(err)
	}
	zero, err := plan.Parse([]byte(base + "floor: 0\ntravel: joint\n"))
	if err != nil {
		t.Fatalf("floor 0 under joint travel: %v", err)
	}
	if zero.Floor != 0 {
		t.Errorf("floor: 0 reads as %d", zero.Floor)
	}
	for _, lines := range []string{"floor: 1000\n", "floor: 1000\ntravel: separate\n", fmt.Sprintf("floor: %d\n", plan.MaxFloor)} {
		p, err := plan.Parse([]byte(base + lines))
		if err != nil {
			t.Fatalf("%q: %v", lines, err)
		}
		if p.Floor == 0 || p.Digest() == none.Digest() {
			t.Errorf("%q: floor %d, digest unchanged %v", lines, p.Floor, p.Digest() == none.Digest())
		}
		y, err := p.YAML()
		if err != nil {
			t.Fatal(err)
		}
		q, err := plan.Parse(y)
		if err != nil || q.Floor != p.Floor || q.Digest() != p.Digest() {
			t.Errorf("%q: YAML round trip: %v, floor %d\n%s", lines, err, q.Floor, y)
		}
	}
	j, _ := none.JSON()
	y, _ := none.YAML()
	if strings.Contains(string(j), "floor") || strings.Contains(string(y), "floor") {
		t.Errorf("a plan without a floor writes the field:\n%s\n%s", j, y)
	}
}
