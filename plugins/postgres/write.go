package postgres

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/memhost/memhost/sdk"
	"github.com/memhost/memhost/sdk/usage"
)

// Writers on many hosts share the tables, so every write is one
// read-committed transaction whose locks are taken in a fixed order:
// records by (scope, content hash), then terms by term text in one
// statement, then the writer's own totals slot. Two writers therefore
// wait for each other rather than deadlock in the common cases; a
// deadlock PostgreSQL still detects (batches overlapping in a different
// order) is retried whole (inTx).

const insertRecordSQL = `
INSERT INTO records (realm, id, scope, status, expires_ms, tag_keys, kind, trust, supersedes,
	created_ms, updated_ms, content_hash, ntok, title, description, tags, body, thread_id, thread_seq, seq, occurred_ms)
OVERRIDING SYSTEM VALUE
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21)
ON CONFLICT (realm, scope, content_hash) WHERE status IN ('active', 'quarantined') DO NOTHING
RETURNING seq`

// allocSeqs draws n record seqs, ascending. Records are inserted in lock
// order but numbered in the order given, so equal scores rank the later
// record first (seq DESC) as they do in the sqlite provider, whose rows
// are numbered in arrival order.
func allocSeqs(ctx context.Context, tx pgx.Tx, n int) ([]int64, error) {
	rows, err := tx.Query(ctx, `SELECT nextval(pg_get_serial_sequence('records', 'seq')) FROM generate_series(1, $1)`, n)
	if err != nil {
		return nil, err
	}
	seqs, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return nil, fmt.Errorf("number records: %w", err)
	}
	slices.Sort(seqs)
	return seqs, nil
}

// totalSlots spreads a realm's index totals over rows (see index_totals).
const totalSlots = 16

// preparedRecord is a validated record with its index form, computed
// before the transaction so locks are held for I/O only.
type preparedRecord struct {
	rec sdk.Record
	own fieldTerms
	doc indexDoc // own terms only; applyIndex adds thread context
}

func prepareRecord(realm string, r sdk.Record, now time.Time) (preparedRecord, error) {
	r.Tags = append([]string(nil), r.Tags...)
	r.UseCount, r.LastUsedAt = 0, time.Time{} // usage is the store's to count
	if err := r.Prepare(realm, now); err != nil {
		return preparedRecord{}, err
	}
	return newPrepared(r), nil
}

func newPrepared(r sdk.Record) preparedRecord {
	own := recordTerms(r.Tags, r.Title, r.Description, r.Body)
	return preparedRecord{rec: r, own: own, doc: buildDoc(own, nil)}
}

// recordThreads answers the threads of the records, to lock.
func recordThreads(prepared []preparedRecord) []string {
	var out []string
	for i := range prepared {
		if t := prepared[i].rec.Thread; t != nil {
			out = append(out, t.ID)
		}
	}
	return out
}

// remember answers the ids and the change log position it committed.
func remember(ctx context.Context, db *pgdb, realm string, records []sdk.Record, now time.Time) ([]string, int64, error) {
	if err := sdk.ValidateRealm(realm); err != nil {
		return nil, 0, fmt.Errorf("postgres: remember: %w", err)
	}
	if len(records) > sdk.MaxBatch {
		return nil, 0, fmt.Errorf("postgres: remember: %d records, the limit is %d: %w", len(records), sdk.MaxBatch, sdk.ErrTooLarge)
	}
	prepared := make([]preparedRecord, len(records))
	for i, r := range records {
		p, err := prepareRecord(realm, r, now)
		if err != nil {
			return nil, 0, fmt.Errorf("postgres: remember: records[%d]: %w", i, err)
		}
		prepared[i] = p
	}
	var ids []string
	var seq int64
	threads := recordThreads(prepared)
	err := inTx(ctx, db, func(tx pgx.Tx) (err error) {
		if err := lockThreads(ctx, tx, realm, threads); err != nil {
			return err
		}
		if ids, err = storeRecords(ctx, tx, realm, prepared, nil, now); err != nil {
			return err
		}
		// Every id, duplicates too: a duplicate may have revived an
		// expired record.
		seq, err = logChanges(ctx, tx, realm, opPut, ids)
		return err
	})
	if err != nil {
		return nil, 0, fmt.Errorf("postgres: remember: %w", err)
	}
	return ids, seq, nil
}

// indexed is a stored active record to add to the index.
type indexed struct {
	seq    int64
	scope  string
	exp    int64
	doc    *indexDoc
	own    fieldTerms
	thread *place // nil: not threaded
}

func newIndexed(seq int64, p *preparedRecord) indexed {
	r := &p.rec
	a := indexed{seq: seq, scope: string(r.Scope), exp: optionalMillis(r.ExpiresAt), doc: &p.doc, own: p.own}
	if r.Thread != nil {
		a.thread = &place{string(r.Scope), r.Thread.ID, r.Thread.Seq}
	}
	return a
}

// storeRecords inserts prepared records (or finds the live copy of their
// content) and indexes the new active ones, with the thread context
// around them and around left (see applyIndex); it answers the ids in
// order. The caller holds the records' thread locks.
func storeRecords(ctx context.Context, tx pgx.Tx, realm string, prepared []preparedRecord, left []place, now time.Time) ([]string, error) {
	order := make([]int, len(prepared))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int {
		ra, rb := &prepared[a].rec, &prepared[b].rec
		return cmp.Or(cmp.Compare(ra.Scope, rb.Scope), cmp.Compare(ra.ContentHash, rb.ContentHash))
	})
	seqs, err := allocSeqs(ctx, tx, len(prepared))
	if err != nil {
		return nil, err
	}
	batch := &pgx.Batch{}
	for _, i := range order {
		r, d := &prepared[i].rec, &prepared[i].doc
		tags := r.Tags
		if tags == nil {
			tags = []string{}
		}
		batch.Queue(insertRecordSQL, r.Realm, r.ID, string(r.Scope), string(r.Status), optionalMillis(r.ExpiresAt),
			foldTags(tags), string(r.Kind), string(r.Trust), r.Supersedes, optionalMillis(r.CreatedAt), optionalMillis(r.UpdatedAt),
			r.ContentHash, d.ntok, r.Title, r.Description, tags, r.Body, threadID(r.Thread), threadSeq(r.Thread), seqs[i],
			optionalMillis(r.OccurredAt))
	}
	ids := make([]string, len(prepared))
	var dups []int
	var add []indexed
	br := tx.SendBatch(ctx, batch)
	for _, i := range order {
		r := &prepared[i].rec
		var seq int64
		err := br.QueryRow().Scan(&seq)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			dups = append(dups, i) // the content is live in the scope already
			continue
		case sqlState(err) == codeUniqueViolation:
			br.Close()
			return nil, fmt.Errorf("records[%d]: id %q already names another record in realm %q: %w", i, r.ID, r.Realm, sdk.ErrConflict)
		case err != nil:
			br.Close()
			return nil, fmt.Errorf("records[%d]: %w", i, err)
		}
		ids[i] = r.ID
		if r.Status == sdk.StatusActive {
			add = append(add, newIndexed(seq, &prepared[i]))
		}
	}
	if err := br.Close(); err != nil {
		return nil, err
	}
	for _, i := range dups {
		id, err := answerDuplicate(ctx, tx, &prepared[i].rec, now)
		if err != nil {
			return nil, fmt.Errorf("records[%d]: %w", i, err)
		}
		ids[i] = id
	}
	if err := applyIndex(ctx, tx, realm, add, left); err != nil {
		return nil, err
	}
	return ids, nil
}

// errCopyGone: the live copy an insert found was forgotten or superseded
// (by another host, say) before this transaction read it, which read
// committed allows; the transaction runs again (inTx) and stores the
// record anew.
var errCopyGone = fmt.Errorf("the existing copy of a duplicate changed meanwhile; try again: %w", sdk.ErrConflict)

// answerDuplicate answers the id of the live record holding r's content,
// reviving it with r's expiry if it had expired.
func answerDuplicate(ctx context.Context, tx pgx.Tx, r *sdk.Record, now time.Time) (string, error) {
	var seq, expires int64
	var id string
	err := tx.QueryRow(ctx, `
		SELECT seq, id, expires_ms FROM records
		WHERE realm = $1 AND scope = $2 AND content_hash = $3 AND status IN ('active', 'quarantined')`,
		r.Realm, string(r.Scope), r.ContentHash).Scan(&seq, &id, &expires)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", errCopyGone
	}
	if err != nil {
		return "", fmt.Errorf("find the existing copy of a duplicate: %w", err)
	}
	if expires != 0 && expires <= now.UnixMilli() {
		exp := optionalMillis(r.ExpiresAt)
		if _, err := tx.Exec(ctx, "UPDATE records SET expires_ms = $1, updated_ms = $2 WHERE seq = $3", exp, now.UnixMilli(), seq); err != nil {
			return "", err
		}
		if _, err := tx.Exec(ctx, "UPDATE postings SET expires_ms = $1 WHERE seq = $2", exp, seq); err != nil {
			return "", err
		}
	}
	return id, nil
}

// index adds records to the inverted index: document frequencies, one
// posting per distinct term, and the realm's totals.
func index(ctx context.Context, tx pgx.Tx, realm string, add []indexed) error {
	if len(add) == 0 {
		return nil
	}
	df := map[string]int64{}
	var tokens int64
	for _, a := range add {
		for t := range a.doc.tf {
			df[t]++
		}
		tokens += int64(a.doc.ntok)
	}
	terms := make([]string, 0, len(df))
	for t := range df {
		terms = append(terms, t)
	}
	// Sorted, so every writer locks term rows in one order.
	slices.Sort(terms)
	counts := make([]int64, len(terms))
	for i, t := range terms {
		counts[i] = df[t]
	}
	termIDs := make(map[string]int64, len(terms))
	if len(terms) > 0 {
		rows, err := tx.Query(ctx, `
			INSERT INTO terms (realm, term, df)
			SELECT $1, u.term, u.n FROM unnest($2::text[], $3::bigint[]) AS u(term, n) ORDER BY u.term COLLATE "C"
			ON CONFLICT (realm, term) DO UPDATE SET df = terms.df + excluded.df
			RETURNING term_id, term`, realm, terms, counts)
		if err != nil {
			return fmt.Errorf("index terms: %w", err)
		}
		for rows.Next() {
			var id int64
			var t string
			if err := rows.Scan(&id, &t); err != nil {
				rows.Close()
				return err
			}
			termIDs[t] = id
		}
		if err := rows.Err(); err != nil {
			return fmt.Errorf("index terms: %w", err)
		}
	}
	type posting struct {
		term, seq int64
		tf        float32
		dl        int32
		scope     string
		exp       int64
	}
	var ps []posting
	for _, a := range add {
		for t, tf := range a.doc.tf {
			ps = append(ps, posting{termIDs[t], a.seq, float32(tf), int32(a.doc.ntok), a.scope, a.exp})
		}
	}
	// In key order, so the primary key's leaf pages are visited once each.
	slices.SortFunc(ps, func(a, b posting) int { return cmp.Or(cmp.Compare(a.term, b.term), cmp.Compare(a.seq, b.seq)) })
	if _, err := tx.CopyFrom(ctx, pgx.Identifier{"postings"}, []string{"term_id", "seq", "tf", "dl", "scope", "expires_ms"},
		pgx.CopyFromSlice(len(ps), func(i int) ([]any, error) {
			p := &ps[i]
			return []any{p.term, p.seq, p.tf, p.dl, p.scope, p.exp}, nil
		})); err != nil {
		return fmt.Errorf("index postings: %w", err)
	}
	return addTotals(ctx, tx, realm, int64(len(add)), tokens)
}

// addTotals adds to the realm's index totals, in this connection's slot.
func addTotals(ctx context.Context, tx pgx.Tx, realm string, docs, tokens int64) error {
	_, err := tx.Exec(ctx, `
		INSERT INTO index_totals (realm, slot, docs, tokens) VALUES ($1, pg_backend_pid() % $4, $2, $3)
		ON CONFLICT (realm, slot) DO UPDATE
		SET docs = index_totals.docs + excluded.docs, tokens = index_totals.tokens + excluded.tokens`,
		realm, docs, tokens, totalSlots)
	if err != nil {
		return fmt.Errorf("index totals: %w", err)
	}
	return nil
}

// unindex removes active records (seqs, with their summed lengths) from
// the index.
func unindex(ctx context.Context, tx pgx.Tx, realm string, seqs []int64, tokens int64) error {
	if len(seqs) == 0 {
		return nil
	}
	if _, err := tx.Exec(ctx, `
		WITH d AS (DELETE FROM postings WHERE seq = ANY($1) RETURNING term_id),
		c AS (SELECT term_id, count(*) AS n FROM d GROUP BY term_id)
		UPDATE terms AS t SET df = t.df - c.n FROM c WHERE t.term_id = c.term_id`, seqs); err != nil {
		return fmt.Errorf("unindex: %w", err)
	}
	return addTotals(ctx, tx, realm, -int64(len(seqs)), -tokens)
}

// storedRecord is what the write paths read back about an existing record.
type storedRecord struct {
	seq    int64
	id     string
	scope  sdk.Scope
	kind   sdk.RecordKind
	status sdk.Status
	ntok   int64
	thread *place
}

// threadLeft answers the places of the active threaded records among
// found, and whether every one's thread is in locked.
func threadLeft(found []storedRecord, locked []string) ([]place, bool) {
	var left []place
	for _, s := range found {
		if s.status == sdk.StatusActive && s.thread != nil {
			if !slices.Contains(locked, s.thread.thread) {
				return nil, false
			}
			left = append(left, *s.thread)
		}
	}
	return left, true
}

// lockRecords reads and row-locks the records of realm named by ids, in id
// order (one lock order for every writer).
func lockRecords(ctx context.Context, tx pgx.Tx, realm string, ids []string) ([]storedRecord, error) {
	rows, err := tx.Query(ctx, `
		SELECT seq, id, scope, kind, status, ntok, thread_id, thread_seq FROM records
		WHERE realm = $1 AND id = ANY($2) ORDER BY id COLLATE "C" FOR UPDATE`, realm, ids)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (storedRecord, error) {
		var s storedRecord
		var thread *string
		var tseq *int64
		err := row.Scan(&s.seq, &s.id, &s.scope, &s.kind, &s.status, &s.ntok, &thread, &tseq)
		if thread != nil && tseq != nil {
			s.thread = &place{string(s.scope), *thread, *tseq}
		}
		return s, err
	})
}

func forget(ctx context.Context, db *pgdb, realm string, ids []string) (int, int64, error) {
	if err := checkIDs(realm, ids); err != nil {
		return 0, 0, fmt.Errorf("postgres: forget: %w", err)
	}
	if len(ids) == 0 {
		return 0, 0, nil
	}
	var n int
	var seq int64
	ids = distinct(ids)
	err := inTx(ctx, db, func(tx pgx.Tx) error {
		threads, err := threadsOf(ctx, tx, realm, ids)
		if err != nil {
			return err
		}
		if err := lockThreads(ctx, tx, realm, threads); err != nil {
			return err
		}
		found, err := lockRecords(ctx, tx, realm, ids)
		if err != nil {
			return err
		}
		left, ok := threadLeft(found, threads)
		if !ok {
			return errRelock
		}
		var active, all []int64
		var tokens int64
		for _, s := range found {
			all = append(all, s.seq)
			if s.status == sdk.StatusActive {
				active = append(active, s.seq)
				tokens += s.ntok
			}
		}
		if err := unindex(ctx, tx, realm, active, tokens); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, "DELETE FROM records WHERE seq = ANY($1)", all); err != nil {
			return err
		}
		if err := applyIndex(ctx, tx, realm, nil, left); err != nil {
			return err
		}
		n = len(found)
		gone := make([]string, len(found))
		for i, s := range found {
			gone[i] = s.id
		}
		seq, err = logChanges(ctx, tx, realm, opDelete, gone)
		return err
	})
	if err != nil {
		return 0, 0, fmt.Errorf("postgres: forget: %w", err)
	}
	return n, seq, nil
}

// supersede stores replacement and marks oldID superseded in one
// transaction. The replacement inherits the old record's scope and kind
// when it names none. Retrying a supersede that already happened answers
// the same replacement id; superseding a record already replaced by other
// content, or tombstoned, is a conflict.
func supersede(ctx context.Context, db *pgdb, realm, oldID string, replacement sdk.Record, now time.Time) (string, int64, error) {
	if err := sdk.ValidateRealm(realm); err != nil {
		return "", 0, fmt.Errorf("postgres: supersede: %w", err)
	}
	if err := sdk.ValidateID(oldID); err != nil {
		return "", 0, fmt.Errorf("postgres: supersede: old %w", err)
	}
	if replacement.Supersedes != "" && replacement.Supersedes != oldID {
		return "", 0, fmt.Errorf("postgres: supersede: replacement names supersedes %q, not %q: %w", replacement.Supersedes, oldID, sdk.ErrInvalid)
	}
	replacement.Supersedes = oldID
	var newID string
	var seq int64
	err := inTx(ctx, db, func(tx pgx.Tx) error {
		threads, err := threadsOf(ctx, tx, realm, []string{oldID})
		if err != nil {
			return err
		}
		if t := replacement.Thread; t != nil {
			threads = append(threads, t.ID)
		}
		if err := lockThreads(ctx, tx, realm, threads); err != nil {
			return err
		}
		found, err := lockRecords(ctx, tx, realm, []string{oldID})
		if err != nil {
			return err
		}
		if len(found) == 0 {
			return fmt.Errorf("record %q not found in realm %q: %w", oldID, realm, sdk.ErrNotFound)
		}
		old := found[0]
		left, ok := threadLeft(found, threads)
		if !ok {
			return errRelock
		}
		rep := replacement
		if rep.Scope == "" {
			rep.Scope = old.scope
		}
		if rep.Kind == "" {
			rep.Kind = old.kind
		}
		p, err := prepareRecord(realm, rep, now)
		if err != nil {
			return fmt.Errorf("replacement: %w", err)
		}
		switch old.status {
		case sdk.StatusSuperseded:
			var id string
			err := tx.QueryRow(ctx, `
				SELECT id FROM records
				WHERE realm = $1 AND scope = $2 AND content_hash = $3 AND supersedes = $4 AND status IN ('active', 'quarantined')`,
				realm, string(p.rec.Scope), p.rec.ContentHash, oldID).Scan(&id)
			if err == nil {
				newID = id
				return nil
			}
			if !errors.Is(err, pgx.ErrNoRows) {
				return err
			}
			return fmt.Errorf("record %q is already superseded by other content: %w", oldID, sdk.ErrConflict)
		case sdk.StatusTombstoned:
			return fmt.Errorf("record %q is tombstoned: %w", oldID, sdk.ErrConflict)
		case sdk.StatusActive:
			if err := unindex(ctx, tx, realm, []int64{old.seq}, old.ntok); err != nil {
				return err
			}
		}
		if _, err := tx.Exec(ctx, "UPDATE records SET status = 'superseded', updated_ms = $1 WHERE seq = $2", now.UnixMilli(), old.seq); err != nil {
			return err
		}
		if old.status != sdk.StatusActive {
			left = nil
		}
		ids, err := storeRecords(ctx, tx, realm, []preparedRecord{p}, left, now)
		if err != nil {
			return err
		}
		newID = ids[0]
		seq, err = logChanges(ctx, tx, realm, opPut, []string{oldID, newID})
		return err
	})
	if err != nil {
		return "", 0, fmt.Errorf("postgres: supersede %s: %w", oldID, err)
	}
	return newID, seq, nil
}

// countUses counts each use's uses of its record at time at; ids not
// there are skipped, and uses lists each id once. The rows are locked, so
// uses counted by two hosts at once all count.
func countUses(ctx context.Context, db *pgdb, realm string, uses []sdk.Use, at time.Time) error {
	ids := make([]string, len(uses))
	count := make(map[string]int64, len(uses))
	for i, u := range uses {
		ids[i] = u.ID
		count[u.ID] = u.Count
	}
	if err := checkIDs(realm, ids); err != nil {
		return fmt.Errorf("postgres: count uses: %w", err)
	}
	if len(ids) == 0 {
		return nil
	}
	err := inTx(ctx, db, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `
			SELECT seq, id, use_count, usage_key FROM records
			WHERE realm = $1 AND id = ANY($2) ORDER BY id COLLATE "C" FOR UPDATE`, realm, ids)
		if err != nil {
			return err
		}
		var seqs, adds []int64
		var keys []float64
		for rows.Next() {
			var seq, used int64
			var id string
			var key float64
			if err := rows.Scan(&seq, &id, &used, &key); err != nil {
				rows.Close()
				return err
			}
			n := count[id]
			seqs, adds = append(seqs, seq), append(adds, n)
			keys = append(keys, usage.KeyN(key, used > 0, n, at))
		}
		if err := rows.Err(); err != nil {
			return err
		}
		if len(seqs) == 0 {
			return nil
		}
		_, err = tx.Exec(ctx, `
			UPDATE records AS r SET use_count = least(r.use_count + u.n, `+strconv.FormatInt(sdk.MaxRecordUseCount, 10)+`), usage_key = u.key,
				last_used_ms = greatest(r.last_used_ms, $4)
			FROM unnest($1::bigint[], $2::float8[], $3::bigint[]) AS u(seq, key, n) WHERE r.seq = u.seq`,
			seqs, keys, adds, at.UnixMilli())
		return err
	})
	if err != nil {
		return fmt.Errorf("postgres: count uses: %w", err)
	}
	return nil
}

// writeLedger appends entries, all or nothing, and trims the ledger to
// its bound. An entry without a time is stamped now.
func writeLedger(ctx context.Context, db *pgdb, entries []sdk.LedgerEntry, bound ledgerBound, now time.Time) error {
	if len(entries) > sdk.MaxBatch {
		return fmt.Errorf("postgres: write ledger: %d entries, the limit is %d: %w", len(entries), sdk.MaxBatch, sdk.ErrTooLarge)
	}
	n := len(entries)
	realms, idents, sessions, recs, surfaces := make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	bytes, ats := make([]int64, n), make([]int64, n)
	for i, e := range entries {
		if err := e.Validate(); err != nil {
			return fmt.Errorf("postgres: write ledger: entries[%d]: %w", i, err)
		}
		at := e.At
		if at.IsZero() || at.After(now) {
			at = now // nothing is injected in the future; such a row would also hold back the trim
		}
		realms[i], idents[i], sessions[i], recs[i], surfaces[i] = e.Realm, e.Identity, e.Session, e.RecordID, e.Surface
		bytes[i], ats[i] = e.Bytes, at.UnixMilli()
	}
	if n == 0 {
		return nil
	}
	err := db.run(ctx, pgx.TxOptions{}, func(q dbtx) error {
		_, err := q.Exec(ctx, `
			INSERT INTO ledger (realm, identity, session, record_id, surface, bytes, at_ms)
			SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::bigint[], $7::bigint[])`,
			realms, idents, sessions, recs, surfaces, bytes, ats)
		if err != nil {
			return err
		}
		return trimLedger(ctx, q, bound, now, max(ledgerTrimBatch, 4*n))
	})
	if err != nil {
		return fmt.Errorf("postgres: write ledger: %w", classify(err))
	}
	return nil
}

// ledgerTrimBatch is the least a ledger write may trim: each write
// removes up to four times the rows it adds, so the ledger shrinks back
// within its bounds after they are lowered, at a bounded cost per write.
const ledgerTrimBatch = 1000

// trimLedger drops the ledger's oldest rows (by seq) past the row bound,
// and the run of rows older than the retention that then leads it, at
// most limit of them, reading and locking only those at the front. Only a
// leading run is ever deleted, so the row count is at most the difference
// of seqs (an identity leaves gaps, which only keep fewer rows); a row
// written out of time order waits for the front to reach it. Hosts
// sharing the schema trim the same run: one waits for the other's delete
// and finds the rows gone.
func trimLedger(ctx context.Context, q dbtx, bound ledgerBound, now time.Time, limit int) error {
	var first, firstAt, last int64
	err := q.QueryRow(ctx, `SELECT seq, at_ms, (SELECT max(seq) FROM ledger) FROM ledger ORDER BY seq LIMIT 1`).Scan(&first, &firstAt, &last)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil
	}
	if err != nil {
		return err
	}
	cutoff := now.Add(-bound.retention).UnixMilli()
	keepFrom := last - bound.maxRows + 1
	if firstAt >= cutoff && first >= keepFrom {
		return nil
	}
	upTo := first + int64(limit) // seqs have gaps: at most limit rows go
	var fresh *int64
	if err := q.QueryRow(ctx, `SELECT min(seq) FROM ledger WHERE seq >= $1 AND seq < $2 AND at_ms >= $3`,
		max(first, keepFrom), upTo, cutoff).Scan(&fresh); err != nil {
		return err
	}
	if fresh != nil {
		upTo = *fresh
	}
	_, err = q.Exec(ctx, `DELETE FROM ledger WHERE seq < $1`, upTo)
	return err
}

// checkIDs validates a realm and a batch of record ids.
func checkIDs(realm string, ids []string) error {
	if err := sdk.ValidateRealm(realm); err != nil {
		return err
	}
	if len(ids) > sdk.MaxBatch {
		return fmt.Errorf("%d ids, the limit is %d: %w", len(ids), sdk.MaxBatch, sdk.ErrTooLarge)
	}
	for i, id := range ids {
		if err := sdk.ValidateID(id); err != nil {
			return fmt.Errorf("ids[%d]: %w", i, err)
		}
	}
	return nil
}

// distinct answers items without repeats, in first-seen order.
func distinct[T comparable](items []T) []T {
	seen := make(map[T]bool, len(items))
	out := items[:0:0]
	for _, it := range items {
		if !seen[it] {
			seen[it] = true
			out = append(out, it)
		}
	}
	return out
}

// optionalMillis stores a time (an expiry, an occurred_at, a created_at); 0
// means none, so a real time at the Unix epoch is kept as one millisecond
// before it.
func optionalMillis(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	if ms := t.UnixMilli(); ms != 0 {
		return ms
	}
	return -1
}

// threadID and threadSeq are a record's thread columns (NULL without one).
func threadID(t *sdk.Thread) *string {
	if t == nil {
		return nil
	}
	return &t.ID
}

func threadSeq(t *sdk.Thread) *int64 {
	if t == nil {
		return nil
	}
	return &t.Seq
}
