package client_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/blanket-dp/blanket/sdk/client"
	"github.com/blanket-dp/blanket/sdk/plan"
)

// TestStateNewPlanFreshState changes the plan (every eps0 from 2 to 2.5)
// while a state metric is being stepped: the periods that ended under the
// old plan are stepped under it, from its run's state; the new plan's
// first step starts from no state (a new protocol run: the old state was
// drawn for another eps0, and the longitudinal randomizer would refuse
// it), with the value carried forward across the change; both runs' states
// are kept.
func TestStateNewPlanFreshState(t *testing.T) {
	ctx := context.Background()
	f := stateServer(t)
	a := f.pl
	cfg, clk, o := planChangeConfig(t, f)
	var sp stepSpy
	cfg.Randomizers = sp.cache(t)
	p := newProvider(t, cfg)
	if err := p.Meter("app").Categorical("enabled").Record(ctx, "true"); err != nil {
		t.Fatal(err)
	}
	clk.Set(t0.AddDate(0, 0, 1))
	flush(t, p) // steps period 0 under plan a
	b := nextPlan(f, a, func(p *plan.Plan) {
		for i := range p.Metrics {
			p.Metrics[i].Eps0 = 2.5
		}
	})
	clk.Set(t0.AddDate(0, 0, 2))
	if changed, err := p.RefreshPlan(ctx); err != nil || !changed {
		t.Fatalf("RefreshPlan = %v, %v", changed, err) // steps period 1 under plan a first
	}
	for d := 3; d <= 4; d++ {
		clk.Set(t0.AddDate(0, 0, d))
		flush(t, p) // steps period d-1 under plan b
	}
	calls := sp.got()
	if len(calls) != 4 {
		t.Fatalf("%d steps, want 4: %+v", len(calls), calls)
	}
	checkChain(t, calls[:2], periodIndex(0), nil, "true", "true")
	checkChainAt(t, calls[2:], 2.5, periodIndex(2), nil, "true", "true")
	states, err := o.States(ctx)
	if err != nil || len(states) != 2 {
		t.Fatalf("states %+v, %v; want one per plan", states, err)
	}
	for _, s := range states {
		want := map[string]struct {
			last  int
			state []byte
		}{a.EpochDigest(): {1, calls[1].next}, b.EpochDigest(): {3, calls[3].next}}[s.Plan]
		if s.Last != a.ReportPeriod(t0.AddDate(0, 0, want.last)) || string(s.State) != string(want.state) {
			t.Errorf("state of plan %.8s: %+v; want the last step's, of period %d", s.Plan, s, want.last)
		}
	}
}

// TestStateResumedRunCatchesUp changes the plan from a to b and back to a
// while the state changes under b: when a's run resumes, it first steps,
// silently, the period after its last with the value carried meanwhile,
// then the period it closes; so the change recorded under b enters a's
// run right after a's last step, not at its return (which, across a tree,
// would carry a's last value into the next tree: docs/time.md §5).
func TestStateResumedRunCatchesUp(t *testing.T) {
	ctx := context.Background()
	f := stateServer(t)
	a := f.pl
	cfg, clk, _ := planChangeConfig(t, f)
	var sp stepSpy
	cfg.Randomizers = sp.cache(t)
	p := newProvider(t, cfg)
	enabled := p.Meter("app").Categorical("enabled")
	if err := enabled.Record(ctx, "true"); err != nil { // period 0, plan a
		t.Fatal(err)
	}
	clk.Set(t0.AddDate(0, 0, 1))
	flush(t, p) // steps period 0 under plan a
	nextPlan(f, a, func(p *plan.Plan) {
		for i := range p.Metrics {
			p.Metrics[i].Eps0 = 2.5
		}
	})
	if changed, err := p.RefreshPlan(ctx); err != nil || !changed {
		t.Fatalf("RefreshPlan to b = %v, %v", changed, err)
	}
	if err := enabled.Record(ctx, "false"); err != nil { // period 1, plan b
		t.Fatal(err)
	}
	for d := 2; d <= 3; d++ {
		clk.Set(t0.AddDate(0, 0, d))
		flush(t, p) // steps period d-1 under plan b
	}
	f.setPlan(a)
	if changed, err := p.RefreshPlan(ctx); err != nil || !changed {
		t.Fatalf("RefreshPlan back to a = %v, %v", changed, err)
	}
	clk.Set(t0.AddDate(0, 0, 4))
	flush(t, p) // steps period 3 under plan a, after catching up
	calls := sp.got()
	if len(calls) != 5 {
		t.Fatalf("%d steps, want 5 (a: 0; b: 1, 2; a: 1 silently, 3): %+v", len(calls), calls)
	}
	checkChain(t, calls[:1], periodIndex(0), nil, "true")
	checkChainAt(t, calls[1:3], 2.5, periodIndex(1), nil, "false", "false")
	// a's run resumes from its period-0 state: period 1 (the period after
	// its last) with the value carried under b, then period 3.
	if c := calls[3]; c.period != periodIndex(1) || c.value != "false" || string(c.state) != string(calls[0].next) || c.eps0 != testEps0 {
		t.Errorf("catch-up step: period %d, value %q, eps0 %v, from state %x; want period %d, false, %v, from a's last state %x",
			c.period, c.value, c.eps0, c.state, periodIndex(1), testEps0, calls[0].next)
	}
	if c := calls[4]; c.period != periodIndex(3) || c.value != "false" || string(c.state) != string(calls[3].next) {
		t.Errorf("resumed step: period %d, value %q, from state %x; want period %d, false, from the catch-up's state %x",
			c.period, c.value, c.state, periodIndex(3), calls[3].next)
	}
}

// TestStatePooledTravelRefused gives a Provider a plan with a state metric
// under joint and under parallel travel: it refuses it, naming the metric,
// as plan.Calibrate does. Under separate travel it takes it.
func TestStatePooledTravelRefused(t *testing.T) {
	f := stateServer(t)
	for _, travel := range []string{"joint", "parallel", "separate"} {
		t.Run(travel, func(t *testing.T) {
			pl := clonePlanJSON(f.pl)
			pl.Travel = travel
			cfg := fastConfig(f, t.TempDir())
			cfg.Plan = pl
			p, err := client.NewProvider(context.Background(), cfg)
			if travel == "separate" {
				if err != nil {
					t.Fatalf("separate travel: %v", err)
				}
				p.Shutdown(context.Background())
				return
			}
			if !errors.Is(err, client.ErrPlanRefused) || !errors.Is(err, plan.ErrInvalid) || !strings.Contains(err.Error(), `"`+stateMetric+`"`) || !strings.Contains(err.Error(), "separate travel") {
				t.Fatalf("NewProvider: %v; want ErrPlanRefused naming %q and separate travel", err, stateMetric)
			}
		})
	}
}
