package sdk

import (
	"context"
	"errors"
	"math"

	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"

	randomizerv1 "github.com/blanket-dp/blanket/sdk/proto/blanket/randomizer/v1"
)

// ProtocolVersion is the go-plugin protocol version this package serves and
// accepts: version 1 is the gRPC service blanket.randomizer.v1.Randomizer.
// Additive changes keep the version; a breaking change adds version 2 to
// PluginSets next to version 1.
const ProtocolVersion = 1

// PluginName is the name under which a plugin process dispenses its
// randomizer (the key in each PluginSet).
const PluginName = "randomizer"

// MaxMessageBytes is the largest gRPC message a plugin accepts or sends,
// raised from gRPC's default of 4 MiB so that any batch fits; the host splits
// batches into requests far smaller than this (see Plugin).
const MaxMessageBytes = math.MaxInt32

// Handshake is the go-plugin handshake shared by the host and every plugin
// binary. The magic cookie only tells a user who runs a plugin binary by hand
// that it is not meant to be run directly; it is not a security measure (pin
// the binary's checksum with WithChecksum for that).
var Handshake = plugin.HandshakeConfig{
	ProtocolVersion:  ProtocolVersion,
	MagicCookieKey:   "BLANKET_PLUGIN",
	MagicCookieValue: "c6e221f9-547a-4878-8d2b-0a249b62f1ae",
}

// Factory builds a configured Randomizer from a plugin-independent
// configuration. Errors should wrap ErrBadConfig.
type Factory func(Config) (Randomizer, error)

// FactoryOf adapts a plugin package's typed constructor, such as
// krr.FromConfig, to a Factory:
//
//	sdk.Serve(sdk.FactoryOf(krr.FromConfig))
func FactoryOf[R Randomizer](f func(Config) (R, error)) Factory {
	return func(cfg Config) (Randomizer, error) {
		r, err := f(cfg)
		if err != nil {
			return nil, err
		}
		return r, nil
	}
}

// PluginSets returns the go-plugin plugin sets by protocol version. A plugin
// passes the factory of its randomizer; the host passes nil.
func PluginSets(f Factory) map[int]plugin.PluginSet {
	return map[int]plugin.PluginSet{
		ProtocolVersion: {PluginName: &GRPCPlugin{Factory: f}},
	}
}

// GRPCPlugin is the go-plugin plugin of protocol version 1: it registers a
// GRPCServer in the plugin process and dispenses a GRPCClient in the host.
type GRPCPlugin struct {
	plugin.NetRPCUnsupportedPlugin
	// Factory builds the served randomizer when the host calls Configure.
	// Required in the plugin process; unused (nil) in the host.
	Factory Factory
}

var _ plugin.GRPCPlugin = (*GRPCPlugin)(nil)

// GRPCServer implements plugin.GRPCPlugin: it registers the Randomizer
// service on s.
func (p *GRPCPlugin) GRPCServer(_ *plugin.GRPCBroker, s *grpc.Server) error {
	if p.Factory == nil {
		return errors.New("sdk: GRPCPlugin.Factory is nil")
	}
	randomizerv1.RegisterRandomizerServer(s, NewGRPCServer(p.Factory))
	return nil
}

// GRPCClient implements plugin.GRPCPlugin: it returns a *GRPCClient on c.
func (p *GRPCPlugin) GRPCClient(_ context.Context, _ *plugin.GRPCBroker, c *grpc.ClientConn) (any, error) {
	return NewGRPCClient(c), nil
}
