package postgres

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
)

// The change log. Every transaction that changes what recall ranks (a
// record stored, revived, superseded or forgotten, a realm re-indexed)
// ends by appending one row per record it touched to changes and
// notifying changesChannel, so every plugin process's replica (replica.go)
// re-reads those records. A row says only which record to re-read: the
// replica reads its state from records in the same snapshot as the log.
//
// Rows must become visible in seq order, or a replica reading "every row
// after my position" could pass a row whose transaction commits later. So
// appending takes a transaction advisory lock held until commit: the next
// writer numbers its rows only after the previous one is visible
// (PostgreSQL makes a commit visible before it releases its locks). A gap
// in seq is then a rolled-back transaction, never one still in flight.
// The lock is taken last, after every row lock, and nothing waits while
// holding it but the insert and the commit, so it adds no deadlock; it
// does serialise the commits of writers on every host.

// changesLockKey is the first key of the change log's advisory lock (the
// second is the schema's hash): "memc" in ASCII.
const changesLockKey = 0x6d656d63

// trimLockKey keeps two trimmers from working at once: "memt".
const trimLockKey = 0x6d656d74

// changesChannel is the NOTIFY channel; the payload is "schema seq".
const changesChannel = "memhost_changes"

// Change ops: a record to re-read (put, delete: which the transaction did,
// for people reading the log), or a whole realm (after a re-index).
const (
	opPut    = "put"
	opDelete = "delete"
	opRealm  = "realm"
)

// logChanges appends one change per id of realm (op for all) and notifies
// replicas at commit; it answers the highest seq written, 0 when ids is
// empty. It must be the transaction's last statement but the commit.
func logChanges(ctx context.Context, tx pgx.Tx, realm, op string, ids []string) (int64, error) {
	realms := make([]string, len(ids))
	for i := range realms {
		realms[i] = realm
	}
	return appendChanges(ctx, tx, op, realms, ids)
}

// logRealms appends a whole-realm change for each of realms (see
// logChanges).
func logRealms(ctx context.Context, tx pgx.Tx, realms []string) (int64, error) {
	return appendChanges(ctx, tx, opRealm, realms, make([]string, len(realms)))
}

func appendChanges(ctx context.Context, tx pgx.Tx, op string, realms, ids []string) (int64, error) {
	if len(ids) == 0 {
		return 0, nil
	}
	if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1, hashtext(current_schema()))", changesLockKey); err != nil {
		return 0, fmt.Errorf("lock the change log: %w", err)
	}
	var seq int64
	err := tx.QueryRow(ctx, `
		WITH ins AS (
			INSERT INTO changes (realm, record_id, op) SELECT u.realm, u.id, $1 FROM unnest($2::text[], $3::text[]) AS u(realm, id)
			RETURNING seq
		), top AS (SELECT max(seq) AS seq FROM ins),
		sent AS (SELECT pg_notify($4, current_schema() || ' ' || top.seq) FROM top)
		SELECT top.seq FROM top, sent`, op, realms, ids, changesChannel).Scan(&seq)
	if err != nil {
		return 0, fmt.Errorf("log changes: %w", err)
	}
	return seq, nil
}

// trimGrace is how long a change every live replica has applied stays in
// the log: a replica loading meanwhile (it registers once loaded) starts
// from a position inside it rather than reloading. Nanoseconds, atomic:
// a test changes it while trimmers run.
var trimGrace = func() *atomic.Int64 {
	var g atomic.Int64
	g.Store(int64(time.Minute))
	return &g
}()

// replicaLiveFor is how long a replica's heartbeat counts it live.
var replicaLiveFor = 3 * heartbeatInterval

// heartbeatInterval is how often a replica records its position.
var heartbeatInterval = 10 * time.Second

// trimChanges deletes the changes every live replica has applied (after
// trimGrace), and those older than retention whatever a replica has
// applied (that replica finds the gap and reloads) but those after the
// snapshot of a live replica's load (a load slower than the retention
// would find them gone and load again, for ever); it raises the horizon
// to what it deleted. One trimmer works at a time; the others skip.
func trimChanges(ctx context.Context, db *pgdb, retention time.Duration) (int64, error) {
	var deleted int64
	err := inTx(ctx, db, func(tx pgx.Tx) error {
		var got bool
		if err := tx.QueryRow(ctx, "SELECT pg_try_advisory_xact_lock($1, hashtext(current_schema()))", trimLockKey).Scan(&got); err != nil || !got {
			return err
		}
		if _, err := tx.Exec(ctx, "DELETE FROM replicas WHERE seen < now() - make_interval(secs => $1)", replicaLiveFor.Seconds()); err != nil {
			return err
		}
		// Below the slowest live replica and older than the grace, or older
		// than the retention and below every live replica loading.
		var upTo int64
		err := tx.QueryRow(ctx, `
			SELECT greatest(
				(SELECT coalesce(max(seq), 0) FROM changes
					WHERE seq <= (SELECT coalesce(min(applied), 9223372036854775807) FROM replicas) AND at < now() - make_interval(secs => $1)),
				(SELECT coalesce(max(seq), 0) FROM changes
					WHERE seq <= (SELECT coalesce(min(applied), 9223372036854775807) FROM replicas WHERE loading) AND at < now() - make_interval(secs => $2)))`,
			time.Duration(trimGrace.Load()).Seconds(), retention.Seconds()).Scan(&upTo)
		if err != nil || upTo == 0 {
			return err
		}
		tag, err := tx.Exec(ctx, "DELETE FROM changes WHERE seq <= $1", upTo)
		if err != nil {
			return err
		}
		deleted = tag.RowsAffected()
		_, err = tx.Exec(ctx, "UPDATE change_horizon SET trimmed = greatest(trimmed, $1)", upTo)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("trim the change log: %w", err)
	}
	return deleted, nil
}

// heartbeat records a replica's applied position, and whether it is
// loading (for trimChanges).
func heartbeat(ctx context.Context, db dbtx, name string, applied int64, loading bool) error {
	_, err := db.Exec(ctx, `INSERT INTO replicas (name, applied, seen, loading) VALUES ($1, $2, now(), $3)
		ON CONFLICT (name) DO UPDATE SET applied = excluded.applied, seen = excluded.seen, loading = excluded.loading`, name, applied, loading)
	if err != nil {
		return fmt.Errorf("record the replica's position: %w", classify(err))
	}
	return nil
}

// trimLoop trims the change log every heartbeatInterval in a process
// without a replica: writers log changes whether or not a replica follows
// them, so every process trims.
func trimLoop(ctx context.Context, db *pgdb, retention time.Duration, log *slog.Logger) {
	every(ctx, heartbeatInterval, func() bool {
		if _, err := trimChanges(ctx, db, retention); err != nil && ctx.Err() == nil {
			log.Debug("trim change log", "error", err)
		}
		return true
	})
}
