package sdk

import (
	"fmt"
	"strings"
	"time"

	"golang.org/x/text/unicode/norm"
)

// The server adapter checks every request shape here, once, before a
// plugin sees it: a plugin served by Serve receives only valid realms,
// scopes, ids, limits and batch sizes, and a recall limit already defaulted
// (0 becomes DefaultRecallLimit) and capped at MaxBatch. Field paths name
// the request field ("scopes[1]", "ids[0]") so the host can report them.

func checkRealm(realm string) error { return ValidateRealm(realm) }

func checkScopes(scopes []Scope) error {
	for i, s := range scopes {
		if err := s.Validate(); err != nil {
			return invalid(fmt.Sprintf("scopes[%d]", i), problemOf(err))
		}
	}
	return nil
}

func checkIDs(field string, ids []string) error {
	if len(ids) > MaxBatch {
		return tooLarge(field, fmt.Sprintf("%d ids in one call, the limit is %d", len(ids), MaxBatch))
	}
	for i, id := range ids {
		if err := ValidateID(id); err != nil {
			return invalid(fmt.Sprintf("%s[%d]", field, i), problemOf(err))
		}
	}
	return nil
}

// MaxUseCount bounds the uses one CountUses call counts for one record, so
// a careless caller cannot overflow a stored count.
const MaxUseCount = 1_000_000

// MaxRecordUseCount bounds a record's use_count: an import over it is
// refused, and a store counting uses stops there. It is the largest
// integer a JSON number carries exactly into every client (JavaScript's
// 2^53 - 1), and far from int64's end, so adding a CountUses batch to it
// cannot wrap a stored count negative or turn SQLite's into a float.
const MaxRecordUseCount = 1<<53 - 1

// ValidateUses checks a CountUses list: at most MaxBatch entries, each a
// valid id listed once with a count from 1 to MaxUseCount.
func ValidateUses(field string, uses []Use) error {
	if len(uses) > MaxBatch {
		return tooLarge(field, fmt.Sprintf("%d uses in one call, the limit is %d", len(uses), MaxBatch))
	}
	seen := make(map[string]int, len(uses))
	at := func(i int, part string) string { return fmt.Sprintf("%s[%d].%s", field, i, part) }
	for i, u := range uses {
		if err := ValidateID(u.ID); err != nil {
			return invalid(at(i, "id"), problemOf(err))
		}
		if j, ok := seen[u.ID]; ok {
			return invalid(at(i, "id"), fmt.Sprintf("%q is listed at %d too; list each id once with its count", u.ID, j))
		}
		seen[u.ID] = i
		if u.Count < 1 || u.Count > MaxUseCount {
			return invalid(at(i, "count"), fmt.Sprintf("%d is outside 1..%d", u.Count, MaxUseCount))
		}
	}
	return nil
}

// checkRecall validates q and answers it with the limit defaulted and capped.
func checkRecall(q RecallQuery) (RecallQuery, error) {
	if err := checkRealm(q.Realm); err != nil {
		return q, err
	}
	if err := checkScopes(q.Scopes); err != nil {
		return q, err
	}
	switch {
	case q.Limit < 0:
		return q, invalid("limit", fmt.Sprintf("%d is negative", q.Limit))
	case q.Limit == 0:
		q.Limit = DefaultRecallLimit
	case q.Limit > MaxBatch:
		q.Limit = MaxBatch
	}
	if err := ValidateTagFilter("tags", q.Tags); err != nil {
		return q, err
	}
	if err := ValidateTagFilter("exclude_tags", q.ExcludeTags); err != nil {
		return q, err
	}
	if err := ValidateWindow(q.Since, q.Until); err != nil {
		return q, err
	}
	if err := checkRecallVector(q); err != nil {
		return q, err
	}
	if q.Neighbours < 0 || q.Neighbours > MaxNeighbours {
		return q, invalid("neighbours", fmt.Sprintf("%d is outside 0..%d", q.Neighbours, MaxNeighbours))
	}
	return q, checkIDs("exclude_ids", q.ExcludeIDs)
}

// ValidateWindow checks a recall's time filters: each a time a record can
// carry, and since before until when both are set. Like ValidateTagFilter
// the host calls it on every surface, the server adapter for every plugin.
func ValidateWindow(since, until time.Time) error {
	if err := CheckTime("since", since); err != nil {
		return err
	}
	if err := CheckTime("until", until); err != nil {
		return err
	}
	if !since.IsZero() && !until.IsZero() && !since.Before(until) {
		return invalid("until", fmt.Sprintf("%s is not after since %s", until.UTC().Format(time.RFC3339Nano), since.UTC().Format(time.RFC3339Nano)))
	}
	return nil
}

// ValidateTagFilter checks a recall filter's tags (field names the list,
// "tags" or "exclude_tags") by the rules of a record's tags, so a filter
// reaches a store only in a shape a stored tag can have: a NUL byte or
// invalid UTF-8 is refused here, not by the database. The host calls it
// on every surface, the server adapter again for every plugin.
func ValidateTagFilter(field string, tags []string) error {
	// A filter is a question, not a payload: every refusal is invalid
	// (400), an over-long one too.
	if len(tags) > MaxBatch {
		return invalid(field, fmt.Sprintf("%d tags, the limit is %d", len(tags), MaxBatch))
	}
	for i, t := range tags {
		elem := fmt.Sprintf("%s[%d]", field, i)
		if len(t) > MaxTagBytes {
			return invalid(elem, fmt.Sprintf("is %d bytes, the limit is %d", len(t), MaxTagBytes))
		}
		if err := checkTag(elem, t); err != nil {
			return err
		}
	}
	return nil
}

// SameTag reports whether two tags are one: stores match tags
// case-insensitively, and the host sends every tag in NFC, so café typed
// composed or as e and a combining accent is one tag too.
func SameTag(a, b string) bool {
	return strings.EqualFold(norm.NFC.String(a), norm.NFC.String(b))
}

// checkTag is the rule of one tag, stored or filtered on.
func checkTag(field, t string) error {
	if err := checkText(field, t, MaxTagBytes); err != nil {
		return err
	}
	if strings.TrimSpace(t) == "" || strings.ContainsAny(t, "\n\r\t,") {
		return invalid(field, fmt.Sprintf("tag %q must be non-blank and hold no comma, tab or line break", t))
	}
	return nil
}

func checkManifest(q ManifestQuery) error {
	if err := checkRealm(q.Realm); err != nil {
		return err
	}
	if err := checkScopes(q.Scopes); err != nil {
		return err
	}
	if q.Tier != TierWorkingSet && q.Tier != TierFull {
		return invalid("tier", "must be the working set or full")
	}
	if q.K < 0 {
		return invalid("k", fmt.Sprintf("%d is negative", q.K))
	}
	return nil
}

// checkWrite validates the batch shape; each record's content is the
// store's to check (Record.Prepare), as it fills the store-owned fields.
func checkWrite(realm string, records []Record) error {
	if err := checkRealm(realm); err != nil {
		return err
	}
	if len(records) > MaxBatch {
		return tooLarge("records", fmt.Sprintf("%d records in one call, the limit is %d", len(records), MaxBatch))
	}
	for i := range records {
		if err := records[i].Validate(); err != nil {
			return prefixField(fmt.Sprintf("records[%d]", i), err)
		}
	}
	return nil
}

// checkReindex validates a reindex request's realm; empty means every realm.
func checkReindex(realm string) error {
	if realm == "" {
		return nil
	}
	return checkRealm(realm)
}

// checkExport validates an export page request and answers its limit.
func checkExport(realm, after string, limit int) (int, error) {
	if err := checkRealm(realm); err != nil {
		return 0, err
	}
	if after != "" {
		if err := ValidateID(after); err != nil {
			return 0, invalid("after", problemOf(err))
		}
	}
	switch {
	case limit < 0:
		return 0, invalid("limit", fmt.Sprintf("%d is negative", limit))
	case limit == 0, limit > MaxExportPage:
		return MaxExportPage, nil
	}
	return limit, nil
}

func checkImport(realm string, records []Record) error {
	if err := checkRealm(realm); err != nil {
		return err
	}
	if len(records) > MaxBatch {
		return tooLarge("records", fmt.Sprintf("%d records in one call, the limit is %d", len(records), MaxBatch))
	}
	for i := range records {
		if err := records[i].PrepareImport(realm); err != nil {
			return prefixField(fmt.Sprintf("records[%d]", i), err)
		}
	}
	return nil
}

func checkLedger(entries []LedgerEntry) error {
	if len(entries) > MaxBatch {
		return tooLarge("entries", fmt.Sprintf("%d entries in one call, the limit is %d", len(entries), MaxBatch))
	}
	for i, e := range entries {
		if err := e.Validate(); err != nil {
			return prefixField(fmt.Sprintf("entries[%d]", i), err)
		}
	}
	return nil
}

// Ledger field limits: a surface names where an injection went ("turn",
// "build"), a session is the host's session key.
const (
	MaxLedgerSurfaceBytes = 64
	MaxLedgerSessionBytes = 256
)

// Validate checks a ledger entry: its identity and record id, a surface
// that is not blank, surface and session as plain text within their
// limits, and bytes not negative. The SDK's server applies it to every
// WriteLedger; a store that takes entries in-process applies it itself.
func (e LedgerEntry) Validate() error {
	if err := (Identity{Realm: e.Realm, ID: e.Identity}).Validate(); err != nil {
		return err
	}
	if err := ValidateID(e.RecordID); err != nil {
		return invalid("record_id", problemOf(err))
	}
	if strings.TrimSpace(e.Surface) == "" {
		return invalid("surface", "is empty")
	}
	if err := checkText("surface", e.Surface, MaxLedgerSurfaceBytes); err != nil {
		return err
	}
	if err := checkText("session", e.Session, MaxLedgerSessionBytes); err != nil {
		return err
	}
	if e.Bytes < 0 {
		return invalid("bytes", fmt.Sprintf("is %d, must not be negative", e.Bytes))
	}
	return nil
}

// problemOf is a FieldError's problem without its field, for re-homing it.
func problemOf(err error) string {
	if fe, ok := err.(*FieldError); ok {
		return fe.Problem
	}
	return err.Error()
}

// prefixField re-homes a FieldError under a request path ("records[2]").
func prefixField(prefix string, err error) error {
	if err == nil {
		return nil
	}
	if fe, ok := err.(*FieldError); ok {
		return &FieldError{Field: prefix + "." + fe.Field, Problem: fe.Problem, Err: fe.Err}
	}
	return fmt.Errorf("%s: %w", prefix, err)
}

// checkCompact refuses what no compactor can summarise, so every
// compactor sees only requests with messages that name their role.
func checkCompact(req CompactRequest) error {
	if len(req.Evicted) == 0 {
		return invalid("evicted", "lists no messages")
	}
	if req.MaxBytes < 0 {
		return invalid("max_bytes", fmt.Sprintf("%d is negative", req.MaxBytes))
	}
	for i, m := range req.Evicted {
		if strings.TrimSpace(m.Role) == "" {
			return invalid(fmt.Sprintf("evicted[%d].role", i), "must not be empty")
		}
	}
	return nil
}
