package sqlite

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/memhost/memhost/sdk"
)

// recordColumns are the columns scanRecord reads, in order.
const recordColumns = `r.id, r.realm, r.scope, r.kind, r.title, r.description, r.body, r.tags, r.trust, r.status,
	r.supersedes, r.created_ms, r.updated_ms, r.expires_ms, r.content_hash, r.use_count, r.last_used_ms,
	r.thread_id, r.thread_seq, r.occurred_ms`

type scanner interface{ Scan(dest ...any) error }

// scanRecord reads recordColumns, then any extra columns into extra.
func scanRecord(s scanner, r *sdk.Record, extra ...any) error {
	var tags, threadID string
	var created, updated, expires, lastUsed, threadSeq, occurred int64
	dest := append([]any{
		&r.ID, &r.Realm, &r.Scope, &r.Kind, &r.Title, &r.Description, &r.Body, &tags, &r.Trust, &r.Status,
		&r.Supersedes, &created, &updated, &expires, &r.ContentHash, &r.UseCount, &lastUsed,
		&threadID, &threadSeq, &occurred,
	}, extra...)
	if err := s.Scan(dest...); err != nil {
		return err
	}
	r.Thread = nil
	if threadID != "" {
		r.Thread = &sdk.Thread{ID: threadID, Seq: threadSeq}
	}
	r.Tags = splitTags(tags)
	r.CreatedAt, r.UpdatedAt = fromMillis(created), fromMillis(updated)
	r.ExpiresAt, r.LastUsedAt = fromMillis(expires), fromMillis(lastUsed)
	r.OccurredAt = fromMillis(occurred)
	return nil
}

// fromMillis reads a stored time; 0 is the zero time.
func fromMillis(ms int64) time.Time {
	if ms == 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms).UTC()
}

// readRecords reads the records the WHERE clause where picks (over
// records AS r; it may go on to ORDER BY and LIMIT), on a read connection
// admitted as recall is, and hands each to add with its row key.
func (d *database) readRecords(ctx context.Context, where string, args []any, add func(r *sdk.Record, seq int64)) error {
	release, err := d.acquireRead(ctx)
	if err != nil {
		return err
	}
	defer release()
	rows, err := d.r.QueryContext(ctx, `SELECT `+recordColumns+`, r.seq FROM records AS r WHERE `+where, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var r sdk.Record
		var seq int64
		if err := scanRecord(rows, &r, &seq); err != nil {
			return err
		}
		add(&r, seq)
	}
	return rows.Err()
}

// get answers the records of realm named by ids, of any status, in the
// order asked; ids not there are skipped.
func (d *database) get(ctx context.Context, realm string, ids []string) ([]sdk.Record, error) {
	out := []sdk.Record{}
	if len(ids) == 0 {
		return out, nil
	}
	idList, _ := json.Marshal(ids) // []string always marshals
	byID := make(map[string]sdk.Record, len(ids))
	err := d.readRecords(ctx, `r.realm = ? AND r.id IN (SELECT value FROM json_each(?))`, []any{realm, string(idList)},
		func(r *sdk.Record, _ int64) { byID[r.ID] = *r })
	if err != nil {
		return nil, fmt.Errorf("sqlite: get: %w", err)
	}
	for _, id := range ids {
		if r, ok := byID[id]; ok {
			out = append(out, r)
		}
	}
	return out, nil
}
