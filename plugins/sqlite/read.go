package sqlite

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/memhost/memhost/sdk"
)

// recordColumns are the columns scanRecord reads, in order, from
// recordsWithUsage.
const recordColumns = `r.id, r.realm, r.scope, r.kind, r.title, r.description, r.body, r.tags, r.trust, r.status,
	r.supersedes, r.created_ms, r.updated_ms, r.expires_ms, r.content_hash, coalesce(u.use_count, 0), coalesce(u.last_used_ms, 0),
	r.thread_id, r.thread_seq, r.occurred_ms`

// recordsWithUsage is the FROM clause recordColumns read: each record (r)
// beside its uses (u), if any.
const recordsWithUsage = `records AS r LEFT JOIN usage AS u ON u.seq = r.seq`

type scanner interface{ Scan(dest ...any) error }

// scanRecord reads recordColumns, then any extra columns into extra.
func scanRecord(s scanner, r *sdk.Record, extra ...any) error {
	var rs recordScan
	return rs.scan(s, r, extra...)
}

// recordScan holds scanRecord's destinations, so a loop over many rows
// reuses them rather than allocating each row's afresh (a recall reads
// its hits through one).
type recordScan struct {
	rec            sdk.Record
	tags, threadID string
	created        int64
	updated        int64
	expires        int64
	lastUsed       int64
	threadSeq      int64
	occurred       int64
	dest           []any
}

// scan reads recordColumns into r, then any extra columns into extra
// (the same extra on every call of one recordScan).
func (rs *recordScan) scan(s scanner, r *sdk.Record, extra ...any) error {
	if rs.dest == nil {
		x := &rs.rec
		rs.dest = append([]any{
			&x.ID, &x.Realm, &x.Scope, &x.Kind, &x.Title, &x.Description, &x.Body, &rs.tags, &x.Trust, &x.Status,
			&x.Supersedes, &rs.created, &rs.updated, &rs.expires, &x.ContentHash, &x.UseCount, &rs.lastUsed,
			&rs.threadID, &rs.threadSeq, &rs.occurred,
		}, extra...)
	}
	if err := s.Scan(rs.dest...); err != nil {
		return err
	}
	*r = rs.rec
	r.Thread = nil
	if rs.threadID != "" {
		r.Thread = &sdk.Thread{ID: rs.threadID, Seq: rs.threadSeq}
	}
	r.Tags = splitTags(rs.tags)
	r.CreatedAt, r.UpdatedAt = fromMillis(rs.created), fromMillis(rs.updated)
	r.ExpiresAt, r.LastUsedAt = fromMillis(rs.expires), fromMillis(rs.lastUsed)
	r.OccurredAt = fromMillis(rs.occurred)
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
func (d *database) readRecords(ctx context.Context, realm, where string, args []any, add func(r *sdk.Record, seq int64)) error {
	release, err := d.acquireRead(ctx, realm)
	if err != nil {
		return err
	}
	defer release()
	if err := ctx.Err(); err != nil {
		return err
	}
	// Every caller reads at most a page of rows by key, so the query runs
	// without ctx's cancellation: watching a cancellable context costs
	// database/sql a goroutine per query, and waking it costs a recall more
	// than the read. ctx bounded the wait for the slot, which holds a
	// connection free.
	rows, err := d.r.QueryContext(context.WithoutCancel(ctx), `SELECT `+recordColumns+`, r.seq FROM `+recordsWithUsage+` WHERE `+where, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	var rs recordScan
	var seq int64
	for rows.Next() {
		var r sdk.Record
		if err := rs.scan(rows, &r, &seq); err != nil {
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
	err := d.readRecords(ctx, realm, `r.realm = ? AND r.id IN (SELECT value FROM json_each(?))`, []any{realm, string(idList)},
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
