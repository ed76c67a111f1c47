package sessionstore

import (
	"cmp"
	"context"
	"database/sql"
	"slices"

	"github.com/memhost/memhost/coordinator"
)

// evictFrom drops n sessions of key's realm, never key itself: each time
// the least recently visited session of the identity holding the most
// sessions (key's own counted), ties to the least recently visited of those
// identities' sessions. One pass does all n: evicting the identity with the
// most sessions, again and again, takes each identity's sessions from the
// oldest, so the one taken next is the oldest among those furthest from
// their identity's newest. Picking the victims reads the realm, which is
// why a realm past its bound evicts in steps (coordinator.EvictionSlack).
// ranked reports that it ranked the whole realm (many identities in play).
func evictFrom(ctx context.Context, tx *sql.Tx, key coordinator.SessionKey, n int) (evicted []coordinator.SessionKey, ranked bool, err error) {
	victims, ok, err := pickFromLargest(ctx, tx, key, n)
	if err != nil {
		return nil, false, err
	}
	if !ok {
		evicted, err = evictByRanking(ctx, tx, key, n)
		return evicted, true, err
	}
	if len(victims) == 0 {
		return nil, false, nil
	}
	del, err := tx.PrepareContext(ctx, `DELETE FROM sessions WHERE realm = ? AND identity = ? AND session = ?`)
	if err != nil {
		return nil, false, err
	}
	defer del.Close()
	for _, v := range victims {
		if _, err := del.ExecContext(ctx, v.Realm, v.Identity, v.Session); err != nil {
			return nil, false, err
		}
	}
	return victims, false, nil
}

// rankedSteps is how many eviction steps of a realm whose last one had
// many identities in play rank the whole realm straight away: the count
// per identity that tells the cases apart costs a fifth of the ranking,
// so such a realm pays for it on one step in rankedSteps+1.
const rankedSteps = 7

// evict is evictFrom for the store, skipping the read of the largest
// identities in a realm where it last found too many in play.
func (s *Store) evict(ctx context.Context, tx *sql.Tx, key coordinator.SessionKey, n int) ([]coordinator.SessionKey, error) {
	if s.ranked[key.Realm] > 0 {
		s.ranked[key.Realm]--
		return evictByRanking(ctx, tx, key, n)
	}
	evicted, ranked, err := evictFrom(ctx, tx, key, n)
	if ranked {
		s.ranked[key.Realm] = rankedSteps
	} else {
		delete(s.ranked, key.Realm)
	}
	return evicted, err
}

// maxLargest bounds the identities pickFromLargest reads one by one; past
// it the realm-wide ranking is cheaper.
const maxLargest = 16

// pickFromLargest answers evictFrom's n victims, in its order, reading
// only the identities that can lose one: a count per identity, then the
// oldest few of each of those. Ranking the whole realm in SQL (a window
// over every session) cost about 9 ms at 10,000 sessions, once per
// EvictionSlack new sessions; a realm flooded by a few identities reads a
// hundred rows instead, and a realm of one session per identity its oldest
// n+1. ok is false when more than maxLargest identities are in play and
// one holds more than one session.
//
// Rank sessions within their identity newest first (rank 1): the victims
// are the n of highest rank, ties to the oldest. Every session of rank r
// or more is among its identity's count-r+1 oldest, so with r the highest
// rank at which the sessions of rank r or more number n+1 (one more, for
// key, which is ranked but never dropped), those oldest hold every victim.
func pickFromLargest(ctx context.Context, tx *sql.Tx, key coordinator.SessionKey, n int) (victims []coordinator.SessionKey, ok bool, err error) {
	if n <= 0 {
		return nil, true, nil
	}
	type identityCount struct {
		identity string
		sessions int
	}
	var counts []identityCount
	// The largest maxLargest+1 are enough: once one more than maxLargest
	// identities are in play the ranking is read instead, and any not read
	// holds no more sessions than the last one read.
	rows, err := tx.QueryContext(ctx, `SELECT identity, count(*) AS n FROM sessions WHERE realm = ?
		GROUP BY identity ORDER BY n DESC LIMIT ?`, key.Realm, maxLargest+1)
	if err != nil {
		return nil, false, err
	}
	for rows.Next() {
		var c identityCount
		if err := rows.Scan(&c.identity, &c.sessions); err != nil {
			rows.Close()
			return nil, false, err
		}
		counts = append(counts, c)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, false, err
	}
	if len(counts) == 0 {
		return nil, true, nil
	}
	// in: the identities holding a session of rank r or more, the first
	// ones of counts; atLeast: how many such sessions there are.
	in, atLeast, r := 0, 0, counts[0].sessions
	for ; ; r-- {
		for in < len(counts) && counts[in].sessions >= r {
			in++
		}
		if in > maxLargest {
			if counts[0].sessions == 1 {
				// Every identity holds one session, all of rank 1: the
				// victims are the realm's oldest.
				victims, err := pickOldest(ctx, tx, key, n)
				return victims, err == nil, err
			}
			return nil, false, nil
		}
		if atLeast += in; atLeast >= n+1 || r == 1 {
			break
		}
	}
	type candidate struct {
		key     coordinator.SessionKey
		touched int64
		rank    int
	}
	var cands []candidate
	for _, c := range counts[:in] {
		rows, err := tx.QueryContext(ctx, `SELECT session, touched_at FROM sessions WHERE realm = ? AND identity = ?
			ORDER BY touched_at, session LIMIT ?`, key.Realm, c.identity, c.sessions-r+1)
		if err != nil {
			return nil, false, err
		}
		for rank := c.sessions; rows.Next(); rank-- {
			k := coordinator.SessionKey{Realm: key.Realm, Identity: c.identity}
			var touched int64
			if err := rows.Scan(&k.Session, &touched); err != nil {
				rows.Close()
				return nil, false, err
			}
			if k != key {
				cands = append(cands, candidate{k, touched, rank})
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, false, err
		}
	}
	slices.SortFunc(cands, func(a, b candidate) int {
		// An identity holds one session of each rank: rank and identity
		// name one session, so the order is total without the session.
		return cmp.Or(cmp.Compare(b.rank, a.rank), cmp.Compare(a.touched, b.touched), cmp.Compare(a.key.Identity, b.key.Identity))
	})
	for _, c := range cands[:min(n, len(cands))] {
		victims = append(victims, c.key)
	}
	return victims, true, nil
}

// pickOldest answers the n least recently visited sessions of key's realm
// but key, oldest first: evictFrom's victims when no identity holds more
// than one session.
func pickOldest(ctx context.Context, tx *sql.Tx, key coordinator.SessionKey, n int) ([]coordinator.SessionKey, error) {
	rows, err := tx.QueryContext(ctx, `SELECT identity, session FROM sessions WHERE realm = ?
		ORDER BY touched_at, identity, session LIMIT ?`, key.Realm, n+1)
	if err != nil {
		return nil, err
	}
	oldest, err := sessionKeys(rows, key.Realm)
	if err != nil {
		return nil, err
	}
	victims := slices.DeleteFunc(oldest, func(k coordinator.SessionKey) bool { return k == key })
	return victims[:min(n, len(victims))], nil
}

// evictByRanking is evictFrom through one statement that ranks the whole
// realm.
func evictByRanking(ctx context.Context, tx *sql.Tx, key coordinator.SessionKey, n int) ([]coordinator.SessionKey, error) {
	if n <= 0 {
		return nil, nil // SQLite reads a negative LIMIT as none
	}
	rows, err := tx.QueryContext(ctx, `DELETE FROM sessions WHERE realm = ? AND (identity, session) IN (
			SELECT identity, session FROM (
				SELECT identity, session, touched_at,
					row_number() OVER (PARTITION BY identity ORDER BY touched_at DESC, session DESC) AS rank
				FROM sessions WHERE realm = ?)
			WHERE NOT (identity = ? AND session = ?)
			ORDER BY rank DESC, touched_at, identity, session LIMIT ?)
		RETURNING identity, session`,
		key.Realm, key.Realm, key.Identity, key.Session, n)
	if err != nil {
		return nil, err
	}
	return sessionKeys(rows, key.Realm)
}

// sessionKeys reads rows of (identity, session) of realm to the end, and
// closes them.
func sessionKeys(rows *sql.Rows, realm string) ([]coordinator.SessionKey, error) {
	defer rows.Close()
	var keys []coordinator.SessionKey
	for rows.Next() {
		k := coordinator.SessionKey{Realm: realm}
		if err := rows.Scan(&k.Identity, &k.Session); err != nil {
			return nil, err
		}
		keys = append(keys, k)
	}
	return keys, rows.Err()
}
