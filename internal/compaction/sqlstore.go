package compaction

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/memhost/memhost/internal/statedb"
)

// SQLStore keeps compaction state in a SQLite database the host owns (its
// state database in data_dir). It creates its own table, so it can share a
// database with other host state.
type SQLStore struct{ db *sql.DB }

// schema is idempotent: the table is created on first use and kept after.
const schema = `CREATE TABLE IF NOT EXISTS compaction_state (
	realm            TEXT    NOT NULL,
	identity         TEXT    NOT NULL,
	conversation     TEXT    NOT NULL,
	watermark        INTEGER NOT NULL,
	prefix_hash      TEXT    NOT NULL,
	artifact_role    TEXT    NOT NULL,
	artifact_content TEXT    NOT NULL,
	updated_at_ms    INTEGER NOT NULL,
	reset_identity   TEXT    NOT NULL DEFAULT '',
	reset_session    TEXT    NOT NULL DEFAULT '',
	PRIMARY KEY (realm, identity, conversation)
)`

// NewSQLStore creates the compaction table in db if it is missing, and
// migrates a table made by an earlier version (see migrateSQL).
func NewSQLStore(ctx context.Context, db *sql.DB) (*SQLStore, error) {
	if err := migrateSQL(ctx, db); err != nil {
		return nil, fmt.Errorf("compaction store: %w", statedb.Classify(err))
	}
	return &SQLStore{db: db}, nil
}

// migrateSQL brings a table keyed by (realm, conversation) to the key
// (realm, identity, conversation), in one transaction: the columns an
// older table lacks are added first (the pending reset's, the owner's),
// then every row moves to its owner's identity; a row saved before owners
// were recorded moves to identity "", which only an application reaches.
func migrateSQL(ctx context.Context, db *sql.DB) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("migrate table: %w", err)
	}
	defer tx.Rollback()
	has := func(col string) (bool, error) {
		var n int
		err := tx.QueryRowContext(ctx, `SELECT count(*) FROM pragma_table_info('compaction_state') WHERE name = ?`, col).Scan(&n)
		return n > 0, err
	}
	exists, err := has("realm")
	if err != nil {
		return fmt.Errorf("inspect table: %w", err)
	}
	keyed, err := has("identity")
	if err != nil {
		return fmt.Errorf("inspect table: %w", err)
	}
	if exists && !keyed {
		for _, col := range []string{"reset_identity", "reset_session", "owner"} {
			ok, err := has(col)
			if err != nil {
				return fmt.Errorf("inspect table: %w", err)
			}
			if !ok {
				if _, err := tx.ExecContext(ctx, `ALTER TABLE compaction_state ADD COLUMN `+col+` TEXT NOT NULL DEFAULT ''`); err != nil {
					return fmt.Errorf("add column %s: %w", col, err)
				}
			}
		}
		for _, stmt := range []string{
			`ALTER TABLE compaction_state RENAME TO compaction_state_unkeyed`,
			schema,
			`INSERT INTO compaction_state (realm, identity, conversation, watermark, prefix_hash, artifact_role, artifact_content, updated_at_ms, reset_identity, reset_session)
			 SELECT realm, owner, conversation, watermark, prefix_hash, artifact_role, artifact_content, updated_at_ms, reset_identity, reset_session
			 FROM compaction_state_unkeyed`,
			`DROP TABLE compaction_state_unkeyed`,
		} {
			if _, err := tx.ExecContext(ctx, stmt); err != nil {
				return fmt.Errorf("key the table by identity: %w", err)
			}
		}
	} else if _, err := tx.ExecContext(ctx, schema); err != nil {
		return fmt.Errorf("create table: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("migrate table: %w", err)
	}
	return nil
}

func (s *SQLStore) Load(ctx context.Context, key Key) (State, bool, error) {
	var st State
	var ms int64
	err := s.db.QueryRowContext(ctx,
		`SELECT watermark, prefix_hash, artifact_role, artifact_content, updated_at_ms, reset_identity, reset_session
		 FROM compaction_state WHERE realm = ? AND identity = ? AND conversation = ?`, key.Realm, key.Identity, key.Conversation,
	).Scan(&st.Watermark, &st.PrefixHash, &st.Artifact.Role, &st.Artifact.Content, &ms, &st.Pending.Identity, &st.Pending.Session)
	if errors.Is(err, sql.ErrNoRows) {
		return State{}, false, nil
	}
	if err != nil {
		return State{}, false, fmt.Errorf("compaction store: load %s: %w", key, statedb.Classify(err))
	}
	st.UpdatedAt = time.UnixMilli(ms).UTC()
	return st, true, nil
}

// Save is a compare-and-set on the watermark, so two hosts sharing the
// database can never both advance a conversation from the same point.
func (s *SQLStore) Save(ctx context.Context, key Key, prev int, st State) error {
	args := []any{st.Watermark, st.PrefixHash, st.Artifact.Role, st.Artifact.Content, st.UpdatedAt.UnixMilli(), st.Pending.Identity, st.Pending.Session, key.Realm, key.Identity, key.Conversation}
	var res sql.Result
	var err error
	if prev == 0 {
		res, err = s.db.ExecContext(ctx,
			`INSERT INTO compaction_state (watermark, prefix_hash, artifact_role, artifact_content, updated_at_ms, reset_identity, reset_session, realm, identity, conversation)
			 VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
			 ON CONFLICT (realm, identity, conversation) DO UPDATE SET
			   watermark = excluded.watermark, prefix_hash = excluded.prefix_hash,
			   artifact_role = excluded.artifact_role, artifact_content = excluded.artifact_content,
			   updated_at_ms = excluded.updated_at_ms,
			   reset_identity = excluded.reset_identity, reset_session = excluded.reset_session
			 WHERE compaction_state.watermark = 0`, args...)
	} else {
		res, err = s.db.ExecContext(ctx,
			`UPDATE compaction_state SET watermark = ?, prefix_hash = ?, artifact_role = ?, artifact_content = ?, updated_at_ms = ?,
			   reset_identity = ?, reset_session = ?
			 WHERE realm = ? AND identity = ? AND conversation = ? AND watermark = ?`, append(args, prev)...)
	}
	if err != nil {
		return fmt.Errorf("compaction store: save %s: %w", key, statedb.Classify(err))
	}
	n, err := res.RowsAffected()
	if err != nil {
		return fmt.Errorf("compaction store: save %s: %w", key, statedb.Classify(err))
	}
	if n == 0 {
		return fmt.Errorf("compaction store: save %s at watermark %d: %w", key, prev, ErrStale)
	}
	return nil
}

func (s *SQLStore) Delete(ctx context.Context, key Key) error {
	if _, err := s.db.ExecContext(ctx, `DELETE FROM compaction_state WHERE realm = ? AND identity = ? AND conversation = ?`, key.Realm, key.Identity, key.Conversation); err != nil {
		return fmt.Errorf("compaction store: delete %s: %w", key, statedb.Classify(err))
	}
	return nil
}

func (s *SQLStore) Identities(ctx context.Context, realm, conversation string) ([]string, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT identity FROM compaction_state WHERE realm = ? AND conversation = ?`, realm, conversation)
	if err != nil {
		return nil, fmt.Errorf("compaction store: list identities of %s/%s: %w", realm, conversation, statedb.Classify(err))
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, fmt.Errorf("compaction store: list identities of %s/%s: %w", realm, conversation, statedb.Classify(err))
		}
		out = append(out, id)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("compaction store: list identities of %s/%s: %w", realm, conversation, statedb.Classify(err))
	}
	return out, nil
}

// PendingResets lists the conversations whose summary is saved and whose
// session reset is not done yet.
func (s *SQLStore) PendingResets(ctx context.Context) (map[Key]PendingReset, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT realm, identity, conversation, reset_identity, reset_session FROM compaction_state WHERE reset_session <> ''`)
	if err != nil {
		return nil, fmt.Errorf("compaction store: list pending resets: %w", statedb.Classify(err))
	}
	defer rows.Close()
	out := map[Key]PendingReset{}
	for rows.Next() {
		var k Key
		var p PendingReset
		if err := rows.Scan(&k.Realm, &k.Identity, &k.Conversation, &p.Identity, &p.Session); err != nil {
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
