package sdk

import (
	pb "github.com/memhost/memhost/sdk/internal/pluginpb"
	"github.com/memhost/memhost/sdk/internal/wire"
)

// Conversions on the plugin side of the wire: requests are decoded, answers
// encoded. sdk/host holds the opposite directions; a round-trip test there
// holds the two together.

func recordToPB(r *Record) *pb.Record {
	return &pb.Record{
		Id: r.ID, Realm: r.Realm, Scope: string(r.Scope), Kind: string(r.Kind),
		Title: r.Title, Description: r.Description, Body: r.Body, Tags: r.Tags,
		Trust: string(r.Trust), Status: string(r.Status), Supersedes: r.Supersedes,
		CreatedUnixMs: wire.ToMillis(r.CreatedAt), UpdatedUnixMs: wire.ToMillis(r.UpdatedAt),
		ExpiresUnixMs: wire.ToMillis(r.ExpiresAt), ContentHash: r.ContentHash,
		UseCount: r.UseCount, LastUsedUnixMs: wire.ToMillis(r.LastUsedAt),
		Thread: threadToPB(r.Thread), OccurredUnixMs: wire.ToMillis(r.OccurredAt),
	}
}

func threadToPB(t *Thread) *pb.Thread {
	if t == nil {
		return nil
	}
	return &pb.Thread{Id: t.ID, Seq: t.Seq}
}

func threadFromPB(t *pb.Thread) *Thread {
	if t == nil {
		return nil
	}
	return &Thread{ID: t.Id, Seq: t.Seq}
}

func recordsToPB(rs []Record) []*pb.Record {
	out := make([]*pb.Record, len(rs))
	for i := range rs {
		out[i] = recordToPB(&rs[i])
	}
	return out
}

// recordFromPB decodes a full record; only Import carries one inbound.
func recordFromPB(p *pb.Record) Record {
	if p == nil {
		return Record{}
	}
	return Record{
		ID: p.Id, Realm: p.Realm, Scope: Scope(p.Scope), Kind: RecordKind(p.Kind),
		Title: p.Title, Description: p.Description, Body: p.Body, Tags: p.Tags,
		Trust: Trust(p.Trust), Status: Status(p.Status), Supersedes: p.Supersedes,
		CreatedAt: wire.FromMillis(p.CreatedUnixMs), UpdatedAt: wire.FromMillis(p.UpdatedUnixMs),
		ExpiresAt: wire.FromMillis(p.ExpiresUnixMs), ContentHash: p.ContentHash,
		UseCount: p.UseCount, LastUsedAt: wire.FromMillis(p.LastUsedUnixMs),
		Thread: threadFromPB(p.Thread), OccurredAt: wire.FromMillis(p.OccurredUnixMs),
	}
}

func recordsFromPB(ps []*pb.Record) []Record {
	out := make([]Record, len(ps))
	for i, p := range ps {
		out[i] = recordFromPB(p)
	}
	return out
}

// recordFromInput builds the record a caller asked to write. The store-owned
// fields stay zero: the wire has no place for a caller to set them.
func recordFromInput(p *pb.RecordInput) Record {
	if p == nil {
		return Record{}
	}
	return Record{
		ID: p.Id, Realm: p.Realm, Scope: Scope(p.Scope), Kind: RecordKind(p.Kind),
		Title: p.Title, Description: p.Description, Body: p.Body, Tags: p.Tags,
		Trust: Trust(p.Trust), ExpiresAt: wire.FromMillis(p.ExpiresUnixMs),
		Thread: threadFromPB(p.Thread), OccurredAt: wire.FromMillis(p.OccurredUnixMs),
	}
}

func recordsFromInput(ps []*pb.RecordInput) []Record {
	out := make([]Record, len(ps))
	for i, p := range ps {
		out[i] = recordFromInput(p)
	}
	return out
}

func scopesFromStrings(ss []string) []Scope {
	out := make([]Scope, len(ss))
	for i, s := range ss {
		out[i] = Scope(s)
	}
	return out
}

func rowsToPB(rs []ManifestRow) []*pb.ManifestRow {
	out := make([]*pb.ManifestRow, len(rs))
	for i := range rs {
		r := &rs[i]
		out[i] = &pb.ManifestRow{
			Id: r.ID, Scope: string(r.Scope), Kind: string(r.Kind), Title: r.Title,
			Description: r.Description, UpdatedUnixMs: wire.ToMillis(r.UpdatedAt), Rank: r.Rank,
		}
	}
	return out
}

func rowsFromPB(ps []*pb.ManifestRow) []ManifestRow {
	out := make([]ManifestRow, len(ps))
	for i, p := range ps {
		out[i] = ManifestRow{
			ID: p.Id, Scope: Scope(p.Scope), Kind: RecordKind(p.Kind), Title: p.Title,
			Description: p.Description, UpdatedAt: wire.FromMillis(p.UpdatedUnixMs), Rank: p.Rank,
		}
	}
	return out
}

func tierFromPB(t pb.ManifestTier) ManifestTier {
	switch t {
	case pb.ManifestTier_MANIFEST_TIER_WORKING_SET:
		return TierWorkingSet
	case pb.ManifestTier_MANIFEST_TIER_FULL:
		return TierFull
	}
	return 0
}

func coverageToPB(c Coverage) pb.Coverage {
	switch c {
	case CoverageSufficient:
		return pb.Coverage_COVERAGE_SUFFICIENT
	case CoverageNeedDeeperSweep:
		return pb.Coverage_COVERAGE_NEED_DEEPER_SWEEP
	}
	return pb.Coverage_COVERAGE_UNSPECIFIED
}

// purposeFromPB answers "" for a purpose this SDK does not know, which
// the request check refuses.
func purposeFromPB(p pb.EmbedPurpose) EmbedPurpose {
	switch p {
	case pb.EmbedPurpose_EMBED_PURPOSE_QUERY:
		return EmbedQuery
	case pb.EmbedPurpose_EMBED_PURPOSE_DOCUMENT:
		return EmbedDocument
	}
	return ""
}

func messageToPB(m *Message) *pb.Message {
	if m == nil {
		return nil
	}
	return &pb.Message{Role: m.Role, Content: m.Content}
}

func messageFromPB(p *pb.Message) Message {
	if p == nil {
		return Message{}
	}
	return Message{Role: p.Role, Content: p.Content}
}

func messagesFromPB(ps []*pb.Message) []Message {
	out := make([]Message, len(ps))
	for i, p := range ps {
		out[i] = messageFromPB(p)
	}
	return out
}

func ledgerFromPB(ps []*pb.LedgerEntry) []LedgerEntry {
	out := make([]LedgerEntry, len(ps))
	for i, p := range ps {
		out[i] = LedgerEntry{
			Realm: p.Realm, Identity: p.Identity, Session: p.Session, RecordID: p.RecordId,
			Surface: p.Surface, Bytes: p.Bytes, At: wire.FromMillis(p.AtUnixMs),
		}
	}
	return out
}
