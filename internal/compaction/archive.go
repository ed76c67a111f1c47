package compaction

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	hclog "github.com/hashicorp/go-hclog"
	"github.com/memhost/memhost/coordinator/speaker"
	"github.com/memhost/memhost/sdk"
	"github.com/memhost/memhost/sdk/host"
)

// Episode is one absorbed message and its position in the conversation's
// evicted list (counting from 0).
type Episode struct {
	Seq     int
	Message sdk.Message
}

// Archiver keeps verbatim what a compaction absorbs, so recall and
// injection can bring back a detail the summary dropped.
type Archiver interface {
	// Archive stores the episodes of the slice [start, end) (a message
	// that was only injected memory has none), before the summary that
	// absorbs them is committed. It must be idempotent: a retried
	// compaction archives the same slice again.
	Archive(ctx context.Context, id sdk.Identity, conversation string, start, end int, eps []Episode) error
	// Retain forgets, once the summary of [start, end) is committed, the
	// positions the realm's retention keeps no longer, the slice's own
	// and the earlier ones it pushed out. Archive forgets none: a slice
	// whose summary never commits leaves the committed episodes as they
	// were, and its own contiguous after the watermark, where Forget
	// finds them.
	Retain(ctx context.Context, id sdk.Identity, conversation string, start, end int) error
	// Forget removes the archive of the identity's conversation: the
	// first absorbed positions and whatever a compaction that never
	// committed left beyond them. Identity "" is a conversation stored
	// before identities were recorded.
	Forget(ctx context.Context, id sdk.Identity, conversation string, absorbed int) error
}

// ArchivePolicy is a realm's archive setting.
type ArchivePolicy struct {
	Enabled bool
	// MaxAge expires an episode that long after it was archived; 0 keeps
	// it until the conversation is deleted.
	MaxAge time.Duration
	// MaxRecords keeps a conversation's newest episodes only; 0 keeps all.
	MaxRecords int
}

// EpisodeArchive archives episodes as records of kind episode in the
// identity's scope on the realm's provider: one record per message, with
// an id derived from (realm, identity, conversation, position) and a title and body
// that depend on the message alone, so writing a slice twice stores it
// once (providers answer the live record of the same content).
type EpisodeArchive struct {
	// Provider answers the realm's provider.
	Provider func(realm string) (sdk.Provider, error)
	// Policy answers the realm's archive setting.
	Policy func(realm string) ArchivePolicy
	Logger hclog.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time

	warned sync.Map // realm -> struct{}: an unable provider is logged once
}

// ErrArchive wraps a failed archive write: the compaction answers it and
// commits nothing, so its retry archives and compacts again.
var ErrArchive = errors.New("archiving the absorbed messages failed")

// archiveProvider is what the archive needs of a provider.
type archiveProvider struct {
	w sdk.RecordWriter
	f sdk.RecordForgetter
	g sdk.RecordGetter // nil when the provider cannot fetch
}

// capable answers the provider's writer and forgetter (and getter, if
// any); ok is false when it lacks either of the two.
func capable(raw sdk.Provider) (archiveProvider, bool) {
	hp := host.ProviderOf(raw)
	w, okW := hp.Writer()
	f, okF := hp.Forgetter()
	g, _ := hp.Getter()
	return archiveProvider{w: w, f: f, g: g}, okW && okF
}

// provider answers the realm's provider when the realm archives and the
// provider can write and forget (DELETE must be able to remove what was
// written); ok is false when the realm does not archive.
func (a *EpisodeArchive) provider(realm string) (p archiveProvider, pol ArchivePolicy, ok bool, err error) {
	pol = a.Policy(realm)
	if !pol.Enabled {
		return p, pol, false, nil
	}
	raw, err := a.Provider(realm)
	if err != nil {
		return p, pol, false, err
	}
	if p, ok = capable(raw); !ok {
		if _, seen := a.warned.LoadOrStore(realm, struct{}{}); !seen && a.Logger != nil {
			a.Logger.Warn("the realm's provider cannot write and forget records; compactions are not archived", "realm", realm)
		}
	}
	return p, pol, ok, nil
}

func (a *EpisodeArchive) now() time.Time {
	if a.Now != nil {
		return a.Now()
	}
	return time.Now()
}

// Archive implements Archiver.
func (a *EpisodeArchive) Archive(ctx context.Context, id sdk.Identity, conversation string, start, end int, eps []Episode) error {
	p, pol, ok, err := a.provider(id.Realm)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrArchive, err)
	}
	if !ok {
		return nil
	}
	now := a.now().UTC()
	recs := make([]sdk.Record, len(eps))
	for i, ep := range eps {
		recs[i] = episodeRecord(id, conversation, ep, now, pol)
	}
	for from := 0; from < len(recs); from += sdk.MaxBatch {
		batch := recs[from:min(from+sdk.MaxBatch, len(recs))]
		if err := clearStale(ctx, p, id.Realm, batch); err != nil {
			return fmt.Errorf("%w: conversation %s: %w", ErrArchive, conversation, err)
		}
		if _, err := p.w.Remember(ctx, id.Realm, batch); err != nil {
			return fmt.Errorf("%w: conversation %s: %w", ErrArchive, conversation, err)
		}
	}
	// Retention waits for the commit (Retain): forgotten here, the
	// committed episodes this slice pushes out would be lost should the
	// summary then never commit.
	return nil
}

// Retain implements Archiver: the positions the committed slice pushed
// out of the newest MaxRecords, the earlier committed ones and its own.
// Earlier ones went with earlier slices.
func (a *EpisodeArchive) Retain(ctx context.Context, id sdk.Identity, conversation string, start, end int) error {
	p, pol, ok, err := a.provider(id.Realm)
	if err != nil || !ok || pol.MaxRecords <= 0 {
		return err
	}
	from, to := max(0, start-pol.MaxRecords), end-pol.MaxRecords
	if to <= from {
		return nil
	}
	if err := forgetRange(ctx, p.f, id, conversation, from, to); err != nil {
		return fmt.Errorf("%w: conversation %s: retention: %w", ErrArchive, conversation, err)
	}
	return nil
}

// clearStale forgets the records that hold a batch's ids with other
// content, or no longer live: the leftovers of an earlier conversation of
// the same id (a compaction archived, then was never committed, and the
// conversation was deleted and restarted). Without this, their ids would
// refuse the new episodes forever.
func clearStale(ctx context.Context, p archiveProvider, realm string, batch []sdk.Record) error {
	if p.g == nil {
		return nil
	}
	ids := make([]string, len(batch))
	want := make(map[string]string, len(batch))
	for i, r := range batch {
		ids[i] = r.ID
		want[r.ID] = string(r.Scope) + "\x00" + sdk.ContentHash(r.Title, r.Body)
	}
	found, err := p.g.Get(ctx, realm, ids)
	if err != nil {
		return err
	}
	var stale []string
	for _, r := range found {
		if r.Status != sdk.StatusActive || string(r.Scope)+"\x00"+r.ContentHash != want[r.ID] {
			stale = append(stale, r.ID)
		}
	}
	if len(stale) == 0 {
		return nil
	}
	_, err = p.f.Forget(ctx, realm, stale)
	return err
}

// Forget implements Archiver.
func (a *EpisodeArchive) Forget(ctx context.Context, id sdk.Identity, conversation string, absorbed int) error {
	raw, err := a.Provider(id.Realm)
	if err != nil {
		return fmt.Errorf("forget the archive of conversation %s: %w", conversation, err)
	}
	p, ok := capable(raw)
	if !ok {
		return nil // it never archived (see provider)
	}
	if id.ID != "" {
		// Whatever the realm's setting is now: it may have archived before.
		if err := forgetRange(ctx, p.f, id, conversation, 0, absorbed); err != nil {
			return fmt.Errorf("forget the archive of conversation %s: %w", conversation, err)
		}
		// A compaction that archived and was never committed left episodes
		// right after the watermark, contiguous: forget batches until one
		// finds nothing.
		for from := absorbed; ; from += sdk.MaxBatch {
			n, err := p.f.Forget(ctx, id.Realm, episodeIDs(id, conversation, from, from+sdk.MaxBatch))
			if err != nil {
				return fmt.Errorf("forget the archive of conversation %s: %w", conversation, err)
			}
			if n == 0 {
				break
			}
		}
	}
	if err := forgetLegacy(ctx, p, id, conversation, absorbed); err != nil {
		return fmt.Errorf("forget the archive of conversation %s: %w", conversation, err)
	}
	return nil
}

// forgetLegacy removes the episodes archived before their ids carried the
// identity (legacyEpisodeID). Those ids are shared by every identity using
// the conversation id, so for a named identity only the records in its own
// scope are forgotten, which takes a provider that can fetch; without one
// they are left. Identity "" (a conversation stored before identities were
// recorded, forgotten by an application) forgets them whatever their scope.
func forgetLegacy(ctx context.Context, p archiveProvider, id sdk.Identity, conversation string, absorbed int) error {
	if id.ID != "" && p.g == nil {
		return nil
	}
	for from := 0; ; from += sdk.MaxBatch {
		ids := make([]string, 0, sdk.MaxBatch)
		for seq := from; seq < from+sdk.MaxBatch; seq++ {
			ids = append(ids, legacyEpisodeID(id.Realm, conversation, seq))
		}
		var n int
		if id.ID == "" && p.g == nil {
			var err error
			if n, err = p.f.Forget(ctx, id.Realm, ids); err != nil {
				return err
			}
		} else {
			found, err := p.g.Get(ctx, id.Realm, ids)
			if err != nil {
				return err
			}
			n = len(found)
			var mine []string
			for _, r := range found {
				if id.ID == "" || r.Scope == sdk.IdentityScope(id.ID) {
					mine = append(mine, r.ID)
				}
			}
			if len(mine) > 0 {
				if _, err := p.f.Forget(ctx, id.Realm, mine); err != nil {
					return err
				}
			}
		}
		// Past the watermark, the leftovers of a compaction that never
		// committed are contiguous: a batch with none ends them.
		if n == 0 && from+sdk.MaxBatch >= absorbed {
			return nil
		}
	}
}

// forgetRange forgets the identity's episodes of positions [from, to).
func forgetRange(ctx context.Context, p sdk.RecordForgetter, id sdk.Identity, conversation string, from, to int) error {
	for ; from < to; from += sdk.MaxBatch {
		if _, err := p.Forget(ctx, id.Realm, episodeIDs(id, conversation, from, min(to, from+sdk.MaxBatch))); err != nil {
			return err
		}
	}
	return nil
}

func episodeIDs(id sdk.Identity, conversation string, from, to int) []string {
	ids := make([]string, 0, to-from)
	for seq := from; seq < to; seq++ {
		ids = append(ids, EpisodeID(id.Realm, id.ID, conversation, seq))
	}
	return ids
}

// EpisodeID is the record id of an identity's conversation message at a
// position: "ep-" and 160 bits of a sha256 over the four, length-prefixed.
// The identity is part of it, so two identities using one conversation id
// never write, clear or forget each other's episodes.
func EpisodeID(realm, identity, conversation string, seq int) string {
	return episodeHash("memhost episode v2", realm, identity, conversation, strconv.Itoa(seq))
}

// legacyEpisodeID is the id an episode had before ids carried the
// identity; still forgotten with its conversation (forgetLegacy).
func legacyEpisodeID(realm, conversation string, seq int) string {
	return episodeHash("memhost episode v1", realm, conversation, strconv.Itoa(seq))
}

func episodeHash(fields ...string) string {
	h := sha256.New()
	var n [8]byte
	for _, f := range fields {
		binary.BigEndian.PutUint64(n[:], uint64(len(f)))
		h.Write(n[:])
		h.Write([]byte(f))
	}
	return "ep-" + hex.EncodeToString(h.Sum(nil)[:20])
}

// EpisodeThread is the thread id of a conversation's episodes: the
// conversation id, or its hash when it is longer than a thread id may be.
func EpisodeThread(conversation string) string {
	if len(conversation) <= sdk.MaxThreadIDBytes {
		return conversation
	}
	sum := sha256.Sum256([]byte(conversation))
	return "sha256:" + hex.EncodeToString(sum[:])
}

// episodeRecord is the record of one episode. Its title and body depend
// on the message and its position only, so a retry stores nothing new;
// the description carries the archive time, which a retry does not change
// (the provider answers the first copy).
func episodeRecord(id sdk.Identity, conversation string, ep Episode, now time.Time, pol ArchivePolicy) sdk.Record {
	r := sdk.Record{
		ID:    EpisodeID(id.Realm, id.ID, conversation, ep.Seq),
		Realm: id.Realm,
		Scope: sdk.IdentityScope(id.ID),
		Kind:  sdk.KindEpisode,
		Title: cutBytes(fmt.Sprintf("%s, message %d of conversation %s", ep.Message.Role, ep.Seq+1, conversation), sdk.MaxTitleBytes),
		Description: cutBytes(fmt.Sprintf("%s message archived from conversation %s at %s, when it was compacted", ep.Message.Role, conversation,
			now.Format(time.RFC3339)), sdk.MaxDescriptionBytes),
		// A message over a record body's limit keeps its first 64 KiB.
		Body:   cutBytes(ep.Message.Content, sdk.MaxBodyBytes),
		Trust:  sdk.TrustAgentObserved,
		Thread: &sdk.Thread{ID: EpisodeThread(conversation), Seq: int64(ep.Seq)},
		Tags:   speaker.Tags(ep.Message.Role), // recall ranks the user's own turns higher
	}
	// OCCURRED_AT: when records carry the time a thing happened (time-aware
	// recall), set it here to the message's time; the compaction API
	// carries no message time yet, so the archive time (above) is all
	// there is.
	if pol.MaxAge > 0 {
		r.ExpiresAt = now.Add(pol.MaxAge)
	}
	return r
}

// cutBytes cuts s to at most n bytes on a character boundary.
func cutBytes(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return cut(s, n)
}
