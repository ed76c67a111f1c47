package markdown

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/memhost/memhost/sdk"
)

// A record file is front matter between two "---" lines, then the body:
//
//	---
//	id: "r0194f3c2a1b07e3c5d2a9f1e"
//	scope: "identity:alice"
//	kind: "preference"
//	title: "Prefers tabs"
//	tags: ["style", "go"]
//	trust: "agent_observed"
//	status: "active"
//	created: "2026-01-02T03:04:05.123Z"
//	updated: "2026-01-02T03:04:05.123Z"
//	content_hash: "…"
//	---
//	The body, as markdown.
//
// Every front-matter line is `key: <JSON value>`: a JSON string, a JSON
// list of strings (tags) or a JSON integer (use_count). JSON rather than
// YAML because it has one spelling per value (no "no" meaning false, no
// implicit types), a strict decoder in the standard library, and still
// reads naturally by hand. Blank lines are ignored; unknown or repeated
// keys are errors. The body is everything after the closing line, minus
// the single newline that ends the file.

const delimiter = "---"

// Front-matter keys, in the order they are written.
const (
	keyID          = "id"
	keyScope       = "scope"
	keyKind        = "kind"
	keyTitle       = "title"
	keyDescription = "description"
	keyTags        = "tags"
	keyTrust       = "trust"
	keyStatus      = "status"
	keySupersedes  = "supersedes"
	keyCreated     = "created"
	keyUpdated     = "updated"
	keyExpires     = "expires"
	keyContentHash = "content_hash"
	keyUseCount    = "use_count"
	keyLastUsed    = "last_used"
	keyThread      = "thread"     // the thread's id
	keyThreadSeq   = "thread_seq" // the record's place in it
	keyOccurred    = "occurred"   // when the remembered thing happened
)

// timeLayout writes UTC with as many fraction digits as needed; parsing
// accepts any RFC 3339 time and converts it to UTC.
const timeLayout = time.RFC3339Nano

// renderRecord writes r as a record file. Empty optional fields are left
// out so hand-written and generated files look alike. r must be valid
// (see sdk.Record.Validate): its times must lie in years 1-9999.
func renderRecord(r *sdk.Record) []byte {
	b := make([]byte, 0, len(r.Body)+len(r.Title)+len(r.Description)+320)
	b = append(b, delimiter+"\n"...)
	str := func(key, v string) {
		if v != "" {
			b = append(b, key+": "...)
			b = appendJSONString(b, v)
			b = append(b, '\n')
		}
	}
	tm := func(key string, t time.Time) {
		if !t.IsZero() {
			str(key, t.UTC().Format(timeLayout))
		}
	}
	str(keyID, r.ID)
	str(keyScope, string(r.Scope))
	str(keyKind, string(r.Kind))
	str(keyTitle, r.Title)
	str(keyDescription, r.Description)
	if len(r.Tags) > 0 {
		b = append(b, keyTags+": ["...)
		for i, t := range r.Tags {
			if i > 0 {
				b = append(b, ", "...)
			}
			b = appendJSONString(b, t)
		}
		b = append(b, "]\n"...)
	}
	str(keyTrust, string(r.Trust))
	str(keyStatus, string(r.Status))
	str(keySupersedes, r.Supersedes)
	tm(keyCreated, r.CreatedAt)
	tm(keyUpdated, r.UpdatedAt)
	tm(keyExpires, r.ExpiresAt)
	str(keyContentHash, r.ContentHash)
	if r.UseCount != 0 {
		b = append(b, keyUseCount+": "...)
		b = strconv.AppendInt(b, r.UseCount, 10)
		b = append(b, '\n')
	}
	tm(keyLastUsed, r.LastUsedAt)
	if r.Thread != nil {
		str(keyThread, r.Thread.ID)
		b = append(b, keyThreadSeq+": "...)
		b = strconv.AppendInt(b, r.Thread.Seq, 10)
		b = append(b, '\n')
	}
	tm(keyOccurred, r.OccurredAt)
	b = append(b, delimiter+"\n"...)
	b = append(b, r.Body...)
	return append(b, '\n')
}

// appendJSONString appends s as a JSON string. Unlike encoding/json it
// leaves <, > and & alone (the file is read by people, not browsers); it
// escapes control characters and the Unicode line separators, so a value
// never spans two lines in any editor.
func appendJSONString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\':
				b = append(b, '\\', c)
			case c == '\n':
				b = append(b, `\n`...)
			case c == '\r':
				b = append(b, `\r`...)
			case c == '\t':
				b = append(b, `\t`...)
			case c < 0x20 || c == 0x7f:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			default:
				b = append(b, c)
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b = append(b, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			b = append(b, `\u202`...)
			b = append(b, hex[r&0xf])
		default:
			b = append(b, s[i:i+size]...)
		}
		i += size
	}
	return append(b, '"')
}

// parseRecord reads a record file strictly. It checks syntax and value
// types only; the caller validates the record's content (sdk.Record
// .Validate) and reconciles it with the file's place on disk. Realm is
// never in the file: the directory names it.
func parseRecord(data []byte) (sdk.Record, error) {
	var r sdk.Record
	data = bytes.TrimPrefix(data, []byte("\ufeff")) // editors on Windows add a BOM
	line, rest, ok := nextLine(data)
	if !ok || !isDelimiter(line) {
		return r, errors.New("line 1: the file must start with a \"---\" line opening the front matter")
	}
	crlf := bytes.HasSuffix(line, []byte("\r"))
	seen := make(map[string]bool, 16)
	for n := 2; ; n++ {
		if len(rest) == 0 {
			return r, fmt.Errorf("line %d: no closing \"---\" line after the front matter", n)
		}
		line, rest, _ = nextLine(rest)
		if isDelimiter(line) {
			break
		}
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		if err := parseField(&r, line, seen); err != nil {
			return r, fmt.Errorf("line %d: %w", n, err)
		}
	}
	if seen[keyThreadSeq] && !seen[keyThread] {
		return r, fmt.Errorf("%s without %s: a place needs its thread", keyThreadSeq, keyThread)
	}
	// The body is the rest verbatim, minus the newline that ends the file;
	// in a file whose opening line ends in CRLF, which memhost never
	// writes, a tool converted the line ends, and they are read back as
	// written (so a re-import of a backup is no conflict).
	if crlf {
		rest = bytes.ReplaceAll(rest, []byte("\r\n"), []byte("\n"))
	}
	rest = bytes.TrimSuffix(rest, []byte("\n"))
	r.Body = string(rest)
	return r, nil
}

// nextLine splits off the first line (without its "\n"); ok is false
// when data is empty.
func nextLine(data []byte) (line, rest []byte, ok bool) {
	if len(data) == 0 {
		return nil, nil, false
	}
	if i := bytes.IndexByte(data, '\n'); i >= 0 {
		return data[:i], data[i+1:], true
	}
	return data, nil, true
}

func isDelimiter(line []byte) bool {
	return string(bytes.TrimSuffix(line, []byte("\r"))) == delimiter
}

func parseField(r *sdk.Record, line []byte, seen map[string]bool) error {
	if !utf8.Valid(line) {
		return errors.New("not valid UTF-8")
	}
	k, v, ok := bytes.Cut(line, []byte(":"))
	key := string(k)
	if !ok || !isKey(key) {
		return fmt.Errorf("want `key: <JSON value>`, got %.60q", line)
	}
	if seen[key] {
		return fmt.Errorf("%s: appears twice", key)
	}
	seen[key] = true
	v = bytes.TrimSpace(v)
	if len(v) == 0 {
		return fmt.Errorf("%s: no value", key)
	}
	var err error
	switch key {
	case keyID:
		r.ID, err = jsonString(v)
	case keyScope:
		var s string
		s, err = jsonString(v)
		r.Scope = sdk.Scope(s)
	case keyKind:
		var s string
		s, err = jsonString(v)
		r.Kind = sdk.RecordKind(s)
	case keyTitle:
		r.Title, err = jsonString(v)
	case keyDescription:
		r.Description, err = jsonString(v)
	case keyTags:
		r.Tags, err = jsonStrings(v)
	case keyTrust:
		var s string
		s, err = jsonString(v)
		r.Trust = sdk.Trust(s)
	case keyStatus:
		var s string
		s, err = jsonString(v)
		r.Status = sdk.Status(s)
	case keySupersedes:
		r.Supersedes, err = jsonString(v)
	case keyCreated:
		r.CreatedAt, err = jsonTime(v)
	case keyUpdated:
		r.UpdatedAt, err = jsonTime(v)
	case keyExpires:
		r.ExpiresAt, err = jsonTime(v)
	case keyContentHash:
		r.ContentHash, err = jsonString(v)
	case keyUseCount:
		r.UseCount, err = jsonCount(v)
	case keyLastUsed:
		r.LastUsedAt, err = jsonTime(v)
	case keyThread:
		if r.Thread == nil {
			r.Thread = &sdk.Thread{}
		}
		r.Thread.ID, err = jsonString(v)
	case keyThreadSeq:
		if r.Thread == nil {
			r.Thread = &sdk.Thread{}
		}
		r.Thread.Seq, err = jsonCount(v)
	case keyOccurred:
		r.OccurredAt, err = jsonTime(v)
	default:
		return fmt.Errorf("unknown key %q (known: id, scope, kind, title, description, tags, trust, status, supersedes, created, updated, expires, content_hash, use_count, last_used, thread, thread_seq, occurred)", key)
	}
	if err != nil {
		return fmt.Errorf("%s: %w", key, err)
	}
	return nil
}

// isKey accepts a bare lower-case key: no indentation, no spaces, so a
// YAML-style nested block is an error rather than a misread.
func isKey(k string) bool {
	if k == "" {
		return false
	}
	for i := 0; i < len(k); i++ {
		if c := k[i]; !(c >= 'a' && c <= 'z' || c == '_') {
			return false
		}
	}
	return true
}

func jsonString(v []byte) (string, error) {
	if v[0] != '"' {
		return "", fmt.Errorf("want a JSON string in double quotes, got %.40s", v)
	}
	// Fast path: nothing escaped, which is nearly every value.
	if len(v) >= 2 && v[len(v)-1] == '"' && plainJSON(v[1:len(v)-1]) {
		return string(v[1 : len(v)-1]), nil
	}
	var s string
	if err := json.Unmarshal(v, &s); err != nil {
		return "", fmt.Errorf("bad JSON string: %v", err)
	}
	return s, nil
}

// plainJSON reports whether b can stand inside JSON quotes unchanged.
func plainJSON(b []byte) bool {
	for _, c := range b {
		if c == '"' || c == '\\' || c < 0x20 {
			return false
		}
	}
	return true
}

func jsonStrings(v []byte) ([]string, error) {
	if v[0] != '[' {
		return nil, fmt.Errorf(`want a JSON list of strings like ["a", "b"], got %.40s`, v)
	}
	var raw []json.RawMessage
	if err := json.Unmarshal(v, &raw); err != nil {
		return nil, fmt.Errorf(`want a JSON list of strings like ["a", "b"]: %v`, err)
	}
	if len(raw) == 0 {
		return nil, nil
	}
	out := make([]string, len(raw))
	for i, e := range raw {
		s, err := jsonString(e)
		if err != nil {
			return nil, fmt.Errorf("item %d: %w", i, err)
		}
		out[i] = s
	}
	return out, nil
}

func jsonTime(v []byte) (time.Time, error) {
	s, err := jsonString(v)
	if err != nil {
		return time.Time{}, err
	}
	t, err := time.Parse(timeLayout, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("want an RFC 3339 time like \"2026-01-02T15:04:05Z\", got %q", s)
	}
	return t.UTC(), nil
}

func jsonCount(v []byte) (int64, error) {
	if v[0] < '0' || v[0] > '9' {
		return 0, fmt.Errorf("want a whole number, got %.40s", v)
	}
	var n int64
	if err := json.Unmarshal(v, &n); err != nil {
		return 0, fmt.Errorf("want a whole number: %v", err)
	}
	return n, nil
}
