package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"time"

	sqlite3 "github.com/mattn/go-sqlite3"
	"github.com/memhost/memhost/sdk"
)

const insertRecordSQL = `
INSERT INTO records (realm, id, scope, status, expires_ms, tag_keys, kind, trust, supersedes,
	created_ms, updated_ms, content_hash, ntok, title, description, tags, body, thread_id, thread_seq, occurred_ms)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`

// insertRecord inserts p as a new row and answers its seq; a live record's
// content becomes live in ch. An id already stored in the realm is a
// conflict.
func insertRecord(ctx context.Context, tx *sql.Tx, ch *indexChange, p *preparedRecord) (int64, error) {
	r := &p.rec
	threadID, threadSeq := threadColumns(r)
	res, err := tx.ExecContext(ctx, insertRecordSQL,
		r.Realm, r.ID, string(r.Scope), string(r.Status), optionalMillis(r.ExpiresAt), tagKeys(r.Tags),
		string(r.Kind), string(r.Trust), r.Supersedes, optionalMillis(r.CreatedAt), optionalMillis(r.UpdatedAt),
		r.ContentHash, p.doc.ntok, r.Title, r.Description, strings.Join(r.Tags, "\n"), r.Body, threadID, threadSeq,
		optionalMillis(r.OccurredAt))
	if isUniqueViolation(err) {
		return 0, fmt.Errorf("id %q already names another record in realm %q: %w", r.ID, r.Realm, sdk.ErrConflict)
	}
	if err != nil {
		return 0, err
	}
	seq, err := res.LastInsertId()
	if err == nil && isLive(r.Status) {
		ch.content.add(p.key, seq)
	}
	return seq, err
}

// preparedRecord is a validated record with its index form and the key of
// its content in its scope, computed before the write transaction so the
// lock is held for I/O only.
type preparedRecord struct {
	rec sdk.Record
	doc indexDoc
	key contentKey
}

// newPrepared completes a validated record's preparation.
func newPrepared(r sdk.Record) preparedRecord {
	return preparedRecord{rec: r, doc: newIndexDoc(&r), key: keyOf(r.Realm, r.Scope, r.ContentHash)}
}

func prepareRecord(realm string, r sdk.Record, now time.Time) (preparedRecord, error) {
	r.Tags = append([]string(nil), r.Tags...)
	r.UseCount, r.LastUsedAt = 0, time.Time{} // usage is the store's to count
	if err := r.Prepare(realm, now); err != nil {
		return preparedRecord{}, err
	}
	return newPrepared(r), nil
}

// prepareAll prepares records on every core: validating, hashing and
// tokenizing are most of a write's CPU, and need no lock. The first
// failing record (by index) is reported.
func prepareAll(realm string, records []sdk.Record, now time.Time) ([]preparedRecord, error) {
	prepared := make([]preparedRecord, len(records))
	errs := make([]error, len(records))
	workers := min(runtime.GOMAXPROCS(0), (len(records)+63)/64)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < len(records); i += workers {
				prepared[i], errs[i] = prepareRecord(realm, records[i], now)
			}
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			return nil, fmt.Errorf("records[%d]: %w", i, err)
		}
	}
	return prepared, nil
}

// remember stores records all or nothing. A record whose content hash is
// live (active or quarantined) in its scope is not stored again: the
// existing id is answered, and an expired copy takes the new expiry.
//
// Realms, ids and batch sizes here and below were validated by the SDK's
// server before the call reached the store.
func (d *database) remember(ctx context.Context, realm string, records []sdk.Record, now time.Time) ([]string, error) {
	prepared, err := prepareAll(realm, records, now)
	if err != nil {
		return nil, fmt.Errorf("sqlite: remember: %w", err)
	}
	ids := make([]string, len(prepared))
	err = d.write(ctx, func(tx *sql.Tx, ch *indexChange) error {
		for i := range prepared {
			id, err := storeRecord(ctx, tx, ch, &prepared[i], now)
			if err != nil {
				return fmt.Errorf("records[%d]: %w", i, err)
			}
			ids[i] = id
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("sqlite: remember: %w", err)
	}
	return ids, nil
}

// storeRecord inserts one prepared record, or answers the live copy of its
// content.
func storeRecord(ctx context.Context, tx *sql.Tx, ch *indexChange, p *preparedRecord, now time.Time) (string, error) {
	r := &p.rec
	if isLive(r.Status) {
		if seq, ok := ch.content.seq(p.key); ok {
			return answerDuplicate(ctx, tx, ch, seq, p.key, r, now)
		}
	}
	seq, err := insertRecord(ctx, tx, ch, p)
	if err != nil {
		return "", err
	}
	if r.Status == sdk.StatusActive {
		ch.put(seq, r, &p.doc)
	}
	return r.ID, nil
}

// liveRecord is what the write paths read of the record holding a content
// live.
type liveRecord struct {
	id, supersedes string
	expires        int64
	status         sdk.Status
}

// readLive reads the record at seq, which the live contents say holds key
// live. A row that does not is an error rather than a wrong answer.
func readLive(ctx context.Context, tx *sql.Tx, seq int64, key contentKey) (liveRecord, error) {
	var l liveRecord
	var realm, scope, hash string
	err := tx.QueryRowContext(ctx, `SELECT id, realm, scope, content_hash, supersedes, expires_ms, status FROM records WHERE seq = ?`, seq).
		Scan(&l.id, &realm, &scope, &hash, &l.supersedes, &l.expires, &l.status)
	if errors.Is(err, sql.ErrNoRows) || err == nil && (!isLive(l.status) || keyOf(realm, sdk.Scope(scope), hash) != key) {
		err = errStaleContent
	}
	if err != nil {
		return liveRecord{}, fmt.Errorf("read the live copy of a content (row %d): %w", seq, err)
	}
	return l, nil
}

// answerDuplicate answers the id of the record at seq, which holds r's
// content live, reviving it with r's expiry if it had expired.
func answerDuplicate(ctx context.Context, tx *sql.Tx, ch *indexChange, seq int64, key contentKey, r *sdk.Record, now time.Time) (string, error) {
	l, err := readLive(ctx, tx, seq, key)
	if err != nil {
		return "", err
	}
	id, status := l.id, l.status
	if l.expires != 0 && l.expires <= now.UnixMilli() {
		if _, err := tx.ExecContext(ctx, "UPDATE records SET expires_ms = ?, updated_ms = ? WHERE seq = ?",
			optionalMillis(r.ExpiresAt), now.UnixMilli(), seq); err != nil {
			return "", err
		}
		if status == sdk.StatusActive {
			// The index judges expiry itself, so it needs the new one;
			// the rest of its document (time, thread) as stored.
			var live sdk.Record
			if err := scanRecord(tx.QueryRowContext(ctx, "SELECT "+recordColumns+" FROM "+recordsWithUsage+" WHERE r.seq = ?", seq), &live); err != nil {
				return "", fmt.Errorf("reread a revived duplicate: %w", err)
			}
			live.ExpiresAt = r.ExpiresAt
			doc := newIndexDoc(&live)
			ch.put(seq, &live, &doc)
		}
	}
	return id, nil
}

// storedRecord is what the write paths read back about an existing record.
type storedRecord struct {
	seq         int64
	scope       sdk.Scope
	kind        sdk.RecordKind
	status      sdk.Status
	contentHash string
}

// retire notes in ch that s, once live, no longer holds its content.
func (s *storedRecord) retire(ch *indexChange, realm string) {
	if isLive(s.status) {
		ch.content.drop(keyOf(realm, s.scope, s.contentHash))
	}
}

// lookupForWrite reads the record id of realm inside a write transaction;
// found is false when there is none.
func lookupForWrite(ctx context.Context, tx *sql.Tx, realm, id string) (s storedRecord, found bool, err error) {
	err = tx.QueryRowContext(ctx, `SELECT seq, scope, kind, status, content_hash FROM records WHERE realm = ? AND id = ?`, realm, id).
		Scan(&s.seq, &s.scope, &s.kind, &s.status, &s.contentHash)
	if errors.Is(err, sql.ErrNoRows) {
		return s, false, nil
	}
	return s, err == nil, err
}

// forget deletes records; ids not there are skipped.
func (d *database) forget(ctx context.Context, realm string, ids []string) (int, error) {
	var n int
	err := d.write(ctx, func(tx *sql.Tx, ch *indexChange) error {
		n = 0
		for _, id := range distinct(ids) {
			s, found, err := lookupForWrite(ctx, tx, realm, id)
			if err != nil {
				return err
			}
			if !found {
				continue
			}
			if s.status == sdk.StatusActive {
				ch.del(realm, id)
			}
			if _, err := tx.ExecContext(ctx, "DELETE FROM records WHERE seq = ?", s.seq); err != nil {
				return err
			}
			ch.unrank(realm, s.scope, s.seq)
			s.retire(ch, realm)
			n++
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("sqlite: forget: %w", err)
	}
	return n, nil
}

// supersede stores replacement and marks oldID superseded in one
// transaction. The replacement inherits the old record's scope and kind
// when it names none. Retrying a supersede that already happened answers
// the same replacement id; superseding a record already replaced by other
// content, or tombstoned, is a conflict.
func (d *database) supersede(ctx context.Context, realm, oldID string, replacement sdk.Record, now time.Time) (string, error) {
	if replacement.Supersedes != "" && replacement.Supersedes != oldID {
		return "", fmt.Errorf("sqlite: supersede: replacement names supersedes %q, not %q: %w", replacement.Supersedes, oldID, sdk.ErrInvalid)
	}
	replacement.Supersedes = oldID
	var newID string
	err := d.write(ctx, func(tx *sql.Tx, ch *indexChange) error {
		old, found, err := lookupForWrite(ctx, tx, realm, oldID)
		if err != nil {
			return err
		}
		if !found {
			return fmt.Errorf("record %q not found in realm %q: %w", oldID, realm, sdk.ErrNotFound)
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
			if id, ok, err := liveSuccessor(ctx, tx, ch, &p, oldID); err != nil || ok {
				newID = id
				return err
			}
			return fmt.Errorf("record %q is already superseded by other content: %w", oldID, sdk.ErrConflict)
		case sdk.StatusTombstoned:
			return fmt.Errorf("record %q is tombstoned: %w", oldID, sdk.ErrConflict)
		case sdk.StatusActive:
			ch.del(realm, oldID)
		}
		if _, err := tx.ExecContext(ctx, "UPDATE records SET status = 'superseded', updated_ms = ? WHERE seq = ?", now.UnixMilli(), old.seq); err != nil {
			return err
		}
		ch.unrank(realm, old.scope, old.seq)
		old.retire(ch, realm)
		newID, err = storeRecord(ctx, tx, ch, &p, now)
		return err
	})
	if err != nil {
		return "", fmt.Errorf("sqlite: supersede %s: %w", oldID, err)
	}
	return newID, nil
}

// liveSuccessor finds the live record with rep's content that supersedes
// oldID: the answer of an earlier, identical supersede.
func liveSuccessor(ctx context.Context, tx *sql.Tx, ch *indexChange, rep *preparedRecord, oldID string) (string, bool, error) {
	seq, ok := ch.content.seq(rep.key)
	if !ok {
		return "", false, nil
	}
	l, err := readLive(ctx, tx, seq, rep.key)
	if err != nil || l.supersedes != oldID {
		return "", false, err
	}
	return l.id, true, nil
}

// writeLedger appends entries, all or nothing. An entry without a time is
// stamped now.
func (d *database) writeLedger(ctx context.Context, entries []sdk.LedgerEntry, now time.Time) error {
	for i, e := range entries {
		if err := e.Validate(); err != nil {
			return fmt.Errorf("sqlite: write ledger: entries[%d]: %w", i, err)
		}
	}
	// The rows go to SQLite as one JSON array, inserted by one statement.
	rows := make([][7]any, len(entries))
	for i, e := range entries {
		at := e.At
		if at.IsZero() || at.After(now) {
			at = now // nothing is injected in the future; such a row would also hold back the trim
		}
		rows[i] = [7]any{e.Realm, e.Identity, e.Session, e.RecordID, e.Surface, e.Bytes, at.UnixMilli()}
	}
	data, err := json.Marshal(rows)
	if err != nil {
		return fmt.Errorf("sqlite: write ledger: %w", err)
	}
	err = d.write(ctx, func(tx *sql.Tx, _ *indexChange) error {
		if _, err := tx.ExecContext(ctx, `
			INSERT INTO ledger (realm, identity, session, record_id, surface, bytes, at_ms)
			SELECT value->>0, value->>1, value->>2, value->>3, value->>4, value->>5, value->>6
			FROM json_each(?) ORDER BY key`, string(data)); err != nil {
			return err
		}
		return d.trimLedger(ctx, tx, now, max(ledgerTrimBatch, 4*len(entries)))
	})
	if err != nil {
		return fmt.Errorf("sqlite: write ledger: %w", err)
	}
	return nil
}

// ledgerTrimBatch is the least a ledger write may trim: each write
// removes up to four times the rows it adds, so the ledger shrinks back
// within its bounds after they are lowered, at a bounded cost per write.
const ledgerTrimBatch = 1000

// trimLedger drops the ledger's oldest rows (in the order they were
// written) past the row bound, and the run of rows older than the
// retention that then leads it, at most limit of them. Only a leading run
// is ever deleted, so the seqs stay contiguous and the row count is a
// difference of seqs; a row written out of time order waits for the front
// to reach it. Only the rows at the front are read.
func (d *database) trimLedger(ctx context.Context, tx *sql.Tx, now time.Time, limit int) error {
	var first, firstAt, last int64
	err := tx.QueryRowContext(ctx, `SELECT seq, at_ms, (SELECT max(seq) FROM ledger) FROM ledger ORDER BY seq LIMIT 1`).Scan(&first, &firstAt, &last)
	if errors.Is(err, sql.ErrNoRows) {
		return nil
	}
	if err != nil {
		return err
	}
	cutoff := now.Add(-d.opts.ledgerRetention).UnixMilli()
	keepFrom := last - d.opts.ledgerMaxRows + 1
	if firstAt >= cutoff && first >= keepFrom {
		return nil
	}
	upTo := first + int64(limit) // at most limit rows go
	var fresh sql.NullInt64
	if err := tx.QueryRowContext(ctx, `SELECT min(seq) FROM ledger WHERE seq >= ? AND seq < ? AND at_ms >= ?`,
		max(first, keepFrom), upTo, cutoff).Scan(&fresh); err != nil {
		return err
	}
	if fresh.Valid {
		upTo = fresh.Int64
	}
	_, err = tx.ExecContext(ctx, `DELETE FROM ledger WHERE seq < ?`, upTo)
	return err
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

func isUniqueViolation(err error) bool {
	var se sqlite3.Error
	return errors.As(err, &se) && (se.ExtendedCode == sqlite3.ErrConstraintUnique || se.ExtendedCode == sqlite3.ErrConstraintPrimaryKey)
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

func splitTags(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

// threadColumns answers the stored form of r's thread: "" and 0 for none.
func threadColumns(r *sdk.Record) (string, int64) {
	if r.Thread == nil {
		return "", 0
	}
	return r.Thread.ID, r.Thread.Seq
}
