package client_test

import (
	"bytes"
	"context"
	"slices"
	"sync"
	"testing"

	"github.com/blanket-dp/blanket/plugins/builtin"
	"github.com/blanket-dp/blanket/plugins/longitudinal"
	"github.com/blanket-dp/blanket/sdk"
	"github.com/blanket-dp/blanket/sdk/client"
	"github.com/blanket-dp/blanket/sdk/internal/counter"
	"github.com/blanket-dp/blanket/sdk/plan"
)

// stateMetric is the state metric of the tests of state metrics: the
// longitudinal protocol (plugins/longitudinal, built in) over trees of 8
// periods, whose values are "false" and "true".
const stateMetric = "app/enabled"

// stateServer starts a fake server whose plan is the test plan (separate
// travel) with a fourth metric, app/enabled (longitudinal, tree 8),
// calibrated by hand like the others.
func stateServer(t *testing.T) *fakeServer {
	t.Helper()
	f := newFakeServer(t, nil)
	f.setPlan(statePlan(t, f, longitudinal.Name, map[string]string{"tree": "8"}))
	return f
}

// statePlan returns the test plan, sealed to f's key, with app/enabled
// served by plugin with params and categories.
func statePlan(t *testing.T, f *fakeServer, plugin string, params map[string]string, categories ...string) *plan.Plan {
	t.Helper()
	pl := testPlan(nil)
	pl.CollectorKeys = fakeKeys(t, f)
	pl.Metrics = append(pl.Metrics, plan.Metric{Name: stateMetric, Plugin: plugin, Categories: categories, Params: params,
		Version: "1", Eps0: testEps0, Delta: 1e-6 / 4})
	return pl
}

// stepCall is one Step of a state metric's randomizer, as a stepSpy saw
// it: for one user (the client steps one at a time).
type stepCall struct {
	eps0   float64
	period int64
	state  []byte // given; nil for a first step
	value  string
	report []byte // returned; nil for none
	next   []byte
	err    error
}

// stepSpy records every Step of the stateful randomizers it opened (the
// real ones, built in, or the counter plugin), so that a test can check
// what each period's step was given and returned.
type stepSpy struct {
	mu    sync.Mutex
	calls []stepCall
}

// cache returns a randomizer cache whose stateful randomizers report to
// s. It opens the built-ins, and "counter" (sdk/internal/counter) in
// process.
func (s *stepSpy) cache(t *testing.T) *client.RandomizerCache {
	c := client.NewRandomizerCache(func(ctx context.Context, name string, cfg sdk.Config) (sdk.Randomizer, error) {
		var r sdk.Randomizer
		var err error
		if name == counter.Name {
			r, err = counter.FromConfig(cfg)
		} else {
			r, err = client.InProcess(builtin.Factories())(ctx, name, cfg)
		}
		if err != nil {
			return nil, err
		}
		d, err := r.Describe(ctx)
		if err != nil {
			return nil, err
		}
		if !d.Stateful {
			return r, nil
		}
		return spiedState{Randomizer: r, st: r.(sdk.Stateful), s: s}, nil
	})
	t.Cleanup(func() { c.Close() })
	return c
}

// got returns the Steps so far.
func (s *stepSpy) got() []stepCall {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.calls)
}

type spiedState struct {
	sdk.Randomizer
	st sdk.Stateful
	s  *stepSpy
}

func (r spiedState) Step(ctx context.Context, eps0 float64, period int64, states [][]byte, in sdk.Inputs) ([][]byte, [][]byte, error) {
	given := make([][]byte, len(states))
	for i, st := range states {
		if st != nil {
			given[i] = bytes.Clone(st)
		}
	}
	reports, next, err := r.st.Step(ctx, eps0, period, states, in)
	r.s.mu.Lock()
	defer r.s.mu.Unlock()
	for i := range in.Categories {
		c := stepCall{eps0: eps0, period: period, state: given[i], value: in.Categories[i], err: err}
		if err == nil {
			c.report, c.next = reports[i], next[i]
		}
		r.s.calls = append(r.s.calls, c)
	}
	return reports, next, err
}

// Close closes the spied randomizer, so that the cache closes a plugin.
func (r spiedState) Close() error {
	if c, ok := r.Randomizer.(interface{ Close() error }); ok {
		return c.Close()
	}
	return nil
}

// periodIndex returns the index of the period holding the test clock's
// time t0 + days days under the test plan (24 h periods).
func periodIndex(days int) int64 {
	return t0.Unix()/int64(day.Seconds()) + int64(days)
}

// checkChain fails unless calls step, one at a time, the periods first,
// first+1, ... at the test plan's eps0 with the values given, each from
// the state the one before returned (the first from state), and none
// failed.
func checkChain(t *testing.T, calls []stepCall, first int64, state []byte, values ...string) {
	t.Helper()
	checkChainAt(t, calls, testEps0, first, state, values...)
}

// checkChainAt is checkChain at eps0.
func checkChainAt(t *testing.T, calls []stepCall, eps0 float64, first int64, state []byte, values ...string) {
	t.Helper()
	if len(calls) != len(values) {
		t.Fatalf("%d steps, want %d: %+v", len(calls), len(values), calls)
	}
	for i, c := range calls {
		if c.err != nil {
			t.Fatalf("step %d failed: %v", i, c.err)
		}
		if c.period != first+int64(i) || c.value != values[i] || c.eps0 != eps0 {
			t.Errorf("step %d: period %d, value %q, eps0 %v; want period %d, value %q, eps0 %v", i, c.period, c.value, c.eps0, first+int64(i), values[i], eps0)
		}
		if !bytes.Equal(c.state, state) || (state == nil) != (c.state == nil) {
			t.Errorf("step %d of period %d was given state %x, want %x", i, c.period, c.state, state)
		}
		state = c.next
	}
}
