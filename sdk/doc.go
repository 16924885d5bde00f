// Package sdk is the plugin contract of Blanket: the Randomizer interface that
// every local randomizer (built-in or third-party plugin) implements, the
// values that cross it, and the sentinel errors it returns.
//
// A randomizer is configured once (each plugin package has an Options struct
// and a FromConfig constructor that takes a plugin-independent Config) and is
// then used at the local budget eps0 fixed by the collector's plan:
//
//	r, err := krr.New(krr.Options{Categories: []string{"home", "search", "settings"}})
//	reports, err := r.Randomize(ctx, eps0, sdk.Inputs{Categories: []string{"search"}}) // on the device
//	stat, err := r.Accumulate(ctx, eps0, shuffledReports)                                // at the collector
//	est, err := r.Estimate(ctx, stat)                                                    // est.Items[i].Value ± CI
//	decl, err := r.Declare(ctx, eps0)                                                    // for the accountant
//
// Every method maps onto one RPC of the plugin protocol; the types here are
// plain structs with exported fields so that protobuf messages can mirror
// them field by field.
//
// Hosts open randomizers by name through one interface, whether linked in or
// a plugin binary (hashicorp/go-plugin over gRPC, mutual TLS, per-call
// timeouts, restart after a crash):
//
//	r, err := builtin.Open(ctx, "rappor", cfg, sdk.WithPluginDir(dir)) // sdk/builtin adds the built-ins
//	defer r.Close()
//
// A plugin binary's main only calls Serve with its factory:
//
//	func main() { sdk.Serve(sdk.FactoryOf(olh.FromConfig)) }
//
// Related packages: sdk/plugintest (the conformance kit), sdk/client (the
// app-facing telemetry SDK), sdk/plan (privacy plans), sdk/report (the wire
// format and HPKE sealing).
//
// Package sdk/ldp holds the primitives plugins share: the randomness source
// (crypto-backed by default, injectable in tests), exact uniform integers and
// Bernoulli draws, report encodings and the frequency estimators.
package sdk
