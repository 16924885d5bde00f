package client_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/blanket-dp/blanket/plugins/builtin"
	"github.com/blanket-dp/blanket/sdk"
	"github.com/blanket-dp/blanket/sdk/client"
)

// day is the test plan's reporting period (plan.DefaultPeriod).
const day = 24 * time.Hour

// t0 is where test clocks start: noon UTC, in the middle of a period.
var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// testClock is a settable clock for Config.Now, safe for concurrent use.
type testClock struct {
	mu sync.Mutex
	t  time.Time
}

func newTestClock() *testClock { return &testClock{t: t0} }

// Now returns the clock's time.
func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// Advance moves the clock by d (back when d < 0).
func (c *testClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// Set sets the clock to t.
func (c *testClock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = t
}

// clockConfig is fastConfig with a new test clock.
func clockConfig(f *fakeServer, dir string) (client.Config, *testClock) {
	clk := newTestClock()
	cfg := fastConfig(f, dir)
	cfg.Now = clk.Now
	return cfg, clk
}

// recordPeriods runs rec(i) for i < n, each in a period of its own: the
// clock moves to the next period after each, so that rec(i+1) closes the
// period of rec(i) and the last closes at the next Flush.
func recordPeriods(t *testing.T, clk *testClock, n int, rec func(i int) error) {
	t.Helper()
	for i := range n {
		if err := rec(i); err != nil {
			t.Fatalf("Record %d: %v", i, err)
		}
		clk.Advance(day)
	}
}

// closeAndFlush moves clk to the next period and flushes p, which closes
// the period the clock was in and uploads its reports.
func closeAndFlush(t *testing.T, p *client.Provider, clk *testClock) {
	t.Helper()
	clk.Advance(day)
	flush(t, p)
}

// spy records the inputs every randomizer it opened was asked to
// randomize, per plugin, so that a test can check what a period's report
// was made of: the randomized report itself is random.
type spy struct {
	mu     sync.Mutex
	inputs map[string][]sdk.Inputs
}

// cache returns a randomizer cache whose randomizers report to s.
func (s *spy) cache(t *testing.T) *client.RandomizerCache {
	s.inputs = map[string][]sdk.Inputs{}
	c := client.NewRandomizerCache(func(ctx context.Context, name string, cfg sdk.Config) (sdk.Randomizer, error) {
		r, err := client.InProcess(builtin.Factories())(ctx, name, cfg)
		if err != nil {
			return nil, err
		}
		return spied{Randomizer: r, s: s, name: name}, nil
	})
	t.Cleanup(func() { c.Close() })
	return c
}

// got returns the inputs randomized by plugin name.
func (s *spy) got(name string) []sdk.Inputs {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.inputs[name])
}

type spied struct {
	sdk.Randomizer
	s    *spy
	name string
}

func (r spied) Randomize(ctx context.Context, eps0 float64, in sdk.Inputs) ([][]byte, error) {
	r.s.mu.Lock()
	r.s.inputs[r.name] = append(r.s.inputs[r.name], in)
	r.s.mu.Unlock()
	return r.Randomizer.Randomize(ctx, eps0, in)
}
