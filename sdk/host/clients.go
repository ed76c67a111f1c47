package host

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	plugin "github.com/hashicorp/go-plugin"
	"github.com/memhost/memhost/sdk"
	pb "github.com/memhost/memhost/sdk/internal/pluginpb"
	"github.com/memhost/memhost/sdk/internal/wire"
	"google.golang.org/grpc"
)

// clientKinds is the host side's one table of plugin kinds: how each
// kind's gRPC client is made and wrapped. sdk.Kinds is the plugin side's;
// TestClientKindsCoverSDK holds the two to the same kinds. The plugin set,
// Conn.Dispense and the typed accessors below all read it.
var clientKinds = map[sdk.PluginKind]struct {
	grpc func(*grpc.ClientConn) any
	wrap func(rpc any, info sdk.Info) any
}{
	sdk.KindProvider: {
		func(c *grpc.ClientConn) any { return pb.NewProviderClient(c) },
		func(rpc any, info sdk.Info) any {
			return ProviderOf(&providerClient{rpc: rpc.(pb.ProviderClient), caps: info.Capabilities})
		},
	},
	sdk.KindSelector: {
		func(c *grpc.ClientConn) any { return pb.NewSelectorClient(c) },
		func(rpc any, _ sdk.Info) any { return &selectorClient{rpc: rpc.(pb.SelectorClient)} },
	},
	sdk.KindCompactor: {
		func(c *grpc.ClientConn) any { return pb.NewCompactorClient(c) },
		func(rpc any, _ sdk.Info) any { return &compactorClient{rpc: rpc.(pb.CompactorClient)} },
	},
	sdk.KindOperatorResolver: {
		func(c *grpc.ClientConn) any { return pb.NewOperatorResolverClient(c) },
		func(rpc any, _ sdk.Info) any { return &operatorClient{rpc: rpc.(pb.OperatorResolverClient)} },
	},
	sdk.KindMobResolver: {
		func(c *grpc.ClientConn) any { return pb.NewMobResolverClient(c) },
		func(rpc any, _ sdk.Info) any { return &mobClient{rpc: rpc.(pb.MobResolverClient)} },
	},
	sdk.KindEmbedder: {
		func(c *grpc.ClientConn) any { return pb.NewEmbedderClient(c) },
		func(rpc any, _ sdk.Info) any { return &embedderClient{rpc: rpc.(pb.EmbedderClient)} },
	},
}

// Compile-time checks that each client is the kind's interface.
var (
	_ fullProvider         = (*providerClient)(nil)
	_ sdk.Selector         = (*selectorClient)(nil)
	_ sdk.Compactor        = (*compactorClient)(nil)
	_ sdk.OperatorResolver = (*operatorClient)(nil)
	_ sdk.MobResolver      = (*mobClient)(nil)
	_ sdk.Embedder         = (*embedderClient)(nil)
)

// clientPlugin is one plugin-set entry on the host side.
type clientPlugin struct {
	plugin.NetRPCUnsupportedPlugin
	name string
}

func (p *clientPlugin) GRPCServer(*plugin.GRPCBroker, *grpc.Server) error {
	return fmt.Errorf("plugin kind %q: the host side serves nothing", p.name)
}

func (p *clientPlugin) GRPCClient(_ context.Context, _ *plugin.GRPCBroker, c *grpc.ClientConn) (any, error) {
	if p.name == wire.MetaPlugin {
		return pb.NewPluginClient(c), nil
	}
	k, ok := clientKinds[sdk.PluginKind(p.name)]
	if !ok {
		return nil, fmt.Errorf("unknown plugin kind %q", p.name)
	}
	return k.grpc(c), nil
}

// hostPluginSet can dispense every kind; Conn checks Info before it does.
func hostPluginSet() plugin.PluginSet {
	set := plugin.PluginSet{wire.MetaPlugin: &clientPlugin{name: wire.MetaPlugin}}
	for k := range clientKinds {
		set[string(k)] = &clientPlugin{name: string(k)}
	}
	return set
}

// Dispense answers the client for kind: a value implementing the kind's
// sdk interface (sdk.Selector...); a provider is a *Provider, whose
// accessors answer the capabilities the plugin declared.
func (c *Conn) Dispense(kind sdk.PluginKind) (any, error) {
	k, known := clientKinds[kind]
	if !known {
		return nil, fmt.Errorf("plugin %s: this host does not know kind %q: %w", c.name, kind, sdk.ErrUnsupported)
	}
	if !slices.Contains(c.info.Kinds, kind) {
		return nil, fmt.Errorf("plugin %s does not serve kind %q (it serves %q): %w", c.name, kind, c.info.Kinds, sdk.ErrUnsupported)
	}
	raw, err := c.rpc.Dispense(string(kind))
	if err != nil {
		return nil, fmt.Errorf("plugin %s: dispense %s: %v: %w", c.name, kind, err, sdk.ErrUnavailable)
	}
	return k.wrap(raw, c.info), nil
}

func dispenseAs[T any](c *Conn, kind sdk.PluginKind) (T, error) {
	var zero T
	v, err := c.Dispense(kind)
	if err != nil {
		return zero, err
	}
	return v.(T), nil
}

// Provider answers the plugin's provider, with the capabilities it declared.
func (c *Conn) Provider() (*Provider, error) { return dispenseAs[*Provider](c, sdk.KindProvider) }

// Selector answers the plugin's selector.
func (c *Conn) Selector() (sdk.Selector, error) { return dispenseAs[sdk.Selector](c, sdk.KindSelector) }

// Compactor answers the plugin's compactor.
func (c *Conn) Compactor() (sdk.Compactor, error) {
	return dispenseAs[sdk.Compactor](c, sdk.KindCompactor)
}

// OperatorResolver answers the plugin's operator resolver.
func (c *Conn) OperatorResolver() (sdk.OperatorResolver, error) {
	return dispenseAs[sdk.OperatorResolver](c, sdk.KindOperatorResolver)
}

// MobResolver answers the plugin's mob resolver.
func (c *Conn) MobResolver() (sdk.MobResolver, error) {
	return dispenseAs[sdk.MobResolver](c, sdk.KindMobResolver)
}

// Embedder answers the plugin's embedder.
func (c *Conn) Embedder() (sdk.Embedder, error) {
	return dispenseAs[sdk.Embedder](c, sdk.KindEmbedder)
}

// providerClient implements every capability; Provider's accessors hide
// the ones the plugin did not declare. A call to an undeclared one still
// fails with ErrUnsupported without a round trip.
type providerClient struct {
	rpc  pb.ProviderClient
	caps sdk.Capabilities
	// timeFields is whether the plugin reads occurred_at and since/until
	// (readsTime), asked once per process.
	timeFields timeFieldsState
	// timeFieldsAt is when the plugin was found built before them.
	timeFieldsAt atomic.Int64
}

func (c *providerClient) Capabilities() sdk.Capabilities { return c.caps }

func (c *providerClient) need(cap sdk.Capability) error {
	if !c.caps.Has(cap) {
		return fmt.Errorf("provider does not declare capability %q: %w", cap, sdk.ErrUnsupported)
	}
	return nil
}

// lastMillisecond is the latest time a record can hold (sdk.CheckTime:
// years 1-9999), in Unix milliseconds.
var lastMillisecond = time.Date(9999, 12, 31, 23, 59, 59, 999_000_000, time.UTC).UnixMilli()

func (c *providerClient) Recall(ctx context.Context, q sdk.RecallQuery) ([]sdk.Hit, error) {
	// The wire and every store keep milliseconds (sdk.RecallQuery.WindowMillis:
	// each end's ceiling, an end at the epoch as -1 since 0 is open). A
	// window inside one millisecond holds none.
	since, until := q.WindowMillis()
	if since != 0 && until != 0 && since >= until && q.Since.Before(q.Until) {
		return []sdk.Hit{}, nil // a window the plugin would refuse is sent, to be refused
	}
	// An end in the last millisecond of year 9999 rounds up into year
	// 10000, which the plugin refuses: no record's time is that late, so
	// such an until is open and such a since holds nothing.
	if until > lastMillisecond {
		until = 0
	}
	if since > lastMillisecond {
		return []sdk.Hit{}, nil
	}
	if since != 0 || until != 0 {
		if err := c.readsTime(ctx, q.Realm); err != nil {
			return nil, err
		}
	}
	req := &pb.RecallRequest{
		Realm: q.Realm, Query: q.Query, Scopes: toStrings(q.Scopes), Limit: int32(q.Limit),
		ExcludeIds: q.ExcludeIDs, Tags: nfcTags(q.Tags), ExcludeTags: nfcTags(q.ExcludeTags),
		SinceUnixMs: since, UntilUnixMs: until,
	}
	if c.caps.Has(sdk.CapNeighbours) {
		if q.Neighbours < 0 || q.Neighbours > sdk.MaxNeighbours {
			// Refused here: the wire's int32 must not wrap it into range.
			return nil, fmt.Errorf("%w: neighbours %d is outside 0..%d", sdk.ErrInvalid, q.Neighbours, sdk.MaxNeighbours)
		}
		req.Neighbours = int32(q.Neighbours)
	} else {
		q.Neighbours = 0 // a plugin that did not declare them answers none
	}
	// The semantic half goes only to a provider that declared vectors.
	if c.caps.Has(sdk.CapVectors) {
		req.QueryVector, req.VectorModel = q.QueryVector, q.VectorModel
		if q.Fusion != (sdk.Fusion{}) {
			req.Fusion = &pb.Fusion{Lexical: q.Fusion.Lexical, Semantic: q.Fusion.Semantic}
		}
	}
	resp, err := c.rpc.Recall(ctx, req)
	if err != nil {
		return nil, fromStatus(ctx, err)
	}
	hits := make([]sdk.Hit, len(resp.Hits))
	for i, h := range resp.Hits {
		hits[i] = sdk.Hit{Record: recordFromPB(h.Record), Score: h.Score}
		for _, n := range h.Neighbours {
			hits[i].Neighbours = append(hits[i].Neighbours, recordFromPB(n))
		}
	}
	if err := checkHits(q, hits); err != nil {
		return nil, err
	}
	return hits, nil
}

func (c *providerClient) Remember(ctx context.Context, realm string, records []sdk.Record) ([]string, error) {
	if err := c.need(sdk.CapWrite); err != nil {
		return nil, err
	}
	in, err := recordsToInput(records)
	if err != nil {
		return nil, err
	}
	if carriesTime(records) {
		if err := c.readsTime(ctx, realm); err != nil {
			return nil, err
		}
	}
	resp, err := c.rpc.Remember(ctx, &pb.RememberRequest{Realm: realm, Records: in})
	if err != nil {
		return nil, fromStatus(ctx, err)
	}
	// Two records of one content share an id, so an id may repeat.
	if len(resp.Ids) != len(records) {
		return nil, badAnswer("remember", "%d ids for %d records", len(resp.Ids), len(records))
	}
	for i, id := range resp.Ids {
		if sdk.ValidateID(id) != nil {
			return nil, badAnswer("remember", "id %d is not a valid id", i)
		}
	}
	return resp.Ids, nil
}

func (c *providerClient) Get(ctx context.Context, realm string, ids []string) ([]sdk.Record, error) {
	if err := c.need(sdk.CapFetch); err != nil {
		return nil, err
	}
	resp, err := c.rpc.Get(ctx, &pb.GetRequest{Realm: realm, Ids: ids})
	if err != nil {
		return nil, fromStatus(ctx, err)
	}
	if len(resp.Records) > len(ids) {
		return nil, badAnswer("get", "%d records for %d ids", len(resp.Records), len(ids))
	}
	recs := recordsFromPB(resp.Records)
	if err := checkRecords("get", realm, recs, ids); err != nil {
		return nil, err
	}
	return recs, nil
}

func (c *providerClient) Forget(ctx context.Context, realm string, ids []string) (int, error) {
	if err := c.need(sdk.CapForget); err != nil {
		return 0, err
	}
	resp, err := c.rpc.Forget(ctx, &pb.ForgetRequest{Realm: realm, Ids: ids})
	if err != nil {
		return 0, fromStatus(ctx, err)
	}
	if err := checkCount("forget", "records forgotten", int(resp.Forgotten), len(ids)); err != nil {
		return 0, err
	}
	return int(resp.Forgotten), nil
}

func (c *providerClient) Manifest(ctx context.Context, q sdk.ManifestQuery) ([]sdk.ManifestRow, error) {
	if err := c.need(sdk.CapManifest); err != nil {
		return nil, err
	}
	// Canceled on return, so a stream cut off below is released.
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := c.rpc.Manifest(sctx, &pb.ManifestRequest{
		Realm: q.Realm, Scopes: toStrings(q.Scopes), Tier: tierToPB(q.Tier), K: int32(q.K),
	})
	if err != nil {
		return nil, fromStatus(ctx, err)
	}
	rows := []sdk.ManifestRow{}
	for {
		chunk, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			if err := checkRowsOnce(rows); err != nil {
				return nil, err
			}
			return rows, nil
		}
		if err != nil {
			return nil, fromStatus(ctx, err)
		}
		first := len(rows)
		rows = append(rows, rowsFromPB(chunk.Rows)...)
		// A working set holds at most 2k rows: more breaks the protocol.
		if most := 2 * q.K; q.Tier == sdk.TierWorkingSet && q.K > 0 && len(rows) > most {
			return nil, badAnswer("manifest", "more than %d rows for a working set of k %d", most, q.K)
		}
		// A full manifest is read up to MaxFullManifestRows and one row
		// more, which tells the caller there were more; the rest of the
		// stream is not read, and each chunk is held to the record limits
		// as it comes, so no provider's answer can fill the host's memory.
		full := q.Tier == sdk.TierFull && len(rows) > sdk.MaxFullManifestRows
		if full {
			rows = rows[:sdk.MaxFullManifestRows+1]
		}
		if err := checkRows(q, rows, first); err != nil {
			return nil, err
		}
		if full {
			if err := checkRowsOnce(rows); err != nil {
				return nil, err
			}
			return rows, nil
		}
	}
}

func (c *providerClient) Supersede(ctx context.Context, realm, oldID string, replacement sdk.Record) (string, error) {
	if err := c.need(sdk.CapSupersede); err != nil {
		return "", err
	}
	if err := callerOwned("replacement", &replacement); err != nil {
		return "", err
	}
	if !replacement.OccurredAt.IsZero() {
		if err := c.readsTime(ctx, realm); err != nil {
			return "", err
		}
	}
	resp, err := c.rpc.Supersede(ctx, &pb.SupersedeRequest{Realm: realm, OldId: oldID, Replacement: recordToInput(&replacement)})
	if err != nil {
		return "", fromStatus(ctx, err)
	}
	if sdk.ValidateID(resp.NewId) != nil {
		return "", badAnswer("supersede", "the new id is not a valid id")
	}
	return resp.NewId, nil
}

func (c *providerClient) MarkUsed(ctx context.Context, realm string, ids []string, at time.Time) error {
	if err := c.need(sdk.CapUsage); err != nil {
		return err
	}
	_, err := c.rpc.MarkUsed(ctx, &pb.MarkUsedRequest{Realm: realm, Ids: ids, AtUnixMs: wire.ToMillis(at)})
	return fromStatus(ctx, err)
}

func (c *providerClient) CountUses(ctx context.Context, realm string, uses []sdk.Use, at time.Time) error {
	if err := c.need(sdk.CapUsageCounts); err != nil {
		return err
	}
	req := &pb.CountUsesRequest{Realm: realm, Uses: make([]*pb.Use, len(uses)), AtUnixMs: wire.ToMillis(at)}
	for i, u := range uses {
		req.Uses[i] = &pb.Use{Id: u.ID, Count: u.Count}
	}
	_, err := c.rpc.CountUses(ctx, req)
	return fromStatus(ctx, err)
}

func (c *providerClient) WriteLedger(ctx context.Context, entries []sdk.LedgerEntry) error {
	if err := c.need(sdk.CapLedger); err != nil {
		return err
	}
	_, err := c.rpc.WriteLedger(ctx, &pb.WriteLedgerRequest{Entries: ledgerToPB(entries)})
	return fromStatus(ctx, err)
}

func (c *providerClient) Export(ctx context.Context, realm, after string, limit int) (sdk.ExportPage, error) {
	if err := c.need(sdk.CapArchive); err != nil {
		return sdk.ExportPage{}, err
	}
	resp, err := c.rpc.Export(ctx, &pb.ExportRequest{Realm: realm, After: after, Limit: int32(limit)})
	if err != nil {
		return sdk.ExportPage{}, fromStatus(ctx, err)
	}
	page := sdk.ExportPage{Records: recordsFromPB(resp.Records), Next: resp.Next}
	if err := checkExportPage(realm, after, limit, page); err != nil {
		return sdk.ExportPage{}, err
	}
	return page, nil
}

func (c *providerClient) Import(ctx context.Context, realm string, records []sdk.Record) (sdk.ImportResult, error) {
	if err := c.need(sdk.CapArchive); err != nil {
		return sdk.ImportResult{}, err
	}
	if carriesTime(records) || importCarriesThread(records) {
		if err := c.readsTime(ctx, realm); err != nil {
			return sdk.ImportResult{}, err
		}
	}
	in := make([]*pb.Record, len(records))
	for i := range records {
		in[i] = recordToPB(&records[i])
	}
	resp, err := c.rpc.Import(ctx, &pb.ImportRequest{Realm: realm, Records: in})
	if err != nil {
		return sdk.ImportResult{}, fromStatus(ctx, err)
	}
	res := sdk.ImportResult{Imported: int(resp.Imported), Skipped: int(resp.Skipped)}
	if err := checkCount("import", "records imported", res.Imported, len(records)); err != nil {
		return sdk.ImportResult{}, err
	}
	if err := checkCount("import", "records imported or skipped", res.Imported+res.Skipped, len(records)); err != nil {
		return sdk.ImportResult{}, err
	}
	return res, nil
}

func (c *providerClient) PutVectors(ctx context.Context, realm string, vecs []sdk.RecordVector) error {
	if err := c.need(sdk.CapVectors); err != nil {
		return err
	}
	in := make([]*pb.RecordVector, len(vecs))
	for i, v := range vecs {
		in[i] = &pb.RecordVector{Id: v.ID, Model: v.Model, Vector: v.Vector, ContentHash: v.ContentHash}
	}
	_, err := c.rpc.PutVectors(ctx, &pb.PutVectorsRequest{Realm: realm, Vectors: in})
	return fromStatus(ctx, err)
}

func (c *providerClient) MissingVectors(ctx context.Context, realm, model, after string, limit int) ([]string, error) {
	if err := c.need(sdk.CapVectors); err != nil {
		return nil, err
	}
	resp, err := c.rpc.MissingVectors(ctx, &pb.MissingVectorsRequest{Realm: realm, Model: model, After: after, Limit: int32(limit)})
	if err != nil {
		return nil, fromStatus(ctx, err)
	}
	if err := checkIDs("missing_vectors", resp.Ids, pageLimit(limit)); err != nil {
		return nil, err
	}
	if err := checkAscending("missing_vectors", after, len(resp.Ids), func(i int) string { return resp.Ids[i] }); err != nil {
		return nil, err
	}
	return resp.Ids, nil
}

// Reindex reads the plugin's stream until its result. The caller's ctx is
// the only deadline: a rebuild takes as long as the store is large.
func (c *providerClient) Reindex(ctx context.Context, realm string, progress func(done, total int)) (int, error) {
	if err := c.need(sdk.CapReindex); err != nil {
		return 0, err
	}
	// Canceled on return, so a stream left unread past its result is
	// released.
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := c.rpc.Reindex(sctx, &pb.ReindexRequest{Realm: realm})
	if err != nil {
		return 0, fromStatus(ctx, err)
	}
	lastDone := int64(0)
	for {
		msg, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return 0, fmt.Errorf("reindex: the plugin ended its answer without a result: %w", sdk.ErrUnavailable)
		}
		if err != nil {
			return 0, fromStatus(ctx, err)
		}
		switch ev := msg.Event.(type) {
		case *pb.ReindexResponse_Progress:
			if ev.Progress == nil {
				continue
			}
			// Progress only grows, never past its total: a caller shows
			// it to an operator as it is.
			done, total := ev.Progress.Done, ev.Progress.Total
			if done < lastDone || total < done || done > math.MaxInt32 || total > math.MaxInt32 {
				return 0, badAnswer("reindex", "progress %d of %d after %d done", done, total, lastDone)
			}
			lastDone = done
			if progress != nil {
				progress(int(done), int(total))
			}
		case *pb.ReindexResponse_Done:
			n := ev.Done.GetReindexed()
			if n < 0 || n > math.MaxInt32 {
				return 0, badAnswer("reindex", "%d records reindexed", n)
			}
			return int(n), nil
		}
		// Any other event is a newer plugin's; this host skips it.
	}
}

type selectorClient struct{ rpc pb.SelectorClient }

func (c *selectorClient) Select(ctx context.Context, req sdk.SelectRequest) (sdk.Selection, error) {
	stream, err := c.rpc.Select(ctx)
	if err != nil {
		return sdk.Selection{}, fromStatus(ctx, err)
	}
	header := &pb.SelectHeader{
		Realm: req.Identity.Realm, Identity: req.Identity.ID, Query: req.Query,
		SuppressedIds: req.SuppressedIDs, Max: int32(req.Max),
	}
	for start := 0; start == 0 || start < len(req.Rows); start += wire.ChunkRows {
		end := min(start+wire.ChunkRows, len(req.Rows))
		msg := &pb.SelectRequest{Rows: rowsToPB(req.Rows[start:end])}
		if start == 0 {
			msg.Header = header
		}
		// A send error means the stream broke; CloseAndRecv reports why.
		if stream.Send(msg) != nil || end == len(req.Rows) {
			break
		}
	}
	resp, err := stream.CloseAndRecv()
	if err != nil {
		return sdk.Selection{}, fromStatus(ctx, err)
	}
	if err := checkSelection(req, resp.Ids); err != nil {
		return sdk.Selection{}, err
	}
	return sdk.Selection{IDs: resp.Ids, Coverage: coverageFromPB(resp.Coverage)}, nil
}

type compactorClient struct{ rpc pb.CompactorClient }

func (c *compactorClient) Compact(ctx context.Context, req sdk.CompactRequest) (sdk.Message, error) {
	resp, err := c.rpc.Compact(ctx, &pb.CompactRequest{
		ConversationId: req.ConversationID, Evicted: messagesToPB(req.Evicted),
		CarryOver: messageToPB(req.CarryOver), IdempotencyKey: req.IdempotencyKey, MaxBytes: int32(req.MaxBytes),
	})
	if err != nil {
		return sdk.Message{}, fromStatus(ctx, err)
	}
	return messageFromPB(resp.Artifact), nil
}

type operatorClient struct{ rpc pb.OperatorResolverClient }

func (c *operatorClient) ResolveOperator(ctx context.Context, id sdk.Identity) (string, error) {
	resp, err := c.rpc.ResolveOperator(ctx, &pb.ResolveOperatorRequest{Realm: id.Realm, Identity: id.ID})
	if err != nil {
		return "", fromStatus(ctx, err)
	}
	return resp.Operator, nil
}

type mobClient struct{ rpc pb.MobResolverClient }

func (c *mobClient) ResolveMobs(ctx context.Context, id sdk.Identity) ([]string, error) {
	resp, err := c.rpc.ResolveMobs(ctx, &pb.ResolveMobsRequest{Realm: id.Realm, Identity: id.ID})
	if err != nil {
		return nil, fromStatus(ctx, err)
	}
	return resp.Mobs, nil
}

// embedderClient checks what the plugin answers, whatever its language:
// a malformed Info, or vectors not of the declared shape, are errors here
// rather than bad vectors stored by the host. It keeps the plugin's Info
// once asked; a restarted plugin gets a new client.
type embedderClient struct {
	rpc pb.EmbedderClient

	mu   sync.Mutex
	info *sdk.EmbedderInfo
}

func (c *embedderClient) EmbedderInfo(ctx context.Context) (sdk.EmbedderInfo, error) {
	resp, err := c.rpc.Info(ctx, &pb.EmbedderInfoRequest{})
	if err != nil {
		return sdk.EmbedderInfo{}, fromStatus(ctx, err)
	}
	info := sdk.EmbedderInfo{
		Model: resp.Model, Dimensions: int(resp.Dimensions), MaxBatch: int(resp.MaxBatch),
		MaxInputBytes: int(resp.MaxInputBytes), Deterministic: resp.Deterministic,
	}
	if err := info.Validate(); err != nil {
		return sdk.EmbedderInfo{}, fmt.Errorf("the embedder's info is malformed: %v: %w", err, ErrBadAnswer)
	}
	c.mu.Lock()
	c.info = &info
	c.mu.Unlock()
	return info, nil
}

// declared answers the plugin's Info, asking for it on the first call.
func (c *embedderClient) declared(ctx context.Context) (sdk.EmbedderInfo, error) {
	c.mu.Lock()
	info := c.info
	c.mu.Unlock()
	if info != nil {
		return *info, nil
	}
	return c.EmbedderInfo(ctx)
}

func (c *embedderClient) Embed(ctx context.Context, req sdk.EmbedRequest) ([][]float32, error) {
	info, err := c.declared(ctx)
	if err != nil {
		return nil, err
	}
	resp, err := c.rpc.Embed(ctx, &pb.EmbedRequest{Purpose: purposeToPB(req.Purpose), Texts: req.Texts})
	if err != nil {
		return nil, fromStatus(ctx, err)
	}
	vecs := make([][]float32, len(resp.Vectors))
	for i, v := range resp.Vectors {
		vecs[i] = v.GetValues()
	}
	if err := info.CheckVectors(len(req.Texts), vecs); err != nil {
		return nil, fmt.Errorf("embed: %v: %w", err, ErrBadAnswer)
	}
	return vecs, nil
}
