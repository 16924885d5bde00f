//go:build unix

package plugin_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/blanket-dp/blanket/plugins/builtin"
	"github.com/blanket-dp/blanket/sdk"
	"github.com/blanket-dp/blanket/sdk/host"
	"github.com/blanket-dp/blanket/sdk/internal/counter"
	"github.com/blanket-dp/blanket/sdk/plugin"
	"github.com/blanket-dp/blanket/sdk/rpc"
)

// The stateful test randomizer's binary, registered here so that the
// tests of Step build it as buildPlugin builds the others.
func init() {
	pluginPackages[counter.Name] = "github.com/blanket-dp/blanket/sdk/internal/counter/cmd/blanket-counter"
}

// counterCats are the categories of the counter plugin in these tests.
var counterCats = []string{"a", "b", "c"}

// openCounter opens the counter randomizer with params as a plugin
// process.
func openCounter(t *testing.T, params map[string]string, opts ...plugin.Option) host.Plugin {
	t.Helper()
	dir := buildPlugin(t, counter.Name)
	p, err := plugin.Open(context.Background(), counter.Name, sdk.Config{Categories: counterCats, Params: params},
		append([]plugin.Option{plugin.WithPluginDir(dir)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

// openCounterBuiltin opens the counter randomizer with params in process.
func openCounterBuiltin(t *testing.T, params map[string]string) host.Plugin {
	t.Helper()
	p, err := plugin.Open(context.Background(), counter.Name, sdk.Config{Categories: counterCats, Params: params},
		plugin.WithBuiltins(map[string]sdk.Factory{counter.Name: sdk.FactoryOf(counter.FromConfig)}), plugin.WithPluginDir(""))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

// decodeStates decodes counter states, failing the test on a bad one.
func decodeStates(t *testing.T, states [][]byte) []counter.State {
	t.Helper()
	out := make([]counter.State, len(states))
	for i, b := range states {
		s, err := counter.Decode(b)
		if err != nil {
			t.Fatalf("state %d: %v", i, err)
		}
		out[i] = s
	}
	return out
}

// TestStepSubprocess steps users of the counter plugin through a plugin
// process over four periods and checks each answer against the same
// randomizer in process (deterministic: its reports are its inputs): the
// description's Stateful and Span survive the wire, states go out and come
// back byte for byte, a user joining later (a nil state next to others)
// starts at step 1, and the periods without a report come back as nil
// reports, not as empty ones.
func TestStepSubprocess(t *testing.T) {
	ctx := context.Background()
	const eps0 = 1.5
	params := map[string]string{"every": "2"}
	p := openCounter(t, params)
	local, err := counter.FromConfig(sdk.Config{Categories: counterCats, Params: params})
	if err != nil {
		t.Fatal(err)
	}
	d, err := p.Describe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := local.Describe(ctx)
	if !d.Stateful || d.Span != counter.Span || !reflect.DeepEqual(d, want) {
		t.Fatalf("Describe = %+v, want %+v (stateful, span %d)", d, want, counter.Span)
	}

	in := sdk.Inputs{Categories: []string{"a", "c", "b"}}
	states := make([][]byte, 3) // first steps
	for period := int64(100); period < 104; period++ {
		if period == 101 {
			// A fourth user joins: its first step next to the others'
			// second, a report next to none.
			in.Categories = append(in.Categories, "b")
			states = append(states, nil)
		}
		sent := make([][]byte, len(states))
		for i, s := range states {
			sent[i] = append([]byte(nil), s...)
		}
		reports, next, err := p.Step(ctx, eps0, period, states, in)
		if err != nil {
			t.Fatalf("period %d: %v", period, err)
		}
		wantReports, wantNext, err := local.Step(ctx, eps0, period, sent, in)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(reports, wantReports) || !reflect.DeepEqual(next, wantNext) {
			t.Fatalf("period %d: Step = %x, %x\nin process %x, %x", period, reports, next, wantReports, wantNext)
		}
		for i, s := range decodeStates(t, next) {
			steps := period - 99
			if i == 3 {
				steps = period - 100
			}
			if s.Last != period || s.Steps != steps || s.Eps0 != eps0 {
				t.Errorf("period %d: state %d = %+v, want last %d, %d steps, eps0 %v", period, i, s, period, steps, eps0)
			}
			// every=2: a report at steps 1, 3, ..., none at the others.
			if got, wantNil := reports[i] == nil, steps%2 == 0; got != wantNil {
				t.Errorf("period %d: user %d at step %d: report %x (nil %v), want nil %v", period, i, steps, reports[i], got, wantNil)
			}
		}
		states = next
	}
}

// TestStepErrors checks the errors of Step across the boundary, and the
// same in process: a replayed period and a foreign state wrap ErrBadState
// (and no other sentinel), a randomizer that is not stateful wraps
// errors.ErrUnsupported, a lying answer (a report missing, an empty
// state) wraps ErrPluginFailed, and a batch with more states than inputs
// wraps ErrBadInput before any call.
func TestStepErrors(t *testing.T) {
	ctx := context.Background()
	in := sdk.Inputs{Categories: []string{"a", "b"}}
	for _, where := range []string{"process", "builtin"} {
		t.Run(where, func(t *testing.T) {
			open := func(params map[string]string) host.Plugin {
				if where == "process" {
					return openCounter(t, params)
				}
				return openCounterBuiltin(t, params)
			}
			p := open(nil)
			_, states, err := p.Step(ctx, 1, 7, make([][]byte, 2), in)
			if err != nil {
				t.Fatal(err)
			}
			badState := []struct {
				name   string
				period int64
				states [][]byte
			}{
				{"same period again", 7, states},
				{"earlier period", 6, states},
				{"foreign bytes", 8, [][]byte{states[0], []byte("not a counter state")}},
			}
			for _, tc := range badState {
				_, _, err := p.Step(ctx, 1, tc.period, tc.states, in)
				if !errors.Is(err, sdk.ErrBadState) {
					t.Errorf("%s: %v, want ErrBadState", tc.name, err)
				}
				for _, other := range []error{sdk.ErrBadInput, sdk.ErrBadEps0, sdk.ErrPluginFailed, errors.ErrUnsupported} {
					if errors.Is(err, other) {
						t.Errorf("%s: %v also wraps %v", tc.name, err, other)
					}
				}
				var pe *rpc.PluginError
				if where == "process" && (!errors.As(err, &pe) || pe.Reason != "BAD_STATE") {
					t.Errorf("%s: %#v, want a *rpc.PluginError of reason BAD_STATE", tc.name, err)
				}
			}
			if _, _, err := p.Step(ctx, 1, 8, make([][]byte, 3), in); !errors.Is(err, sdk.ErrBadInput) {
				t.Errorf("3 states for 2 inputs: %v, want ErrBadInput", err)
			}
			if _, _, err := p.Step(ctx, 0, 8, states, in); !errors.Is(err, sdk.ErrBadEps0) {
				t.Errorf("eps0 0: %v, want ErrBadEps0", err)
			}
			if _, err := p.Randomize(ctx, 1, in); !errors.Is(err, errors.ErrUnsupported) {
				t.Errorf("Randomize of a stateful randomizer: %v, want errors.ErrUnsupported", err)
			}
			for _, lie := range []string{"short", "empty"} {
				liar := open(map[string]string{"lie": lie})
				if _, _, err := liar.Step(ctx, 1, 7, make([][]byte, 2), in); !errors.Is(err, sdk.ErrPluginFailed) {
					t.Errorf("lie=%s: %v, want ErrPluginFailed", lie, err)
				}
			}
		})
	}

	t.Run("not stateful", func(t *testing.T) {
		cfg := sdk.Config{Categories: []string{"a", "b"}}
		dir := buildPlugin(t, "krr")
		proc, err := plugin.Open(ctx, "krr", cfg, plugin.WithPluginDir(dir))
		if err != nil {
			t.Fatal(err)
		}
		defer proc.Close()
		in, err := builtin.Open(ctx, "krr", cfg, plugin.WithPluginDir(""))
		if err != nil {
			t.Fatal(err)
		}
		defer in.Close()
		for name, p := range map[string]host.Plugin{"process": proc, "builtin": in} {
			_, _, err := p.Step(ctx, 1, 7, make([][]byte, 2), sdk.Inputs{Categories: []string{"a", "b"}})
			if !errors.Is(err, errors.ErrUnsupported) {
				t.Errorf("%s: Step of krr: %v, want errors.ErrUnsupported", name, err)
			}
			if errors.Is(err, sdk.ErrPluginFailed) {
				t.Errorf("%s: Step of krr: %v wraps ErrPluginFailed", name, err)
			}
		}
	})
}

// TestStepRestart crashes the plugin process in its first Step: the host
// starts a new process and sends the step again, which answers as a first
// step would (the host kept the states it sent).
func TestStepRestart(t *testing.T) {
	ctx := context.Background()
	marker := filepath.Join(t.TempDir(), "crashed")
	p := openCounter(t, map[string]string{"crash_once": marker})
	before := plugin.PID(p)
	reports, next, err := p.Step(ctx, 1, 5, make([][]byte, 2), sdk.Inputs{Categories: []string{"b", "c"}})
	if err != nil {
		t.Fatalf("Step after a crash: %v", err)
	}
	if _, err := os.Stat(marker); err != nil {
		t.Fatalf("the plugin did not crash: %v", err)
	}
	if after := plugin.PID(p); after == before || after == 0 {
		t.Errorf("process %d before and %d after: no restart", before, after)
	}
	for i, s := range decodeStates(t, next) {
		if s.Steps != 1 || s.Last != 5 || reports[i] == nil {
			t.Errorf("user %d: state %+v, report %x; want a first step of period 5 with its report", i, s, reports[i])
		}
	}
}

// TestStepChunks steps a batch too large for one request (the limit
// lowered to a few inputs) and checks the answer against the same batch in
// process: every user's state at a different step count, so a report or
// state out of place shows.
func TestStepChunks(t *testing.T) {
	ctx := context.Background()
	const n = 200
	p := openCounter(t, nil, plugin.WithMaxRequestBytes(256))
	local, err := counter.FromConfig(sdk.Config{Categories: counterCats})
	if err != nil {
		t.Fatal(err)
	}
	in := sdk.Inputs{Categories: make([]string, n)}
	states := make([][]byte, n)
	for i := range n {
		in.Categories[i] = counterCats[i%3]
		if i%5 != 0 { // every fifth user takes its first step
			states[i] = counter.State{Eps0: 2, Last: 10, Steps: int64(i)}.Encode()
		}
	}
	reports, next, err := p.Step(ctx, 2, 11, states, in)
	if err != nil {
		t.Fatal(err)
	}
	wantReports, wantNext, err := local.Step(ctx, 2, 11, states, in)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(reports, wantReports) || !reflect.DeepEqual(next, wantNext) {
		t.Fatalf("chunked Step differs from the whole batch in process")
	}
	for i, s := range decodeStates(t, next) {
		if want := int64(i) + 1; (i%5 == 0 && s.Steps != 1) || (i%5 != 0 && s.Steps != want) {
			t.Fatalf("user %d: %d steps", i, s.Steps)
		}
	}
}
