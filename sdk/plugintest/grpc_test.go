package plugintest_test

import (
	"context"
	"testing"

	"github.com/blanket-dp/blanket/sdk/rpc"

	goplugin "github.com/hashicorp/go-plugin"

	"github.com/blanket-dp/blanket/examples/custom-plugin/olh"
	"github.com/blanket-dp/blanket/plugins/krr"
	"github.com/blanket-dp/blanket/plugins/laplace"
	"github.com/blanket-dp/blanket/plugins/summation"
	"github.com/blanket-dp/blanket/sdk"
	"github.com/blanket-dp/blanket/sdk/plugin"
	"github.com/blanket-dp/blanket/sdk/plugintest"
)

// served returns the randomizer of cfg built by f, served in process over a
// real gRPC connection (goplugin.TestPluginGRPCConn), as the host sees a
// plugin binary: errors cross as gRPC statuses and are mapped back.
func served(t *testing.T, f sdk.Factory, cfg sdk.Config) sdk.Randomizer {
	t.Helper()
	client, _ := goplugin.TestPluginGRPCConn(t, false, plugin.PluginSets(f)[plugin.ProtocolVersion])
	t.Cleanup(func() { _ = client.Close() })
	raw, err := client.Dispense(plugin.PluginName)
	if err != nil {
		t.Fatal(err)
	}
	c, ok := raw.(*rpc.Client)
	if !ok {
		t.Fatalf("dispensed %T, want *rpc.Client", raw)
	}
	if _, err := c.Configure(context.Background(), cfg); err != nil {
		t.Fatal(err)
	}
	return c
}

// TestOverGRPC runs the kit on plugins behind the plugin protocol, the way
// `blanket plugin verify` does: error sentinels, malformed-report counts and
// panics must survive the trip.
func TestOverGRPC(t *testing.T) {
	// Fewer draws than the defaults: this test is about the protocol, and
	// TestBuiltins runs the full kit in process. Laplace, whose sampler is
	// the costliest under -race (18 s of CPU here with the others'
	// options), runs at one eps0 with estimator batches of 200; the
	// others' options are TestOverGRPCDeep's (make audit).
	light := plugintest.Options{Samples: 5000, Batches: 50}
	laplaceOpts := light
	laplaceOpts.Eps0s, laplaceOpts.BatchSize = []float64{2}, 200
	overGRPC(t, light, laplaceOpts)
}

// overGRPC runs TestOverGRPC with the options light, and laplaceOpts for
// the laplace plugin.
func overGRPC(t *testing.T, light, laplaceOpts plugintest.Options) {
	local := must(olh.FromConfig(sdk.Config{Categories: []string{"a", "b", "c"}, Other: "other"})) // decodes reports of the served configuration
	small := sdk.Config{Categories: []string{"a", "b", "c"}, Other: "other"}
	olhOpts := light
	olhOpts.Output = local.Output
	tests := []struct {
		name string
		f    sdk.Factory
		cfg  sdk.Config
		opts plugintest.Options
	}{
		{"krr", sdk.FactoryOf(krr.FromConfig), small, light},
		{"summation", sdk.FactoryOf(summation.FromConfig), sdk.Config{Lo: 0, Hi: 10, Params: map[string]string{"k": "4"}}, light},
		{"laplace", sdk.FactoryOf(laplace.FromConfig), sdk.Config{Lo: 0, Hi: 10}, laplaceOpts},
		{"olh", sdk.FactoryOf(olh.FromConfig), small, olhOpts},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			plugintest.Run(t, served(t, tt.f, tt.cfg), tt.opts)
		})
	}
}
