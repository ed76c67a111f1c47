package sqlite

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"

	"github.com/memhost/memhost/sdk"
)

// Idempotent writes need to know which record holds a content live (active
// or quarantined) in its scope. A unique index on (realm, scope,
// content_hash) answered that until schema version 5, but its keys are
// random, so every batch dirtied a page of it per record: more than half of
// a 500-record commit's WAL frames at 100k records, and a third of the
// write path's time (docs/benchmarks.md). The answer now lives in memory,
// in liveContent, loaded at open and changed only by write transactions,
// which hold wmu; the database file is locked to this process, so nothing
// else writes it.

// contentKey names a content in a scope: the first 128 bits of SHA-256
// over realm, scope and content hash. Dedup already trusts the content
// hash (SHA-256) to tell contents apart; the key adds no weaker link, and
// every hit is checked against the row it names before it is used.
type contentKey [16]byte

func keyOf(realm string, scope sdk.Scope, contentHash string) contentKey {
	h := sha256.New()
	h.Write([]byte(realm))
	h.Write([]byte{0})
	h.Write([]byte(scope))
	h.Write([]byte{0})
	h.Write([]byte(contentHash))
	var k contentKey
	copy(k[:], h.Sum(nil))
	return k
}

// isLive tells whether a record of status s holds its content against
// another copy in the scope.
func isLive(s sdk.Status) bool {
	return s == sdk.StatusActive || s == sdk.StatusQuarantined
}

// errStaleContent marks a live-content entry the records contradict. It is
// never answered: the write is rolled back, the map reloaded from the
// records and the write run again (writeTx).
var errStaleContent = errors.New("the live-content map disagrees with the records")

// liveContent maps each live content to the seq of its record. Only write
// transactions read or change it, under the database's wmu.
type liveContent struct {
	seqs map[contentKey]int64
	// stale is set when a commit failed (SQLite may have kept it or not)
	// or an entry was found wrong: the next write reloads the map from the
	// records first.
	stale bool
}

// load reads the live contents of every record, replacing what the map
// held.
func (c *liveContent) load(ctx context.Context, q querier) error {
	rows, err := q.QueryContext(ctx, `SELECT seq, realm, scope, content_hash FROM records WHERE status IN ('active', 'quarantined')`)
	if err != nil {
		return fmt.Errorf("read live contents: %w", err)
	}
	defer rows.Close()
	seqs := make(map[contentKey]int64, len(c.seqs))
	for rows.Next() {
		var seq int64
		var realm, scope, hash string
		if err := rows.Scan(&seq, &realm, &scope, &hash); err != nil {
			return fmt.Errorf("read live contents: %w", err)
		}
		seqs[keyOf(realm, sdk.Scope(scope), hash)] = seq
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("read live contents: %w", err)
	}
	c.seqs, c.stale = seqs, false
	return nil
}

// contentChange is one transaction's view of liveContent: its own changes
// over the committed map, merged into it only when the transaction
// commits.
type contentChange struct {
	base    *liveContent
	changed map[contentKey]int64 // 0 (never a row key; SQLite numbers rows from 1): no longer live
}

// seq answers the record holding k live, if any.
func (c *contentChange) seq(k contentKey) (int64, bool) {
	if seq, ok := c.changed[k]; ok {
		return seq, seq != 0
	}
	seq, ok := c.base.seqs[k]
	return seq, ok
}

func (c *contentChange) set(k contentKey, seq int64) {
	if c.changed == nil {
		c.changed = make(map[contentKey]int64)
	}
	c.changed[k] = seq
}

// add records that seq now holds k live.
func (c *contentChange) add(k contentKey, seq int64) { c.set(k, seq) }

// drop records that k is no longer live.
func (c *contentChange) drop(k contentKey) { c.set(k, 0) }

// commit merges the transaction's changes into the committed map.
func (c *contentChange) commit() {
	for k, seq := range c.changed {
		if seq == 0 {
			delete(c.base.seqs, k)
		} else {
			c.base.seqs[k] = seq
		}
	}
}
