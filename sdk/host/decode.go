package host

import (
	"fmt"
	"slices"

	"github.com/memhost/memhost/sdk"
	pb "github.com/memhost/memhost/sdk/internal/pluginpb"
	"github.com/memhost/memhost/sdk/internal/wire"
	"golang.org/x/text/unicode/norm"
)

// Conversions on the host side of the wire: requests are encoded, answers
// decoded. Package sdk holds the opposite directions; roundtrip_test.go
// holds the two together.

func infoFromPB(p *pb.InfoResponse) sdk.Info {
	out := sdk.Info{Name: p.Name, Version: p.Version, ConfigSchema: p.ConfigSchema}
	for _, k := range p.Kinds {
		out.Kinds = append(out.Kinds, sdk.PluginKind(k))
	}
	for _, v := range p.ProtocolVersions {
		out.Protocols = append(out.Protocols, int(v))
	}
	for _, c := range p.Capabilities {
		out.Capabilities = append(out.Capabilities, sdk.Capability(c))
	}
	return out
}

// nfcTags puts tags in NFC on their way to a plugin, stored or filtered
// on: stores match tags by case only, and the same word typed on another
// system (café composed, or e and a combining accent) must be one tag, as
// it is one term in text (the tokenizer's NFC). tags itself is returned
// when it is already NFC.
func nfcTags(tags []string) []string {
	for i, t := range tags {
		if !norm.NFC.IsNormalString(t) {
			out := slices.Clone(tags)
			for j := i; j < len(out); j++ {
				out[j] = norm.NFC.String(out[j])
			}
			return out
		}
	}
	return tags
}

// recordToInput keeps what a caller may set; the store owns the rest.
func recordToInput(r *sdk.Record) *pb.RecordInput {
	return &pb.RecordInput{
		Id: r.ID, Realm: r.Realm, Scope: string(r.Scope), Kind: string(r.Kind),
		Title: r.Title, Description: r.Description, Body: r.Body, Tags: nfcTags(r.Tags),
		Trust: string(r.Trust), ExpiresUnixMs: wire.ToMillis(r.ExpiresAt),
		Thread: threadToPB(r.Thread), OccurredUnixMs: wire.ToMillis(r.OccurredAt),
	}
}

func recordsToInput(rs []sdk.Record) ([]*pb.RecordInput, error) {
	out := make([]*pb.RecordInput, len(rs))
	for i := range rs {
		if err := callerOwned(fmt.Sprintf("records[%d]", i), &rs[i]); err != nil {
			return nil, err
		}
		out[i] = recordToInput(&rs[i])
	}
	return out, nil
}

// callerOwned refuses a record to be written that sets a field the store
// owns: the wire has no place for it, and dropping it silently would store
// something other than what the caller asked for.
func callerOwned(path string, r *sdk.Record) error {
	var field string
	switch {
	case r.Status != "":
		field = "status"
	case r.Supersedes != "":
		field = "supersedes"
	case r.ContentHash != "":
		field = "content_hash"
	case r.UseCount != 0:
		field = "use_count"
	case !r.CreatedAt.IsZero():
		field = "created_at"
	case !r.UpdatedAt.IsZero():
		field = "updated_at"
	case !r.LastUsedAt.IsZero():
		field = "last_used_at"
	default:
		return nil
	}
	return &sdk.FieldError{Field: path + "." + field, Problem: "is set by the store, not by a caller", Err: sdk.ErrInvalid}
}

func recordFromPB(p *pb.Record) sdk.Record {
	if p == nil {
		return sdk.Record{}
	}
	return sdk.Record{
		ID: p.Id, Realm: p.Realm, Scope: sdk.Scope(p.Scope), Kind: sdk.RecordKind(p.Kind),
		Title: p.Title, Description: p.Description, Body: p.Body, Tags: p.Tags,
		Trust: sdk.Trust(p.Trust), Status: sdk.Status(p.Status), Supersedes: p.Supersedes,
		CreatedAt: wire.FromMillis(p.CreatedUnixMs), UpdatedAt: wire.FromMillis(p.UpdatedUnixMs),
		ExpiresAt: wire.FromMillis(p.ExpiresUnixMs), ContentHash: p.ContentHash,
		UseCount: p.UseCount, LastUsedAt: wire.FromMillis(p.LastUsedUnixMs),
		Thread: threadFromPB(p.Thread), OccurredAt: wire.FromMillis(p.OccurredUnixMs),
	}
}

// recordToPB encodes a full record; only Import carries one outbound.
func recordToPB(r *sdk.Record) *pb.Record {
	return &pb.Record{
		Id: r.ID, Realm: r.Realm, Scope: string(r.Scope), Kind: string(r.Kind),
		Title: r.Title, Description: r.Description, Body: r.Body, Tags: nfcTags(r.Tags),
		Trust: string(r.Trust), Status: string(r.Status), Supersedes: r.Supersedes,
		CreatedUnixMs: wire.ToMillis(r.CreatedAt), UpdatedUnixMs: wire.ToMillis(r.UpdatedAt),
		ExpiresUnixMs: wire.ToMillis(r.ExpiresAt), ContentHash: r.ContentHash,
		UseCount: r.UseCount, LastUsedUnixMs: wire.ToMillis(r.LastUsedAt),
		Thread: threadToPB(r.Thread), OccurredUnixMs: wire.ToMillis(r.OccurredAt),
	}
}

func recordsFromPB(ps []*pb.Record) []sdk.Record {
	out := make([]sdk.Record, len(ps))
	for i, p := range ps {
		out[i] = recordFromPB(p)
	}
	return out
}

// toStrings answers the wire form of a list of named strings.
func toStrings[S ~string](ss []S) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = string(s)
	}
	return out
}

func rowsToPB(rs []sdk.ManifestRow) []*pb.ManifestRow {
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

func rowsFromPB(ps []*pb.ManifestRow) []sdk.ManifestRow {
	out := make([]sdk.ManifestRow, len(ps))
	for i, p := range ps {
		out[i] = sdk.ManifestRow{
			ID: p.Id, Scope: sdk.Scope(p.Scope), Kind: sdk.RecordKind(p.Kind), Title: p.Title,
			Description: p.Description, UpdatedAt: wire.FromMillis(p.UpdatedUnixMs), Rank: p.Rank,
		}
	}
	return out
}

func tierToPB(t sdk.ManifestTier) pb.ManifestTier {
	switch t {
	case sdk.TierWorkingSet:
		return pb.ManifestTier_MANIFEST_TIER_WORKING_SET
	case sdk.TierFull:
		return pb.ManifestTier_MANIFEST_TIER_FULL
	}
	return pb.ManifestTier_MANIFEST_TIER_UNSPECIFIED
}

func coverageFromPB(c pb.Coverage) sdk.Coverage {
	if c == pb.Coverage_COVERAGE_NEED_DEEPER_SWEEP {
		return sdk.CoverageNeedDeeperSweep
	}
	return sdk.CoverageSufficient
}

func messageToPB(m *sdk.Message) *pb.Message {
	if m == nil {
		return nil
	}
	return &pb.Message{Role: m.Role, Content: m.Content}
}

func messageFromPB(p *pb.Message) sdk.Message {
	if p == nil {
		return sdk.Message{}
	}
	return sdk.Message{Role: p.Role, Content: p.Content}
}

func messagesToPB(ms []sdk.Message) []*pb.Message {
	out := make([]*pb.Message, len(ms))
	for i := range ms {
		out[i] = messageToPB(&ms[i])
	}
	return out
}

func ledgerToPB(es []sdk.LedgerEntry) []*pb.LedgerEntry {
	out := make([]*pb.LedgerEntry, len(es))
	for i, e := range es {
		out[i] = &pb.LedgerEntry{
			Realm: e.Realm, Identity: e.Identity, Session: e.Session, RecordId: e.RecordID,
			Surface: e.Surface, Bytes: e.Bytes, AtUnixMs: wire.ToMillis(e.At),
		}
	}
	return out
}

func threadToPB(t *sdk.Thread) *pb.Thread {
	if t == nil {
		return nil
	}
	return &pb.Thread{Id: t.ID, Seq: t.Seq}
}

func threadFromPB(t *pb.Thread) *sdk.Thread {
	if t == nil {
		return nil
	}
	return &sdk.Thread{ID: t.Id, Seq: t.Seq}
}

// purposeToPB sends a purpose this host does not know as unspecified,
// which the plugin refuses as invalid.
func purposeToPB(p sdk.EmbedPurpose) pb.EmbedPurpose {
	switch p {
	case sdk.EmbedQuery:
		return pb.EmbedPurpose_EMBED_PURPOSE_QUERY
	case sdk.EmbedDocument:
		return pb.EmbedPurpose_EMBED_PURPOSE_DOCUMENT
	}
	return pb.EmbedPurpose_EMBED_PURPOSE_UNSPECIFIED
}
