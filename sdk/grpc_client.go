package sdk

import (
	"context"
	"fmt"
	"time"

	pb "github.com/memhost/memhost/sdk/proto/memhost/plugin/v1"
)

// ProviderClient is the host side of a provider plugin. It implements
// Provider and every capability interface; a call to a capability the
// plugin did not declare fails with ErrUnsupported without a round trip.
// Use CapabilitiesOf (or Capabilities) to branch, never the Go type.
type ProviderClient struct {
	rpc  pb.ProviderClient
	caps Capabilities
}

// NewProviderClient wraps a generated gRPC client; caps come from Info.
func NewProviderClient(rpc pb.ProviderClient, caps Capabilities) *ProviderClient {
	return &ProviderClient{rpc: rpc, caps: caps}
}

// Capabilities answers what the remote plugin declared.
func (c *ProviderClient) Capabilities() Capabilities { return c.caps }

func (c *ProviderClient) need(cap Capability) error {
	if !c.caps.Has(cap) {
		return fmt.Errorf("provider does not declare capability %q: %w", cap, ErrUnsupported)
	}
	return nil
}

func (c *ProviderClient) Recall(ctx context.Context, q RecallQuery) ([]Hit, error) {
	resp, err := c.rpc.Recall(ctx, &pb.RecallRequest{
		Realm: q.Realm, Query: q.Query, Scopes: scopesToStrings(q.Scopes), Limit: int32(q.Limit),
		ExcludeIds: q.ExcludeIDs, Tags: q.Tags, ExcludeTags: q.ExcludeTags,
	})
	if err != nil {
		return nil, fromStatus(err)
	}
	hits := make([]Hit, len(resp.Hits))
	for i, h := range resp.Hits {
		hits[i] = Hit{Record: recordFromPB(h.Record), Score: h.Score}
	}
	return hits, nil
}

func (c *ProviderClient) Remember(ctx context.Context, realm string, records []Record) ([]string, error) {
	if err := c.need(CapWrite); err != nil {
		return nil, err
	}
	resp, err := c.rpc.Remember(ctx, &pb.RememberRequest{Realm: realm, Records: recordsToPB(records)})
	if err != nil {
		return nil, fromStatus(err)
	}
	return resp.Ids, nil
}

func (c *ProviderClient) Get(ctx context.Context, realm string, ids []string) ([]Record, error) {
	if err := c.need(CapFetch); err != nil {
		return nil, err
	}
	resp, err := c.rpc.Get(ctx, &pb.GetRequest{Realm: realm, Ids: ids})
	if err != nil {
		return nil, fromStatus(err)
	}
	return recordsFromPB(resp.Records), nil
}

func (c *ProviderClient) Forget(ctx context.Context, realm string, ids []string) (int, error) {
	if err := c.need(CapForget); err != nil {
		return 0, err
	}
	resp, err := c.rpc.Forget(ctx, &pb.ForgetRequest{Realm: realm, Ids: ids})
	if err != nil {
		return 0, fromStatus(err)
	}
	return int(resp.Forgotten), nil
}

func (c *ProviderClient) Manifest(ctx context.Context, q ManifestQuery) ([]ManifestRow, error) {
	if err := c.need(CapManifest); err != nil {
		return nil, err
	}
	resp, err := c.rpc.Manifest(ctx, &pb.ManifestRequest{
		Realm: q.Realm, Scopes: scopesToStrings(q.Scopes), Tier: tierToPB(q.Tier), K: int32(q.K),
	})
	if err != nil {
		return nil, fromStatus(err)
	}
	return rowsFromPB(resp.Rows), nil
}

func (c *ProviderClient) Supersede(ctx context.Context, realm, oldID string, replacement Record) (string, error) {
	if err := c.need(CapSupersede); err != nil {
		return "", err
	}
	resp, err := c.rpc.Supersede(ctx, &pb.SupersedeRequest{Realm: realm, OldId: oldID, Replacement: recordToPB(&replacement)})
	if err != nil {
		return "", fromStatus(err)
	}
	return resp.NewId, nil
}

func (c *ProviderClient) MarkUsed(ctx context.Context, realm string, ids []string, at time.Time) error {
	if err := c.need(CapUsage); err != nil {
		return err
	}
	_, err := c.rpc.MarkUsed(ctx, &pb.MarkUsedRequest{Realm: realm, Ids: ids, AtUnixMs: toMillis(at)})
	return fromStatus(err)
}

func (c *ProviderClient) WriteLedger(ctx context.Context, entries []LedgerEntry) error {
	if err := c.need(CapLedger); err != nil {
		return err
	}
	_, err := c.rpc.WriteLedger(ctx, &pb.WriteLedgerRequest{Entries: ledgerToPB(entries)})
	return fromStatus(err)
}

// SelectorClient is the host side of a selector plugin.
type SelectorClient struct{ rpc pb.SelectorClient }

func (c *SelectorClient) Select(ctx context.Context, req SelectRequest) (Selection, error) {
	resp, err := c.rpc.Select(ctx, &pb.SelectRequest{
		Realm: req.Identity.Realm, Identity: req.Identity.ID, Query: req.Query,
		Rows: rowsToPB(req.Rows), SuppressedIds: req.SuppressedIDs, Max: int32(req.Max),
	})
	if err != nil {
		return Selection{}, fromStatus(err)
	}
	return Selection{IDs: resp.Ids, Coverage: coverageFromPB(resp.Coverage)}, nil
}

// CompactorClient is the host side of a compactor plugin.
type CompactorClient struct{ rpc pb.CompactorClient }

func (c *CompactorClient) Compact(ctx context.Context, req CompactRequest) (Message, error) {
	resp, err := c.rpc.Compact(ctx, &pb.CompactRequest{
		ConversationId: req.ConversationID, Evicted: messagesToPB(req.Evicted),
		CarryOver: messageToPB(req.CarryOver), IdempotencyKey: req.IdempotencyKey, MaxBytes: int32(req.MaxBytes),
	})
	if err != nil {
		return Message{}, fromStatus(err)
	}
	return messageFromPB(resp.Artifact), nil
}

// OperatorResolverClient is the host side of an operator resolver plugin.
type OperatorResolverClient struct{ rpc pb.OperatorResolverClient }

func (c *OperatorResolverClient) ResolveOperator(ctx context.Context, id Identity) (string, error) {
	resp, err := c.rpc.ResolveOperator(ctx, &pb.ResolveRequest{Realm: id.Realm, Identity: id.ID})
	if err != nil {
		return "", fromStatus(err)
	}
	return resp.Operator, nil
}

// MobResolverClient is the host side of a mob resolver plugin.
type MobResolverClient struct{ rpc pb.MobResolverClient }

func (c *MobResolverClient) ResolveMobs(ctx context.Context, id Identity) ([]string, error) {
	resp, err := c.rpc.ResolveMobs(ctx, &pb.ResolveRequest{Realm: id.Realm, Identity: id.ID})
	if err != nil {
		return nil, fromStatus(err)
	}
	return resp.Mobs, nil
}
