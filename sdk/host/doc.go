// Package host is what a program that runs randomizers holds: the Plugin
// interface every opened randomizer implements (the contract's methods,
// Step and Outputs whatever the randomizer supports, and a lifecycle), and
// its in-process implementation for built-in randomizers (Builtin). The
// other implementation, a randomizer served by a plugin process, is
// package sdk/plugin's; this package links neither go-plugin nor gRPC, so
// that an app (sdk/client) opens its built-ins through it alone.
//
//	p, err := host.Builtin("krr", sdk.Config{Categories: cats}, factories)
//	defer p.Close()
//	reports, err := p.Randomize(ctx, eps0, sdk.Inputs{Categories: values})
package host
