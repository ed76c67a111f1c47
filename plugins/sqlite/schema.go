package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
)

// migrations build the schema, one step per version: migrations[i] takes
// the database from user_version i to i+1. Steps are append-only; a
// released step is never edited.
var migrations = []string{
	// 1: records, the FTS index and its totals, and the ledger.
	`
-- Filter columns come first and the large texts last, so the row lookups
-- recall filters with rarely touch overflow pages.
CREATE TABLE records (
	seq          INTEGER PRIMARY KEY,
	realm        TEXT    NOT NULL,
	id           TEXT    NOT NULL,
	scope        TEXT    NOT NULL,
	status       TEXT    NOT NULL CHECK (status IN ('active', 'superseded', 'quarantined', 'tombstoned')),
	expires_ms   INTEGER NOT NULL, -- 0: never
	tag_keys     TEXT    NOT NULL, -- case-folded tags, each wrapped in line feeds
	use_count    INTEGER NOT NULL DEFAULT 0,
	last_used_ms INTEGER NOT NULL DEFAULT 0,
	usage_key    REAL    NOT NULL DEFAULT 0, -- see usage.Key
	kind         TEXT    NOT NULL,
	trust        TEXT    NOT NULL,
	supersedes   TEXT    NOT NULL,
	created_ms   INTEGER NOT NULL,
	updated_ms   INTEGER NOT NULL,
	content_hash TEXT    NOT NULL,
	ntok         INTEGER NOT NULL, -- tokens indexed for this record
	title        TEXT    NOT NULL,
	description  TEXT    NOT NULL,
	tags         TEXT    NOT NULL, -- as written, joined by line feeds
	body         TEXT    NOT NULL
);
CREATE UNIQUE INDEX records_by_id ON records (realm, id);
-- Idempotent writes: one live copy of a content per scope. Superseded and
-- tombstoned records do not count, so content can be remembered again.
CREATE UNIQUE INDEX records_by_content ON records (realm, scope, content_hash)
	WHERE status IN ('active', 'quarantined');
-- Manifest working set: newest unused rows, and rows ranked by use.
CREATE INDEX records_unused_by_scope ON records (realm, scope, updated_ms) WHERE use_count = 0;
CREATE INDEX records_unused_by_realm ON records (realm, updated_ms) WHERE use_count = 0;
CREATE INDEX records_used_by_scope ON records (realm, scope, usage_key) WHERE use_count > 0;
CREATE INDEX records_used_by_realm ON records (realm, usage_key) WHERE use_count > 0;

-- The index holds exactly the active records, keyed by records.seq. Its
-- columns hold sdk/tokenize terms joined by spaces, which the ascii
-- tokenizer splits back exactly (every non-ASCII rune is a token rune).
-- Contentless: the text lives once, in records.
CREATE VIRTUAL TABLE records_fts USING fts5 (
	tags, title, description, body,
	content = '', contentless_delete = 1, tokenize = 'ascii'
);
-- Document frequencies for the query planner in recall.go.
CREATE VIRTUAL TABLE records_vocab USING fts5vocab (records_fts, 'row');
-- BM25's N and total token count, kept in step with records_fts so recall
-- can score terms outside the FTS query exactly as FTS5 would.
CREATE TABLE fts_totals (
	one    INTEGER PRIMARY KEY CHECK (one = 1),
	docs   INTEGER NOT NULL,
	tokens INTEGER NOT NULL
);
INSERT INTO fts_totals VALUES (1, 0, 0);
-- Active records per scope, so recall can plan without counting them.
CREATE TABLE scope_totals (
	realm TEXT    NOT NULL,
	scope TEXT    NOT NULL,
	docs  INTEGER NOT NULL,
	PRIMARY KEY (realm, scope)
) WITHOUT ROWID;

CREATE TABLE ledger (
	seq       INTEGER PRIMARY KEY,
	realm     TEXT    NOT NULL,
	identity  TEXT    NOT NULL,
	session   TEXT    NOT NULL,
	record_id TEXT    NOT NULL,
	surface   TEXT    NOT NULL,
	bytes     INTEGER NOT NULL,
	at_ms     INTEGER NOT NULL
);
CREATE INDEX ledger_by_record ON ledger (realm, record_id, at_ms);
`,
	// 2: the generation of the in-memory recall index, which stamps its
	// snapshot (see memindex.go).
	`
CREATE TABLE index_gen (
	one INTEGER PRIMARY KEY CHECK (one = 1),
	gen INTEGER NOT NULL
);
INSERT INTO index_gen VALUES (1, 0);
`,
	// 3: recall no longer reads FTS5 (the in-memory index answers it, 2-3x
	// faster to write without it; docs/benchmarks.md), so its tables go.
	`
DROP TABLE records_vocab;
DROP TABLE records_fts;
DROP TABLE fts_totals;
DROP TABLE scope_totals;
`,
	// 4: a record's thread (sdk.Thread); '' is none.
	`
ALTER TABLE records ADD COLUMN thread_id TEXT NOT NULL DEFAULT '';
ALTER TABLE records ADD COLUMN thread_seq INTEGER NOT NULL DEFAULT 0;
`,
	// 5: the live contents are kept in memory (content.go); their unique
	// index cost a dirty page per written record.
	`
DROP INDEX records_by_content;
`,
	// 6: when the remembered thing happened (sdk.Record.OccurredAt); 0 is
	// unknown.
	`
ALTER TABLE records ADD COLUMN occurred_ms INTEGER NOT NULL DEFAULT 0;
`,
	// 7: a record's embedding (sdk.VectorStore), keyed by its row. The
	// triggers drop it when the record leaves recall (forgotten, expired
	// and purged, superseded, quarantined), whichever path does it.
	`
CREATE TABLE vectors (
	seq   INTEGER PRIMARY KEY, -- records.seq
	model TEXT    NOT NULL,
	vec   BLOB    NOT NULL     -- float32 components, little-endian, as given
);
CREATE TRIGGER vectors_of_deleted AFTER DELETE ON records
BEGIN
	DELETE FROM vectors WHERE seq = OLD.seq;
END;
CREATE TRIGGER vectors_of_retired AFTER UPDATE OF status ON records WHEN NEW.status != 'active'
BEGIN
	DELETE FROM vectors WHERE seq = OLD.seq;
END;
`,
	// 8: a random identity of the database, which stamps the index
	// snapshot and log beside the generation, so the files of another
	// database at the same generation are never taken for this one's.
	`
ALTER TABLE index_gen ADD COLUMN store BLOB NOT NULL DEFAULT x'';
UPDATE index_gen SET store = randomblob(16);
`,
	// 9: a record's uses, kept in a narrow table of their own. A use
	// rewrote the record's wide row and moved it in two of four partial
	// indexes: a turn's marks cost an inject about 30% of its CPU. The
	// used records are ordered in memory (usage.go); the newest unused are
	// found through the time indexes, skipping rows with uses. Uses of a
	// superseded or quarantined record are kept; a deleted record's go.
	`
CREATE TABLE usage (
	seq          INTEGER PRIMARY KEY, -- records.seq
	use_count    INTEGER NOT NULL,    -- > 0: a record without uses has no row
	last_used_ms INTEGER NOT NULL,
	usage_key    REAL    NOT NULL     -- see usage.Key
);
INSERT INTO usage SELECT seq, use_count, last_used_ms, usage_key FROM records WHERE use_count > 0;
DROP INDEX records_unused_by_scope;
DROP INDEX records_unused_by_realm;
DROP INDEX records_used_by_scope;
DROP INDEX records_used_by_realm;
ALTER TABLE records DROP COLUMN use_count;
ALTER TABLE records DROP COLUMN last_used_ms;
ALTER TABLE records DROP COLUMN usage_key;
CREATE INDEX records_by_scope_time ON records (realm, scope, updated_ms);
CREATE INDEX records_by_realm_time ON records (realm, updated_ms);
CREATE TRIGGER usage_of_deleted AFTER DELETE ON records
BEGIN
	DELETE FROM usage WHERE seq = OLD.seq;
END;
`,
	// 10: nothing reads the ledger by record, and keeping that index cost
	// each ledger row a random insert into a b-tree growing without end:
	// at 80k rows a turn's rows took three times as long to write as
	// without it. The ledger is now bounded (trimLedger).
	`
DROP INDEX IF EXISTS ledger_by_record;
`,
}

// schemaVersion is the user_version this build writes.
var schemaVersion = len(migrations)

// migrate brings the database to schemaVersion in one write transaction.
// It refuses a database written by a newer build, and a non-empty file that
// is not a memhost database, rather than touching either. An upgrade of a
// large store takes minutes, in which the plugin answers nothing: the log
// says what it does.
func migrate(ctx context.Context, db *sql.DB, log *slog.Logger) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	var version int
	if err := tx.QueryRowContext(ctx, "PRAGMA user_version").Scan(&version); err != nil {
		return err
	}
	switch {
	case version > schemaVersion:
		return fmt.Errorf("schema version %d is newer than this plugin's %d: upgrade the plugin", version, schemaVersion)
	case version == schemaVersion:
		return nil
	case version == 0:
		var objects int
		if err := tx.QueryRowContext(ctx, "SELECT count(*) FROM sqlite_schema").Scan(&objects); err != nil {
			return err
		}
		if objects > 0 {
			return fmt.Errorf("not a memhost database: it holds %d schema objects but no memhost schema version", objects)
		}
	}
	if version > 0 {
		log.Info("migrating the database to this plugin's schema; a large store takes minutes, and a failed or stopped migration leaves it as it was",
			"from_version", version, "to_version", schemaVersion)
	}
	for v := version; v < schemaVersion; v++ {
		if _, err := tx.ExecContext(ctx, migrations[v]); err != nil {
			return fmt.Errorf("migrate to schema version %d: %w", v+1, err)
		}
	}
	// PRAGMA takes no parameters; the value is an int this code chose.
	if _, err := tx.ExecContext(ctx, fmt.Sprintf("PRAGMA user_version = %d", schemaVersion)); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return err
	}
	if version > 0 {
		log.Info("migrated the database", "to_version", schemaVersion)
	}
	return nil
}
