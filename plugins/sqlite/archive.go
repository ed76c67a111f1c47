package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"time"

	"github.com/memhost/memhost/sdk"
	"github.com/memhost/memhost/sdk/usage"
)

var _ sdk.Archiver = (*Store)(nil)

// Export answers a page of the realm's records, of every status, in id
// order (sdk.Archiver); the (realm, id) index serves the cursor.
func (s *Store) Export(ctx context.Context, realm, after string, limit int) (sdk.ExportPage, error) {
	var page sdk.ExportPage
	err := s.use(func(db *database) error {
		return db.readRecords(ctx, realm, `r.realm = ? AND r.id > ? ORDER BY r.id LIMIT ?`, []any{realm, after, limit + 1},
			func(r *sdk.Record, _ int64) { page.Records = append(page.Records, *r) })
	})
	if err != nil {
		return sdk.ExportPage{}, fmt.Errorf("sqlite: export: %w", err)
	}
	if len(page.Records) > limit {
		page.Records = page.Records[:limit]
		page.Next = page.Records[limit-1].ID
	}
	return page, nil
}

// Import stores full records as given, in one transaction (sdk.Archiver).
// A stored id is skipped, unless the record retires it (sdk.ImportRetires:
// it is then moved to the record's status, and counted imported); so is a
// record whose content is live in its scope already.
func (s *Store) Import(ctx context.Context, realm string, records []sdk.Record) (sdk.ImportResult, error) {
	prepared := make([]preparedRecord, len(records))
	for i, r := range records {
		r.Tags = slices.Clone(r.Tags)
		if err := r.PrepareImport(realm); err != nil {
			return sdk.ImportResult{}, fmt.Errorf("sqlite: import: records[%d]: %w", i, err)
		}
		prepared[i] = newPrepared(r)
	}
	var res sdk.ImportResult
	now := s.opts.now()
	err := s.use(func(db *database) error {
		return db.write(ctx, func(tx *sql.Tx, ch *indexChange) error {
			res = sdk.ImportResult{}
			for i := range prepared {
				stored, err := importRecord(ctx, tx, ch, &prepared[i], now)
				if err != nil {
					return fmt.Errorf("records[%d]: %w", i, err)
				}
				if stored {
					res.Imported++
				} else {
					res.Skipped++
				}
			}
			return nil
		})
	})
	if err != nil {
		return sdk.ImportResult{}, fmt.Errorf("sqlite: import: %w", err)
	}
	return res, nil
}

func importRecord(ctx context.Context, tx *sql.Tx, ch *indexChange, p *preparedRecord, now time.Time) (bool, error) {
	r := &p.rec
	old, found, err := lookupForWrite(ctx, tx, r.Realm, r.ID)
	if err != nil {
		return false, err
	}
	if found {
		if !sdk.ImportRetires(&sdk.Record{ID: r.ID, Scope: old.scope, Status: old.status, ContentHash: old.contentHash}, r) {
			return false, nil
		}
		// A newer export of the record: it was retired since (superseded,
		// tombstoned), and leaves recall here too.
		if _, err := tx.ExecContext(ctx, "UPDATE records SET status = ?, updated_ms = max(updated_ms, ?) WHERE seq = ?",
			string(r.Status), r.UpdatedAt.UnixMilli(), old.seq); err != nil {
			return false, err
		}
		if old.status == sdk.StatusActive {
			ch.del(r.Realm, r.ID)
		}
		ch.unrank(r.Realm, old.scope, old.seq)
		old.retire(ch, r.Realm)
		return true, nil
	}
	if seq, ok := ch.content.seq(p.key); ok && isLive(r.Status) {
		// Its content is live in the scope already, one copy only. A
		// holder that has expired takes an active record's later expiry,
		// as a write's duplicate does, so the content stays recallable; a
		// quarantined record (a pending proposal) changes nothing: no
		// record becomes recallable before review.
		if r.Status == sdk.StatusActive && (r.ExpiresAt.IsZero() || r.ExpiresAt.After(now)) {
			if _, err := answerDuplicate(ctx, tx, ch, seq, p.key, r, now); err != nil {
				return false, err
			}
		}
		return false, nil
	}
	seq, err := insertRecord(ctx, tx, ch, p)
	if err != nil {
		return false, err
	}
	if r.UseCount > 0 {
		// The decayed usage key is rebuilt as if every use happened at the
		// last one: the history behind the count is not exported.
		at := r.LastUsedAt
		if at.IsZero() {
			at = r.UpdatedAt
		}
		key := usage.Key(0, false, at)
		if _, err := tx.ExecContext(ctx, "INSERT INTO usage (seq, use_count, last_used_ms, usage_key) VALUES (?, ?, ?, ?)",
			seq, r.UseCount, optionalMillis(r.LastUsedAt), key); err != nil {
			return false, err
		}
		if r.Status == sdk.StatusActive {
			ch.used = append(ch.used, usedRow{seq: seq, realm: r.Realm, scope: r.Scope, key: key})
		}
	}
	if r.Status == sdk.StatusActive {
		ch.put(seq, r, &p.doc)
	}
	return true, nil
}
