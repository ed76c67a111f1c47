package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/memhost/memhost/sdk"
	"github.com/memhost/memhost/sdk/usage"
)

// The record manifest lists recallable rows (active, unexpired) of the
// asked scopes, or of every scope of the realm when none are asked, with
// the sqlite provider's working-set rule:
//
//  1. the k used records of highest usage rank (usage.Key, each use
//     decayed by age), highest first, then
//  2. the newest never-used records by updated time, filling up to 2k.
//
// Full lists every recallable row, newest first, with the same rank.

const manifestColumns = `id, scope, kind, title, description, updated_ms, use_count, usage_key`

// manifestFilter: $1 is the realm, $2 now in milliseconds.
const manifestFilter = `realm = $1 AND status = 'active' AND (expires_ms = 0 OR expires_ms > $2)`

func manifest(ctx context.Context, db *pgdb, q sdk.ManifestQuery, now time.Time) ([]sdk.ManifestRow, error) {
	if err := sdk.ValidateRealm(q.Realm); err != nil {
		return nil, fmt.Errorf("postgres: manifest: %w", err)
	}
	for i, s := range q.Scopes {
		if err := s.Validate(); err != nil {
			return nil, fmt.Errorf("postgres: manifest: scopes[%d]: %w", i, err)
		}
	}
	var rows []sdk.ManifestRow
	var err error
	switch q.Tier {
	case sdk.TierFull:
		err = db.run(ctx, readOnly, func(tx dbtx) (err error) {
			rows, err = listRows(ctx, tx, `SELECT `+manifestColumns+` FROM records
				WHERE `+manifestFilter+` AND ($3::text[] IS NULL OR scope = ANY($3))
				ORDER BY updated_ms DESC, seq DESC`, now, q.Realm, now.UnixMilli(), scopeList(q.Scopes))
			return err
		})
	case sdk.TierWorkingSet:
		if q.K <= 0 {
			return nil, fmt.Errorf("postgres: manifest: working set k is %d, must be positive: %w", q.K, sdk.ErrInvalid)
		}
		err = pgx.BeginTxFunc(ctx, db, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) (err error) {
			rows, err = workingSet(ctx, tx, q, min(q.K, usage.MaxWorkingSetK), now)
			return err
		})
	default:
		return nil, fmt.Errorf("postgres: manifest: unknown tier %d: %w", q.Tier, sdk.ErrInvalid)
	}
	if err != nil {
		return nil, fmt.Errorf("postgres: manifest: %w", classify(err))
	}
	return rows, nil
}

// scopeList is a scope filter as a SQL array; nil (NULL) means any scope.
func scopeList(scopes []sdk.Scope) []string {
	if len(scopes) == 0 {
		return nil
	}
	out := make([]string, len(scopes))
	for i, s := range scopes {
		out[i] = string(s)
	}
	return out
}

// workingSet reads the used and the unused rows scope by scope, each from
// its own partial index in rank (or time) order, in one snapshot.
func workingSet(ctx context.Context, tx pgx.Tx, q sdk.ManifestQuery, k int, now time.Time) ([]sdk.ManifestRow, error) {
	const used = `SELECT ` + manifestColumns + ` FROM records WHERE ` + manifestFilter + ` AND use_count > 0`
	const unused = `SELECT ` + manifestColumns + ` FROM records WHERE ` + manifestFilter + ` AND use_count = 0`
	const byRank = ` ORDER BY usage_key DESC, seq DESC LIMIT $3`
	const byTime = ` ORDER BY updated_ms DESC, seq DESC LIMIT $3`
	ranked, err := perScope(ctx, tx, q, now, used, byRank, k)
	if err != nil {
		return nil, err
	}
	return usage.WorkingSet(k, ranked, func(n int) ([]sdk.ManifestRow, error) {
		return perScope(ctx, tx, q, now, unused, byTime, n)
	})
}

// perScope runs base+order with limit n for the realm (no scopes) or for
// each asked scope, concatenating the answers.
func perScope(ctx context.Context, tx pgx.Tx, q sdk.ManifestQuery, now time.Time, base, order string, n int) ([]sdk.ManifestRow, error) {
	if n <= 0 {
		return nil, nil
	}
	if len(q.Scopes) == 0 {
		return listRows(ctx, tx, base+order, now, q.Realm, now.UnixMilli(), n)
	}
	var out []sdk.ManifestRow
	for _, s := range distinct(q.Scopes) {
		rows, err := listRows(ctx, tx, base+` AND scope = $4`+order, now, q.Realm, now.UnixMilli(), n, string(s))
		if err != nil {
			return nil, err
		}
		out = append(out, rows...)
	}
	return out, nil
}

type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

func listRows(ctx context.Context, db querier, query string, now time.Time, args ...any) ([]sdk.ManifestRow, error) {
	rows, err := db.Query(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []sdk.ManifestRow{}
	for rows.Next() {
		var r sdk.ManifestRow
		var updated, uses int64
		var key float64
		if err := rows.Scan(&r.ID, &r.Scope, &r.Kind, &r.Title, &r.Description, &updated, &uses, &key); err != nil {
			return nil, err
		}
		r.UpdatedAt = fromMillis(updated)
		if uses > 0 {
			r.Rank = usage.Rank(key, now)
		}
		out = append(out, r)
	}
	return out, rows.Err()
}
