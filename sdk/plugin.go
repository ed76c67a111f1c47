package sdk

import (
	"context"
	"encoding/json"
	"slices"
	"time"

	"github.com/memhost/memhost/sdk/internal/wire"
)

// ProtocolVersion is the plugin protocol major version this SDK speaks
// (the proto package memhost.plugin.v1).
const ProtocolVersion = wire.ProtocolVersion

// PluginKind is a role a plugin binary can serve.
type PluginKind string

const (
	KindProvider         PluginKind = "provider"
	KindSelector         PluginKind = "selector"
	KindCompactor        PluginKind = "compactor"
	KindOperatorResolver PluginKind = "operator_resolver"
	KindMobResolver      PluginKind = "mob_resolver"
	KindEmbedder         PluginKind = "embedder"
)

// Kinds lists every kind this SDK can serve, in a stable order.
func Kinds() []PluginKind {
	out := make([]PluginKind, len(kindTable))
	for i, k := range kindTable {
		out[i] = k.kind
	}
	return out
}

// Known reports whether this SDK knows kind k.
func (k PluginKind) Known() bool {
	_, ok := kindEntry(k)
	return ok
}

// Capability is an optional provider feature. A plugin declares the
// capabilities it supports in its Info; the host never probes for them.
type Capability string

const (
	CapWrite     Capability = "write"     // RecordWriter
	CapFetch     Capability = "fetch"     // RecordGetter
	CapForget    Capability = "forget"    // RecordForgetter
	CapManifest  Capability = "manifest"  // ManifestLister
	CapSupersede Capability = "supersede" // Superseder
	CapUsage     Capability = "usage"     // UsageMarker
	CapLedger    Capability = "ledger"    // LedgerWriter
	CapArchive   Capability = "archive"   // Archiver
	CapReindex   Capability = "reindex"   // Reindexer
	CapVectors   Capability = "vectors"   // VectorStore
	// CapUsageCounts counts many uses of a record in one call; the host
	// otherwise sends one MarkUsed per repeat.
	CapUsageCounts Capability = "usage_counts" // UsageCounter
	// CapNeighbours answers a recall's threaded hits with the records
	// beside them in their thread (RecallQuery.Neighbours).
	CapNeighbours Capability = "neighbours" // ThreadReader
)

// Capabilities is a set of declared capabilities.
type Capabilities []Capability

// Has reports whether c is in the set.
func (cs Capabilities) Has(c Capability) bool { return slices.Contains(cs, c) }

// Info is what a plugin says about itself. The host compares it with the
// plugin's manifest and refuses any difference.
type Info struct {
	Name         string          `json:"name"`
	Version      string          `json:"version"`
	Kinds        []PluginKind    `json:"kinds"`
	Protocols    []int           `json:"protocols"`
	Capabilities Capabilities    `json:"capabilities,omitempty"`
	ConfigSchema json.RawMessage `json:"config_schema,omitempty"`
}

// Plugin is what every plugin implements, whatever its kinds.
type Plugin interface {
	// Info describes the plugin. It must not depend on configuration.
	Info() Info
	// Configure receives the instance configuration (a JSON object, "{}"
	// when the deployment gives none) once, before any other call. It
	// rejects unknown keys and bad values with an error wrapping ErrInvalid.
	Configure(ctx context.Context, config json.RawMessage) error
}

// Provider stores and recalls memory records. Recall is the one required
// call; every other ability is a capability interface below.
type Provider interface {
	Recall(ctx context.Context, q RecallQuery) ([]Hit, error)
}

// RecallQuery asks a provider for the records most relevant to Query.
type RecallQuery struct {
	Realm string
	Query string
	// Scopes limits the search; empty means every scope of the realm.
	Scopes []Scope
	// Limit caps the hits; 0 means the provider's default (10).
	Limit int
	// ExcludeIDs are never returned (already injected this session).
	ExcludeIDs []string
	// Tags a hit must all carry; ExcludeTags a hit must not carry.
	Tags        []string
	ExcludeTags []string
	// Since and Until, when set, keep the hits whose Record.When lies in
	// [Since, Until): the record's OccurredAt, else its CreatedAt.
	Since, Until time.Time
	// QueryVector is the query's embedding, nil for lexical recall only;
	// VectorModel is the model that made it. Only a provider that declared
	// CapVectors reads them (the host sends none to another): it answers
	// ErrInvalid when the model or the dimension differs from its stored
	// vectors'.
	QueryVector []float32
	VectorModel string
	// Fusion weighs the lexical and the semantic half; the zero value is
	// the provider's default.
	Fusion Fusion
	// Neighbours, when above 0, asks for each threaded hit's neighbours:
	// the records of its scope and thread up to this many places before
	// and after its own (at most MaxNeighbours). Only a provider that
	// declared CapNeighbours reads it; they arrive in Hit.Neighbours.
	Neighbours int
}

// MaxNeighbours bounds RecallQuery.Neighbours.
const MaxNeighbours = 2

// Fusion weighs min-max-normalised lexical and vector scores:
// score = Lexical*lex + Semantic*sem. A provider normalises over a pool
// that does not grow with the recall's limit, so a record scores the same
// at any limit (sdk/index: both halves' top index.FusionDepth; exactly
// while its vector half is a scan, not its approximate graph).
type Fusion struct{ Lexical, Semantic float64 }

// WindowMillis answers Since and Until in Unix milliseconds, 0 for an
// open end, as the wire and the stores keep them. Each end is the first
// whole millisecond at or after its time: stored times are whole
// milliseconds, so a record lies in [Since, Until) exactly when its time
// lies in [since, until).
//
// An end at the Unix epoch (or less than a millisecond before it) would
// read as open, so it is answered as -1. Stores already keep an occurred_at
// or expiry at the epoch as -1 for the same reason, so a window ending
// there judges the millisecond before the epoch as the epoch, and never
// opens.
func (q *RecallQuery) WindowMillis() (since, until int64) {
	return windowMillis(q.Since), windowMillis(q.Until)
}

func windowMillis(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	ms := t.UnixMilli() // rounds down, also before the epoch
	if !t.Truncate(time.Millisecond).Equal(t) {
		ms++
	}
	if ms == 0 {
		return -1
	}
	return ms
}

// InWindow reports whether t lies in the query's [Since, Until); a zero
// end is open.
func (q *RecallQuery) InWindow(t time.Time) bool {
	return (q.Since.IsZero() || !t.Before(q.Since)) && (q.Until.IsZero() || t.Before(q.Until))
}

// DefaultRecallLimit applies when a query gives no limit.
const DefaultRecallLimit = 10

// Hit is one recalled record with its provider-specific score (higher is
// more relevant; scores are comparable only within one answer).
type Hit struct {
	Record Record  `json:"record"`
	Score  float64 `json:"score"`
	// Neighbours are the records beside Record in its thread, in thread
	// order, when the query asked for them (see AttachNeighbours).
	Neighbours []Record `json:"neighbours,omitempty"`
}

// RecordWriter stores records (CapWrite). All or nothing: on error nothing
// is stored. A record whose scope already holds the same content hash in
// a live record (active or quarantined) is not stored again; its existing
// id is answered in its place. Written again, content is recallable: an
// expired holder takes the new record's expiry (or a new record is
// stored), and a superseded one holds nothing.
type RecordWriter interface {
	Remember(ctx context.Context, realm string, records []Record) ([]string, error)
}

// RecordGetter fetches records by id (CapFetch), found ones only, in the
// order asked. Records of any status are returned.
type RecordGetter interface {
	Get(ctx context.Context, realm string, ids []string) ([]Record, error)
}

// RecordForgetter deletes records by id (CapForget). Forgetting an id that
// is not there is not an error; the count says how many were removed.
type RecordForgetter interface {
	Forget(ctx context.Context, realm string, ids []string) (int, error)
}

// ManifestTier chooses how much of the record manifest to list.
type ManifestTier int

const (
	// TierWorkingSet lists the top-k ranked rows plus the newest unranked
	// ones, capped at 2k rows.
	TierWorkingSet ManifestTier = iota + 1
	// TierFull lists every recallable row.
	TierFull
)

// ManifestQuery asks for metadata rows (no bodies).
type ManifestQuery struct {
	Realm  string
	Scopes []Scope
	Tier   ManifestTier
	K      int
}

// ManifestRow is a record's metadata without its body.
type ManifestRow struct {
	ID          string     `json:"id"`
	Scope       Scope      `json:"scope"`
	Kind        RecordKind `json:"kind"`
	Title       string     `json:"title"`
	Description string     `json:"description,omitempty"`
	UpdatedAt   time.Time  `json:"updated_at"`
	// Rank orders the working set; 0 means unranked.
	Rank float64 `json:"rank"`
}

// ManifestLister lists record manifests (CapManifest).
type ManifestLister interface {
	Manifest(ctx context.Context, q ManifestQuery) ([]ManifestRow, error)
}

// Superseder replaces a record with a new one, marking the old superseded
// (CapSupersede).
type Superseder interface {
	Supersede(ctx context.Context, realm, oldID string, replacement Record) (string, error)
}

// UsageMarker counts that records were injected or recalled (CapUsage):
// one use of each listed record at the given time. An id listed twice in
// one call counts once; UsageCounter counts repeats.
type UsageMarker interface {
	MarkUsed(ctx context.Context, realm string, ids []string, at time.Time) error
}

// Use is Count uses of the record ID.
type Use struct {
	ID    string `json:"id"`
	Count int64  `json:"count"`
}

// OneUseEach answers one use of each distinct id, in the order first
// listed: MarkUsed's ids as CountUses takes them.
func OneUseEach(ids []string) []Use {
	uses := make([]Use, 0, len(ids))
	seen := make(map[string]bool, len(ids))
	for _, id := range ids {
		if !seen[id] {
			seen[id] = true
			uses = append(uses, Use{ID: id, Count: 1})
		}
	}
	return uses
}

// UsageCounter counts several uses of each record in one call
// (CapUsageCounts): CountUses with a Use of count n leaves a record as n
// MarkUsed calls at the same time would. Ids the realm does not hold are
// skipped; each id is listed once (Serve refuses a repeat).
type UsageCounter interface {
	CountUses(ctx context.Context, realm string, uses []Use, at time.Time) error
}

// LedgerEntry records that a record was injected into a session.
type LedgerEntry struct {
	Realm    string    `json:"realm"`
	Identity string    `json:"identity"`
	Session  string    `json:"session,omitempty"`
	RecordID string    `json:"record_id"`
	Surface  string    `json:"surface"`
	Bytes    int64     `json:"bytes"`
	At       time.Time `json:"at"`
}

// LedgerWriter keeps the injection ledger (CapLedger). The ledger is
// only ever appended to, so a provider keeping it bounds it: rows leave
// oldest first once older than a retention or past a number of rows. The
// first-party providers default to these bounds (config keys
// ledger_retention_hours and ledger_max_rows).
type LedgerWriter interface {
	WriteLedger(ctx context.Context, entries []LedgerEntry) error
}

// Default bounds of a provider's injection ledger (see LedgerWriter).
const (
	DefaultLedgerRetention = 30 * 24 * time.Hour
	DefaultLedgerMaxRows   = 10_000_000
)

// MaxExportPage bounds the records of one Export page.
const MaxExportPage = MaxBatch

// ExportPage is one page of a realm's records and the cursor of the next
// ("" after the last page).
type ExportPage struct {
	Records []Record
	Next    string
}

// ImportResult counts what an Import stored (a stored record it retired,
// see ImportRetires, included) and what it found already there.
type ImportResult struct {
	Imported int `json:"imported"`
	Skipped  int `json:"skipped"`
}

// Archiver dumps and loads a realm's full records (CapArchive), for backup,
// migration between providers and resumable bulk loads.
type Archiver interface {
	// Export answers up to limit records of realm whose id sorts after
	// after (byte order), of every status, in id order. limit is 1 to
	// MaxExportPage.
	Export(ctx context.Context, realm, after string, limit int) (ExportPage, error)
	// Import stores records exactly as given, ids, times, status and
	// counters included (each has passed PrepareImport). All or nothing. A
	// record whose id is already stored is skipped, unless it retires the
	// stored record (ImportRetires: a newer export of it, superseded or
	// tombstoned since), which then takes its status and later updated_at,
	// leaves recall and counts as imported; no import moves a record back
	// to an earlier status. A recallable
	// one whose scope already holds its content hash in a recallable
	// record, so a repeated import stores nothing twice. A record that is
	// not active changes no stored record: a quarantined one (a pending
	// proposal) whose content an expired record of its scope holds leaves
	// that record expired, stored beside it or skipped, so nothing becomes
	// recallable before review.
	Import(ctx context.Context, realm string, records []Record) (ImportResult, error)
}

// Reindexer rebuilds a provider's search index from its stored records
// (CapReindex): after an index went stale, a tokenizer changed, or an
// operator asks. The records themselves are untouched.
type Reindexer interface {
	// Reindex rebuilds the index of realm ("" means every realm) and
	// answers how many records it indexed. The provider keeps serving
	// meanwhile, from its old index until the new one replaces it; a
	// canceled or failed reindex leaves the old one in place. progress,
	// when not nil, is told done of total records now and then (say every
	// 100 ms, and once at the end), possibly from another goroutine; it
	// must return quickly. A reindex asked for while another runs waits
	// for it (or for its own ctx); a canceled one must end promptly, so
	// the next one is not kept waiting.
	Reindex(ctx context.Context, realm string, progress func(done, total int)) (int, error)
}

// RecordVector is one record's embedding, with the model that made it.
type RecordVector struct {
	ID     string
	Model  string
	Vector []float32
	// ContentHash, when set, is the ContentHash of the title and body the
	// vector was made from. The record may have changed while it was being
	// embedded (a hand edit, or a forget and an import reusing the id): a
	// provider stores the vector only if the record's content still has
	// this hash, and skips it otherwise, as it skips an unknown id.
	ContentHash string
}

// MaxVectorDimensions bounds one vector's length.
const MaxVectorDimensions = 8192

// VectorStore keeps a vector per record and uses it in Recall (CapVectors).
type VectorStore interface {
	// PutVectors stores vectors for existing records of realm (a
	// record's previous vector is replaced; an unknown id, or a record
	// whose content no longer has the vector's ContentHash, is skipped
	// and not an error: it was forgotten or changed meanwhile).
	PutVectors(ctx context.Context, realm string, vecs []RecordVector) error
	// MissingVectors answers up to limit ids of live records of realm
	// with no vector made by model, in id order (byte order), each
	// sorting after `after` ("" = from the start): the host's embedding
	// backlog.
	MissingVectors(ctx context.Context, realm, model, after string, limit int) ([]string, error)
}

// ThreadPlace is a place in a thread of one scope.
type ThreadPlace struct {
	Scope  Scope
	Thread string
	Seq    int64
}

// ThreadReader reads records by their place in a thread (CapNeighbours).
type ThreadReader interface {
	// ReadThread answers the active records of realm at the given
	// places, in any order: of each place its first MaxPlaceReads by id
	// (byte order), however many it holds, so the read stays bounded.
	// AttachNeighbours keeps the ones a recall may show.
	ReadThread(ctx context.Context, realm string, places []ThreadPlace) ([]Record, error)
}

// Coverage is a selector's verdict on whether the working set sufficed.
type Coverage string

const (
	CoverageSufficient      Coverage = "sufficient"
	CoverageNeedDeeperSweep Coverage = "need_deeper_sweep"
)

// SelectRequest gives a selector the turn text and the candidate rows.
type SelectRequest struct {
	Identity      Identity
	Query         string
	Rows          []ManifestRow
	SuppressedIDs []string
	Max           int
}

// Selection is a selector's answer. An empty IDs list is a real verdict:
// inject nothing.
type Selection struct {
	IDs      []string
	Coverage Coverage
}

// Selector picks which record bodies to inject.
type Selector interface {
	Select(ctx context.Context, req SelectRequest) (Selection, error)
}

// Message is one conversation message.
type Message struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// CompactRequest carries newly evicted messages and the previous artifact.
type CompactRequest struct {
	ConversationID string
	Evicted        []Message
	CarryOver      *Message
	IdempotencyKey string
	MaxBytes       int
}

// Compactor summarises evicted messages into an artifact.
type Compactor interface {
	Compact(ctx context.Context, req CompactRequest) (Message, error)
}

// OperatorResolver answers the active operator of an identity ("" for none).
type OperatorResolver interface {
	ResolveOperator(ctx context.Context, id Identity) (string, error)
}

// MobResolver answers the mobs an identity is bound to.
type MobResolver interface {
	ResolveMobs(ctx context.Context, id Identity) ([]string, error)
}

// EmbedPurpose says what a text is embedded for: some models embed a
// question and a passage differently.
type EmbedPurpose string

const (
	EmbedQuery    EmbedPurpose = "query"
	EmbedDocument EmbedPurpose = "document"
)

// Known reports whether p is a purpose this SDK knows.
func (p EmbedPurpose) Known() bool { return p == EmbedQuery || p == EmbedDocument }

// EmbedderInfo declares what an embedder makes.
type EmbedderInfo struct {
	Model         string // model id; stored vectors made by another id are stale
	Dimensions    int
	MaxBatch      int  // texts per Embed call
	MaxInputBytes int  // bytes per text
	Deterministic bool // the same text always gives the same vector
}

// EmbedRequest asks for one vector per text, all for one purpose.
type EmbedRequest struct {
	Purpose EmbedPurpose
	Texts   []string
}

// Embedder turns texts into vectors, one per text, in order.
type Embedder interface {
	EmbedderInfo(ctx context.Context) (EmbedderInfo, error)
	Embed(ctx context.Context, req EmbedRequest) ([][]float32, error)
}

// capabilityImpls pairs each capability with a check that v implements it.
var capabilityImpls = []struct {
	name Capability
	ok   func(any) bool
}{
	{CapWrite, func(v any) bool { _, ok := v.(RecordWriter); return ok }},
	{CapFetch, func(v any) bool { _, ok := v.(RecordGetter); return ok }},
	{CapForget, func(v any) bool { _, ok := v.(RecordForgetter); return ok }},
	{CapManifest, func(v any) bool { _, ok := v.(ManifestLister); return ok }},
	{CapSupersede, func(v any) bool { _, ok := v.(Superseder); return ok }},
	{CapUsage, func(v any) bool { _, ok := v.(UsageMarker); return ok }},
	{CapLedger, func(v any) bool { _, ok := v.(LedgerWriter); return ok }},
	{CapArchive, func(v any) bool { _, ok := v.(Archiver); return ok }},
	{CapReindex, func(v any) bool { _, ok := v.(Reindexer); return ok }},
	{CapVectors, func(v any) bool { _, ok := v.(VectorStore); return ok }},
	{CapUsageCounts, func(v any) bool { _, ok := v.(UsageCounter); return ok }},
	{CapNeighbours, func(v any) bool { _, ok := v.(ThreadReader); return ok }},
}

func capabilityIndex(c Capability) int {
	for i, e := range capabilityImpls {
		if e.name == c {
			return i
		}
	}
	return -1
}

// AllCapabilities lists every provider capability this SDK knows.
func AllCapabilities() Capabilities {
	out := make(Capabilities, len(capabilityImpls))
	for i, c := range capabilityImpls {
		out[i] = c.name
	}
	return out
}

// capabilityDeclarer is implemented by host-side clients, whose
// capabilities come from the remote plugin's Info.
type capabilityDeclarer interface {
	Capabilities() Capabilities
}

// CapabilitiesOf answers the capabilities v both declares and implements.
// Host-side clients answer what the remote plugin declared; an in-process
// Plugin answers its Info's capabilities that it really implements; any
// other value answers the capability interfaces it implements.
func CapabilitiesOf(v any) Capabilities {
	if d, ok := v.(capabilityDeclarer); ok {
		return d.Capabilities()
	}
	var declared Capabilities
	p, isPlugin := v.(Plugin)
	if isPlugin {
		declared = p.Info().Capabilities
	}
	var out Capabilities
	for _, c := range capabilityImpls {
		if c.ok(v) && (!isPlugin || declared.Has(c.name)) {
			out = append(out, c.name)
		}
	}
	return out
}

// Supports reports whether v declares and implements capability c.
func Supports(v any, c Capability) bool { return CapabilitiesOf(v).Has(c) }
