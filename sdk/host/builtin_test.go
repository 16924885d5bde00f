package host_test

import (
	"context"
	"errors"
	"testing"

	"github.com/blanket-dp/blanket/plugins/krr"
	"github.com/blanket-dp/blanket/sdk"
	"github.com/blanket-dp/blanket/sdk/host"
)

var builtins = map[string]sdk.Factory{krr.Name: sdk.FactoryOf(krr.FromConfig)}

// TestBuiltinBehavesAsAPlugin opens k-RR in process and checks what a
// Plugin promises whatever its implementation: the randomizer's answers,
// errors.ErrUnsupported from Step and Outputs it does not implement (and
// SampleBlanket and EstimateFloor of a randomizer without them), k-RR's
// EstimateFloor, and sdk.ErrClosed after Close.
func TestBuiltinBehavesAsAPlugin(t *testing.T) {
	ctx := context.Background()
	p, err := host.Builtin("krr", sdk.Config{Categories: []string{"a", "b"}}, builtins)
	if err != nil {
		t.Fatal(err)
	}
	if p.Name() != "krr" || p.Path() != "" || !p.Running() || p.Restarts() != 0 {
		t.Errorf("Name %q, Path %q, Running %v, Restarts %d; want krr, \"\", true, 0", p.Name(), p.Path(), p.Running(), p.Restarts())
	}
	reports, err := p.Randomize(ctx, 1, sdk.Inputs{Categories: []string{"a", "b", "a"}})
	if err != nil || len(reports) != 3 {
		t.Fatalf("Randomize: %d reports, %v", len(reports), err)
	}
	if _, err := p.Randomize(ctx, 1, sdk.Inputs{Categories: []string{"c"}}); !errors.Is(err, sdk.ErrBadInput) {
		t.Errorf("Randomize(c): %v, want ErrBadInput", err)
	}
	if _, _, err := p.Step(ctx, 1, 0, [][]byte{nil}, sdk.Inputs{Categories: []string{"a"}}); !errors.Is(err, errors.ErrUnsupported) {
		t.Errorf("Step on k-RR: %v, want ErrUnsupported", err)
	}
	if _, _, err := p.Step(ctx, 1, 0, nil, sdk.Inputs{Categories: []string{"a"}}); !errors.Is(err, sdk.ErrBadInput) {
		t.Errorf("Step with no state for one input: %v, want ErrBadInput", err)
	}
	if _, err := p.Outputs(ctx, 1, reports); !errors.Is(err, errors.ErrUnsupported) {
		t.Errorf("Outputs on k-RR: %v, want ErrUnsupported", err)
	}
	draws, err := p.SampleBlanket(ctx, 1, 4)
	if err != nil || len(draws) != 4 {
		t.Fatalf("SampleBlanket on k-RR: %d draws, %v", len(draws), err)
	}
	stat, err := p.Accumulate(ctx, 1, append(reports, draws...))
	if err != nil {
		t.Fatal(err)
	}
	stat.Draws = 4
	if est, err := p.EstimateFloor(ctx, stat); err != nil || est.N != 3 {
		t.Errorf("EstimateFloor on k-RR of 3 reports and 4 draws: %+v, %v; want an estimate of N = 3", est, err)
	}
	if _, err := p.Estimate(ctx, stat); !errors.Is(err, sdk.ErrBadStatistic) {
		t.Errorf("Estimate on k-RR of a statistic with draws: %v, want ErrBadStatistic", err)
	}
	hidden, err := host.Builtin("plain", sdk.Config{Categories: []string{"a", "b"}}, map[string]sdk.Factory{"plain": func(cfg sdk.Config) (sdk.Randomizer, error) {
		r, err := krr.FromConfig(cfg)
		return struct{ sdk.Randomizer }{r}, err
	}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := hidden.SampleBlanket(ctx, 1, 4); !errors.Is(err, errors.ErrUnsupported) {
		t.Errorf("SampleBlanket on a randomizer without it: %v, want ErrUnsupported", err)
	}
	if _, err := hidden.EstimateFloor(ctx, stat); !errors.Is(err, errors.ErrUnsupported) {
		t.Errorf("EstimateFloor on a randomizer without it: %v, want ErrUnsupported", err)
	}
	if err := p.Close(); err != nil || p.Running() {
		t.Fatalf("Close: %v, Running %v", err, p.Running())
	}
	if _, err := p.Describe(ctx); !errors.Is(err, sdk.ErrClosed) {
		t.Errorf("Describe after Close: %v, want ErrClosed", err)
	}
	if _, err := p.EstimateFloor(ctx, stat); !errors.Is(err, sdk.ErrClosed) {
		t.Errorf("EstimateFloor after Close: %v, want ErrClosed", err)
	}
}

// TestBuiltinErrors names what Builtin refuses: an invalid name, a name
// not built in, and a configuration the factory rejects.
func TestBuiltinErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  sdk.Config
		want error
	}{
		{"../krr", sdk.Config{Categories: []string{"a", "b"}}, sdk.ErrBadConfig},
		{"olh", sdk.Config{}, sdk.ErrPluginNotFound},
		{"krr", sdk.Config{}, sdk.ErrBadConfig},
	} {
		if p, err := host.Builtin(tc.name, tc.cfg, builtins); !errors.Is(err, tc.want) || p != nil {
			t.Errorf("Builtin(%q): %v, %v; want nil and %v", tc.name, p, err, tc.want)
		}
	}
}
