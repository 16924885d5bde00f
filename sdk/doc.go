// Package sdk is the plugin contract of Blanket: the Randomizer interface that
// every local randomizer (built-in or third-party plugin) implements, its
// optional interfaces (Stateful, OutputMapper, PackedRandomizer), the values
// that cross it, and the sentinel errors it returns. A randomizer author
// imports this package, sdk/ldp (sampling primitives, report encodings,
// frequency estimators) and accountant/declare (the declaration of the
// randomizer's output distributions), and tests with sdk/plugintest; none
// of them links gRPC or the accountant.
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
// The packages around the contract, by role:
//
//   - sdk/host: what a program that runs randomizers holds, host.Plugin,
//     and its in-process implementation for built-ins (host.Builtin).
//   - sdk/plugin: randomizers as plugin processes (hashicorp/go-plugin):
//     plugin.Serve in a plugin binary's main, plugin.Open in the host,
//     whose subprocess is the other host.Plugin.
//   - sdk/rpc: the gRPC transport of the contract (sdk/proto), with errors
//     mapped to status codes and back.
//   - plugins/builtin: the registry of Blanket's randomizers.
//
// A plugin binary's main only calls plugin.Serve with its factory:
//
//	func main() { plugin.Serve(sdk.FactoryOf(olh.FromConfig)) }
//
// and a host opens a randomizer by name through one interface, whether
// linked in or a plugin binary:
//
//	r, err := builtin.Open(ctx, "rappor", cfg, plugin.WithPluginDir(dir))
//	defer r.Close()
//
// Related packages: sdk/client (the app-facing telemetry SDK), sdk/plan
// (privacy plans), sdk/report (the wire format and HPKE sealing).
package sdk
