// Package builtin links Blanket's six randomizers (krr, hadamard, rappor,
// summation, laplace, longitudinal) into the host process, so that opening them needs no plugin
// binary. It is a separate package because the plugins import sdk.
//
//	r, err := builtin.Open(ctx, "krr", sdk.Config{Categories: cats})
//	// same as sdk.Open(ctx, "krr", cfg, sdk.WithBuiltins(builtin.Factories()))
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
)

// Factories returns a new map from plugin name to the FromConfig factory of
// each built-in randomizer, for sdk.WithBuiltins.
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

// Open is sdk.Open with the built-ins: a built-in name opens in process,
// any other name is looked up as a plugin binary. Options come after
// WithBuiltins(Factories()), so a later WithBuiltins replaces it.
func Open(ctx context.Context, name string, cfg sdk.Config, opts ...sdk.OpenOption) (*sdk.Plugin, error) {
	return sdk.Open(ctx, name, cfg, append([]sdk.OpenOption{sdk.WithBuiltins(Factories())}, opts...)...)
}
