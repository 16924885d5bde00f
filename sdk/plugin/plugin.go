package plugin

import (
	"context"
	"errors"

	goplugin "github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"

	"github.com/blanket-dp/blanket/sdk"
	randomizerv1 "github.com/blanket-dp/blanket/sdk/proto/blanket/randomizer/v1"
	"github.com/blanket-dp/blanket/sdk/rpc"
)

// ProtocolVersion is the go-plugin protocol version this package serves and
// accepts: version 1 is the gRPC service blanket.randomizer.v1.Randomizer.
// Additive changes keep the version; a breaking change adds version 2 to
// PluginSets next to version 1.
const ProtocolVersion = 1

// PluginName is the name under which a plugin process dispenses its
// randomizer (the key in each PluginSet).
const PluginName = "randomizer"

// Handshake is the go-plugin handshake shared by the host and every plugin
// binary. The magic cookie only tells a user who runs a plugin binary by hand
// that it is not meant to be run directly; it is not a security measure (pin
// the binary's checksum with WithChecksum for that).
var Handshake = goplugin.HandshakeConfig{
	ProtocolVersion:  ProtocolVersion,
	MagicCookieKey:   "BLANKET_PLUGIN",
	MagicCookieValue: "c6e221f9-547a-4878-8d2b-0a249b62f1ae",
}

// PluginSets returns the go-plugin plugin sets by protocol version. A plugin
// passes the factory of its randomizer; the host passes nil.
func PluginSets(f sdk.Factory) map[int]goplugin.PluginSet {
	return map[int]goplugin.PluginSet{
		ProtocolVersion: {PluginName: &GRPCPlugin{Factory: f}},
	}
}

// GRPCPlugin is the go-plugin plugin of protocol version 1: it registers an
// rpc.Server in the plugin process and dispenses an rpc.Client in the host.
type GRPCPlugin struct {
	goplugin.NetRPCUnsupportedPlugin
	// Factory builds the served randomizer when the host calls Configure.
	// Required in the plugin process; unused (nil) in the host.
	Factory sdk.Factory
}

var _ goplugin.GRPCPlugin = (*GRPCPlugin)(nil)

// GRPCServer implements goplugin.GRPCPlugin: it registers the Randomizer
// service on s.
func (p *GRPCPlugin) GRPCServer(_ *goplugin.GRPCBroker, s *grpc.Server) error {
	if p.Factory == nil {
		return errors.New("plugin: GRPCPlugin.Factory is nil")
	}
	randomizerv1.RegisterRandomizerServer(s, rpc.NewServer(p.Factory))
	return nil
}

// GRPCClient implements goplugin.GRPCPlugin: it returns an *rpc.Client on c.
func (p *GRPCPlugin) GRPCClient(_ context.Context, _ *goplugin.GRPCBroker, c *grpc.ClientConn) (any, error) {
	return rpc.NewClient(c), nil
}
