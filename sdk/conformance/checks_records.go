package conformance

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/memhost/memhost/sdk"
)

// fullRecord answers a record that sets every field a caller may set,
// with text that trips naive storage: non-ASCII, markup, quotes, and a
// line that looks like markdown front matter.
func (e *env) fullRecord(scope sdk.Scope) (sdk.Record, string) {
	w := e.word()
	return sdk.Record{
		Scope:       scope,
		Kind:        sdk.KindPreference,
		Title:       "Prefers tabs: " + w + " \"quoted\" café",
		Description: "Indentation preference — " + w + " 日本語",
		Body: "Uses tabs for Go code (" + w + ").\n\n---\ntitle: not front matter\nstatus: tombstoned\n---\n\n" +
			"<memo a=\"1\">&amp; 日本語のメモ</memo> kept by the " + commonWord + " kit.",
		Tags:       []string{"editor", "Go-Style", "naïve"},
		Trust:      sdk.TrustAgentVerified,
		ExpiresAt:  time.Now().Add(30 * 24 * time.Hour).UTC().Truncate(time.Millisecond),
		Thread:     &sdk.Thread{ID: "conversation " + w, Seq: 42},
		OccurredAt: time.Date(2024, 2, 29, 23, 59, 58, 123_000_000, time.UTC),
	}, w
}

// diffRecord lists how got differs from the fields want's caller set.
func diffRecord(want, got sdk.Record) []string {
	var d []string
	field := func(name string, w, g any) {
		if w != g {
			d = append(d, fmt.Sprintf("%s: wrote %q, read %q", name, w, g))
		}
	}
	field("scope", want.Scope, got.Scope)
	field("kind", want.Kind, got.Kind)
	field("title", want.Title, got.Title)
	field("description", want.Description, got.Description)
	field("body", want.Body, got.Body)
	trust := want.Trust
	if trust == "" {
		trust = sdk.TrustAgentObserved
	}
	field("trust", trust, got.Trust)
	status := want.Status
	if status == "" {
		status = sdk.StatusActive
	}
	field("status", status, got.Status)
	field("supersedes", want.Supersedes, got.Supersedes)
	if !sameSet(want.Tags, got.Tags) {
		d = append(d, fmt.Sprintf("tags: wrote %q, read %q", want.Tags, got.Tags))
	}
	switch w, g := want.Thread, got.Thread; {
	case w == nil && g != nil:
		d = append(d, fmt.Sprintf("thread: wrote none, read %+v", *g))
	case w != nil && (g == nil || *w != *g):
		d = append(d, fmt.Sprintf("thread: wrote %+v, read %+v", *w, g))
	}
	if !want.OccurredAt.Equal(got.OccurredAt) {
		d = append(d, fmt.Sprintf("occurred_at: wrote %v, read %v", want.OccurredAt, got.OccurredAt))
	}
	if !want.ExpiresAt.Equal(got.ExpiresAt) {
		d = append(d, fmt.Sprintf("expires_at: wrote %v, read %v", want.ExpiresAt, got.ExpiresAt))
	}
	if h := sdk.ContentHash(want.Title, want.Body); got.ContentHash != h {
		d = append(d, fmt.Sprintf("content_hash: read %q, want sdk.ContentHash(title, body) = %q", got.ContentHash, h))
	}
	if got.CreatedAt.IsZero() || got.UpdatedAt.IsZero() || got.UpdatedAt.Before(got.CreatedAt) {
		d = append(d, fmt.Sprintf("created_at %v / updated_at %v: both must be set, updated not before created", got.CreatedAt, got.UpdatedAt))
	}
	return d
}

// checkRoundTrip: every field survives Remember then Get; Get answers
// found records only, in the order asked; an explicit id is kept and the
// store fills realm, trust, status, times and hash.
func checkRoundTrip(ctx context.Context, e *env) error {
	full, _ := e.fullRecord(scopeAlice)
	plain, _ := e.record(scopeBob)
	explicit, _ := e.record(sdk.RealmScope)
	explicit.ID = "conformance-explicit-1"
	explicit.Kind = sdk.KindProcedure
	in := []sdk.Record{full, plain, explicit}
	ids, err := e.remember(ctx, realmA, in...)
	if err != nil {
		return err
	}
	var p problems
	if ids[2] != explicit.ID {
		p.addf("a record written with id %q was stored as %q; a caller-chosen id must be kept (import relies on it)", explicit.ID, ids[2])
	}
	if ids[0] == ids[1] || ids[0] == ids[2] || ids[1] == ids[2] {
		p.addf("three different records got ids %v", ids)
	}
	ask := []string{ids[2], "conformance-never-stored", ids[0], ids[1]}
	got, err := e.p.Get(ctx, realmA, ask)
	if err != nil {
		return fmt.Errorf("Get(%v): %w", ask, err)
	}
	if want := []string{ids[2], ids[0], ids[1]}; !slices.Equal(recordIDs(got), want) {
		return fmt.Errorf("Get(%v) answered ids %v, want %v (found ones only, in the order asked)", ask, recordIDs(got), want)
	}
	for i, r := range []sdk.Record{got[1], got[2], got[0]} {
		if r.Realm != realmA {
			p.addf("record %s: realm %q, want %q", r.ID, r.Realm, realmA)
		}
		for _, d := range diffRecord(in[i], r) {
			p.addf("record %s after Get: %s", r.ID, d)
		}
	}
	if recs, err := e.p.Get(ctx, realmA, nil); err != nil || len(recs) != 0 {
		p.addf("Get with no ids answered %d records, %v; want none and no error", len(recs), err)
	}
	return p.err()
}

// checkRecallRoundTrip: a recalled record carries every field as written.
func checkRecallRoundTrip(ctx context.Context, e *env) error {
	full, w := e.fullRecord(scopeAlice)
	ids, err := e.remember(ctx, realmA, full)
	if err != nil {
		return err
	}
	hits, err := e.recall(ctx, sdk.RecallQuery{Realm: realmA, Query: w, Limit: listLimit})
	if err != nil {
		return err
	}
	i := slices.IndexFunc(hits, func(h sdk.Hit) bool { return h.Record.ID == ids[0] })
	if i < 0 {
		return fmt.Errorf("Recall(%q) did not answer record %s, whose title and body hold the word", w, ids[0])
	}
	var p problems
	for _, d := range diffRecord(full, hits[i].Record) {
		p.addf("record %s after Recall: %s", ids[0], d)
	}
	return p.err()
}

// checkIdempotentWrite: the same title and body in the same realm and
// scope answer the existing id, also inside one batch; elsewhere they are
// a new record.
func checkIdempotentWrite(ctx context.Context, e *env) error {
	r, w := e.record(scopeAlice)
	ids, err := e.remember(ctx, realmA, r)
	if err != nil {
		return err
	}
	first := ids[0]
	var p problems
	retry := r
	retry.Description = "the same record written again with other metadata"
	retry.Tags = []string{"retry"}
	if ids, err := e.remember(ctx, realmA, retry); err != nil {
		return err
	} else if ids[0] != first {
		p.addf("writing the same title and body to the same scope again answered id %s, want the existing %s", ids[0], first)
	}
	other := r
	other.Scope = scopeBob
	if ids, err := e.remember(ctx, realmA, other); err != nil {
		return err
	} else if ids[0] == first {
		p.addf("the same content in another scope answered the existing id %s, want a new record", first)
	}
	if _, err := e.remember(ctx, realmB, r); err != nil {
		return fmt.Errorf("the same content in another realm: %w", err)
	}
	twin, tw := e.record(scopeAlice)
	if ids, err := e.remember(ctx, realmA, twin, twin); err != nil {
		return err
	} else if ids[0] != ids[1] {
		p.addf("one batch holding the same record twice answered ids %v, want one id twice", ids)
	}
	fresh, _ := e.record(scopeAlice)
	if ids, err := e.remember(ctx, realmA, r, fresh); err != nil {
		return err
	} else if ids[0] != first || ids[1] == first {
		p.addf("a batch of an existing and a new record answered %v, want [%s, <new id>]", ids, first)
	}
	for _, word := range []string{w, tw} {
		got, err := e.recallIDs(ctx, realmA, word, scopeAlice)
		if err != nil {
			return err
		}
		if len(got) != 1 {
			p.addf("Recall(%q) in scope %s answered %d records, want the one stored copy", word, scopeAlice, len(got))
		}
	}
	return p.err()
}

// checkBatchAllOrNothing: one bad record in a batch stores none of it.
func checkBatchAllOrNothing(ctx context.Context, e *env) error {
	var p problems
	for _, tc := range []struct {
		what     string
		badAt    int
		bad      func(*sdk.Record)
		sentinel error
	}{
		{"a title over the limit last", 2, func(r *sdk.Record) { r.Title = fill(r.Title, sdk.MaxTitleBytes+1) }, sdk.ErrTooLarge},
		{"an unknown kind in the middle", 1, func(r *sdk.Record) { r.Kind = "opinion" }, sdk.ErrInvalid},
		{"a bad scope first", 0, func(r *sdk.Record) { r.Scope = "team:x" }, sdk.ErrInvalid},
	} {
		batch := make([]sdk.Record, 3)
		words := make([]string, 3)
		for i := range batch {
			batch[i], words[i] = e.record(scopeAlice)
		}
		tc.bad(&batch[tc.badAt])
		_, err := e.p.Remember(ctx, realmA, batch)
		p.add(wantErr("Remember of a batch with "+tc.what, err, tc.sentinel))
		for i, w := range words {
			if i == tc.badAt {
				continue
			}
			if ok, err := e.stored(ctx, realmA, w); err != nil {
				return err
			} else if ok {
				p.addf("a batch with %s was refused, yet its good record %d was stored", tc.what, i)
			}
		}
		good := slices.Delete(slices.Clone(batch), tc.badAt, tc.badAt+1)
		if _, err := e.remember(ctx, realmA, good...); err != nil {
			p.addf("the good records of the refused batch alone: %v", err)
		}
	}
	return p.err()
}

// checkRecordLimits: records exactly at every limit are stored whole;
// one byte (or one tag, or one record) over is refused with
// sdk.ErrTooLarge and stores nothing.
func checkRecordLimits(ctx context.Context, e *env) error {
	var p problems
	atLimit, w := e.record(scopeAlice)
	atLimit.Title = fill("Note "+w, sdk.MaxTitleBytes)
	atLimit.Description = fill("Description "+w, sdk.MaxDescriptionBytes)
	atLimit.Body = fill("The "+w+" "+commonWord+" body", sdk.MaxBodyBytes)
	for i := range sdk.MaxTags {
		atLimit.Tags = append(atLimit.Tags, fmt.Sprintf("t%02d", i)+strings.Repeat("x", sdk.MaxTagBytes-3))
	}
	ids, err := e.p.Remember(ctx, realmA, []sdk.Record{atLimit})
	if err != nil {
		p.addf("a record exactly at every limit (title %d B, description %d B, body %d B, %d tags of %d B) was refused: %v",
			sdk.MaxTitleBytes, sdk.MaxDescriptionBytes, sdk.MaxBodyBytes, sdk.MaxTags, sdk.MaxTagBytes, err)
	} else if e.has(sdk.CapFetch) && len(ids) == 1 {
		got, found, err := e.getOne(ctx, realmA, ids[0])
		switch {
		case err != nil:
			p.add(err)
		case !found:
			p.addf("the record at every limit was acknowledged as %s but Get does not find it", ids[0])
		default:
			for _, d := range diffRecord(atLimit, got) {
				p.addf("the record at every limit: %s", shorten(d))
			}
		}
	}
	for _, tc := range []struct {
		what string
		bad  func(*sdk.Record)
	}{
		{"a title of 201 bytes", func(r *sdk.Record) { r.Title = fill(r.Title, sdk.MaxTitleBytes+1) }},
		{"a description of 401 bytes", func(r *sdk.Record) { r.Description = fill("d", sdk.MaxDescriptionBytes+1) }},
		{"a body of 64 KiB + 1", func(r *sdk.Record) { r.Body = fill(r.Body, sdk.MaxBodyBytes+1) }},
		{"33 tags", func(r *sdk.Record) {
			for i := range sdk.MaxTags + 1 {
				r.Tags = append(r.Tags, fmt.Sprintf("tag%d", i))
			}
		}},
		{"a tag of 65 bytes", func(r *sdk.Record) { r.Tags = []string{strings.Repeat("x", sdk.MaxTagBytes+1)} }},
	} {
		rec, w := e.record(scopeAlice)
		tc.bad(&rec)
		_, err := e.p.Remember(ctx, realmA, []sdk.Record{rec})
		p.add(wantErr("Remember of a record with "+tc.what, err, sdk.ErrTooLarge))
		if ok, err := e.stored(ctx, realmA, w); err != nil {
			return err
		} else if ok {
			p.addf("the refused record with %s was stored", tc.what)
		}
	}
	batch := make([]sdk.Record, sdk.MaxBatch+1)
	var first, last string
	for i := range batch {
		var w string
		batch[i], w = e.record(scopeAlice)
		if i == 0 {
			first = w
		}
		last = w
	}
	_, err = e.p.Remember(ctx, realmA, batch)
	p.add(wantErr(fmt.Sprintf("Remember of %d records (the batch limit is %d)", len(batch), sdk.MaxBatch), err, sdk.ErrTooLarge))
	for _, w := range []string{first, last} {
		if ok, err := e.stored(ctx, realmA, w); err != nil {
			return err
		} else if ok {
			p.addf("a refused batch over the limit stored a record")
			break
		}
	}
	return p.err()
}

// checkLargeMessages: a batch and a recall answer bigger than gRPC's
// default 4 MiB message limit go through whole.
func checkLargeMessages(ctx context.Context, e *env) error {
	const n = 100 // 100 bodies of 64 KiB: 6.4 MiB each way
	recs := make([]sdk.Record, n)
	shared := e.word()
	for i := range recs {
		var w string
		recs[i], w = e.record(scopeAlice)
		recs[i].Body = fill("The "+w+" "+shared+" body", sdk.MaxBodyBytes)
	}
	ids, err := e.remember(ctx, realmA, recs...)
	if err != nil {
		return fmt.Errorf("a batch of %d records with %d-byte bodies: %w", n, sdk.MaxBodyBytes, err)
	}
	var p problems
	hits, err := e.recall(ctx, sdk.RecallQuery{Realm: realmA, Query: shared, Limit: n})
	if err != nil {
		p.addf("a recall answering %d records with %d-byte bodies: %v", n, sdk.MaxBodyBytes, err)
	} else if len(hits) != n {
		p.addf("Recall(%q, limit %d) answered %d hits, want all %d records holding the word", shared, n, len(hits), n)
	} else if m := missing(ids, hitIDs(hits)); len(m) > 0 {
		p.addf("Recall(%q, limit %d) lacks %v", shared, n, m)
	}
	if e.has(sdk.CapFetch) {
		got, err := e.p.Get(ctx, realmA, ids)
		if err != nil {
			p.addf("a Get answering %d records with %d-byte bodies: %v", n, sdk.MaxBodyBytes, err)
		} else if len(got) != n {
			p.addf("Get of %d ids answered %d records", n, len(got))
		}
	}
	return p.err()
}

// shorten keeps a diff of huge fields readable.
func shorten(s string) string {
	if len(s) > 300 {
		return s[:300] + "…"
	}
	return s
}

// checkBadRecords: every malformed record is refused with sdk.ErrInvalid
// and stores nothing; an unsafe id never reaches storage.
func checkBadRecords(ctx context.Context, e *env) error {
	var p problems
	for _, tc := range []struct {
		what  string
		realm string
		bad   func(*sdk.Record)
	}{
		{"an id that escapes a directory", realmA, func(r *sdk.Record) { r.ID = "../../etc/passwd" }},
		{"an id starting with '.'", realmA, func(r *sdk.Record) { r.ID = ".hidden" }},
		{"an id with a slash", realmA, func(r *sdk.Record) { r.ID = "a/b" }},
		{"an unknown kind", realmA, func(r *sdk.Record) { r.Kind = "opinion" }},
		{"no kind", realmA, func(r *sdk.Record) { r.Kind = "" }},
		{"an unknown scope class", realmA, func(r *sdk.Record) { r.Scope = "team:x" }},
		{"a scope name that escapes a directory", realmA, func(r *sdk.Record) { r.Scope = "identity:../../x" }},
		{"no scope", realmA, func(r *sdk.Record) { r.Scope = "" }},
		{"an empty title and body", realmA, func(r *sdk.Record) { r.Title, r.Body = " ", "\n" }},
		{"a title that is not UTF-8", realmA, func(r *sdk.Record) { r.Title += " \xff\xfe" }},
		{"a body that is not UTF-8", realmA, func(r *sdk.Record) { r.Body += " \xc3\x28" }},
		{"a NUL byte in the body", realmA, func(r *sdk.Record) { r.Body += " \x00" }},
		// A NUL and text that is not UTF-8 in every other text field: a
		// database refuses them with an error of its own (PostgreSQL's
		// text holds no NUL), so they must be refused before it.
		{"a NUL byte in the title", realmA, func(r *sdk.Record) { r.Title += " \x00" }},
		{"a NUL byte in the description", realmA, func(r *sdk.Record) { r.Description = "about \x00 it" }},
		{"a NUL byte in a tag", realmA, func(r *sdk.Record) { r.Tags = []string{"ok", "b\x00d"} }},
		{"a NUL byte in the thread id", realmA, func(r *sdk.Record) { r.Thread = &sdk.Thread{ID: "t\x00", Seq: 1} }},
		{"a description that is not UTF-8", realmA, func(r *sdk.Record) { r.Description = "about \xff it" }},
		{"a tag that is not UTF-8", realmA, func(r *sdk.Record) { r.Tags = []string{"b\xc3d"} }},
		{"a thread id that is not UTF-8", realmA, func(r *sdk.Record) { r.Thread = &sdk.Thread{ID: "t\xfe", Seq: 1} }},
		{"a body holding a UTF-16 surrogate (a lone half of a pair, encoded)", realmA, func(r *sdk.Record) { r.Body += " \xed\xa0\x80" }},
		{"a tag with a comma", realmA, func(r *sdk.Record) { r.Tags = []string{"a,b"} }},
		{"a blank tag", realmA, func(r *sdk.Record) { r.Tags = []string{"  "} }},
		{"an unknown trust", realmA, func(r *sdk.Record) { r.Trust = "root" }},
		{"an unknown status", realmA, func(r *sdk.Record) { r.Status = "deleted" }},
		{"a supersedes id that escapes a directory", realmA, func(r *sdk.Record) { r.Supersedes = "../x" }},
		{"an occurred_at past the year 9999", realmA, func(r *sdk.Record) { r.OccurredAt = time.Date(10000, 1, 2, 0, 0, 0, 0, time.UTC) }},
		{"a realm other than the call's", realmA, func(r *sdk.Record) { r.Realm = realmB }},
		{"a realm that escapes a directory", "../escape", func(*sdk.Record) {}},
	} {
		rec, w := e.record(scopeAlice)
		tc.bad(&rec)
		_, err := e.p.Remember(ctx, tc.realm, []sdk.Record{rec})
		p.add(wantErr("Remember of a record with "+tc.what, err, sdk.ErrInvalid))
		for _, realm := range []string{realmA, realmB} {
			if ok, err := e.stored(ctx, realm, w); err != nil {
				return err
			} else if ok {
				p.addf("the refused record with %s was stored in realm %s", tc.what, realm)
			}
		}
	}
	return p.err()
}

// checkRealmStatistics: a realm's recall scores depend on its own records
// only. A flood of records holding the query's words into another realm
// moves none of them; if it did, one tenant's writes would reorder
// another's memory, and a tenant could read another's term counts from
// its own scores.
func checkRealmStatistics(ctx context.Context, e *env) error {
	a, aw := e.record(scopeAlice)
	b, _ := e.record(scopeAlice)
	if _, err := e.remember(ctx, realmA, a, b); err != nil {
		return err
	}
	query := aw + " " + commonWord
	q := sdk.RecallQuery{Realm: realmA, Query: query, Limit: listLimit}
	before, err := e.recall(ctx, q)
	if err != nil {
		return err
	}
	if len(before) != 2 {
		return fmt.Errorf("Recall(%q) in realm %s answered %d hits, want both records", query, realmA, len(before))
	}
	var flood []sdk.Record
	for range 30 {
		r, _ := e.record(scopeAlice)
		r.Body += " " + aw + " " + aw
		flood = append(flood, r)
	}
	if _, err := e.remember(ctx, realmB, flood...); err != nil {
		return err
	}
	after, err := e.recall(ctx, q)
	if err != nil {
		return err
	}
	if len(after) != len(before) {
		return fmt.Errorf("Recall(%q) in realm %s answered %d hits after writes to realm %s, %d before", query, realmA, len(after), realmB, len(before))
	}
	for i := range before {
		// 1e-9: a store summing in another order may differ in the last
		// bits; another realm's statistics move a score far more.
		if after[i].Record.ID != before[i].Record.ID || math.Abs(after[i].Score-before[i].Score) > 1e-9*math.Abs(before[i].Score) {
			return fmt.Errorf("Recall(%q) in realm %s: hit %d was %s scoring %v, after 30 records holding its words were written to realm %s it is %s scoring %v; a realm must be ranked by its own records' statistics",
				query, realmA, i, before[i].Record.ID, before[i].Score, realmB, after[i].Record.ID, after[i].Score)
		}
	}
	return nil
}

// checkRealmIsolation: nothing written to one realm is ever read,
// listed, forgotten or superseded through another, even when both hold
// the same content.
func checkRealmIsolation(ctx context.Context, e *env) error {
	shared, _ := e.record(scopeAlice)
	idsA, err := e.remember(ctx, realmA, shared)
	if err != nil {
		return err
	}
	idsB, err := e.remember(ctx, realmB, shared)
	if err != nil {
		return err
	}
	only, ow := e.record(scopeAlice)
	idsOnly, err := e.remember(ctx, realmA, only)
	if err != nil {
		return err
	}
	sharedA, sharedB, onlyA := idsA[0], idsB[0], idsOnly[0]
	var p problems
	if got, err := e.recallIDs(ctx, realmB, ow); err != nil {
		return err
	} else if len(got) > 0 {
		p.addf("Recall(%q) in realm %s answered %v; the word is only in realm %s", ow, realmB, got, realmA)
	}
	got, err := e.recallIDs(ctx, realmB, commonWord)
	if err != nil {
		return err
	}
	if !sameSet(got, []string{sharedB}) {
		p.addf("Recall(%q) in realm %s answered %v, want only its own record %s", commonWord, realmB, got, sharedB)
	}
	if got, err := e.recallIDs(ctx, realmA, commonWord); err != nil {
		return err
	} else if !sameSet(got, []string{sharedA, onlyA}) {
		p.addf("Recall(%q) in realm %s answered %v, want %v", commonWord, realmA, got, []string{sharedA, onlyA})
	}
	if e.has(sdk.CapFetch) {
		if _, found, err := e.getOne(ctx, realmB, onlyA); err != nil {
			return err
		} else if found {
			p.addf("Get(%s) in realm %s found a record of realm %s", onlyA, realmB, realmA)
		}
	}
	if e.has(sdk.CapManifest) {
		rows, err := e.fullManifest(ctx, realmB)
		if err != nil {
			return err
		}
		if !sameSet(rowIDs(rows), []string{sharedB}) {
			p.addf("the full manifest of realm %s lists %v, want only %s", realmB, rowIDs(rows), sharedB)
		}
	}
	if e.has(sdk.CapSupersede) {
		repl, rw := e.record(scopeAlice)
		_, err := e.p.Supersede(ctx, realmB, onlyA, repl)
		p.add(wantErr(fmt.Sprintf("Supersede(%s) in realm %s, where it does not exist", onlyA, realmB), err, sdk.ErrNotFound))
		if ok, err := e.stored(ctx, realmB, rw); err != nil {
			return err
		} else if ok {
			p.addf("a refused Supersede in realm %s stored its replacement", realmB)
		}
	}
	if e.has(sdk.CapForget) {
		if n, err := e.p.Forget(ctx, realmB, []string{onlyA}); err != nil {
			p.addf("Forget(%s) in realm %s: %v", onlyA, realmB, err)
		} else if n != 0 {
			p.addf("Forget(%s) in realm %s removed %d records; the id is in realm %s", onlyA, realmB, n, realmA)
		}
		if n, err := e.p.Forget(ctx, realmB, []string{sharedB}); err != nil || n != 1 {
			p.addf("Forget(%s) in realm %s: removed %d, %v; want 1", sharedB, realmB, n, err)
		}
	}
	// Whatever happened in realm B, realm A is intact.
	if got, err := e.recallIDs(ctx, realmA, commonWord); err != nil {
		return err
	} else if !sameSet(got, []string{sharedA, onlyA}) {
		p.addf("after calls in realm %s, Recall(%q) in realm %s answered %v, want %v", realmB, commonWord, realmA, got, []string{sharedA, onlyA})
	}
	return p.err()
}

// checkScopeIsolation: recall and manifests answer exactly the records of
// the asked scopes, and of every scope when none is asked.
func checkScopeIsolation(ctx context.Context, e *env) error {
	scopes := []sdk.Scope{scopeAlice, scopeBob, scopeTeam, sdk.OperatorScope("ops"), sdk.RealmScope}
	var recs []sdk.Record
	for _, s := range scopes {
		r, _ := e.record(s)
		recs = append(recs, r)
	}
	ids, err := e.remember(ctx, realmA, recs...)
	if err != nil {
		return err
	}
	idOf := map[sdk.Scope]string{}
	for i, s := range scopes {
		idOf[s] = ids[i]
	}
	var p problems
	for _, ask := range [][]sdk.Scope{
		{scopeAlice}, {scopeAlice, scopeTeam}, {sdk.RealmScope}, {sdk.OperatorScope("ops"), scopeBob},
		{sdk.IdentityScope("carol")}, nil,
	} {
		var want []string
		for _, s := range scopes {
			if len(ask) == 0 || slices.Contains(ask, s) {
				want = append(want, idOf[s])
			}
		}
		got, err := e.recallIDs(ctx, realmA, commonWord, ask...)
		if err != nil {
			return err
		}
		if !sameSet(got, want) {
			p.addf("Recall(%q) in scopes %v answered %v, want %v", commonWord, ask, got, want)
		}
		if e.has(sdk.CapManifest) {
			rows, err := e.fullManifest(ctx, realmA, ask...)
			if err != nil {
				return err
			}
			if !sameSet(rowIDs(rows), want) {
				p.addf("the full manifest of scopes %v lists %v, want %v", ask, rowIDs(rows), want)
			}
		}
	}
	return p.err()
}

// checkSupersede: the replacement is recalled and the old record is not;
// Get still answers the old one, marked superseded; a missing id is
// sdk.ErrNotFound and a bad replacement changes nothing.
func checkSupersede(ctx context.Context, e *env) error {
	old, ow := e.record(scopeAlice)
	ids, err := e.remember(ctx, realmA, old)
	if err != nil {
		return err
	}
	oldID := ids[0]
	repl, rw := e.record(scopeAlice)
	newID, err := e.p.Supersede(ctx, realmA, oldID, repl)
	if err != nil {
		return fmt.Errorf("Supersede(%s): %w", oldID, err)
	}
	var p problems
	if err := sdk.ValidateID(newID); err != nil || newID == oldID {
		p.addf("Supersede(%s) answered id %q, want a new safe id", oldID, newID)
	}
	if got, err := e.recallIDs(ctx, realmA, ow); err != nil {
		return err
	} else if slices.Contains(got, oldID) {
		p.addf("the superseded record %s is still recalled", oldID)
	}
	if got, err := e.recallIDs(ctx, realmA, rw); err != nil {
		return err
	} else if !slices.Contains(got, newID) {
		p.addf("the replacement %s is not recalled by its word %q", newID, rw)
	}
	if e.has(sdk.CapFetch) {
		if r, found, err := e.getOne(ctx, realmA, oldID); err != nil {
			return err
		} else if !found || r.Status != sdk.StatusSuperseded {
			p.addf("Get(%s) after Supersede: found %v, status %q; want the record, status %q", oldID, found, r.Status, sdk.StatusSuperseded)
		}
		if r, found, err := e.getOne(ctx, realmA, newID); err != nil {
			return err
		} else if !found || r.Status != sdk.StatusActive || r.Supersedes != oldID || r.Title != repl.Title {
			p.addf("Get(%s) after Supersede: found %v, status %q, supersedes %q, title %q; want active, supersedes %s, title %q",
				newID, found, r.Status, r.Supersedes, r.Title, oldID, repl.Title)
		}
	}
	if e.has(sdk.CapManifest) {
		rows, err := e.fullManifest(ctx, realmA)
		if err != nil {
			return err
		}
		if got := rowIDs(rows); slices.Contains(got, oldID) || !slices.Contains(got, newID) {
			p.addf("the full manifest after Supersede lists %v, want %s and not %s", got, newID, oldID)
		}
	}
	missingRepl, mw := e.record(scopeAlice)
	_, err = e.p.Supersede(ctx, realmA, "conformance-never-stored", missingRepl)
	p.add(wantErr("Supersede of an id never stored", err, sdk.ErrNotFound))
	if ok, err := e.stored(ctx, realmA, mw); err != nil {
		return err
	} else if ok {
		p.addf("Supersede of an id never stored stored its replacement")
	}
	keep, kw := e.record(scopeAlice)
	ids, err = e.remember(ctx, realmA, keep)
	if err != nil {
		return err
	}
	bad, _ := e.record(scopeAlice)
	bad.Title = fill(bad.Title, sdk.MaxTitleBytes+1)
	_, err = e.p.Supersede(ctx, realmA, ids[0], bad)
	p.add(wantErr("Supersede with a replacement whose title is too large", err, sdk.ErrTooLarge))
	if got, err := e.recallIDs(ctx, realmA, kw); err != nil {
		return err
	} else if !slices.Contains(got, ids[0]) {
		p.addf("a refused Supersede left record %s no longer recalled", ids[0])
	}
	return p.err()
}

// checkExpiry: a record whose expiry has passed is stored (an import may
// carry one) but never recalled or listed; an unexpired one is.
func checkExpiry(ctx context.Context, e *env) error {
	past, pw := e.record(scopeAlice)
	past.ExpiresAt = time.Now().Add(-time.Hour).UTC().Truncate(time.Millisecond)
	future, fw := e.record(scopeAlice)
	future.ExpiresAt = time.Now().Add(24 * time.Hour).UTC().Truncate(time.Millisecond)
	// soon expires while stored: a provider that decides expiry when it
	// writes a record (an indexed flag, say) keeps recalling it for ever.
	soon, sw := e.record(scopeAlice)
	soon.ExpiresAt = time.Now().Add(time.Second).UTC().Truncate(time.Millisecond)
	ids, err := e.remember(ctx, realmA, past, future, soon)
	if err != nil {
		return fmt.Errorf("a record whose expiry has passed must be accepted and simply never recalled: %w", err)
	}
	var p problems
	select {
	case <-time.After(time.Until(soon.ExpiresAt) + 10*time.Millisecond):
	case <-ctx.Done():
		return ctx.Err()
	}
	if got, err := e.recallIDs(ctx, realmA, sw); err != nil {
		return err
	} else if slices.Contains(got, ids[2]) {
		p.addf("the record %s, which expired while stored, is recalled", ids[2])
	}
	if got, err := e.recallIDs(ctx, realmA, pw); err != nil {
		return err
	} else if slices.Contains(got, ids[0]) {
		p.addf("the expired record %s is recalled", ids[0])
	}
	if got, err := e.recallIDs(ctx, realmA, fw); err != nil {
		return err
	} else if !slices.Contains(got, ids[1]) {
		p.addf("the unexpired record %s is not recalled", ids[1])
	}
	if e.has(sdk.CapManifest) {
		for _, q := range []sdk.ManifestQuery{{Realm: realmA, Tier: sdk.TierFull}, {Realm: realmA, Tier: sdk.TierWorkingSet, K: 10}} {
			rows, err := e.p.Manifest(ctx, q)
			if err != nil {
				return fmt.Errorf("Manifest(tier %d): %w", q.Tier, err)
			}
			if got := rowIDs(rows); slices.Contains(got, ids[0]) || slices.Contains(got, ids[2]) || !slices.Contains(got, ids[1]) {
				p.addf("manifest tier %d lists %v, want %s and not the expired %s and %s", q.Tier, got, ids[1], ids[0], ids[2])
			}
		}
	}
	return p.err()
}

// checkRewriteOfDeadContent: content written again after its record
// expired, or after its record was superseded, is recallable under the
// id the write answers: the expired record revived with the new expiry
// (as memhost's providers do) or a new record. A provider that answered
// the dead holder stored nothing recallable while the writer was told it
// was remembered.
func checkRewriteOfDeadContent(ctx context.Context, e *env) error {
	var p problems
	expired, xw := e.record(scopeAlice)
	expired.ExpiresAt = time.Now().Add(-time.Hour).UTC().Truncate(time.Millisecond)
	ids, err := e.remember(ctx, realmA, expired)
	if err != nil {
		return err
	}
	again := expired
	again.ExpiresAt = time.Time{}
	got, err := e.remember(ctx, realmA, again)
	if err != nil {
		return err
	}
	if hits, err := e.recallIDs(ctx, realmA, xw); err != nil {
		return err
	} else if !slices.Contains(hits, got[0]) {
		p.addf("the content of expired record %s written again without an expiry (answered %s) is not recalled (recall answered %v)", ids[0], got[0], hits)
	}
	if e.has(sdk.CapFetch) {
		if r, found, err := e.getOne(ctx, realmA, got[0]); err != nil {
			return err
		} else if !found || !r.ExpiresAt.IsZero() || r.Status != sdk.StatusActive {
			p.addf("Get(%s), the answer to the content of expired record %s written again: found %v, status %q, expires %v; want active, no expiry", got[0], ids[0], found, r.Status, r.ExpiresAt)
		}
	}
	if e.has(sdk.CapSupersede) {
		old, ow := e.record(scopeAlice)
		ids, err := e.remember(ctx, realmA, old)
		if err != nil {
			return err
		}
		repl, _ := e.record(scopeAlice)
		if _, err := e.p.Supersede(ctx, realmA, ids[0], repl); err != nil {
			return fmt.Errorf("Supersede(%s): %w", ids[0], err)
		}
		got, err := e.remember(ctx, realmA, old)
		if err != nil {
			return err
		}
		if got[0] == ids[0] {
			p.addf("the content of superseded record %s written again answered the superseded record, want a new active one", ids[0])
		}
		if hits, err := e.recallIDs(ctx, realmA, ow); err != nil {
			return err
		} else if !slices.Contains(hits, got[0]) {
			p.addf("the content of superseded record %s written again (answered %s) is not recalled (recall answered %v)", ids[0], got[0], hits)
		}
	}
	return p.err()
}

// checkRecallFilters: limit, the default limit, excluded ids, required
// tags (all, case-folded) and excluded tags (any).
func checkRecallFilters(ctx context.Context, e *env) error {
	const n = 12
	recs := make([]sdk.Record, n)
	for i := range recs {
		recs[i], _ = e.record(scopeAlice)
		recs[i].Tags = []string{"plain"}
	}
	recs[0].Tags = []string{"red", "round"}
	recs[1].Tags = []string{"Red"}
	recs[2].Tags = []string{"round"}
	// Three happened in 2020, one before the Unix epoch; the rest are
	// judged by their creation, now.
	mar, jun, sep := time.Date(2020, 3, 1, 0, 0, 0, 0, time.UTC), time.Date(2020, 6, 1, 0, 0, 0, 0, time.UTC), time.Date(2020, 9, 1, 0, 0, 0, 0, time.UTC)
	recs[0].OccurredAt, recs[1].OccurredAt, recs[2].OccurredAt = mar, jun, sep
	recs[3].OccurredAt = time.Date(1969, 7, 20, 20, 17, 0, 0, time.UTC)
	// The epoch is a real end, though 0 means an open one on the wire.
	epoch := time.Unix(0, 0).UTC()
	y2021 := time.Date(2021, 1, 1, 0, 0, 0, 0, time.UTC)
	ids, err := e.remember(ctx, realmA, recs...)
	if err != nil {
		return err
	}
	var p problems
	q := func(mod func(*sdk.RecallQuery)) sdk.RecallQuery {
		q := sdk.RecallQuery{Realm: realmA, Query: commonWord, Limit: listLimit}
		mod(&q)
		return q
	}
	for _, tc := range []struct {
		what  string
		query sdk.RecallQuery
		want  []string // nil: only the count matters
		count int
	}{
		{"limit 2", q(func(q *sdk.RecallQuery) { q.Limit = 2 }), nil, 2},
		{"no limit (the default is 10)", q(func(q *sdk.RecallQuery) { q.Limit = 0 }), nil, sdk.DefaultRecallLimit},
		{"two excluded ids", q(func(q *sdk.RecallQuery) { q.ExcludeIDs = ids[:2] }), ids[2:], 0},
		{"tag red", q(func(q *sdk.RecallQuery) { q.Tags = []string{"red"} }), ids[:2], 0},
		{"tag RED (tags compare case-folded)", q(func(q *sdk.RecallQuery) { q.Tags = []string{"RED"} }), ids[:2], 0},
		{"tags red and round", q(func(q *sdk.RecallQuery) { q.Tags = []string{"red", "round"} }), ids[:1], 0},
		{"excluded tag red", q(func(q *sdk.RecallQuery) { q.ExcludeTags = []string{"red"} }), ids[2:], 0},
		{"excluded tags red or round", q(func(q *sdk.RecallQuery) { q.ExcludeTags = []string{"round", "red"} }), ids[3:], 0},
		{"tag round without red", q(func(q *sdk.RecallQuery) { q.Tags, q.ExcludeTags = []string{"round"}, []string{"red"} }), ids[2:3], 0},
		{"an unknown tag", q(func(q *sdk.RecallQuery) { q.Tags = []string{"absent"} }), []string{}, 0},
		{"until 2021 (occurred_at)", q(func(q *sdk.RecallQuery) { q.Until = y2021 }), ids[:4], 0},
		{"since 2021 (created_at when occurred_at is unset)", q(func(q *sdk.RecallQuery) { q.Since = y2021 }), ids[4:], 0},
		{"until the Unix epoch", q(func(q *sdk.RecallQuery) { q.Until = epoch }), ids[3:4], 0},
		{"since the Unix epoch until 2021", q(func(q *sdk.RecallQuery) { q.Since, q.Until = epoch, y2021 }), ids[:3], 0},
		{"since June until September 2020 (since inclusive, until exclusive)", q(func(q *sdk.RecallQuery) { q.Since, q.Until = jun, sep }), ids[1:2], 0},
		{"since one millisecond after June 2020", q(func(q *sdk.RecallQuery) { q.Since, q.Until = jun.Add(time.Millisecond), y2021 }), ids[2:3], 0},
		{"tag red until April 2020", q(func(q *sdk.RecallQuery) { q.Tags, q.Until = []string{"red"}, mar.AddDate(0, 1, 0) }), ids[:1], 0},
		{"since 1999 until 2000", q(func(q *sdk.RecallQuery) { q.Since, q.Until = y2021.AddDate(-22, 0, 0), y2021.AddDate(-21, 0, 0) }), []string{}, 0},
	} {
		hits, err := e.recall(ctx, tc.query)
		if err != nil {
			p.addf("%s: %v", tc.what, err)
			continue
		}
		got := hitIDs(hits)
		if tc.want != nil && !sameSet(got, tc.want) {
			p.addf("Recall(%q) with %s answered %v, want %v", commonWord, tc.what, got, tc.want)
		}
		if tc.want == nil && len(got) != tc.count {
			p.addf("Recall(%q) with %s answered %d hits, want %d (%d records match)", commonWord, tc.what, len(got), tc.count, n)
		}
	}
	return p.err()
}

// checkRelevance: the only record whose title holds a rare word is the
// top hit for it, above records holding it in their body alone; a record
// holding every query term ranks above records holding one.
func checkRelevance(ctx context.Context, e *env) error {
	var recs []sdk.Record
	for range 20 {
		r, _ := e.record(scopeAlice)
		recs = append(recs, r)
	}
	rare, x, y := e.word(), e.word(), e.word()
	titled := sdk.Record{Scope: scopeAlice, Kind: sdk.KindGotcha, Title: "The " + rare + " incident", Body: "What went wrong in production, kept by the " + commonWord + " kit."}
	var bodyOnly []sdk.Record
	for i := range 3 {
		bodyOnly = append(bodyOnly, sdk.Record{
			Scope: scopeAlice, Kind: sdk.KindFact, Title: fmt.Sprintf("Unrelated note %d", i),
			Body: "A long body about deployments, dashboards and alerts that mentions " + rare + " once, among many other words about " + commonWord + " and operations.",
		})
	}
	both := sdk.Record{Scope: scopeAlice, Kind: sdk.KindFact, Title: "Note " + x + " " + y, Body: "Both terms, " + commonWord + "."}
	onlyX := sdk.Record{Scope: scopeAlice, Kind: sdk.KindFact, Title: "Note " + x, Body: "One term, " + commonWord + "."}
	onlyY := sdk.Record{Scope: scopeAlice, Kind: sdk.KindFact, Title: "Note " + y, Body: "Other term, " + commonWord + "."}
	recs = append(recs, bodyOnly...)
	recs = append(recs, onlyX, titled, both, onlyY)
	ids, err := e.remember(ctx, realmA, recs...)
	if err != nil {
		return err
	}
	idOf := func(r sdk.Record) string {
		return ids[slices.IndexFunc(recs, func(x sdk.Record) bool { return x.Title == r.Title })]
	}
	var p problems
	for _, tc := range []struct {
		query string
		top   sdk.Record
		why   string
	}{
		{rare, titled, "the only record whose title holds it"},
		{x + " " + y, both, "the only record holding both terms"},
	} {
		hits, err := e.recall(ctx, sdk.RecallQuery{Realm: realmA, Query: tc.query, Limit: 5})
		if err != nil {
			return err
		}
		if len(hits) == 0 || hits[0].Record.ID != idOf(tc.top) {
			p.addf("Recall(%q) answered %v first, want %s (%q), %s", tc.query, titles(hits), idOf(tc.top), tc.top.Title, tc.why)
		}
	}
	return p.err()
}

// checkUnicodeRecall: words of any script are terms, matched regardless
// of case, and CJK text, written without spaces, is found by a word inside
// it.
func checkUnicodeRecall(ctx context.Context, e *env) error {
	recs := []sdk.Record{
		{Scope: scopeAlice, Kind: sdk.KindFact, Title: "Заметка о памяти", Body: "Русский текст, " + commonWord + "."},
		{Scope: scopeAlice, Kind: sdk.KindFact, Title: "東京の会議メモ", Body: "会議は火曜日 " + commonWord + "."},
		{Scope: scopeAlice, Kind: sdk.KindFact, Title: "Crème brûlée recipe", Body: "Dessert notes, " + commonWord + "."},
		{Scope: scopeAlice, Kind: sdk.KindFact, Title: "Plain English note", Body: "Nothing special, " + commonWord + "."},
	}
	ids, err := e.remember(ctx, realmA, recs...)
	if err != nil {
		return err
	}
	var p problems
	for _, tc := range []struct {
		query string
		top   int
	}{
		{"памяти", 0},
		{"ПАМЯТИ", 0},
		{"東京", 1},
		{"会議", 1},
		{"brûlée", 2},
		{"CRÈME", 2},
	} {
		hits, err := e.recall(ctx, sdk.RecallQuery{Realm: realmA, Query: tc.query, Limit: 5})
		if err != nil {
			return err
		}
		if len(hits) == 0 || hits[0].Record.ID != ids[tc.top] {
			p.addf("Recall(%q) answered %v first, want %q", tc.query, titles(hits), recs[tc.top].Title)
		}
	}
	return p.err()
}

func titles(hits []sdk.Hit) []string {
	out := make([]string, len(hits))
	for i, h := range hits {
		out[i] = h.Record.Title
	}
	return out
}

// checkManifestTiers: the full tier lists exactly the recallable rows of
// the scopes, with their metadata; working_set(k) lists at most 2k of
// them, the newest included.
func checkManifestTiers(ctx context.Context, e *env) error {
	var alice, bob []sdk.Record
	for i := range 12 {
		r, _ := e.record(scopeAlice)
		r.Description = fmt.Sprintf("row %d", i)
		r.Kind = []sdk.RecordKind{sdk.KindFact, sdk.KindGotcha, sdk.KindProcedure}[i%3]
		alice = append(alice, r)
	}
	for range 3 {
		r, _ := e.record(scopeBob)
		bob = append(bob, r)
	}
	expired, _ := e.record(scopeAlice)
	expired.ExpiresAt = time.Now().Add(-time.Hour)
	aliceIDs, err := e.remember(ctx, realmA, alice...)
	if err != nil {
		return err
	}
	bobIDs, err := e.remember(ctx, realmA, bob...)
	if err != nil {
		return err
	}
	if _, err := e.remember(ctx, realmA, expired); err != nil {
		return err
	}
	if _, err := e.remember(ctx, realmB, alice[0]); err != nil {
		return err
	}
	// Timestamps have millisecond resolution: let the newest be strictly newest.
	time.Sleep(5 * time.Millisecond)
	newest, _ := e.record(scopeAlice)
	ids, err := e.remember(ctx, realmA, newest)
	if err != nil {
		return err
	}
	newestID := ids[0]
	alice = append(alice, newest)
	aliceIDs = append(aliceIDs, newestID)
	all := append(slices.Clone(aliceIDs), bobIDs...)

	var p problems
	rows, err := e.fullManifest(ctx, realmA, scopeAlice)
	if err != nil {
		return err
	}
	if !sameSet(rowIDs(rows), aliceIDs) {
		p.addf("the full manifest of %s lists %v, want %v", scopeAlice, rowIDs(rows), aliceIDs)
	}
	for _, row := range rows {
		i := slices.Index(aliceIDs, row.ID)
		if i < 0 {
			continue
		}
		want := alice[i]
		if row.Scope != want.Scope || row.Kind != want.Kind || row.Title != want.Title || row.Description != want.Description || row.UpdatedAt.IsZero() {
			p.addf("manifest row %s is {scope %q, kind %q, title %q, description %q, updated %v}, want {%q, %q, %q, %q, set}",
				row.ID, row.Scope, row.Kind, row.Title, row.Description, row.UpdatedAt, want.Scope, want.Kind, want.Title, want.Description)
		}
	}
	for _, scopes := range [][]sdk.Scope{nil, {scopeAlice, scopeBob}} {
		rows, err := e.fullManifest(ctx, realmA, scopes...)
		if err != nil {
			return err
		}
		if !sameSet(rowIDs(rows), all) {
			p.addf("the full manifest of scopes %v lists %d rows %v, want the %d rows %v", scopes, len(rows), rowIDs(rows), len(all), all)
		}
	}
	for _, tc := range []struct {
		k      int
		scopes []sdk.Scope
		pool   []string
	}{
		{3, []sdk.Scope{scopeAlice}, aliceIDs},
		{1, []sdk.Scope{scopeAlice}, aliceIDs},
		{2, nil, all},
		{100, []sdk.Scope{scopeAlice}, aliceIDs},
	} {
		q := sdk.ManifestQuery{Realm: realmA, Scopes: tc.scopes, Tier: sdk.TierWorkingSet, K: tc.k}
		rows, err := e.p.Manifest(ctx, q)
		if err != nil {
			return fmt.Errorf("Manifest(working_set(%d), scopes %v): %w", tc.k, tc.scopes, err)
		}
		got := rowIDs(rows)
		what := fmt.Sprintf("working_set(%d) of scopes %v", tc.k, tc.scopes)
		switch {
		case len(got) > 2*tc.k:
			p.addf("%s lists %d rows, over the cap of 2k = %d", what, len(got), 2*tc.k)
		case len(missing(got, tc.pool)) > 0:
			p.addf("%s lists rows %v that are not recallable rows of those scopes", what, missing(got, tc.pool))
		case len(got) != len(uniq(got)):
			p.addf("%s lists a row twice: %v", what, got)
		case !slices.Contains(got, newestID):
			p.addf("%s lists %v without the newest row %s", what, got, newestID)
		case 2*tc.k >= len(tc.pool) && len(got) != len(tc.pool):
			p.addf("%s lists %d rows; with room for %d it must list all %d", what, len(got), 2*tc.k, len(tc.pool))
		}
	}
	return p.err()
}

func uniq(ids []string) []string {
	out := slices.Clone(ids)
	slices.Sort(out)
	return slices.Compact(out)
}

func recordIDs(recs []sdk.Record) []string {
	ids := make([]string, len(recs))
	for i, r := range recs {
		ids[i] = r.ID
	}
	return ids
}

// checkIdempotentForget: forgetting twice, or an id never stored, is not
// an error; the count says what was removed; forgotten content can be
// remembered again.
func checkIdempotentForget(ctx context.Context, e *env) error {
	a, aw := e.record(scopeAlice)
	b, bw := e.record(scopeAlice)
	keep, kw := e.record(scopeAlice)
	ids, err := e.remember(ctx, realmA, a, b, keep)
	if err != nil {
		return err
	}
	var p problems
	forget := func(want int, ask ...string) {
		n, err := e.p.Forget(ctx, realmA, ask)
		if err != nil || n != want {
			p.addf("Forget(%v) removed %d, %v; want %d and no error", ask, n, err, want)
		}
	}
	forget(1, ids[0])
	forget(0, ids[0])
	forget(0, "conformance-never-stored")
	forget(1, ids[1], "conformance-never-stored", ids[1])
	forget(0)
	for _, w := range []string{aw, bw} {
		if ok, err := e.stored(ctx, realmA, w); err != nil {
			return err
		} else if ok {
			p.addf("the forgotten record holding %q is still recalled or listed", w)
		}
	}
	if ok, err := e.stored(ctx, realmA, kw); err != nil {
		return err
	} else if !ok {
		p.addf("the record never forgotten (%s) is gone", ids[2])
	}
	if e.has(sdk.CapFetch) {
		if r, found, err := e.getOne(ctx, realmA, ids[0]); err != nil {
			return err
		} else if found && r.Status != sdk.StatusTombstoned {
			p.addf("Get(%s) after Forget answers it with status %q; want nothing, or a tombstone", ids[0], r.Status)
		}
	}
	again, err := e.remember(ctx, realmA, a)
	if err != nil {
		return fmt.Errorf("remembering forgotten content again: %w", err)
	}
	if got, err := e.recallIDs(ctx, realmA, aw); err != nil {
		return err
	} else if !slices.Contains(got, again[0]) {
		p.addf("forgotten content remembered again (as %s) is not recalled", again[0])
	}
	return p.err()
}

// checkUsage: MarkUsed counts uses and keeps the last time, per realm; an
// id listed twice in one call counts once.
func checkUsage(ctx context.Context, e *env) error {
	a, _ := e.record(scopeAlice)
	b, _ := e.record(scopeAlice)
	ids, err := e.remember(ctx, realmA, a, b)
	if err != nil {
		return err
	}
	t1 := time.Now().Add(-time.Hour).UTC().Truncate(time.Millisecond)
	t2 := t1.Add(time.Minute)
	if err := e.p.MarkUsed(ctx, realmA, []string{ids[0]}, t1); err != nil {
		return fmt.Errorf("MarkUsed: %w", err)
	}
	if err := e.p.MarkUsed(ctx, realmA, []string{ids[0], ids[0]}, t2); err != nil {
		return fmt.Errorf("MarkUsed of an id listed twice: %w", err)
	}
	if err := e.p.MarkUsed(ctx, realmB, []string{ids[0], ids[1]}, t2); err != nil {
		return fmt.Errorf("MarkUsed in a realm without those ids: %w", err)
	}
	var p problems
	if err := usageIs(ctx, e, &p, ids, []usage{{2, t2}, {0, time.Time{}}}); err != nil {
		return err
	}
	return p.err()
}

// usage is a record's use count and last use, as Get answers them.
type usage struct {
	count int64
	last  time.Time
}

// usageIs adds a problem for each record ids[i] of realmA whose usage is
// not want[i].
func usageIs(ctx context.Context, e *env, p *problems, ids []string, want []usage) error {
	for i, w := range want {
		r, found, err := e.getOne(ctx, realmA, ids[i])
		if err != nil {
			return err
		}
		if !found || r.UseCount != w.count || !r.LastUsedAt.Equal(w.last) {
			p.addf("record %s: use_count %d, last_used_at %v; want %d, %v", ids[i], r.UseCount, r.LastUsedAt, w.count, w.last)
		}
	}
	return nil
}

// checkUsageCounts: CountUses adds each use's count and keeps the latest
// time, as that many MarkUsed calls would (the same working-set rank too,
// when the provider lists manifests and marks usage); ids of another realm
// are skipped; a repeated id or a count outside 1..MaxUseCount is refused
// and changes nothing.
func checkUsageCounts(ctx context.Context, e *env) error {
	a, _ := e.record(scopeAlice)
	b, _ := e.record(scopeAlice)
	c, _ := e.record(scopeAlice)
	ids, err := e.remember(ctx, realmA, a, b, c)
	if err != nil {
		return err
	}
	t1 := time.Now().Add(-time.Hour).UTC().Truncate(time.Millisecond)
	t2 := t1.Add(time.Minute)
	var p problems
	for _, step := range []struct {
		uses []sdk.Use
		at   time.Time
	}{
		{[]sdk.Use{{ID: ids[0], Count: 3}}, t2},
		{[]sdk.Use{{ID: ids[0], Count: 2}, {ID: ids[1], Count: 1}}, t1},
	} {
		if err := e.p.CountUses(ctx, realmA, step.uses, step.at); err != nil {
			return fmt.Errorf("CountUses(%v): %w", step.uses, err)
		}
	}
	if err := e.p.CountUses(ctx, realmB, []sdk.Use{{ID: ids[0], Count: 4}}, t2); err != nil {
		p.addf("CountUses in a realm without that id: %v", err)
	}
	for what, uses := range map[string][]sdk.Use{
		"a repeated id":            {{ID: ids[2], Count: 1}, {ID: ids[2], Count: 1}},
		"a count of 0":             {{ID: ids[2], Count: 0}},
		"a count over MaxUseCount": {{ID: ids[2], Count: sdk.MaxUseCount + 1}},
	} {
		p.add(wantErr("CountUses with "+what, e.p.CountUses(ctx, realmA, uses, t2), sdk.ErrInvalid))
	}
	if err := usageIs(ctx, e, &p, ids, []usage{{5, t2}, {1, t1}, {0, time.Time{}}}); err != nil {
		return err
	}
	if e.has(sdk.CapManifest) && e.has(sdk.CapUsage) {
		p.add(checkCountedRank(ctx, e, ids[2], t1))
	}
	return p.err()
}

// checkCountedRank: a record given two uses by CountUses ranks as one
// given them by two MarkUsed calls at the same time.
func checkCountedRank(ctx context.Context, e *env, counted string, at time.Time) error {
	d, _ := e.record(scopeAlice)
	ids, err := e.remember(ctx, realmA, d)
	if err != nil {
		return err
	}
	marked := ids[0]
	for range 2 {
		if err := e.p.MarkUsed(ctx, realmA, []string{marked}, at); err != nil {
			return fmt.Errorf("MarkUsed: %w", err)
		}
	}
	if err := e.p.CountUses(ctx, realmA, []sdk.Use{{ID: counted, Count: 2}}, at); err != nil {
		return fmt.Errorf("CountUses: %w", err)
	}
	rows, err := e.p.Manifest(ctx, sdk.ManifestQuery{Realm: realmA, Tier: sdk.TierWorkingSet, K: 10})
	if err != nil {
		return fmt.Errorf("Manifest(working_set(10)): %w", err)
	}
	rank := map[string]float64{}
	for _, r := range rows {
		rank[r.ID] = r.Rank
	}
	rc, rm := rank[counted], rank[marked]
	if rm <= 0 || math.Abs(rc-rm) > 1e-9*rm {
		return fmt.Errorf("working-set rank after two uses: %g counted by CountUses, %g marked by two MarkUsed calls; want them equal", rc, rm)
	}
	return nil
}

// checkLedger: valid entries are kept, an empty call is fine.
func checkLedger(ctx context.Context, e *env) error {
	now := time.Now().UTC()
	entries := []sdk.LedgerEntry{
		{Realm: realmA, Identity: "alice", Session: "s1", RecordID: "conformance-id-1", Surface: "turn", Bytes: 120, At: now},
		{Realm: realmA, Identity: "alice", RecordID: "conformance-id-2", Surface: "build", Bytes: 64, At: now},
	}
	var p problems
	if err := e.p.WriteLedger(ctx, entries); err != nil {
		p.addf("WriteLedger of %d valid entries: %v", len(entries), err)
	}
	if err := e.p.WriteLedger(ctx, nil); err != nil {
		p.addf("WriteLedger of no entries: %v", err)
	}
	return p.err()
}
