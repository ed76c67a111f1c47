package sdk

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"sync"
	"time"

	pb "github.com/memhost/memhost/sdk/internal/pluginpb"
	"github.com/memhost/memhost/sdk/internal/wire"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// The servers below adapt a plugin's Go implementation to the gRPC
// services. Every request is validated first (validate.go), so plugins see
// valid input only. A capability the plugin did not declare answers
// UNIMPLEMENTED, even when the Go value happens to implement it.

// HostCapability is a feature of the calling host that a plugin may rely
// on. A host names the ones it has in Configure; a name this SDK does not
// know is a newer host's and is passed on as is.
type HostCapability string

const (
	// HostFieldErrors: a *FieldError reaches the host's caller with its
	// field path.
	HostFieldErrors HostCapability = "field_errors"
	// HostManifestStream: Manifest rows travel in chunks, so a manifest may
	// be larger than one message.
	HostManifestStream HostCapability = "manifest_stream"
	// HostSelectStream: Select receives its rows in chunks.
	HostSelectStream HostCapability = "select_stream"
)

// HostCapabilities is a set of host features.
type HostCapabilities []HostCapability

// Has reports whether c is in the set.
func (hs HostCapabilities) Has(c HostCapability) bool { return slices.Contains(hs, c) }

// HostInfo is what the host tells a plugin about itself in Configure.
type HostInfo struct {
	// Version is the memhost version, like "0.4.0".
	Version string
	// Protocols are the plugin protocol versions the host speaks.
	Protocols []int
	// Capabilities are host features a plugin may rely on.
	Capabilities HostCapabilities
}

type hostInfoKey struct{}

// HostFrom answers the calling host's HostInfo inside Configure; ok is
// false when the host sent none (an in-process test, an older host).
func HostFrom(ctx context.Context) (HostInfo, bool) {
	h, ok := ctx.Value(hostInfoKey{}).(HostInfo)
	return h, ok
}

type pluginServer struct {
	pb.UnimplementedPluginServer
	impl Plugin
}

func (s *pluginServer) Info(context.Context, *pb.InfoRequest) (*pb.InfoResponse, error) {
	in := s.impl.Info()
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
	return out, nil
}

func (s *pluginServer) Configure(ctx context.Context, req *pb.ConfigureRequest) (*pb.ConfigureResponse, error) {
	raw := json.RawMessage(req.ConfigJson)
	if len(raw) == 0 {
		raw = json.RawMessage("{}")
	}
	if h := req.Host; h != nil {
		info := HostInfo{Version: h.Version}
		for _, c := range h.Capabilities {
			info.Capabilities = append(info.Capabilities, HostCapability(c))
		}
		for _, v := range h.ProtocolVersions {
			info.Protocols = append(info.Protocols, int(v))
		}
		ctx = context.WithValue(ctx, hostInfoKey{}, info)
	}
	if err := s.impl.Configure(ctx, raw); err != nil {
		return nil, toStatus(err)
	}
	return &pb.ConfigureResponse{}, nil
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
	q, err := checkRecall(RecallQuery{
		Realm: req.Realm, Query: req.Query, Scopes: scopesFromStrings(req.Scopes), Limit: int(req.Limit),
		ExcludeIDs: req.ExcludeIds, Tags: req.Tags, ExcludeTags: req.ExcludeTags,
		Since: wire.FromMillis(req.SinceUnixMs), Until: wire.FromMillis(req.UntilUnixMs),
		QueryVector: req.QueryVector, VectorModel: req.VectorModel, Fusion: fusionFromPB(req.Fusion),
		Neighbours: int(req.Neighbours),
	})
	if err != nil {
		return nil, toStatus(err)
	}
	if !s.caps.Has(CapNeighbours) {
		q.Neighbours = 0 // undeclared: none are answered
	}
	if !s.caps.Has(CapVectors) {
		// Undeclared: the semantic half is ignored, as the contract says.
		q.QueryVector, q.VectorModel, q.Fusion = nil, "", Fusion{}
	}
	hits, err := s.impl.Recall(ctx, q)
	if err != nil {
		return nil, toStatus(err)
	}
	if q.Neighbours > 0 {
		if err := AttachNeighbours(ctx, s.impl.(ThreadReader), q, hits, time.Now()); err != nil {
			if ctx.Err() != nil {
				return nil, toStatus(ctx.Err())
			}
			// Neighbours are context for the hits, not the answer: a failed
			// read of them leaves the hits, without any.
			Logger().Warn("recall: reading the hits' thread neighbours failed; answering the hits without them", "error", err)
		}
	} else {
		for i := range hits {
			hits[i].Neighbours = nil // none were asked for
		}
	}
	out := &pb.RecallResponse{Hits: make([]*pb.Hit, len(hits))}
	for i := range hits {
		out.Hits[i] = &pb.Hit{Record: recordToPB(&hits[i].Record), Score: hits[i].Score}
		for j := range hits[i].Neighbours {
			out.Hits[i].Neighbours = append(out.Hits[i].Neighbours, recordToPB(&hits[i].Neighbours[j]))
		}
	}
	return out, nil
}

func (s *providerServer) Remember(ctx context.Context, req *pb.RememberRequest) (*pb.RememberResponse, error) {
	if !s.caps.Has(CapWrite) {
		return nil, unsupported(CapWrite)
	}
	records := recordsFromInput(req.Records)
	if err := checkWrite(req.Realm, records); err != nil {
		return nil, toStatus(err)
	}
	ids, err := s.impl.(RecordWriter).Remember(ctx, req.Realm, records)
	if err != nil {
		return nil, toStatus(err)
	}
	return &pb.RememberResponse{Ids: ids}, nil
}

func (s *providerServer) Get(ctx context.Context, req *pb.GetRequest) (*pb.GetResponse, error) {
	if !s.caps.Has(CapFetch) {
		return nil, unsupported(CapFetch)
	}
	if err := firstOf(checkRealm(req.Realm), checkIDs("ids", req.Ids)); err != nil {
		return nil, toStatus(err)
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
	if err := firstOf(checkRealm(req.Realm), checkIDs("ids", req.Ids)); err != nil {
		return nil, toStatus(err)
	}
	n, err := s.impl.(RecordForgetter).Forget(ctx, req.Realm, req.Ids)
	if err != nil {
		return nil, toStatus(err)
	}
	return &pb.ForgetResponse{Forgotten: int32(n)}, nil
}

func (s *providerServer) Manifest(req *pb.ManifestRequest, stream grpc.ServerStreamingServer[pb.ManifestResponse]) error {
	if !s.caps.Has(CapManifest) {
		return unsupported(CapManifest)
	}
	q := ManifestQuery{Realm: req.Realm, Scopes: scopesFromStrings(req.Scopes), Tier: tierFromPB(req.Tier), K: int(req.K)}
	if err := checkManifest(q); err != nil {
		return toStatus(err)
	}
	rows, err := s.impl.(ManifestLister).Manifest(stream.Context(), q)
	if err != nil {
		return toStatus(err)
	}
	// An empty manifest is still one (empty) message, so the host can tell
	// "no rows" from a stream cut short.
	for start := 0; start == 0 || start < len(rows); start += wire.ChunkRows {
		end := min(start+wire.ChunkRows, len(rows))
		if err := stream.Send(&pb.ManifestResponse{Rows: rowsToPB(rows[start:end])}); err != nil {
			return err
		}
		if end == len(rows) {
			break
		}
	}
	return nil
}

func (s *providerServer) Supersede(ctx context.Context, req *pb.SupersedeRequest) (*pb.SupersedeResponse, error) {
	if !s.caps.Has(CapSupersede) {
		return nil, unsupported(CapSupersede)
	}
	replacement := recordFromInput(req.Replacement)
	// An empty scope or kind is inherited from the old record, so only
	// what the replacement sets is checked here.
	check := replacement
	if check.Scope == "" {
		check.Scope = RealmScope
	}
	if check.Kind == "" {
		check.Kind = KindFact
	}
	if err := firstOf(checkRealm(req.Realm), validateField("old_id", ValidateID(req.OldId)),
		prefixField("replacement", check.Validate())); err != nil {
		return nil, toStatus(err)
	}
	id, err := s.impl.(Superseder).Supersede(ctx, req.Realm, req.OldId, replacement)
	if err != nil {
		return nil, toStatus(err)
	}
	return &pb.SupersedeResponse{NewId: id}, nil
}

func (s *providerServer) MarkUsed(ctx context.Context, req *pb.MarkUsedRequest) (*pb.MarkUsedResponse, error) {
	if !s.caps.Has(CapUsage) {
		return nil, unsupported(CapUsage)
	}
	if err := firstOf(checkRealm(req.Realm), checkIDs("ids", req.Ids)); err != nil {
		return nil, toStatus(err)
	}
	at := wire.FromMillis(req.AtUnixMs)
	if at.IsZero() {
		at = time.Now().UTC()
	}
	if err := s.impl.(UsageMarker).MarkUsed(ctx, req.Realm, req.Ids, at); err != nil {
		return nil, toStatus(err)
	}
	return &pb.MarkUsedResponse{}, nil
}

func (s *providerServer) CountUses(ctx context.Context, req *pb.CountUsesRequest) (*pb.CountUsesResponse, error) {
	if !s.caps.Has(CapUsageCounts) {
		return nil, unsupported(CapUsageCounts)
	}
	uses := make([]Use, len(req.Uses))
	for i, u := range req.Uses {
		uses[i] = Use{ID: u.Id, Count: u.Count}
	}
	if err := firstOf(checkRealm(req.Realm), ValidateUses("uses", uses)); err != nil {
		return nil, toStatus(err)
	}
	at := wire.FromMillis(req.AtUnixMs)
	if at.IsZero() {
		at = time.Now().UTC()
	}
	if err := s.impl.(UsageCounter).CountUses(ctx, req.Realm, uses, at); err != nil {
		return nil, toStatus(err)
	}
	return &pb.CountUsesResponse{}, nil
}

func (s *providerServer) WriteLedger(ctx context.Context, req *pb.WriteLedgerRequest) (*pb.WriteLedgerResponse, error) {
	if !s.caps.Has(CapLedger) {
		return nil, unsupported(CapLedger)
	}
	entries := ledgerFromPB(req.Entries)
	if err := checkLedger(entries); err != nil {
		return nil, toStatus(err)
	}
	if err := s.impl.(LedgerWriter).WriteLedger(ctx, entries); err != nil {
		return nil, toStatus(err)
	}
	return &pb.WriteLedgerResponse{}, nil
}

type selectorServer struct {
	pb.UnimplementedSelectorServer
	impl Selector
}

func (s *providerServer) Export(ctx context.Context, req *pb.ExportRequest) (*pb.ExportResponse, error) {
	if !s.caps.Has(CapArchive) {
		return nil, unsupported(CapArchive)
	}
	limit, err := checkExport(req.Realm, req.After, int(req.Limit))
	if err != nil {
		return nil, toStatus(err)
	}
	page, err := s.impl.(Archiver).Export(ctx, req.Realm, req.After, limit)
	if err != nil {
		return nil, toStatus(err)
	}
	return &pb.ExportResponse{Records: recordsToPB(page.Records), Next: page.Next}, nil
}

func (s *providerServer) Import(ctx context.Context, req *pb.ImportRequest) (*pb.ImportResponse, error) {
	if !s.caps.Has(CapArchive) {
		return nil, unsupported(CapArchive)
	}
	records := recordsFromPB(req.Records)
	if err := checkImport(req.Realm, records); err != nil {
		return nil, toStatus(err)
	}
	res, err := s.impl.(Archiver).Import(ctx, req.Realm, records)
	if err != nil {
		return nil, toStatus(err)
	}
	return &pb.ImportResponse{Imported: int32(res.Imported), Skipped: int32(res.Skipped)}, nil
}

func (s *providerServer) PutVectors(ctx context.Context, req *pb.PutVectorsRequest) (*pb.PutVectorsResponse, error) {
	if !s.caps.Has(CapVectors) {
		return nil, unsupported(CapVectors)
	}
	vecs := make([]RecordVector, len(req.Vectors))
	for i, v := range req.Vectors {
		vecs[i] = RecordVector{ID: v.GetId(), Model: v.GetModel(), Vector: v.GetVector(), ContentHash: v.GetContentHash()}
	}
	if err := checkPutVectors(req.Realm, vecs); err != nil {
		return nil, toStatus(err)
	}
	if err := s.impl.(VectorStore).PutVectors(ctx, req.Realm, vecs); err != nil {
		return nil, toStatus(err)
	}
	return &pb.PutVectorsResponse{}, nil
}

func (s *providerServer) MissingVectors(ctx context.Context, req *pb.MissingVectorsRequest) (*pb.MissingVectorsResponse, error) {
	if !s.caps.Has(CapVectors) {
		return nil, unsupported(CapVectors)
	}
	limit, err := checkMissingVectors(req.Realm, req.Model, req.After, int(req.Limit))
	if err != nil {
		return nil, toStatus(err)
	}
	ids, err := s.impl.(VectorStore).MissingVectors(ctx, req.Realm, req.Model, req.After, limit)
	if err != nil {
		return nil, toStatus(err)
	}
	return &pb.MissingVectorsResponse{Ids: ids}, nil
}

// fusionFromPB answers the zero Fusion (the provider's default) for an
// absent message.
func fusionFromPB(f *pb.Fusion) Fusion {
	return Fusion{Lexical: f.GetLexical(), Semantic: f.GetSemantic()}
}

func (s *selectorServer) Select(stream grpc.ClientStreamingServer[pb.SelectRequest, pb.SelectResponse]) error {
	var header *pb.SelectHeader
	var rows []ManifestRow
	for {
		msg, err := stream.Recv()
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
		if header == nil {
			header = msg.Header
		}
		rows = append(rows, rowsFromPB(msg.Rows)...)
	}
	if header == nil {
		return toStatus(invalid("header", "the first message carries no header"))
	}
	req := SelectRequest{
		Identity: Identity{Realm: header.Realm, ID: header.Identity}, Query: header.Query,
		Rows: rows, SuppressedIDs: header.SuppressedIds, Max: int(header.Max),
	}
	if err := firstOf(req.Identity.Validate(), checkRowIDs(req.Rows), checkIDs("suppressed_ids", req.SuppressedIDs)); err != nil {
		return toStatus(err)
	}
	if req.Max < 0 {
		return toStatus(invalid("max", fmt.Sprintf("%d is negative", req.Max)))
	}
	sel, err := s.impl.Select(stream.Context(), req)
	if err != nil {
		return toStatus(err)
	}
	return stream.SendAndClose(&pb.SelectResponse{Ids: sel.IDs, Coverage: coverageToPB(sel.Coverage)})
}

// checkRowIDs refuses a selector row without a valid id: the selector
// answers ids, and one it cannot name it could never select.
func checkRowIDs(rows []ManifestRow) error {
	for i := range rows {
		if err := ValidateID(rows[i].ID); err != nil {
			return invalid(fmt.Sprintf("rows[%d].id", i), problemOf(err))
		}
	}
	return nil
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
	creq := CompactRequest{
		ConversationID: req.ConversationId, Evicted: messagesFromPB(req.Evicted), CarryOver: carry,
		IdempotencyKey: req.IdempotencyKey, MaxBytes: int(req.MaxBytes),
	}
	if err := checkCompact(creq); err != nil {
		return nil, toStatus(err)
	}
	art, err := s.impl.Compact(ctx, creq)
	if err != nil {
		return nil, toStatus(err)
	}
	return &pb.CompactResponse{Artifact: messageToPB(&art)}, nil
}

type operatorServer struct {
	pb.UnimplementedOperatorResolverServer
	impl OperatorResolver
}

func (s *operatorServer) ResolveOperator(ctx context.Context, req *pb.ResolveOperatorRequest) (*pb.ResolveOperatorResponse, error) {
	id := Identity{Realm: req.Realm, ID: req.Identity}
	if err := id.Validate(); err != nil {
		return nil, toStatus(err)
	}
	op, err := s.impl.ResolveOperator(ctx, id)
	if err != nil {
		return nil, toStatus(err)
	}
	return &pb.ResolveOperatorResponse{Operator: op}, nil
}

type mobServer struct {
	pb.UnimplementedMobResolverServer
	impl MobResolver
}

func (s *mobServer) ResolveMobs(ctx context.Context, req *pb.ResolveMobsRequest) (*pb.ResolveMobsResponse, error) {
	id := Identity{Realm: req.Realm, ID: req.Identity}
	if err := id.Validate(); err != nil {
		return nil, toStatus(err)
	}
	mobs, err := s.impl.ResolveMobs(ctx, id)
	if err != nil {
		return nil, toStatus(err)
	}
	return &pb.ResolveMobsResponse{Mobs: mobs}, nil
}

type embedderServer struct {
	pb.UnimplementedEmbedderServer
	impl Embedder
}

// info answers the impl's declaration, refused when it breaks the SDK's
// limits: the host would refuse it anyway, and the SDK checks requests
// and answers against it.
func (s *embedderServer) info(ctx context.Context) (EmbedderInfo, error) {
	info, err := s.impl.EmbedderInfo(ctx)
	if err != nil {
		return EmbedderInfo{}, err
	}
	if err := info.Validate(); err != nil {
		// Not wrapped: the plugin is at fault, not the request.
		return EmbedderInfo{}, fmt.Errorf("the embedder's info is malformed: %v", err)
	}
	return info, nil
}

// Info answers the impl's declaration (the Embedder service's Info).
func (s *embedderServer) Info(ctx context.Context, _ *pb.EmbedderInfoRequest) (*pb.EmbedderInfoResponse, error) {
	info, err := s.info(ctx)
	if err != nil {
		return nil, toStatus(err)
	}
	return &pb.EmbedderInfoResponse{
		Model: info.Model, Dimensions: int32(info.Dimensions), MaxBatch: int32(info.MaxBatch),
		MaxInputBytes: int32(info.MaxInputBytes), Deterministic: info.Deterministic,
	}, nil
}

// Embed checks the request against the impl's declared limits before the
// impl sees it, and the impl's answer before the host does.
func (s *embedderServer) Embed(ctx context.Context, req *pb.EmbedRequest) (*pb.EmbedResponse, error) {
	info, err := s.info(ctx)
	if err != nil {
		return nil, toStatus(err)
	}
	ereq := EmbedRequest{Purpose: purposeFromPB(req.Purpose), Texts: req.Texts}
	if err := info.CheckRequest(ereq); err != nil {
		return nil, toStatus(err)
	}
	vecs, err := s.impl.Embed(ctx, ereq)
	if err != nil {
		return nil, toStatus(err)
	}
	if err := info.CheckVectors(len(ereq.Texts), vecs); err != nil {
		return nil, toStatus(err)
	}
	out := make([]*pb.Embedding, len(vecs))
	for i, v := range vecs {
		out[i] = &pb.Embedding{Values: v}
	}
	return &pb.EmbedResponse{Vectors: out}, nil
}

// firstOf answers the first non-nil error, checks being run in order.
func firstOf(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// validateField re-homes a token check under the request field it checked.
func validateField(field string, err error) error {
	if err == nil {
		return nil
	}
	return invalid(field, problemOf(err))
}

// Reindex runs the plugin's Reindex and streams its progress, then the
// result. Progress is coalesced: the plugin's callback only records the
// latest count, and one sender goroutine sends it, so a slow host never
// stalls the plugin's rebuild and stream.Send is never called twice at once.
func (s *providerServer) Reindex(req *pb.ReindexRequest, stream grpc.ServerStreamingServer[pb.ReindexResponse]) error {
	if !s.caps.Has(CapReindex) {
		return unsupported(CapReindex)
	}
	if err := checkReindex(req.Realm); err != nil {
		return toStatus(err)
	}
	ctx, cancel := context.WithCancel(stream.Context())
	defer cancel()
	var (
		mu          sync.Mutex
		done, total int
		ended       bool
	)
	wake := make(chan struct{}, 1)
	progress := func(d, t int) {
		mu.Lock()
		if !ended {
			done, total = d, t
		}
		mu.Unlock()
		select {
		case wake <- struct{}{}:
		default:
		}
	}
	// The sender sends the latest count on each wake; told to stop, it
	// sends a count still pending, so the host sees the final one.
	stop, sent := make(chan struct{}), make(chan error, 1)
	go func() {
		var err error
		send := func() {
			mu.Lock()
			msg := &pb.ReindexProgress{Done: int64(done), Total: int64(total)}
			mu.Unlock()
			if err == nil {
				if err = stream.Send(&pb.ReindexResponse{Event: &pb.ReindexResponse_Progress{Progress: msg}}); err != nil {
					// The host is gone: stop the rebuild too.
					cancel()
				}
			}
		}
		for {
			select {
			case <-ctx.Done():
				sent <- err
				return
			case <-wake:
				send()
			case <-stop:
				select {
				case <-wake:
					send()
				default:
				}
				sent <- err
				return
			}
		}
	}()
	n, err := s.impl.(Reindexer).Reindex(ctx, req.Realm, progress)
	mu.Lock()
	ended = true
	mu.Unlock()
	close(stop)
	sendErr := <-sent
	if err != nil {
		return toStatus(err)
	}
	if sendErr != nil {
		return sendErr
	}
	return stream.Send(&pb.ReindexResponse{Event: &pb.ReindexResponse_Done{Done: &pb.ReindexDone{Reindexed: int64(n)}}})
}
