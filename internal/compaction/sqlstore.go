package compaction

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
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
	PRIMARY KEY (realm, conversation)
)`

// NewSQLStore creates the compaction table in db if it is missing.
func NewSQLStore(ctx context.Context, db *sql.DB) (*SQLStore, error) {
	if _, err := db.ExecContext(ctx, schema); err != nil {
		return nil, fmt.Errorf("compaction store: create table: %w", err)
	}
	return &SQLStore{db: db}, nil
}

func (s *SQLStore) Load(ctx context.Context, key Key) (State, bool, error) {
	var st State
	var ms int64
	err := s.db.QueryRowContext(ctx,
		`SELECT watermark, prefix_hash, artifact_role, artifact_content, updated_at_ms
		 FROM compaction_state WHERE realm = ? AND conversation = ?`, key.Realm, key.Conversation,
	).Scan(&st.Watermark, &st.PrefixHash, &st.Artifact.Role, &st.Artifact.Content, &ms)
	if errors.Is(err, sql.ErrNoRows) {
		return State{}, false, nil
	}
	if err != nil {
		return State{}, false, fmt.Errorf("compaction store: load %s/%s: %w", key.Realm, key.Conversation, err)
	}
	st.UpdatedAt = time.UnixMilli(ms).UTC()
	return st, true, nil
}

// Save is a compare-and-set on the watermark, so two hosts sharing the
// database can never both advance a conversation from the same point.
func (s *SQLStore) Save(ctx context.Context, key Key, prev int, st State) error {
	args := []any{st.Watermark, st.PrefixHash, st.Artifact.Role, st.Artifact.Content, st.UpdatedAt.UnixMilli(), key.Realm, key.Conversation}
	var res sql.Result
	var err error
	if prev == 0 {
		res, err = s.db.ExecContext(ctx,
			`INSERT INTO compaction_state (watermark, prefix_hash, artifact_role, artifact_content, updated_at_ms, realm, conversation)
			 VALUES (?, ?, ?, ?, ?, ?, ?)
			 ON CONFLICT (realm, conversation) DO UPDATE SET
			   watermark = excluded.watermark, prefix_hash = excluded.prefix_hash,
			   artifact_role = excluded.artifact_role, artifact_content = excluded.artifact_content,
			   updated_at_ms = excluded.updated_at_ms
			 WHERE compaction_state.watermark = 0`, args...)
	} else {
		res, err = s.db.ExecContext(ctx,
			`UPDATE compaction_state SET watermark = ?, prefix_hash = ?, artifact_role = ?, artifact_content = ?, updated_at_ms = ?
			 WHERE realm = ? AND conversation = ? AND watermark = ?`, append(args, prev)...)
	}
	if err != nil {
		return fmt.Errorf("compaction store: save %s/%s: %w", key.Realm, key.Conversation, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return fmt.Errorf("compaction store: save %s/%s: %w", key.Realm, key.Conversation, err)
	}
	if n == 0 {
		return fmt.Errorf("compaction store: save %s/%s at watermark %d: %w", key.Realm, key.Conversation, prev, ErrStale)
	}
	return nil
}

func (s *SQLStore) Delete(ctx context.Context, key Key) error {
	if _, err := s.db.ExecContext(ctx, `DELETE FROM compaction_state WHERE realm = ? AND conversation = ?`, key.Realm, key.Conversation); err != nil {
		return fmt.Errorf("compaction store: delete %s/%s: %w", key.Realm, key.Conversation, err)
	}
	return nil
}

// compile-time checks that both stores satisfy Store.
var (
	_ Store = (*SQLStore)(nil)
	_ Store = (*MemoryStore)(nil)
)
