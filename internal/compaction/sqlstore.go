package compaction

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"github.com/memhost/memhost/internal/statedb"
	"time"
)

// SQLStore keeps compaction state in a SQLite database the host owns (its
// state database in data_dir). It creates its own table, so it can share a
// database with other host state.
type SQLStore struct{ db *sql.DB }

// schema is idempotent: the table is created on first use and kept after.
const schema = `CREATE TABLE IF NOT EXISTS compaction_state (
	realm            TEXT    NOT NULL,
	conversation     TEXT    NOT NULL,
	watermark        INTEGER NOT NULL,
	prefix_hash      TEXT    NOT NULL,
	artifact_role    TEXT    NOT NULL,
	artifact_content TEXT    NOT NULL,
	updated_at_ms    INTEGER NOT NULL,
	reset_identity   TEXT    NOT NULL DEFAULT '',
	reset_session    TEXT    NOT NULL DEFAULT '',
	owner            TEXT    NOT NULL DEFAULT '',
	PRIMARY KEY (realm, conversation)
)`

// NewSQLStore creates the compaction table in db if it is missing, and
// adds the columns a table made before them lacks: the pending reset's,
// and the owner's (a row saved before owners were recorded gets an empty
// owner, unknown, which only an application may touch).
func NewSQLStore(ctx context.Context, db *sql.DB) (*SQLStore, error) {
	if _, err := db.ExecContext(ctx, schema); err != nil {
		return nil, fmt.Errorf("compaction store: create table: %w", statedb.Classify(err))
	}
	for _, col := range []string{"reset_identity", "reset_session", "owner"} {
		var have int
		if err := db.QueryRowContext(ctx, `SELECT count(*) FROM pragma_table_info('compaction_state') WHERE name = ?`, col).Scan(&have); err != nil {
			return nil, fmt.Errorf("compaction store: inspect table: %w", statedb.Classify(err))
		}
		if have == 0 {
			if _, err := db.ExecContext(ctx, `ALTER TABLE compaction_state ADD COLUMN `+col+` TEXT NOT NULL DEFAULT ''`); err != nil {
				return nil, fmt.Errorf("compaction store: add column %s: %w", col, statedb.Classify(err))
			}
		}
	}
	return &SQLStore{db: db}, nil
}

func (s *SQLStore) Load(ctx context.Context, key Key) (State, bool, error) {
	var st State
	var ms int64
	err := s.db.QueryRowContext(ctx,
		`SELECT watermark, prefix_hash, artifact_role, artifact_content, updated_at_ms, reset_identity, reset_session, owner
		 FROM compaction_state WHERE realm = ? AND conversation = ?`, key.Realm, key.Conversation,
	).Scan(&st.Watermark, &st.PrefixHash, &st.Artifact.Role, &st.Artifact.Content, &ms, &st.Pending.Identity, &st.Pending.Session, &st.Owner)
	if errors.Is(err, sql.ErrNoRows) {
		return State{}, false, nil
	}
	if err != nil {
		return State{}, false, fmt.Errorf("compaction store: load %s/%s: %w", key.Realm, key.Conversation, statedb.Classify(err))
	}
	st.UpdatedAt = time.UnixMilli(ms).UTC()
	return st, true, nil
}

// Save is a compare-and-set on the watermark, so two hosts sharing the
// database can never both advance a conversation from the same point.
func (s *SQLStore) Save(ctx context.Context, key Key, prev int, st State) error {
	args := []any{st.Watermark, st.PrefixHash, st.Artifact.Role, st.Artifact.Content, st.UpdatedAt.UnixMilli(), st.Pending.Identity, st.Pending.Session, st.Owner, key.Realm, key.Conversation}
	var res sql.Result
	var err error
	if prev == 0 {
		res, err = s.db.ExecContext(ctx,
			`INSERT INTO compaction_state (watermark, prefix_hash, artifact_role, artifact_content, updated_at_ms, reset_identity, reset_session, owner, realm, conversation)
			 VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
			 ON CONFLICT (realm, conversation) DO UPDATE SET
			   watermark = excluded.watermark, prefix_hash = excluded.prefix_hash,
			   artifact_role = excluded.artifact_role, artifact_content = excluded.artifact_content,
			   updated_at_ms = excluded.updated_at_ms,
			   reset_identity = excluded.reset_identity, reset_session = excluded.reset_session,
			   owner = excluded.owner
			 WHERE compaction_state.watermark = 0`, args...)
	} else {
		res, err = s.db.ExecContext(ctx,
			`UPDATE compaction_state SET watermark = ?, prefix_hash = ?, artifact_role = ?, artifact_content = ?, updated_at_ms = ?,
			   reset_identity = ?, reset_session = ?, owner = ?
			 WHERE realm = ? AND conversation = ? AND watermark = ?`, append(args, prev)...)
	}
	if err != nil {
		return fmt.Errorf("compaction store: save %s/%s: %w", key.Realm, key.Conversation, statedb.Classify(err))
	}
	n, err := res.RowsAffected()
	if err != nil {
		return fmt.Errorf("compaction store: save %s/%s: %w", key.Realm, key.Conversation, statedb.Classify(err))
	}
	if n == 0 {
		return fmt.Errorf("compaction store: save %s/%s at watermark %d: %w", key.Realm, key.Conversation, prev, ErrStale)
	}
	return nil
}

func (s *SQLStore) Delete(ctx context.Context, key Key) error {
	if _, err := s.db.ExecContext(ctx, `DELETE FROM compaction_state WHERE realm = ? AND conversation = ?`, key.Realm, key.Conversation); err != nil {
		return fmt.Errorf("compaction store: delete %s/%s: %w", key.Realm, key.Conversation, statedb.Classify(err))
	}
	return nil
}

// PendingResets lists the conversations whose summary is saved and whose
// session reset is not done yet.
func (s *SQLStore) PendingResets(ctx context.Context) (map[Key]PendingReset, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT realm, conversation, reset_identity, reset_session FROM compaction_state WHERE reset_session <> ''`)
	if err != nil {
		return nil, fmt.Errorf("compaction store: list pending resets: %w", statedb.Classify(err))
	}
	defer rows.Close()
	out := map[Key]PendingReset{}
	for rows.Next() {
		var k Key
		var p PendingReset
		if err := rows.Scan(&k.Realm, &k.Conversation, &p.Identity, &p.Session); err != nil {
			return nil, fmt.Errorf("compaction store: list pending resets: %w", statedb.Classify(err))
		}
		out[k] = p
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("compaction store: list pending resets: %w", statedb.Classify(err))
	}
	return out, nil
}

// compile-time checks that both stores satisfy Store.
var (
	_ Store         = (*SQLStore)(nil)
	_ Store         = (*MemoryStore)(nil)
	_ PendingLister = (*SQLStore)(nil)
	_ PendingLister = (*MemoryStore)(nil)
)
