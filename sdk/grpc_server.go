package sdk

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	pb "github.com/memhost/memhost/sdk/proto/memhost/plugin/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// The servers below adapt a plugin's Go implementation to the gRPC
// services. A capability the plugin did not declare answers UNIMPLEMENTED,
// even when the Go value happens to implement it.

type pluginServer struct {
	pb.UnimplementedPluginServer
	impl Plugin
}

func (s *pluginServer) Info(context.Context, *pb.InfoRequest) (*pb.InfoResponse, error) {
	return infoToPB(s.impl.Info()), nil
}

func (s *pluginServer) Configure(ctx context.Context, req *pb.ConfigureRequest) (*pb.ConfigureResponse, error) {
	raw := json.RawMessage(req.ConfigJson)
	if len(raw) == 0 {
		raw = json.RawMessage("{}")
	}
	if err := s.impl.Configure(ctx, raw); err != nil {
		return nil, toStatus(err)
	}
	return &pb.ConfigureResponse{}, nil
}

func infoToPB(in Info) *pb.InfoResponse {
	out := &pb.InfoResponse{Name: in.Name, Version: in.Version, ConfigSchema: in.ConfigSchema}
	for _, k := range in.Kinds {
		out.Kinds = append(out.Kinds, string(k))
	}
	for _, p := range in.Protocols {
		out.ProtocolVersions = append(out.ProtocolVersions, int32(p))
	}
	for _, c := range in.Capabilities {
		out.Capabilities = append(out.Capabilities, string(c))
	}
	return out
}

func infoFromPB(p *pb.InfoResponse) Info {
	out := Info{Name: p.Name, Version: p.Version, ConfigSchema: p.ConfigSchema}
	for _, k := range p.Kinds {
		out.Kinds = append(out.Kinds, PluginKind(k))
	}
	for _, v := range p.ProtocolVersions {
		out.Protocols = append(out.Protocols, int(v))
	}
	for _, c := range p.Capabilities {
		out.Capabilities = append(out.Capabilities, Capability(c))
	}
	return out
}

type providerServer struct {
	pb.UnimplementedProviderServer
	impl Provider
	caps Capabilities
}

func unsupported(c Capability) error {
	return status.Error(codes.Unimplemented, fmt.Sprintf("capability %q is not declared by this plugin", c))
}

func (s *providerServer) Recall(ctx context.Context, req *pb.RecallRequest) (*pb.RecallResponse, error) {
	hits, err := s.impl.Recall(ctx, RecallQuery{
		Realm: req.Realm, Query: req.Query, Scopes: scopesFromStrings(req.Scopes), Limit: int(req.Limit),
		ExcludeIDs: req.ExcludeIds, Tags: req.Tags, ExcludeTags: req.ExcludeTags,
	})
	if err != nil {
		return nil, toStatus(err)
	}
	out := &pb.RecallResponse{Hits: make([]*pb.Hit, len(hits))}
	for i := range hits {
		out.Hits[i] = &pb.Hit{Record: recordToPB(&hits[i].Record), Score: hits[i].Score}
	}
	return out, nil
}

func (s *providerServer) Remember(ctx context.Context, req *pb.RememberRequest) (*pb.RememberResponse, error) {
	if !s.caps.Has(CapWrite) {
		return nil, unsupported(CapWrite)
	}
	ids, err := s.impl.(RecordWriter).Remember(ctx, req.Realm, recordsFromPB(req.Records))
	if err != nil {
		return nil, toStatus(err)
	}
	return &pb.RememberResponse{Ids: ids}, nil
}

func (s *providerServer) Get(ctx context.Context, req *pb.GetRequest) (*pb.GetResponse, error) {
	if !s.caps.Has(CapFetch) {
		return nil, unsupported(CapFetch)
	}
	recs, err := s.impl.(RecordGetter).Get(ctx, req.Realm, req.Ids)
	if err != nil {
		return nil, toStatus(err)
	}
	return &pb.GetResponse{Records: recordsToPB(recs)}, nil
}

func (s *providerServer) Forget(ctx context.Context, req *pb.ForgetRequest) (*pb.ForgetResponse, error) {
	if !s.caps.Has(CapForget) {
		return nil, unsupported(CapForget)
	}
	n, err := s.impl.(RecordForgetter).Forget(ctx, req.Realm, req.Ids)
	if err != nil {
		return nil, toStatus(err)
	}
	return &pb.ForgetResponse{Forgotten: int32(n)}, nil
}

func (s *providerServer) Manifest(ctx context.Context, req *pb.ManifestRequest) (*pb.ManifestResponse, error) {
	if !s.caps.Has(CapManifest) {
		return nil, unsupported(CapManifest)
	}
	rows, err := s.impl.(ManifestLister).Manifest(ctx, ManifestQuery{
		Realm: req.Realm, Scopes: scopesFromStrings(req.Scopes), Tier: tierFromPB(req.Tier), K: int(req.K),
	})
	if err != nil {
		return nil, toStatus(err)
	}
	return &pb.ManifestResponse{Rows: rowsToPB(rows)}, nil
}

func (s *providerServer) Supersede(ctx context.Context, req *pb.SupersedeRequest) (*pb.SupersedeResponse, error) {
	if !s.caps.Has(CapSupersede) {
		return nil, unsupported(CapSupersede)
	}
	id, err := s.impl.(Superseder).Supersede(ctx, req.Realm, req.OldId, recordFromPB(req.Replacement))
	if err != nil {
		return nil, toStatus(err)
	}
	return &pb.SupersedeResponse{NewId: id}, nil
}

func (s *providerServer) MarkUsed(ctx context.Context, req *pb.MarkUsedRequest) (*pb.MarkUsedResponse, error) {
	if !s.caps.Has(CapUsage) {
		return nil, unsupported(CapUsage)
	}
	at := fromMillis(req.AtUnixMs)
	if at.IsZero() {
		at = time.Now().UTC()
	}
	if err := s.impl.(UsageMarker).MarkUsed(ctx, req.Realm, req.Ids, at); err != nil {
		return nil, toStatus(err)
	}
	return &pb.MarkUsedResponse{}, nil
}

func (s *providerServer) WriteLedger(ctx context.Context, req *pb.WriteLedgerRequest) (*pb.WriteLedgerResponse, error) {
	if !s.caps.Has(CapLedger) {
		return nil, unsupported(CapLedger)
	}
	if err := s.impl.(LedgerWriter).WriteLedger(ctx, ledgerFromPB(req.Entries)); err != nil {
		return nil, toStatus(err)
	}
	return &pb.WriteLedgerResponse{}, nil
}

type selectorServer struct {
	pb.UnimplementedSelectorServer
	impl Selector
}

func (s *selectorServer) Select(ctx context.Context, req *pb.SelectRequest) (*pb.SelectResponse, error) {
	sel, err := s.impl.Select(ctx, SelectRequest{
		Identity: Identity{Realm: req.Realm, ID: req.Identity}, Query: req.Query,
		Rows: rowsFromPB(req.Rows), SuppressedIDs: req.SuppressedIds, Max: int(req.Max),
	})
	if err != nil {
		return nil, toStatus(err)
	}
	return &pb.SelectResponse{Ids: sel.IDs, Coverage: coverageToPB(sel.Coverage)}, nil
}

type compactorServer struct {
	pb.UnimplementedCompactorServer
	impl Compactor
}

func (s *compactorServer) Compact(ctx context.Context, req *pb.CompactRequest) (*pb.CompactResponse, error) {
	var carry *Message
	if req.CarryOver != nil {
		m := messageFromPB(req.CarryOver)
		carry = &m
	}
	art, err := s.impl.Compact(ctx, CompactRequest{
		ConversationID: req.ConversationId, Evicted: messagesFromPB(req.Evicted), CarryOver: carry,
		IdempotencyKey: req.IdempotencyKey, MaxBytes: int(req.MaxBytes),
	})
	if err != nil {
		return nil, toStatus(err)
	}
	return &pb.CompactResponse{Artifact: messageToPB(&art)}, nil
}

type operatorServer struct {
	pb.UnimplementedOperatorResolverServer
	impl OperatorResolver
}

func (s *operatorServer) ResolveOperator(ctx context.Context, req *pb.ResolveRequest) (*pb.ResolveOperatorResponse, error) {
	op, err := s.impl.ResolveOperator(ctx, Identity{Realm: req.Realm, ID: req.Identity})
	if err != nil {
		return nil, toStatus(err)
	}
	return &pb.ResolveOperatorResponse{Operator: op}, nil
}

type mobServer struct {
	pb.UnimplementedMobResolverServer
	impl MobResolver
}

func (s *mobServer) ResolveMobs(ctx context.Context, req *pb.ResolveRequest) (*pb.ResolveMobsResponse, error) {
	mobs, err := s.impl.ResolveMobs(ctx, Identity{Realm: req.Realm, ID: req.Identity})
	if err != nil {
		return nil, toStatus(err)
	}
	return &pb.ResolveMobsResponse{Mobs: mobs}, nil
}
