package sdk

import (
	"context"
	"fmt"

	plugin "github.com/hashicorp/go-plugin"
	pb "github.com/memhost/memhost/sdk/internal/pluginpb"
	"github.com/memhost/memhost/sdk/internal/wire"
	"google.golang.org/grpc"
)

// kindTable is the one list of plugin kinds on the plugin side: what a
// value must implement to declare the kind, and how its gRPC service is
// registered. Kinds, CheckPlugin and the served plugin set all read it;
// sdk/host keeps the matching client table, and a test there holds the two
// to the same kinds.
var kindTable = []struct {
	kind       PluginKind
	implements func(any) bool
	register   func(s *grpc.Server, p Plugin)
}{
	{KindProvider, func(v any) bool { _, ok := v.(Provider); return ok }, func(s *grpc.Server, p Plugin) {
		pb.RegisterProviderServer(s, &providerServer{impl: p.(Provider), caps: CapabilitiesOf(p)})
	}},
	{KindSelector, func(v any) bool { _, ok := v.(Selector); return ok }, func(s *grpc.Server, p Plugin) {
		pb.RegisterSelectorServer(s, &selectorServer{impl: p.(Selector)})
	}},
	{KindCompactor, func(v any) bool { _, ok := v.(Compactor); return ok }, func(s *grpc.Server, p Plugin) {
		pb.RegisterCompactorServer(s, &compactorServer{impl: p.(Compactor)})
	}},
	{KindOperatorResolver, func(v any) bool { _, ok := v.(OperatorResolver); return ok }, func(s *grpc.Server, p Plugin) {
		pb.RegisterOperatorResolverServer(s, &operatorServer{impl: p.(OperatorResolver)})
	}},
	{KindMobResolver, func(v any) bool { _, ok := v.(MobResolver); return ok }, func(s *grpc.Server, p Plugin) {
		pb.RegisterMobResolverServer(s, &mobServer{impl: p.(MobResolver)})
	}},
	{KindEmbedder, func(v any) bool { _, ok := v.(Embedder); return ok }, func(s *grpc.Server, p Plugin) {
		pb.RegisterEmbedderServer(s, &embedderServer{impl: p.(Embedder)})
	}},
}

func kindEntry(k PluginKind) (int, bool) {
	for i, e := range kindTable {
		if e.kind == k {
			return i, true
		}
	}
	return -1, false
}

// servedPlugin is one plugin-set entry on the plugin side: the meta
// service or one kind. The host side has its own entry type in sdk/host.
type servedPlugin struct {
	plugin.NetRPCUnsupportedPlugin
	name string
	impl Plugin
}

func (p *servedPlugin) GRPCServer(_ *plugin.GRPCBroker, s *grpc.Server) error {
	if p.name == wire.MetaPlugin {
		pb.RegisterPluginServer(s, &pluginServer{impl: p.impl})
		return nil
	}
	i, ok := kindEntry(PluginKind(p.name))
	if !ok {
		return fmt.Errorf("unknown plugin kind %q", p.name)
	}
	kindTable[i].register(s, p.impl)
	return nil
}

func (p *servedPlugin) GRPCClient(context.Context, *plugin.GRPCBroker, *grpc.ClientConn) (any, error) {
	return nil, fmt.Errorf("plugin kind %q: the plugin side has no client", p.name)
}

// servedPluginSet serves the meta service and each kind impl declares.
func servedPluginSet(impl Plugin) plugin.PluginSet {
	set := plugin.PluginSet{wire.MetaPlugin: &servedPlugin{name: wire.MetaPlugin, impl: impl}}
	for _, k := range impl.Info().Kinds {
		set[string(k)] = &servedPlugin{name: string(k), impl: impl}
	}
	return set
}
