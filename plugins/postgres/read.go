package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/memhost/memhost/sdk"
)

// recordColumns are the columns scanRecord reads, in order.
const recordColumns = `r.id, r.realm, r.scope, r.kind, r.title, r.description, r.body, r.tags, r.trust, r.status,
	r.supersedes, r.created_ms, r.updated_ms, r.expires_ms, r.content_hash, r.use_count, r.last_used_ms,
	r.thread_id, r.thread_seq, r.occurred_ms`

// scanRecord reads recordColumns, then any extra columns into extra.
func scanRecord(row pgx.Row, r *sdk.Record, extra ...any) error {
	var created, updated, expires, lastUsed, occurred int64
	var threadID *string
	var threadSeq *int64
	dest := append([]any{
		&r.ID, &r.Realm, &r.Scope, &r.Kind, &r.Title, &r.Description, &r.Body, &r.Tags, &r.Trust, &r.Status,
		&r.Supersedes, &created, &updated, &expires, &r.ContentHash, &r.UseCount, &lastUsed, &threadID, &threadSeq,
		&occurred,
	}, extra...)
	if err := row.Scan(dest...); err != nil {
		return err
	}
	r.Thread = nil
	if threadID != nil && threadSeq != nil {
		r.Thread = &sdk.Thread{ID: *threadID, Seq: *threadSeq}
	}
	if len(r.Tags) == 0 {
		r.Tags = nil
	}
	r.CreatedAt, r.UpdatedAt = fromMillis(created), fromMillis(updated)
	r.ExpiresAt, r.LastUsedAt = fromMillis(expires), fromMillis(lastUsed)
	r.OccurredAt = fromMillis(occurred)
	return nil
}

// readRecords runs query, which selects recordColumns (over records AS
// r), on q and hands each record to add.
func readRecords(ctx context.Context, q dbtx, query string, args []any, add func(r *sdk.Record)) error {
	rows, err := q.Query(ctx, query, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var r sdk.Record
		if err := scanRecord(rows, &r); err != nil {
			return err
		}
		add(&r)
	}
	return rows.Err()
}

// fromMillis reads a stored time; 0 is the zero time.
func fromMillis(ms int64) time.Time {
	if ms == 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms).UTC()
}

// get answers the records of realm named by ids, of any status, in the
// order asked; ids not there are skipped.
func get(ctx context.Context, db *pgdb, realm string, ids []string) ([]sdk.Record, error) {
	if err := checkIDs(realm, ids); err != nil {
		return nil, fmt.Errorf("postgres: get: %w", err)
	}
	out := []sdk.Record{}
	if len(ids) == 0 {
		return out, nil
	}
	byID := make(map[string]sdk.Record, len(ids))
	err := db.run(ctx, readOnly, func(q dbtx) error {
		return readRecords(ctx, q, `SELECT `+recordColumns+` FROM records AS r WHERE r.realm = $1 AND r.id = ANY($2)`,
			[]any{realm, ids}, func(r *sdk.Record) { byID[r.ID] = *r })
	})
	if err != nil {
		return nil, fmt.Errorf("postgres: get: %w", classify(err))
	}
	for _, id := range ids {
		if r, ok := byID[id]; ok {
			out = append(out, r)
		}
	}
	return out, nil
}

// fromFirstAtPlaces is the FROM clause of a query of realm $1's active
// records (as r) at the places given by the arrays $2 (scopes), $3
// (thread ids) and $4 (seqs): of each place its first $5[i] by id in byte
// order, which records_by_thread holds in that order, so a place crowded
// by a flood is never read whole.
const fromFirstAtPlaces = `
	FROM unnest($2::text[], $3::text[], $4::bigint[], $5::int[]) AS w(scope, thread_id, thread_seq, first)
	CROSS JOIN LATERAL (SELECT * FROM records
		WHERE realm = $1 AND status = 'active' AND thread_id IS NOT NULL AND thread_id = w.thread_id
			AND thread_seq = w.thread_seq AND scope = w.scope
		ORDER BY id COLLATE "C" LIMIT w.first) AS r`

// readThreadSQL selects the records readThread answers.
const readThreadSQL = `SELECT ` + recordColumns + fromFirstAtPlaces

// readThread answers the active records of realm at places (scope, thread
// id, seq), of each its first sdk.MaxPlaceReads by id, in no particular
// order, in one query that records_by_thread serves. Other statuses are
// left out: the SDK shows only active neighbours (sdk.AttachNeighbours),
// and records_by_thread holds only those.
func readThread(ctx context.Context, db *pgdb, realm string, places []sdk.ThreadPlace) ([]sdk.Record, error) {
	if err := sdk.ValidateRealm(realm); err != nil {
		return nil, fmt.Errorf("postgres: read thread: %w", err)
	}
	out := []sdk.Record{}
	scopes := make([]string, 0, len(places))
	threads, seqs := make([]string, 0, len(places)), make([]int64, 0, len(places))
	seen := make(map[sdk.ThreadPlace]bool, len(places))
	for _, p := range places {
		if !seen[p] {
			seen[p] = true
			scopes, threads, seqs = append(scopes, string(p.Scope)), append(threads, p.Thread), append(seqs, p.Seq)
		}
	}
	if len(scopes) == 0 {
		return out, nil
	}
	err := db.run(ctx, readOnly, func(q dbtx) error {
		first := make([]int32, len(scopes))
		for i := range first {
			first[i] = sdk.MaxPlaceReads
		}
		return readRecords(ctx, q, readThreadSQL, []any{realm, scopes, threads, seqs, first},
			func(r *sdk.Record) { out = append(out, *r) })
	})
	if err != nil {
		return nil, fmt.Errorf("postgres: read thread: %w", classify(err))
	}
	return out, nil
}
