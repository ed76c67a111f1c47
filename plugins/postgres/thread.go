package postgres

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"

	"github.com/jackc/pgx/v5"
	sdkindex "github.com/memhost/memhost/sdk/index"
)

// Thread context, as sdk/index gives it to the sqlite provider: an active
// record with a thread {id, seq} is indexed with one more field holding
// the own terms (tags, title, description, body) of the active records of
// its realm and scope at seq±1…ContextSpan of the same thread id (another
// scope's records under that id are no neighbours), each term weighted
// ContextWeight up to ContextTermCap occurrences, and at most
// ContextLengthCap of those terms count in its length. A place holding
// more than MaxPlaceDocs records lets only the MaxPlaceDocs least ids
// (byte order) give and get context. So a record's postings change when
// a neighbour comes or goes, and every write path that adds or removes an
// active threaded record re-indexes the records beside it (applyIndex).
//
// Writers on different hosts must see each other's neighbours, so a
// transaction that changes a thread takes a transaction advisory lock per
// (realm, thread) before any other lock, in key order, and reads the
// neighbours after it (read committed: each statement sees what committed
// before it).

// place is a position in a thread of one scope.
type place struct {
	scope  string
	thread string
	seq    int64
}

// errRelock asks inTx to retry a transaction that locked threads read
// before its row locks, when a record's thread changed in between (its id
// was forgotten and written again elsewhere).
var errRelock = errors.New("postgres: a record's thread changed while locking")

// threadLockKey is the advisory lock key of a realm's thread: the 64-bit
// key space, apart from the migration lock's two 32-bit keys.
func threadLockKey(realm, thread string) int64 {
	h := fnv.New64a()
	h.Write([]byte("memhost-thread\x00"))
	h.Write([]byte(realm))
	h.Write([]byte{0})
	h.Write([]byte(thread))
	return int64(h.Sum64())
}

// lockThreads takes the thread locks of realm's threads, in key order.
func lockThreads(ctx context.Context, tx pgx.Tx, realm string, threads []string) error {
	keys := make([]int64, 0, len(threads))
	for _, t := range threads {
		keys = append(keys, threadLockKey(realm, t))
	}
	slices.Sort(keys)
	for _, k := range slices.Compact(keys) {
		if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", k); err != nil {
			return fmt.Errorf("lock thread: %w", err)
		}
	}
	return nil
}

// threadsOf answers the threads of realm's active records named by ids,
// read without locks (to lock them before the rows).
func threadsOf(ctx context.Context, tx pgx.Tx, realm string, ids []string) ([]string, error) {
	rows, err := tx.Query(ctx, `SELECT DISTINCT thread_id FROM records
		WHERE realm = $1 AND id = ANY($2) AND status = 'active' AND thread_id IS NOT NULL`, realm, ids)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}

// threadRow is an active threaded record as context needs it.
type threadRow struct {
	seq   int64
	id    string
	at    place
	scope string
	exp   int64
	ntok  int64
	own   fieldTerms
	fresh *indexed // set when this transaction stored the record
}

// applyIndex indexes add (active records this transaction stored, not
// yet indexed) and keeps thread context current: around the places of
// the threaded ones among them and around left (places an active record
// left in this transaction), the records whose context changed are
// re-indexed. It must run after the thread locks and the row changes.
func applyIndex(ctx context.Context, tx pgx.Tx, realm string, add []indexed, left []place) error {
	changed := slices.Clone(left)
	fresh := map[int64]*indexed{}
	joining := map[place]int{}
	for i := range add {
		if a := &add[i]; a.thread != nil {
			changed = append(changed, *a.thread)
			fresh[a.seq] = a
			joining[*a.thread]++
		}
	}
	if len(changed) == 0 {
		return index(ctx, tx, realm, add)
	}
	// At a changed place, the participants and one past them for each
	// record joining it (a newcomer with a lesser id pushes one out of
	// taking part).
	settled := func(k place) int { return sdkindex.MaxPlaceDocs + max(1, joining[k]) }
	byPlace, err := readPlaces(ctx, tx, realm, changed, settled, fresh)
	if err != nil {
		return err
	}
	// The records whose context may have changed: at a changed place, the
	// settled ones; beside it, the participants.
	var affected []*threadRow
	seen := map[int64]bool{}
	note := func(rs []*threadRow) {
		for _, r := range rs {
			if !seen[r.seq] {
				seen[r.seq] = true
				affected = append(affected, r)
			}
		}
	}
	for _, k := range changed {
		at := byPlace[k]
		note(at[:min(len(at), settled(k))])
		for _, s := range sdkindex.Neighbours(k.seq) {
			note(participants(byPlace[place{k.scope, k.thread, s}]))
		}
	}
	var stale []int64
	var staleTokens int64
	var ntokSeqs []int64
	var ntoks []int32
	final := make([]indexed, 0, len(add)+len(affected))
	for _, a := range add {
		if a.thread == nil || !seen[a.seq] {
			final = append(final, a) // its own terms only
		}
	}
	for _, r := range affected {
		doc := buildDoc(r.own, threadContext(byPlace, r))
		if r.fresh == nil {
			stale = append(stale, r.seq)
			staleTokens += r.ntok
		}
		if int64(doc.ntok) != r.ntok {
			ntokSeqs, ntoks = append(ntokSeqs, r.seq), append(ntoks, int32(doc.ntok))
		}
		final = append(final, indexed{seq: r.seq, scope: r.scope, exp: r.exp, doc: &doc, thread: &r.at})
	}
	if err := unindex(ctx, tx, realm, stale, staleTokens); err != nil {
		return err
	}
	if err := index(ctx, tx, realm, final); err != nil {
		return err
	}
	return setLengths(ctx, tx, ntokSeqs, ntoks)
}

// readPlaces reads the active records at and within 2·ContextSpan of the
// changed places (the context of a record beside a change reaches that
// far), each place's records sorted by id: only the first that applyIndex
// looks at (settled ones at a changed place, the participants elsewhere),
// so a write beside a place crowded by a flood reads a few rows, not the
// flood. Records of fresh take their own terms from what was prepared.
func readPlaces(ctx context.Context, tx pgx.Tx, realm string, changed []place, settled func(place) int, fresh map[int64]*indexed) (map[place][]*threadRow, error) {
	want := map[place]bool{}
	for _, k := range changed {
		// Neighbours of neighbours, not seq±2·ContextSpan: a seq near
		// either end of int64 must not wrap around.
		want[k] = true
		for _, n := range sdkindex.Neighbours(k.seq) {
			want[place{k.scope, k.thread, n}] = true
			for _, s := range sdkindex.Neighbours(n) {
				want[place{k.scope, k.thread, s}] = true
			}
		}
	}
	isChanged := make(map[place]bool, len(changed))
	for _, k := range changed {
		isChanged[k] = true
	}
	scopes := make([]string, 0, len(want))
	threads, seqs := make([]string, 0, len(want)), make([]int64, 0, len(want))
	first := make([]int32, 0, len(want))
	for k := range want {
		scopes, threads, seqs = append(scopes, k.scope), append(threads, k.thread), append(seqs, k.seq)
		n := sdkindex.MaxPlaceDocs
		if isChanged[k] {
			n = settled(k)
		}
		first = append(first, int32(n))
	}
	rows, err := tx.Query(ctx, `SELECT `+threadedColumns+fromFirstAtPlaces, realm, scopes, threads, seqs, first)
	if err != nil {
		return nil, fmt.Errorf("read thread neighbours: %w", err)
	}
	out, _, err := scanThreaded(rows, fresh)
	if err != nil {
		return nil, fmt.Errorf("read thread neighbours: %w", err)
	}
	return out, nil
}

// threadedColumns are the columns of records (as r) scanThreaded reads,
// in order.
const threadedColumns = "r.seq, r.id, r.thread_id, r.thread_seq, r.scope, r.expires_ms, r.ntok, r.tags, r.title, r.description, r.body"

// scanThreaded reads rows of threadedColumns, closing them, and answers
// them by place, each place's sorted by id, and all of them. A record of
// fresh takes its own terms from what was prepared.
func scanThreaded(rows pgx.Rows, fresh map[int64]*indexed) (map[place][]*threadRow, []*threadRow, error) {
	defer rows.Close()
	byPlace := map[place][]*threadRow{}
	var all []*threadRow
	for rows.Next() {
		r := &threadRow{}
		var tags []string
		var title, description, body string
		if err := rows.Scan(&r.seq, &r.id, &r.at.thread, &r.at.seq, &r.scope, &r.exp, &r.ntok, &tags, &title, &description, &body); err != nil {
			return nil, nil, err
		}
		r.at.scope = r.scope
		if f := fresh[r.seq]; f != nil {
			r.fresh, r.own = f, f.own
		} else {
			r.own = recordTerms(tags, title, description, body)
		}
		byPlace[r.at] = append(byPlace[r.at], r)
		all = append(all, r)
	}
	if err := rows.Err(); err != nil {
		return nil, nil, err
	}
	for _, rs := range byPlace {
		slices.SortFunc(rs, func(a, b *threadRow) int { return cmp.Compare(a.id, b.id) })
	}
	return byPlace, all, nil
}

// participants answers the records of one place that take part in
// context: the MaxPlaceDocs least ids.
func participants(at []*threadRow) []*threadRow {
	return at[:min(len(at), sdkindex.MaxPlaceDocs)]
}

// threadContext answers r's context terms: the own terms of the
// participants beside its place, in place order; none when r does not
// take part at its own place.
func threadContext(byPlace map[place][]*threadRow, r *threadRow) []string {
	if !slices.Contains(participants(byPlace[r.at]), r) {
		return nil
	}
	var out []string
	for _, s := range sdkindex.Neighbours(r.at.seq) {
		for _, n := range participants(byPlace[place{r.at.scope, r.at.thread, s}]) {
			for _, terms := range n.own {
				out = append(out, terms...)
			}
		}
	}
	return out
}

// indexThread indexes every active record of one thread with its context,
// replacing their postings when indexed says they are in the index
// already; it answers how many records it indexed.
func indexThread(ctx context.Context, tx pgx.Tx, realm, thread string, inIndex bool) (int, error) {
	rows, err := tx.Query(ctx, `SELECT `+threadedColumns+`
		FROM records AS r WHERE r.realm = $1 AND r.status = 'active' AND r.thread_id = $2`, realm, thread)
	if err != nil {
		return 0, fmt.Errorf("read thread: %w", err)
	}
	byPlace, all, err := scanThreaded(rows, nil)
	if err != nil {
		return 0, fmt.Errorf("read thread: %w", err)
	}
	return len(all), reindexRows(ctx, tx, realm, all, byPlace, inIndex)
}

// reindexRows indexes rows (with their context from byPlace, or none when
// byPlace is nil), first removing their postings when indexed, and
// stores their new lengths.
func reindexRows(ctx context.Context, tx pgx.Tx, realm string, rows []*threadRow, byPlace map[place][]*threadRow, inIndex bool) error {
	var stale []int64
	var staleTokens int64
	var ntokSeqs []int64
	var ntoks []int32
	add := make([]indexed, 0, len(rows))
	for _, r := range rows {
		var context []string
		if byPlace != nil {
			context = threadContext(byPlace, r)
		}
		doc := buildDoc(r.own, context)
		stale = append(stale, r.seq)
		staleTokens += r.ntok
		if int64(doc.ntok) != r.ntok {
			ntokSeqs, ntoks = append(ntokSeqs, r.seq), append(ntoks, int32(doc.ntok))
		}
		add = append(add, indexed{seq: r.seq, scope: r.scope, exp: r.exp, doc: &doc})
	}
	if inIndex {
		if err := unindex(ctx, tx, realm, stale, staleTokens); err != nil {
			return err
		}
	}
	if err := index(ctx, tx, realm, add); err != nil {
		return err
	}
	return setLengths(ctx, tx, ntokSeqs, ntoks)
}

// setLengths stores records' indexed lengths (BM25's dl, which unindex
// reads back).
func setLengths(ctx context.Context, tx pgx.Tx, seqs []int64, ntoks []int32) error {
	if len(seqs) == 0 {
		return nil
	}
	if _, err := tx.Exec(ctx, `UPDATE records AS r SET ntok = u.n
		FROM unnest($1::bigint[], $2::integer[]) AS u(seq, n) WHERE r.seq = u.seq`, seqs, ntoks); err != nil {
		return fmt.Errorf("record lengths: %w", err)
	}
	return nil
}
