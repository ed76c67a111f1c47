package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"time"

	"github.com/memhost/memhost/sdk"
	"github.com/memhost/memhost/sdk/usage"
)

// The record manifest lists recallable rows (active, unexpired) of the
// asked scopes, or of every scope of the realm when none are asked.
//
// Working set(k): a record is ranked once it has been used (MarkUsed), and
// its rank is its use count with each use decayed by age, halving every
// usage.HalfLife (see usage.Key): so both how often and how lately it was used
// count. The tier lists
//
//  1. the k used records of highest rank, highest first, then
//  2. the newest never-used records (rank 0) by updated time, newest first,
//     filling the list up to 2k rows.
//
// Used records outside the top k are left out, even when newer than the
// unused ones listed. Full lists every recallable row, newest first, with
// the same rank (0 for never-used rows).

// manifestColumns are the columns scanManifestRow reads, from
// recordsWithUsage.
const manifestColumns = `r.id, r.scope, r.kind, r.title, r.description, r.updated_ms, coalesce(u.use_count, 0), coalesce(u.usage_key, 0)`

// manifestFilter is the condition every listed row meets; ?1 is the realm,
// ?2 now in milliseconds.
const manifestFilter = `r.realm = ?1 AND r.status = 'active' AND (r.expires_ms = 0 OR r.expires_ms > ?2)`

func (d *database) manifest(ctx context.Context, q sdk.ManifestQuery, now time.Time) ([]sdk.ManifestRow, error) {
	var rows []sdk.ManifestRow
	var err error
	switch q.Tier {
	case sdk.TierFull:
		rows, err = d.fullManifest(ctx, q, now)
	case sdk.TierWorkingSet:
		if q.K <= 0 {
			return nil, fmt.Errorf("sqlite: manifest: working set k is %d, must be positive: %w", q.K, sdk.ErrInvalid)
		}
		rows, err = d.workingSet(ctx, q, min(q.K, usage.MaxWorkingSetK), now)
	default:
		return nil, fmt.Errorf("sqlite: manifest: unknown tier %d: %w", q.Tier, sdk.ErrInvalid)
	}
	if err != nil {
		return nil, fmt.Errorf("sqlite: manifest: %w", err)
	}
	return rows, nil
}

func (d *database) fullManifest(ctx context.Context, q sdk.ManifestQuery, now time.Time) ([]sdk.ManifestRow, error) {
	// Admitted as every other read is: straight from the pool, a realm's
	// flood of full manifests took the connections from other realms'
	// recalls, which database/sql hands to a random waiter.
	release, err := d.acquireRead(ctx, q.Realm)
	if err != nil {
		return nil, err
	}
	defer release()
	return d.listRows(ctx, d.r, `SELECT `+manifestColumns+` FROM `+recordsWithUsage+`
		WHERE `+manifestFilter+` AND (?3 IS NULL OR r.scope IN (SELECT value FROM json_each(?3)))
		ORDER BY r.updated_ms DESC, r.seq DESC`, now, q.Realm, now.UnixMilli(), jsonScopes(q.Scopes))
}

// workingSet reads the used rows in rank order from the order in memory
// (usage.go) and the newest unused rows scope by scope through the time
// indexes, so only about 2k rows per scope are read however many the
// scopes hold; one snapshot serves both parts.
func (d *database) workingSet(ctx context.Context, q sdk.ManifestQuery, k int, now time.Time) ([]sdk.ManifestRow, error) {
	release, err := d.acquireRead(ctx, q.Realm)
	if err != nil {
		return nil, err
	}
	defer release()
	tx, err := d.r.BeginTx(ctx, nil)
	if err != nil {
		return nil, err
	}
	defer tx.Rollback()
	// The snapshot starts with the first read, which must come before the
	// order in memory is read: a record first used between the two would
	// otherwise be in neither part (not yet in the order, no longer unused
	// in the snapshot).
	var one int
	if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM (SELECT 1 FROM records LIMIT 1)`).Scan(&one); err != nil {
		return nil, err
	}
	ranked, err := d.rankedRows(ctx, tx, q, k, now)
	if err != nil {
		return nil, err
	}
	return usage.WorkingSet(k, ranked, func(n int) ([]sdk.ManifestRow, error) {
		return d.unusedRows(ctx, tx, q, now, n)
	})
}

// unusedRows reads the n newest rows without uses of the realm (no scopes)
// or of each asked scope, concatenating the answers.
func (d *database) unusedRows(ctx context.Context, tx *sql.Tx, q sdk.ManifestQuery, now time.Time, n int) ([]sdk.ManifestRow, error) {
	if n <= 0 {
		return nil, nil
	}
	const unused = `SELECT ` + manifestColumns + ` FROM ` + recordsWithUsage + ` WHERE ` + manifestFilter + ` AND u.seq IS NULL`
	const byTime = ` ORDER BY r.updated_ms DESC, r.seq DESC LIMIT ?3`
	if len(q.Scopes) == 0 {
		return d.listRows(ctx, tx, unused+byTime, now, q.Realm, now.UnixMilli(), n)
	}
	var out []sdk.ManifestRow
	for _, s := range distinct(q.Scopes) {
		rows, err := d.listRows(ctx, tx, unused+` AND r.scope = ?4`+byTime, now, q.Realm, now.UnixMilli(), n, string(s))
		if err != nil {
			return nil, err
		}
		out = append(out, rows...)
	}
	return out, nil
}

type querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

func (d *database) listRows(ctx context.Context, db querier, query string, now time.Time, args ...any) ([]sdk.ManifestRow, error) {
	rows, err := db.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []sdk.ManifestRow{}
	for rows.Next() {
		r, err := scanManifestRow(rows, now)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// scanManifestRow reads any leading columns into lead, then
// manifestColumns.
func scanManifestRow(s scanner, now time.Time, lead ...any) (sdk.ManifestRow, error) {
	var r sdk.ManifestRow
	var updated, uses int64
	var key float64
	if err := s.Scan(append(lead, &r.ID, &r.Scope, &r.Kind, &r.Title, &r.Description, &updated, &uses, &key)...); err != nil {
		return sdk.ManifestRow{}, err
	}
	r.UpdatedAt = fromMillis(updated)
	if uses > 0 {
		r.Rank = usage.Rank(key, now)
	}
	return r, nil
}

// jsonScopes is scopes as a JSON list parameter, nil when there are none.
func jsonScopes(scopes []sdk.Scope) any {
	if len(scopes) == 0 {
		return nil
	}
	list := make([]string, len(scopes))
	for i, s := range scopes {
		list[i] = string(s)
	}
	b, _ := json.Marshal(list) // []string always marshals
	return string(b)
}
