// Package builtin is the registry of Blanket's six randomizers (krr,
// hadamard, rappor, summation, laplace, longitudinal): their factories by
// plugin name, and Open, which serves them in process and looks any other
// name up as a plugin binary. The collector, the CLI and the tools use
// it. It links every randomizer and the plugin host (go-plugin, gRPC); an
// app's SDK (sdk/client) opens its own default set in process without it.
//
//	r, err := builtin.Open(ctx, "krr", sdk.Config{Categories: cats})
//	// same as plugin.Open(ctx, "krr", cfg, plugin.WithBuiltins(builtin.Factories()))
package builtin

import (
	"context"

	"github.com/blanket-dp/blanket/plugins/hadamard"
	"github.com/blanket-dp/blanket/plugins/krr"
	"github.com/blanket-dp/blanket/plugins/laplace"
	"github.com/blanket-dp/blanket/plugins/longitudinal"
	"github.com/blanket-dp/blanket/plugins/rappor"
	"github.com/blanket-dp/blanket/plugins/summation"
	"github.com/blanket-dp/blanket/sdk"
	"github.com/blanket-dp/blanket/sdk/host"
	"github.com/blanket-dp/blanket/sdk/plugin"
)

// Factories returns a new map from plugin name to the FromConfig factory of
// each built-in randomizer, for plugin.WithBuiltins or host.Builtin.
func Factories() map[string]sdk.Factory {
	return map[string]sdk.Factory{
		krr.Name:          sdk.FactoryOf(krr.FromConfig),
		hadamard.Name:     sdk.FactoryOf(hadamard.FromConfig),
		rappor.Name:       sdk.FactoryOf(rappor.FromConfig),
		summation.Name:    sdk.FactoryOf(summation.FromConfig),
		laplace.Name:      sdk.FactoryOf(laplace.FromConfig),
		longitudinal.Name: sdk.FactoryOf(longitudinal.FromConfig),
	}
}

// Open is plugin.Open with the built-ins: a built-in name opens in process,
// any other name is looked up as a plugin binary. Options come after
// plugin.WithBuiltins(Factories()), so a later WithBuiltins replaces it.
func Open(ctx context.Context, name string, cfg sdk.Config, opts ...plugin.Option) (host.Plugin, error) {
	return plugin.Open(ctx, name, cfg, append([]plugin.Option{plugin.WithBuiltins(Factories())}, opts...)...)
}

// Opener returns Open with opts as a plan.Opener, for an SDK Provider's
// randomizer cache (client.NewRandomizerCache) or the collector: every
// built-in in process, and plugin binaries from the plugin directory.
func Opener(opts ...plugin.Option) func(ctx context.Context, name string, cfg sdk.Config) (sdk.Randomizer, error) {
	return func(ctx context.Context, name string, cfg sdk.Config) (sdk.Randomizer, error) {
		return Open(ctx, name, cfg, opts...)
	}
}
