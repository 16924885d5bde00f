// Package plugin runs randomizers as plugin processes over
// hashicorp/go-plugin (gRPC through package sdk/rpc, mutual TLS, optional
// SHA-256 pinning of the binary, per-call timeouts, restart after a
// crash). Both ends are here: Serve is all a plugin binary's main calls,
// and Open, in the host, starts the binary blanket-<name> from the plugin
// directory and returns it as a host.Plugin, the interface it shares with
// the in-process built-ins (package sdk/host).
//
//	func main() { plugin.Serve(sdk.FactoryOf(olh.FromConfig)) } // the plugin binary
//
//	r, err := plugin.Open(ctx, "olh", cfg, plugin.WithPluginDir(dir)) // the host
//	defer r.Close()
//
// An app links this package (and gRPC) only when it opts into plugin
// binaries: sdk/client opens the built-ins in process without it.
package plugin
