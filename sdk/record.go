package sdk

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/memhost/memhost/sdk/internal/wire"
)

// Record limits, in bytes.
const (
	MaxTitleBytes       = 200
	MaxDescriptionBytes = 400
	MaxBodyBytes        = 64 << 10
	MaxTags             = 32
	MaxTagBytes         = 64
	MaxIDBytes          = 128
	MaxThreadIDBytes    = 128
	// MaxBatch bounds the records of one Remember call and the ids of one
	// Get or Forget call.
	MaxBatch = 1000
	// MaxFullManifestRows bounds a full manifest the host reads: of a
	// provider's stream it reads this many rows and one more (which says
	// there were more) and no further, however many rows the provider
	// streams, so no answer fills the host's memory.
	MaxFullManifestRows = 50_000
)

// DefaultRealm is the realm used when a caller names none.
const DefaultRealm = "default"

// RecordKind classifies what a record remembers.
type RecordKind string

const (
	KindPreference   RecordKind = "preference"
	KindFact         RecordKind = "fact"
	KindGotcha       RecordKind = "gotcha"
	KindProcedure    RecordKind = "procedure"
	KindRelationship RecordKind = "relationship"
	KindOpenLoop     RecordKind = "open_loop"
	KindReference    RecordKind = "reference"
	// KindEpisode is a message of a conversation kept verbatim (the
	// compaction archive writes them, one per evicted message).
	KindEpisode RecordKind = "episode"
)

var recordKinds = []RecordKind{KindPreference, KindFact, KindGotcha, KindProcedure, KindRelationship, KindOpenLoop, KindReference, KindEpisode}

// Trust orders how far a record's origin is believed; higher is more trusted.
type Trust string

const (
	TrustUntrusted     Trust = "untrusted"
	TrustAgentObserved Trust = "agent_observed"
	TrustAgentVerified Trust = "agent_verified"
	TrustApplication   Trust = "application"
	TrustOperator      Trust = "operator"
)

var trustLevels = []Trust{TrustUntrusted, TrustAgentObserved, TrustAgentVerified, TrustApplication, TrustOperator}

// Level is the trust's rank from 0 (untrusted); -1 for an unknown value.
func (t Trust) Level() int {
	for i, v := range trustLevels {
		if v == t {
			return i
		}
	}
	return -1
}

// Status is a record's lifecycle state. Only active records are recalled.
type Status string

const (
	StatusActive      Status = "active"
	StatusSuperseded  Status = "superseded"
	StatusQuarantined Status = "quarantined"
	StatusTombstoned  Status = "tombstoned"
)

var statuses = []Status{StatusActive, StatusSuperseded, StatusQuarantined, StatusTombstoned}

// Record is one memory. Times are UTC; a zero ExpiresAt never expires.
type Record struct {
	ID          string     `json:"id"`
	Realm       string     `json:"realm"`
	Scope       Scope      `json:"scope"`
	Kind        RecordKind `json:"kind"`
	Title       string     `json:"title"`
	Description string     `json:"description,omitempty"`
	Body        string     `json:"body"`
	Tags        []string   `json:"tags,omitempty"`
	Trust       Trust      `json:"trust"`
	Status      Status     `json:"status"`
	Supersedes  string     `json:"supersedes,omitempty"`
	CreatedAt   time.Time  `json:"created_at"`
	UpdatedAt   time.Time  `json:"updated_at"`
	ExpiresAt   time.Time  `json:"expires_at,omitzero"`
	ContentHash string     `json:"content_hash"`
	UseCount    int64      `json:"use_count"`
	LastUsedAt  time.Time  `json:"last_used_at,omitzero"`
	// Thread, when set, places an episodic record (a conversation turn)
	// in a sequence; providers index it with its neighbours' text.
	Thread *Thread `json:"thread,omitempty"`
	// OccurredAt is when the remembered thing happened (the day of the
	// conversation a turn came from, say), as distinct from CreatedAt, when
	// it was stored; zero when unknown. Recall's time filters and the
	// host's time-aware ranking read it, falling back to CreatedAt.
	OccurredAt time.Time `json:"occurred_at,omitzero"`
}

// When is the time recall judges the record by: OccurredAt when known,
// else CreatedAt.
func (r *Record) When() time.Time {
	if !r.OccurredAt.IsZero() {
		return r.OccurredAt
	}
	return r.CreatedAt
}

// Thread is a record's place in a sequence of records: a conversation, a
// log. Providers index a record together with the text of its neighbours
// (Seq-2 to Seq+2 of the same ID) at a lower weight, so a question that
// names the topic of a stretch also finds the turn in it that answers.
type Thread struct {
	ID  string `json:"id"`
	Seq int64  `json:"seq"`
}

// Recallable reports whether the record may be recalled or injected at now.
func (r *Record) Recallable(now time.Time) bool {
	return r.Status == StatusActive && (r.ExpiresAt.IsZero() || now.Before(r.ExpiresAt))
}

// ThreadDistance answers how many places apart r and o stand in one
// conversation, and whether they are in one: both threaded, in the same
// scope and thread. It holds for any seqs (the distance of MinInt64 and
// MaxInt64 does not overflow).
func (r *Record) ThreadDistance(o *Record) (uint64, bool) {
	if r.Thread == nil || o.Thread == nil || r.Thread.ID != o.Thread.ID || r.Scope != o.Scope {
		return 0, false
	}
	a, b := r.Thread.Seq, o.Thread.Seq
	if a < b {
		a, b = b, a
	}
	return uint64(a) - uint64(b), true
}

// HasTag reports whether the record carries tag, compared as SameTag does
// (in NFC, case-folded): a record stored before the host sent tags in NFC
// may hold a decomposed one.
func (r *Record) HasTag(tag string) bool {
	for _, t := range r.Tags {
		if SameTag(t, tag) {
			return true
		}
	}
	return false
}

// ContentHash is the identity of a record's content: sha256 over title and
// body. Writing the same title and body to the same scope again is a no-op
// that answers the existing id.
func ContentHash(title, body string) string {
	h := sha256.New()
	h.Write([]byte(title))
	h.Write([]byte{0})
	h.Write([]byte(body))
	return hex.EncodeToString(h.Sum(nil))
}

// NewRecordID returns a fresh id: a millisecond timestamp (so ids sort
// roughly by creation) followed by 64 random bits.
func NewRecordID(now time.Time) string {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(fmt.Sprintf("sdk: crypto/rand failed: %v", err))
	}
	return fmt.Sprintf("r%011x%s", now.UnixMilli(), hex.EncodeToString(b[:]))
}

// ValidateID checks that id is a safe token: 1-128 bytes of ASCII letters,
// digits, '-', '_' and '.', not starting with '.'. Such an id can name a
// file or a key anywhere without escaping its directory.
func ValidateID(id string) error {
	if err := wire.ValidateToken(id, MaxIDBytes); err != nil {
		return invalid("id", err.Error())
	}
	return nil
}

// ValidateRealm checks that realm is a safe token.
func ValidateRealm(realm string) error {
	if err := wire.ValidateToken(realm, 64); err != nil {
		return invalid("realm", err.Error())
	}
	return nil
}

// Validate checks every field against the record limits. It does not
// require an id, timestamps or a hash: Prepare fills those.
func (r *Record) Validate() error {
	if r.ID != "" {
		if err := ValidateID(r.ID); err != nil {
			return err
		}
	}
	if r.Realm != "" {
		if err := ValidateRealm(r.Realm); err != nil {
			return err
		}
	}
	if err := r.Scope.Validate(); err != nil {
		return err
	}
	if r.Kind == "" {
		return invalid("kind", fmt.Sprintf("is required: one of %s", join(recordKinds)))
	}
	if !contains(recordKinds, r.Kind) {
		return invalid("kind", fmt.Sprintf("unknown kind %q (want one of %s)", r.Kind, join(recordKinds)))
	}
	if r.Trust != "" && r.Trust.Level() < 0 {
		return invalid("trust", fmt.Sprintf("unknown trust %q (want one of %s)", r.Trust, join(trustLevels)))
	}
	if r.Status != "" && !contains(statuses, r.Status) {
		return invalid("status", fmt.Sprintf("unknown status %q (want one of %s)", r.Status, join(statuses)))
	}
	if err := checkText("title", r.Title, MaxTitleBytes); err != nil {
		return err
	}
	if err := checkText("description", r.Description, MaxDescriptionBytes); err != nil {
		return err
	}
	if err := checkText("body", r.Body, MaxBodyBytes); err != nil {
		return err
	}
	if strings.TrimSpace(r.Title) == "" && strings.TrimSpace(r.Body) == "" {
		return invalid("title", "title and body are both empty")
	}
	if len(r.Tags) > MaxTags {
		return tooLarge("tags", fmt.Sprintf("%d tags, the limit is %d", len(r.Tags), MaxTags))
	}
	for i, t := range r.Tags {
		if err := checkTag(fmt.Sprintf("tags[%d]", i), t); err != nil {
			return err
		}
	}
	if r.Supersedes != "" {
		if err := ValidateID(r.Supersedes); err != nil {
			return invalid("supersedes", err.Error())
		}
	}
	// Every time a record carries must be one every store and the JSON
	// form can hold: a record stored with an expiry in year 10000 could no
	// longer be answered or exported.
	for _, t := range []struct {
		field string
		at    time.Time
	}{{"occurred_at", r.OccurredAt}, {"expires_at", r.ExpiresAt}, {"created_at", r.CreatedAt}, {"updated_at", r.UpdatedAt}, {"last_used_at", r.LastUsedAt}} {
		if err := CheckTime(t.field, t.at); err != nil {
			return err
		}
	}
	if t := r.Thread; t != nil {
		if err := checkText("thread.id", t.ID, MaxThreadIDBytes); err != nil {
			return err
		}
		if strings.TrimSpace(t.ID) == "" {
			return invalid("thread.id", "is blank: a thread needs an id")
		}
		if t.Seq < 0 {
			return invalid("thread.seq", fmt.Sprintf("is %d, want 0 or more", t.Seq))
		}
	}
	return nil
}

// CheckTime refuses a time outside the years 1-9999, the range every
// store and the JSON and RFC 3339 forms of a time can hold; the zero time
// (unset) passes.
func CheckTime(field string, t time.Time) error {
	if t.IsZero() {
		return nil
	}
	if y := t.UTC().Year(); y < 1 || y > 9999 {
		return invalid(field, fmt.Sprintf("year %d is outside 1-9999", y))
	}
	return nil
}

func checkText(field, s string, max int) error {
	if len(s) > max {
		return tooLarge(field, fmt.Sprintf("is %d bytes, the limit is %d", len(s), max))
	}
	if !utf8.ValidString(s) {
		return invalid(field, "is not valid UTF-8")
	}
	if strings.IndexByte(s, 0) >= 0 {
		return invalid(field, "contains a NUL byte")
	}
	return nil
}

// Prepare validates a record about to be stored in realm and fills what the
// store owns: realm, id, default trust and status, timestamps, content hash.
func (r *Record) Prepare(realm string, now time.Time) error {
	if r.Realm == "" {
		r.Realm = realm
	}
	if r.Realm != realm {
		return invalid("realm", fmt.Sprintf("record names realm %q inside a write to realm %q", r.Realm, realm))
	}
	if r.Trust == "" {
		r.Trust = TrustAgentObserved
	}
	if r.Status == "" {
		r.Status = StatusActive
	}
	if err := r.Validate(); err != nil {
		return err
	}
	now = now.UTC()
	if r.ID == "" {
		r.ID = NewRecordID(now)
	}
	if r.CreatedAt.IsZero() {
		r.CreatedAt = now
	}
	r.UpdatedAt = now
	if !r.OccurredAt.IsZero() {
		r.OccurredAt = r.OccurredAt.UTC().Truncate(time.Millisecond)
	}
	r.ContentHash = ContentHash(r.Title, r.Body)
	return nil
}

// PrepareImport validates a full record about to be imported into realm as
// it stands: unlike Prepare it keeps the id, status and times, and requires
// them. The content hash is recomputed; a stated hash must match it.
func (r *Record) PrepareImport(realm string) error {
	if r.Realm == "" {
		r.Realm = realm
	}
	if r.Realm != realm {
		return invalid("realm", fmt.Sprintf("record names realm %q inside an import to realm %q", r.Realm, realm))
	}
	if err := r.Validate(); err != nil {
		return err
	}
	switch {
	case r.ID == "":
		return invalid("id", "is required on an imported record")
	case r.Status == "":
		return invalid("status", "is required on an imported record")
	case r.Trust == "":
		return invalid("trust", "is required on an imported record")
	case r.CreatedAt.IsZero():
		return invalid("created_at", "is required on an imported record")
	case r.UpdatedAt.IsZero():
		return invalid("updated_at", "is required on an imported record")
	case r.UseCount < 0:
		return invalid("use_count", "is negative")
	case r.UseCount > MaxRecordUseCount:
		return invalid("use_count", fmt.Sprintf("%d is over the most a record may have been used, %d", r.UseCount, MaxRecordUseCount))
	}
	hash := ContentHash(r.Title, r.Body)
	if r.ContentHash != "" && r.ContentHash != hash {
		return invalid("content_hash", "does not match the title and body")
	}
	r.ContentHash = hash
	// Milliseconds, as the wire and every store keep them, so an import
	// in-process stores what one through a plugin would.
	for _, t := range []*time.Time{&r.CreatedAt, &r.UpdatedAt, &r.ExpiresAt, &r.LastUsedAt, &r.OccurredAt} {
		if !t.IsZero() {
			*t = t.UTC().Truncate(time.Millisecond)
		}
	}
	return nil
}

func contains[T comparable](list []T, v T) bool {
	for _, x := range list {
		if x == v {
			return true
		}
	}
	return false
}

func join[T ~string](list []T) string {
	parts := make([]string, len(list))
	for i, v := range list {
		parts[i] = string(v)
	}
	return strings.Join(parts, ", ")
}

// ImportRetires reports whether importing r moves the stored record of
// its id on to r's later lifecycle status, as Archiver.Import does in
// place of skipping it: the same content in the same scope, which the
// store holds active and r says superseded or tombstoned, or holds
// superseded and r says tombstoned (a newer export of a record retired
// since the older one was imported, while its successor is imported
// active). An import never moves a record back: a superseded or
// tombstoned record stays so whatever an older export says. A pending
// proposal (quarantined) is left alone, its review being the host's.
// stored.ContentHash must be the hash of the stored title and body.
func ImportRetires(stored, r *Record) bool {
	if stored.ID != r.ID || stored.Scope != r.Scope || stored.ContentHash != ContentHash(r.Title, r.Body) {
		return false
	}
	switch stored.Status {
	case StatusActive:
		return r.Status == StatusSuperseded || r.Status == StatusTombstoned
	case StatusSuperseded:
		return r.Status == StatusTombstoned
	}
	return false
}
