package sdk

import (
	"context"
	"fmt"

	plugin "github.com/hashicorp/go-plugin"
	pb "github.com/memhost/memhost/sdk/proto/memhost/plugin/v1"
	"google.golang.org/grpc"
)

// Handshake is the go-plugin handshake every memhost plugin answers. The
// cookie is fixed forever: it only stops a plugin binary from being run by
// hand by mistake, it is not a secret.
var Handshake = plugin.HandshakeConfig{
	ProtocolVersion:  ProtocolVersion,
	MagicCookieKey:   "MEMHOST_PLUGIN_COOKIE",
	MagicCookieValue: "5f0c0a3e9d2b4c71a8e6f3b2d9c4e1a7",
}

// metaPluginName is the plugin-set entry that serves the Plugin service
// (Info and Configure); every binary serves it, whatever its kinds.
const metaPluginName = "plugin"

// grpcPlugin is one plugin-set entry: the meta service or one kind.
type grpcPlugin struct {
	plugin.NetRPCUnsupportedPlugin
	name string
	impl Plugin // nil on the host side
}

func (p *grpcPlugin) GRPCServer(_ *plugin.GRPCBroker, s *grpc.Server) error {
	switch p.name {
	case metaPluginName:
		pb.RegisterPluginServer(s, &pluginServer{impl: p.impl})
	case string(KindProvider):
		pb.RegisterProviderServer(s, &providerServer{impl: p.impl.(Provider), caps: CapabilitiesOf(p.impl)})
	case string(KindSelector):
		pb.RegisterSelectorServer(s, &selectorServer{impl: p.impl.(Selector)})
	case string(KindCompactor):
		pb.RegisterCompactorServer(s, &compactorServer{impl: p.impl.(Compactor)})
	case string(KindOperatorResolver):
		pb.RegisterOperatorResolverServer(s, &operatorServer{impl: p.impl.(OperatorResolver)})
	case string(KindMobResolver):
		pb.RegisterMobResolverServer(s, &mobServer{impl: p.impl.(MobResolver)})
	default:
		return fmt.Errorf("unknown plugin kind %q", p.name)
	}
	return nil
}

// GRPCClient answers the raw generated client; Conn wraps it with the
// capabilities from Info.
func (p *grpcPlugin) GRPCClient(_ context.Context, _ *plugin.GRPCBroker, c *grpc.ClientConn) (any, error) {
	switch p.name {
	case metaPluginName:
		return pb.NewPluginClient(c), nil
	case string(KindProvider):
		return pb.NewProviderClient(c), nil
	case string(KindSelector):
		return pb.NewSelectorClient(c), nil
	case string(KindCompactor):
		return pb.NewCompactorClient(c), nil
	case string(KindOperatorResolver):
		return pb.NewOperatorResolverClient(c), nil
	case string(KindMobResolver):
		return pb.NewMobResolverClient(c), nil
	}
	return nil, fmt.Errorf("unknown plugin kind %q", p.name)
}

// serverPluginSet serves the meta service and each kind impl declares.
func serverPluginSet(impl Plugin) plugin.PluginSet {
	set := plugin.PluginSet{metaPluginName: &grpcPlugin{name: metaPluginName, impl: impl}}
	for _, k := range impl.Info().Kinds {
		set[string(k)] = &grpcPlugin{name: string(k), impl: impl}
	}
	return set
}

// hostPluginSet can dispense every kind; Conn checks Info before it does.
func hostPluginSet() plugin.PluginSet {
	set := plugin.PluginSet{metaPluginName: &grpcPlugin{name: metaPluginName}}
	for _, k := range PluginKinds {
		set[string(k)] = &grpcPlugin{name: string(k)}
	}
	return set
}
