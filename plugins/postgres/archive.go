package postgres

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/memhost/memhost/sdk"
	"github.com/memhost/memhost/sdk/usage"
)

// Export answers a page of the realm's records, of every status, in id
// byte order (sdk.Archiver), whatever the database's collation:
// records_by_id_bytes serves the cursor.
func (s *Store) Export(ctx context.Context, realm, after string, limit int) (sdk.ExportPage, error) {
	ctx = inRealm(ctx, realm)
	if err := sdk.ValidateRealm(realm); err != nil {
		return sdk.ExportPage{}, fmt.Errorf("postgres: export: %w", err)
	}
	if limit <= 0 || limit > sdk.MaxExportPage {
		limit = sdk.MaxExportPage
	}
	var page sdk.ExportPage
	err := s.use(func(db *pgdb) error {
		return db.run(ctx, readOnly, func(q dbtx) error {
			return readRecords(ctx, q, `SELECT `+recordColumns+` FROM records AS r
				WHERE r.realm = $1 AND r.id COLLATE "C" > $2 ORDER BY r.id COLLATE "C" LIMIT $3`,
				[]any{realm, after, limit + 1}, func(r *sdk.Record) { page.Records = append(page.Records, *r) })
		})
	})
	if err != nil {
		return sdk.ExportPage{}, fmt.Errorf("postgres: export: %w", classify(err))
	}
	if len(page.Records) > limit {
		page.Records = page.Records[:limit]
		page.Next = page.Records[limit-1].ID
	}
	return page, nil
}

const importRecordSQL = `
INSERT INTO records (realm, id, scope, status, expires_ms, tag_keys, kind, trust, supersedes,
	created_ms, updated_ms, content_hash, ntok, title, description, tags, body, thread_id, thread_seq, seq,
	use_count, last_used_ms, usage_key, occurred_ms)
OVERRIDING SYSTEM VALUE
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22, $23, $24)
ON CONFLICT DO NOTHING
RETURNING seq`

// Import stores full records as given, all or nothing (sdk.Archiver). A
// stored id is skipped, unless the record retires it (sdk.ImportRetires:
// it then takes the record's status, and counts imported), and so is a
// record whose content is live in its scope already: the unique indexes decide, so hosts importing the same
// records at once store each one once (a second insert waits for the
// first to commit, then does nothing).
func (s *Store) Import(ctx context.Context, realm string, records []sdk.Record) (sdk.ImportResult, error) {
	ctx = inRealm(ctx, realm)
	if err := sdk.ValidateRealm(realm); err != nil {
		return sdk.ImportResult{}, fmt.Errorf("postgres: import: %w", err)
	}
	if len(records) > sdk.MaxBatch {
		return sdk.ImportResult{}, fmt.Errorf("postgres: import: %d records, the limit is %d: %w", len(records), sdk.MaxBatch, sdk.ErrTooLarge)
	}
	prepared := make([]preparedRecord, len(records))
	for i, r := range records {
		r.Tags = slices.Clone(r.Tags)
		if err := r.PrepareImport(realm); err != nil {
			return sdk.ImportResult{}, fmt.Errorf("postgres: import: records[%d]: %w", i, err)
		}
		prepared[i] = newPrepared(r)
	}
	threads := recordThreads(prepared)
	var res sdk.ImportResult
	var seq int64
	now := s.now()
	err := s.use(func(db *pgdb) error {
		err := inTx(ctx, db, func(tx pgx.Tx) (err error) {
			// The threads of the stored records a retired one may take out
			// of recall, whose neighbours' indexed context changes.
			var retiring []string
			for i := range prepared {
				if st := prepared[i].rec.Status; st == sdk.StatusSuperseded || st == sdk.StatusTombstoned {
					retiring = append(retiring, prepared[i].rec.ID)
				}
			}
			locked := threads
			if len(retiring) > 0 {
				stored, err := threadsOf(ctx, tx, realm, retiring)
				if err != nil {
					return err
				}
				locked = append(slices.Clone(threads), stored...)
			}
			if err := lockThreads(ctx, tx, realm, locked); err != nil {
				return err
			}
			var held []string
			if res, held, err = importRecords(ctx, tx, realm, prepared, locked, now); err != nil || res.Imported == 0 && len(held) == 0 {
				return err
			}
			ids := make([]string, 0, len(prepared)+len(held))
			for i := range prepared {
				ids = append(ids, prepared[i].rec.ID)
			}
			// A holder a skipped record may have revived, as a write's
			// duplicate is logged.
			ids = append(ids, held...)
			seq, err = logChanges(ctx, tx, realm, opPut, ids)
			return err
		})
		if err == nil {
			s.acknowledge(seq)
		}
		return err
	})
	if err != nil {
		return sdk.ImportResult{}, fmt.Errorf("postgres: import: %w", err)
	}
	return res, nil
}

// importRecords inserts prepared, answering what it imported and the ids
// of the records already holding the content of a skipped one.
func importRecords(ctx context.Context, tx pgx.Tx, realm string, prepared []preparedRecord, locked []string, now time.Time) (sdk.ImportResult, []string, error) {
	if len(prepared) == 0 {
		return sdk.ImportResult{}, nil, nil
	}
	// In id order, one lock order for every importer.
	order := make([]int, len(prepared))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int { return cmp.Compare(prepared[a].rec.ID, prepared[b].rec.ID) })
	seqs, err := allocSeqs(ctx, tx, len(prepared))
	if err != nil {
		return sdk.ImportResult{}, nil, err
	}
	batch := &pgx.Batch{}
	for _, i := range order {
		r, d := &prepared[i].rec, &prepared[i].doc
		tags := r.Tags
		if tags == nil {
			tags = []string{}
		}
		var key float64
		if r.UseCount > 0 {
			// The decayed usage key is rebuilt as if every use happened at
			// the last one: the history behind the count is not exported.
			at := r.LastUsedAt
			if at.IsZero() {
				at = r.UpdatedAt
			}
			key = usage.Key(0, false, at)
		}
		batch.Queue(importRecordSQL, r.Realm, r.ID, string(r.Scope), string(r.Status), optionalMillis(r.ExpiresAt),
			foldTags(tags), string(r.Kind), string(r.Trust), r.Supersedes, optionalMillis(r.CreatedAt), optionalMillis(r.UpdatedAt),
			r.ContentHash, d.ntok, r.Title, r.Description, tags, r.Body, threadID(r.Thread), threadSeq(r.Thread), seqs[i],
			r.UseCount, optionalMillis(r.LastUsedAt), key, optionalMillis(r.OccurredAt))
	}
	var res sdk.ImportResult
	var add []indexed
	var skipped []int
	br := tx.SendBatch(ctx, batch)
	for _, i := range order {
		var seq int64
		switch err := br.QueryRow().Scan(&seq); {
		case errors.Is(err, pgx.ErrNoRows):
			res.Skipped++
			skipped = append(skipped, i)
			continue
		case err != nil:
			br.Close()
			return sdk.ImportResult{}, nil, fmt.Errorf("records[%d]: %w", i, err)
		}
		res.Imported++
		if prepared[i].rec.Status == sdk.StatusActive {
			add = append(add, newIndexed(seq, &prepared[i]))
		}
	}
	if err := br.Close(); err != nil {
		return sdk.ImportResult{}, nil, err
	}
	left, skipped, err := retireStored(ctx, tx, realm, prepared, skipped, locked)
	if err != nil {
		return sdk.ImportResult{}, nil, err
	}
	res.Imported += res.Skipped - len(skipped)
	res.Skipped = len(skipped)
	if err := applyIndex(ctx, tx, realm, add, left); err != nil {
		return sdk.ImportResult{}, nil, err
	}
	var held []string
	for _, i := range skipped {
		r := &prepared[i].rec
		if r.Status != sdk.StatusActive || !r.ExpiresAt.IsZero() && !r.ExpiresAt.After(now) {
			continue
		}
		var one int
		switch err := tx.QueryRow(ctx, "SELECT 1 FROM records WHERE realm = $1 AND id = $2", r.Realm, r.ID).Scan(&one); {
		case err == nil:
			continue // its id is stored already
		case !errors.Is(err, pgx.ErrNoRows):
			return sdk.ImportResult{}, nil, fmt.Errorf("records[%d]: %w", i, err)
		}
		// Its content is live in the scope already, one copy only. A
		// holder that has expired takes an active record's later expiry,
		// as a write's duplicate does, so the content stays recallable; a
		// quarantined record (a pending proposal) changes nothing: no
		// record becomes recallable before review.
		id, err := answerDuplicate(ctx, tx, r, now)
		if err != nil {
			return sdk.ImportResult{}, nil, fmt.Errorf("records[%d]: %w", i, err)
		}
		held = append(held, id)
	}
	return res, held, nil
}

// retireStored moves the stored records that skipped ones retire
// (sdk.ImportRetires: a newer export of a record superseded or tombstoned
// since) to their status, out of the index, answering the thread places
// they left and the records still skipped.
func retireStored(ctx context.Context, tx pgx.Tx, realm string, prepared []preparedRecord, skipped []int, locked []string) ([]place, []int, error) {
	var left []place
	var still []int
	for _, i := range skipped {
		r := &prepared[i].rec
		if r.Status != sdk.StatusSuperseded && r.Status != sdk.StatusTombstoned {
			still = append(still, i)
			continue
		}
		var held sdk.Record
		var seq, ntok int64
		var thread *string
		var tseq *int64
		err := tx.QueryRow(ctx, `SELECT seq, scope, status, title, body, ntok, thread_id, thread_seq FROM records
			WHERE realm = $1 AND id = $2 FOR UPDATE`, realm, r.ID).Scan(&seq, &held.Scope, &held.Status, &held.Title, &held.Body, &ntok, &thread, &tseq)
		if errors.Is(err, pgx.ErrNoRows) {
			still = append(still, i) // its content is held by another record
			continue
		}
		if err != nil {
			return nil, nil, fmt.Errorf("records[%d]: %w", i, err)
		}
		held.ID, held.ContentHash = r.ID, sdk.ContentHash(held.Title, held.Body)
		if !sdk.ImportRetires(&held, r) {
			still = append(still, i)
			continue
		}
		if held.Status == sdk.StatusActive {
			if thread != nil && tseq != nil {
				if !slices.Contains(locked, *thread) {
					return nil, nil, errRelock
				}
				left = append(left, place{string(held.Scope), *thread, *tseq})
			}
			if err := unindex(ctx, tx, realm, []int64{seq}, ntok); err != nil {
				return nil, nil, err
			}
		}
		if _, err := tx.Exec(ctx, "UPDATE records SET status = $1, updated_ms = GREATEST(updated_ms, $2) WHERE seq = $3",
			string(r.Status), r.UpdatedAt.UnixMilli(), seq); err != nil {
			return nil, nil, fmt.Errorf("records[%d]: %w", i, err)
		}
	}
	return left, still, nil
}
