// Package rpc carries the randomizer contract (package sdk) over gRPC: the
// service blanket.randomizer.v1.Randomizer (package randomizerv1, generated
// from sdk/proto) served by Server in a plugin process and called by Client
// in the host, the conversions between the contract's values and their
// protobuf mirrors, a protobuf codec with pooled buffers, and the mapping of
// the contract's sentinel errors to gRPC status codes and back (PluginError),
// so that errors.Is(err, sdk.ErrBadInput) works on the host as in process.
//
// It has no process management: package sdk/plugin starts plugin
// processes, dispenses a Client from each and adds timeouts, restarts and
// batch splitting.
//
//	srv := rpc.NewServer(sdk.FactoryOf(krr.FromConfig)) // in the plugin
//	c := rpc.NewClient(conn)                             // in the host
//	desc, err := c.Configure(ctx, cfg)
package rpc
