package postgres

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/jackc/pgx/v5"

	sdkindex "github.com/memhost/memhost/sdk/index"
)

// migration is one schema step: its SQL, then, when set, Go code in the
// same transaction (re-indexing needs the tokenizer).
type migration struct {
	sql  string
	then func(ctx context.Context, tx pgx.Tx) error
}

// migrations build the schema, one step per version: migrations[i] takes
// it from version i to i+1. Steps are append-only; a released step is
// never edited. Every name is unqualified: the migration sets search_path
// to the configured schema.
var migrations = []migration{
	// 1: records, the inverted index and its statistics, and the ledger.
	{sql: `
CREATE TABLE records (
	seq          bigint  GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	realm        text    NOT NULL,
	id           text    NOT NULL,
	scope        text    NOT NULL,
	status       text    NOT NULL CHECK (status IN ('active', 'superseded', 'quarantined', 'tombstoned')),
	expires_ms   bigint  NOT NULL, -- 0: never
	tag_keys     text[]  NOT NULL, -- case-folded tags, for filters
	use_count    bigint  NOT NULL DEFAULT 0,
	last_used_ms bigint  NOT NULL DEFAULT 0,
	usage_key    float8  NOT NULL DEFAULT 0, -- see usage.Key
	kind         text    NOT NULL,
	trust        text    NOT NULL,
	supersedes   text    NOT NULL,
	created_ms   bigint  NOT NULL,
	updated_ms   bigint  NOT NULL,
	content_hash text    NOT NULL,
	ntok         integer NOT NULL, -- terms indexed for this record (BM25's length)
	title        text    NOT NULL,
	description  text    NOT NULL,
	tags         text[]  NOT NULL,
	body         text    NOT NULL
);
CREATE UNIQUE INDEX records_by_id ON records (realm, id);
-- Idempotent writes: one live copy of a content per scope, whichever host
-- writes it. Superseded and tombstoned records do not count.
CREATE UNIQUE INDEX records_by_content ON records (realm, scope, content_hash)
	WHERE status IN ('active', 'quarantined');
CREATE INDEX records_unused_by_scope ON records (realm, scope, updated_ms) WHERE use_count = 0;
CREATE INDEX records_unused_by_realm ON records (realm, updated_ms) WHERE use_count = 0;
CREATE INDEX records_used_by_scope ON records (realm, scope, usage_key) WHERE use_count > 0;
CREATE INDEX records_used_by_realm ON records (realm, usage_key) WHERE use_count > 0;

-- The vocabulary of each realm, with document frequencies (BM25's n).
CREATE TABLE terms (
	term_id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	realm   text   NOT NULL,
	term    text   NOT NULL,
	df      bigint NOT NULL,
	UNIQUE (realm, term)
) WITH (fillfactor = 50); -- room for df updates in place (HOT), sparing both indexes
-- One row per term of each active record. tf is the field-weighted term
-- frequency, dl the record's length; scope and expiry are copied here so
-- recall filters without touching records. The primary key covers every
-- column recall reads, so it scans the index alone.
CREATE TABLE postings (
	term_id    bigint  NOT NULL,
	seq        bigint  NOT NULL,
	tf         real    NOT NULL,
	dl         integer NOT NULL,
	scope      text    NOT NULL,
	expires_ms bigint  NOT NULL,
	PRIMARY KEY (term_id, seq) INCLUDE (tf, dl, scope, expires_ms)
);
-- A record's postings, for unindexing and for scoring candidates (recall's
-- probes read one record's terms from this index alone).
CREATE INDEX postings_by_seq ON postings (seq) INCLUDE (term_id, tf, dl);
-- BM25's N and total length per realm, split over slots so concurrent
-- writers (on any host) rarely wait on one row; readers sum the slots.
CREATE TABLE index_totals (
	realm  text     NOT NULL,
	slot   smallint NOT NULL,
	docs   bigint   NOT NULL,
	tokens bigint   NOT NULL,
	PRIMARY KEY (realm, slot)
);

CREATE TABLE ledger (
	seq       bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	realm     text   NOT NULL,
	identity  text   NOT NULL,
	session   text   NOT NULL,
	record_id text   NOT NULL,
	surface   text   NOT NULL,
	bytes     bigint NOT NULL,
	at_ms     bigint NOT NULL
);
CREATE INDEX ledger_by_record ON ledger (realm, record_id, at_ms);
`},
	// 2: a record's optional thread (conversation id and position).
	{sql: `
ALTER TABLE records ADD COLUMN thread_id text, ADD COLUMN thread_seq bigint;
`},
	// 3: thread context (thread.go): the active records at a thread's
	// places, for re-indexing neighbours; ids in byte order, for export
	// cursors whatever the database's collation; terms across realms.
	// Records stored by version 2 are re-indexed with their context.
	{sql: `
CREATE INDEX records_by_thread ON records (realm, thread_id, thread_seq)
	WHERE status = 'active' AND thread_id IS NOT NULL;
CREATE INDEX records_by_id_bytes ON records (realm, id COLLATE "C");
-- A term's rows in every realm, for statistics over the store; df stays
-- out of it so its updates remain HOT.
CREATE INDEX terms_by_term ON terms (term);
`, then: indexAllThreads},
	// 4: when the remembered thing happened (sdk.Record.OccurredAt); 0 is
	// unknown.
	{sql: `
ALTER TABLE records ADD COLUMN occurred_ms bigint NOT NULL DEFAULT 0;
`},
	// 5: thread context saturates on its own (sdk/index ContextFrequency
	// and ContextLength): threaded records are re-indexed.
	{sql: `SELECT 1;`, then: indexAllThreads},
	// 6: the change log replicas follow (changes.go): one row per record
	// a transaction changed, numbered in commit order; how far it has been
	// trimmed; and each live replica's applied position.
	{sql: `
CREATE TABLE changes (
	seq       bigserial   PRIMARY KEY,
	realm     text        NOT NULL,
	record_id text        NOT NULL, -- '' for the whole realm
	op        text        NOT NULL CHECK (op IN ('put', 'delete', 'realm')),
	at        timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX changes_by_time ON changes (at);
CREATE TABLE change_horizon (
	one     boolean PRIMARY KEY DEFAULT true CHECK (one),
	trimmed bigint  NOT NULL -- changes at or below it may be gone
);
INSERT INTO change_horizon (trimmed) VALUES (0);
CREATE TABLE replicas (
	name    text        PRIMARY KEY,
	applied bigint      NOT NULL,
	seen    timestamptz NOT NULL
);
`},
	// 7: a record's embedding (sdk.VectorStore, vectors.go), keyed by its
	// row: float32 little-endian in bytea (no pgvector: the replica ranks).
	// A row goes with its record: deleted with it (the foreign key), and
	// when it leaves recall (superseded, quarantined, tombstoned) by the
	// trigger, whatever write path did it. The function keeps the
	// migration's search_path, so it finds the table from any session.
	{sql: `
CREATE TABLE vectors (
	seq   bigint PRIMARY KEY REFERENCES records (seq) ON DELETE CASCADE,
	realm text   NOT NULL,
	model text   NOT NULL,
	dims  integer NOT NULL,
	vec   bytea  NOT NULL CHECK (octet_length(vec) = 4 * dims)
);
-- A model's vectors of another length than a batch's are found in this
-- index's ranges either side of it, not by reading every vector.
CREATE INDEX vectors_by_model ON vectors (realm, model, dims);
CREATE FUNCTION vectors_retire() RETURNS trigger LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
	DELETE FROM vectors WHERE seq = OLD.seq;
	RETURN NULL;
END $$;
CREATE TRIGGER vectors_of_retired AFTER UPDATE OF status ON records
	FOR EACH ROW WHEN (OLD.status = 'active' AND NEW.status <> 'active') EXECUTE FUNCTION vectors_retire();
`},
	// 8: thread context joins records of one scope only (thread.go): the
	// context stored before drew on other scopes' records under the same
	// thread id, so threaded records are re-indexed.
	{sql: `SELECT 1;`, then: indexAllThreads},
	// 9: nothing reads the ledger by record, and that index made each
	// ledger row a random insert into an index growing without end. The
	// ledger is now bounded (trimLedger).
	{sql: `DROP INDEX IF EXISTS ledger_by_record;`},
	// 10: memhost's system tags (memhost:user, memhost:assistant,
	// memhost:proposal) are markers, not text (sdkindex.TagText): the
	// records carrying one, and the threads they are in, are re-indexed.
	{sql: `SELECT 1;`, then: indexSystemTagged},
	// 11: a place's records in id order (byte order, as sdk/index keeps
	// them), so reading a crowded place's first few (readThread,
	// readPlaces) stops after them rather than reading and sorting the
	// whole place. The new index is built before the old one is dropped:
	// the build holds off writes only, and the drop's exclusive lock is
	// taken just before the migration commits.
	{sql: `
CREATE INDEX records_by_place ON records (realm, thread_id, thread_seq, scope, id COLLATE "C")
	WHERE status = 'active' AND thread_id IS NOT NULL;
DROP INDEX records_by_thread;
ALTER INDEX records_by_place RENAME TO records_by_thread;
`},
	// 12: the tokenizer puts text in NFC and folds every letter of a
	// case-fold orbit to one (tokenize.Version 3): the terms stored before
	// would miss queries that now cut other terms, so every realm is
	// re-indexed.
	{sql: `SELECT 1;`, then: func(ctx context.Context, tx pgx.Tx) error {
		_, err := reindex(ctx, tx, "", nil)
		return err
	}},
	// 13: tag keys are folded in NFC (index.FoldTag), as the host sends
	// tags since; a tag stored before as written (e and a combining
	// accent) kept a key no filter names any more.
	{sql: `SELECT 1;`, then: refoldTags},
	// 14: a replica loading says so (changes.go trimChanges): the changes
	// after its load's snapshot outlive change_retention until it is done,
	// or a load slower than the retention on a written schema found them
	// trimmed and loaded again, for ever.
	{sql: `ALTER TABLE replicas ADD COLUMN IF NOT EXISTS loading boolean NOT NULL DEFAULT false;`},
	// 15: the tokenizer drops format characters (a soft hyphen, a
	// zero-width joiner, a bidi mark) and variation selectors inside a
	// word instead of cutting it there, keeps the kana length mark in its
	// kana run and cuts Thai, Lao, Khmer and Myanmar into bigrams
	// (tokenize.Version 4): every realm is re-indexed, as in 12.
	{sql: `SELECT 1;`, then: func(ctx context.Context, tx pgx.Tx) error {
		_, err := reindex(ctx, tx, "", nil)
		return err
	}},
	// 16: the tokenizer folds fullwidth and halfwidth forms and spells out
	// the Latin ligatures (tokenize.Version 5): every realm is re-indexed,
	// as in 12.
	{sql: `SELECT 1;`, then: func(ctx context.Context, tx pgx.Tx) error {
		_, err := reindex(ctx, tx, "", nil)
		return err
	}},
}

// termsVersion is the tokenizer version (tokenize.Version) whose terms the
// schema's last re-index left stored; TestSchemaFollowsTokenizer holds it
// to the tokenizer, so a new tokenizer version cannot ship without the
// migration that re-indexes under it.
const termsVersion = 5

// refoldTags recomputes the tag keys of the records holding a non-ASCII
// tag (an ASCII key is the same under either rule). Only keys that change
// are written, in batches: the host has sent tags in NFC since the
// previous upgrade, whose keys stay, and a row-by-row rewrite of every
// record with an accented tag took minutes of Configure at a million.
func refoldTags(ctx context.Context, tx pgx.Tx) error {
	rows, err := tx.Query(ctx, `SELECT seq, tags, tag_keys FROM records WHERE array_to_string(tags, ' ') ~ '[^[:ascii:]]'`)
	if err != nil {
		return err
	}
	type row struct {
		seq  int64
		keys []string
	}
	var changed []row
	var tags, keys []string
	var seq int64
	_, err = pgx.ForEachRow(rows, []any{&seq, &tags, &keys}, func() error {
		if folded := foldTags(tags); !slices.Equal(folded, keys) {
			changed = append(changed, row{seq, folded})
		}
		return nil
	})
	if err != nil {
		return err
	}
	for len(changed) > 0 {
		n := min(len(changed), 1000)
		b := &pgx.Batch{}
		for _, r := range changed[:n] {
			b.Queue(`UPDATE records SET tag_keys = $1 WHERE seq = $2`, r.keys, r.seq)
		}
		if err := tx.SendBatch(ctx, b).Close(); err != nil {
			return err
		}
		changed = changed[n:]
	}
	return nil
}

// indexAllThreads re-indexes every active threaded record with its
// context (records indexed before thread context have their own terms
// only).
func indexAllThreads(ctx context.Context, tx pgx.Tx) error {
	rows, err := tx.Query(ctx, `SELECT DISTINCT realm, thread_id FROM records WHERE status = 'active' AND thread_id IS NOT NULL`)
	if err != nil {
		return err
	}
	type key struct{ realm, thread string }
	keys, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (key, error) {
		var k key
		err := row.Scan(&k.realm, &k.thread)
		return k, err
	})
	if err != nil {
		return err
	}
	for _, k := range keys {
		if _, err := indexThread(ctx, tx, k.realm, k.thread, true); err != nil {
			return fmt.Errorf("re-index thread of realm %s: %w", k.realm, err)
		}
	}
	return nil
}

// indexSystemTagged re-indexes the active records whose tags hold a
// system tag, which earlier versions indexed as text, and the threads they
// are in (a record's own terms are its neighbours' context).
func indexSystemTagged(ctx context.Context, tx pgx.Tx) error {
	// A system tag holds a colon; which tags are system tags is decided
	// here, case-folded as tags compare, which SQL's ILIKE is not.
	rows, err := tx.Query(ctx, `SELECT realm, seq, thread_id, tags FROM records
		WHERE status = 'active' AND array_to_string(tags, ' ') LIKE '%:%'`)
	if err != nil {
		return err
	}
	type key struct{ realm, thread string }
	threads := map[key]bool{}
	loose := map[string][]int64{} // realm → unthreaded records' seqs
	for rows.Next() {
		var realm string
		var seq int64
		var thread *string
		var tags []string
		if err := rows.Scan(&realm, &seq, &thread, &tags); err != nil {
			rows.Close()
			return err
		}
		switch {
		case !slices.ContainsFunc(tags, sdkindex.IsSystemTag):
		case thread != nil:
			threads[key{realm, *thread}] = true
		default:
			loose[realm] = append(loose[realm], seq)
		}
	}
	if err := rows.Err(); err != nil {
		return err
	}
	for _, realm := range slices.Sorted(maps.Keys(loose)) {
		for chunk := range slices.Chunk(loose[realm], reindexBatch) {
			rows, err := tx.Query(ctx, `SELECT `+unthreadedColumns+` FROM records
				WHERE seq = ANY($1) AND status = 'active' AND thread_id IS NULL`, chunk)
			if err != nil {
				return err
			}
			batch, err := scanUnthreaded(rows)
			if err != nil {
				return err
			}
			if err := reindexRows(ctx, tx, realm, batch, nil, true); err != nil {
				return fmt.Errorf("re-index records of realm %s: %w", realm, err)
			}
		}
	}
	for _, k := range slices.SortedFunc(maps.Keys(threads), func(a, b key) int {
		return cmp.Or(strings.Compare(a.realm, b.realm), strings.Compare(a.thread, b.thread))
	}) {
		if _, err := indexThread(ctx, tx, k.realm, k.thread, true); err != nil {
			return fmt.Errorf("re-index thread of realm %s: %w", k.realm, err)
		}
	}
	return nil
}

// schemaVersion is the version this build writes.
var schemaVersion = len(migrations)

// errReadOnlyServer refuses a server whose transactions are read-only.
var errReadOnlyServer = errors.New("the server accepts read-only transactions only (a standby, or default_transaction_read_only is on); point the connection string at the primary")

// migrateHook, when set, runs inside a migration, after its lock is
// taken: tests idle there as a loaded machine does.
var migrateHook atomic.Pointer[func()]

// migrateLockKey is the first key of the advisory lock migrations hold
// (the second is the schema name's hash): "memh" in ASCII.
const migrateLockKey = 0x6d656d68

// migrate brings the schema to schemaVersion in one transaction, holding
// a transaction-level advisory lock so hosts starting at once migrate one
// after another (the later ones find nothing to do). It refuses a schema a
// newer build wrote, and one holding tables but no memhost version. An
// upgrade of a large store takes minutes, in which the plugin answers
// nothing: the log says what it does.
func migrate(ctx context.Context, pool *pgdb, schema string, log *slog.Logger) error {
	// Waiting for another host's migration may take longer than one
	// statement may; Configure's context bounds the wait instead.
	tx, err := pool.BeginTx(ctx, withTimeouts(pgx.TxOptions{}, 0, maintenanceTimeout))
	if err != nil {
		return err
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1, hashtext($2))", migrateLockKey, schema); err != nil {
		return fmt.Errorf("take the migration lock: %w", err)
	}
	if hook := migrateHook.Load(); hook != nil {
		(*hook)()
	}
	// A read-only server (a standby) must fail here, not on every write
	// after a start that looked healthy: a migrated schema needs no write
	// to start.
	var readOnlyServer bool
	if err := tx.QueryRow(ctx, "SELECT current_setting('transaction_read_only') = 'on'").Scan(&readOnlyServer); err != nil {
		return err
	}
	if readOnlyServer {
		return errReadOnlyServer
	}
	ident := pgx.Identifier{schema}.Sanitize()
	// CREATE SCHEMA IF NOT EXISTS needs the CREATE privilege on the
	// database even when the schema exists, which a role given only its
	// own schema lacks: create it only when it is missing.
	var exists bool
	if err := tx.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_namespace WHERE nspname = $1)", schema).Scan(&exists); err != nil {
		return err
	}
	if !exists {
		if _, err := tx.Exec(ctx, "CREATE SCHEMA IF NOT EXISTS "+ident); err != nil {
			return fmt.Errorf("create schema %s: %w", schema, err)
		}
	}
	var hasVersions bool
	if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_tables WHERE schemaname = $1 AND tablename = 'schema_migrations')`, schema).Scan(&hasVersions); err != nil {
		return err
	}
	version := 0
	if hasVersions {
		if err := tx.QueryRow(ctx, "SELECT coalesce(max(version), 0) FROM "+ident+".schema_migrations").Scan(&version); err != nil {
			return fmt.Errorf("read schema version: %w", err)
		}
	} else {
		var tables int
		if err := tx.QueryRow(ctx, "SELECT count(*) FROM pg_tables WHERE schemaname = $1", schema).Scan(&tables); err != nil {
			return err
		}
		if tables > 0 {
			return fmt.Errorf("schema %s holds %d tables but no memhost schema version: not a memhost schema (configure another schema)", schema, tables)
		}
		if _, err := tx.Exec(ctx, "CREATE TABLE "+ident+`.schema_migrations (
			version    integer     PRIMARY KEY,
			applied_at timestamptz NOT NULL DEFAULT now()
		)`); err != nil {
			return err
		}
	}
	switch {
	case version > schemaVersion:
		return fmt.Errorf("schema %s is at version %d, newer than this plugin's %d: upgrade the plugin", schema, version, schemaVersion)
	case version == schemaVersion:
		return tx.Commit(ctx)
	}
	if _, err := tx.Exec(ctx, "SET LOCAL search_path = "+ident); err != nil {
		return err
	}
	if version > 0 {
		log.Info("migrating the schema to this plugin's version; a large store takes minutes, and a failed or stopped migration leaves it as it was",
			"schema", schema, "from_version", version, "to_version", schemaVersion)
	}
	for v := version; v < schemaVersion; v++ {
		m := migrations[v]
		if _, err := tx.Exec(ctx, m.sql); err != nil {
			return fmt.Errorf("migrate schema %s to version %d: %w", schema, v+1, err)
		}
		if m.then != nil {
			if err := m.then(ctx, tx); err != nil {
				return fmt.Errorf("migrate schema %s to version %d: %w", schema, v+1, err)
			}
		}
		if _, err := tx.Exec(ctx, "INSERT INTO schema_migrations (version) VALUES ($1)", v+1); err != nil {
			return err
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return err
	}
	if version > 0 {
		log.Info("migrated the schema", "schema", schema, "to_version", schemaVersion)
	}
	return nil
}

// checkHook, when set, runs in a schema check's transaction before its
// reads: tests make the check outlast a short statement_timeout there.
var checkHook atomic.Pointer[func(context.Context, pgx.Tx) error]

// errSchema marks a schema that lacks a table or column the provider
// needs (renamed or dropped behind its back).
var errSchema = errors.New("provider schema incomplete")

// requiredColumns is every table and column the provider reads or writes;
// TestRequiredColumnsMatchMigrations holds it to the migrations.
var requiredColumns = map[string][]string{
	"schema_migrations": {"version", "applied_at"},
	"records": {"seq", "realm", "id", "scope", "status", "expires_ms", "tag_keys", "use_count", "last_used_ms", "usage_key",
		"kind", "trust", "supersedes", "created_ms", "updated_ms", "content_hash", "ntok", "title", "description", "tags", "body",
		"thread_id", "thread_seq", "occurred_ms"},
	"terms":          {"term_id", "realm", "term", "df"},
	"postings":       {"term_id", "seq", "tf", "dl", "scope", "expires_ms"},
	"index_totals":   {"realm", "slot", "docs", "tokens"},
	"ledger":         {"seq", "realm", "identity", "session", "record_id", "surface", "bytes", "at_ms"},
	"changes":        {"seq", "realm", "record_id", "op", "at"},
	"change_horizon": {"one", "trimmed"},
	"replicas":       {"name", "applied", "seen", "loading"},
	"vectors":        {"seq", "realm", "model", "dims", "vec"},
}

// checkSchema answers an error wrapping errSchema, naming what is missing,
// when schema lacks a table or column the provider needs: the version row
// alone does not prove the tables are still there. The catalog is read
// whatever the role's privileges (information_schema would hide tables).
// It runs under maintenanceTimeout.
func checkSchema(ctx context.Context, db *pgdb, schema string) error {
	have := map[string]bool{}
	var version int
	var changesCache *int64
	var changesSeq string
	err := pgx.BeginTxFunc(ctx, db, withTimeouts(readOnly, maintenanceTimeout, maintenanceTimeout), func(q pgx.Tx) error {
		if hook := checkHook.Load(); hook != nil {
			if err := (*hook)(ctx, q); err != nil {
				return err
			}
		}
		rows, err := q.Query(ctx, `SELECT c.relname, a.attname FROM pg_catalog.pg_attribute a
			JOIN pg_catalog.pg_class c ON c.oid = a.attrelid
			JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
			WHERE n.nspname = $1 AND c.relkind IN ('r', 'p') AND a.attnum > 0 AND NOT a.attisdropped`, schema)
		if err != nil {
			return err
		}
		var table, column string
		_, err = pgx.ForEachRow(rows, []any{&table, &column}, func() error {
			have[table] = true
			have[table+"."+column] = true
			return nil
		})
		if err != nil || !have["schema_migrations.version"] || !have["changes.seq"] {
			return err
		}
		ident := pgx.Identifier{schema}.Sanitize()
		if err := q.QueryRow(ctx, "SELECT coalesce(max(version), 0) FROM "+ident+".schema_migrations").Scan(&version); err != nil {
			return err
		}
		return q.QueryRow(ctx, `SELECT s.seqcache, s.seqrelid::regclass::text FROM pg_catalog.pg_sequence AS s
			WHERE s.seqrelid = pg_get_serial_sequence($1, 'seq')::regclass`, ident+".changes").Scan(&changesCache, &changesSeq)
	})
	if errors.Is(err, pgx.ErrNoRows) {
		err = nil // changes.seq numbered by no sequence: the columns check below is what can fail
	}
	if err != nil {
		return fmt.Errorf("check schema %s: %w", schema, classify(err))
	}
	// A writer of an older build would store records without logging
	// them in changes (from version 6), which no replica would then see.
	if version > schemaVersion {
		return fmt.Errorf("schema %s is at version %d, newer than this plugin's %d: upgrade the plugin: %w", schema, version, schemaVersion, errSchema)
	}
	// Replicas read changes in seq order; with numbers cached per
	// session, a later commit can take a lower number and be passed over.
	if changesCache != nil && *changesCache != 1 {
		return fmt.Errorf("schema %s: sequence %s caches %d numbers per session, so changes may be numbered out of commit order and replicas would pass them over; run ALTER SEQUENCE %s CACHE 1: %w", schema, changesSeq, *changesCache, changesSeq, errSchema)
	}
	var missing []string
	for _, table := range slices.Sorted(maps.Keys(requiredColumns)) {
		if !have[table] {
			missing = append(missing, "table "+table)
			continue
		}
		for _, col := range requiredColumns[table] {
			if !have[table+"."+col] {
				missing = append(missing, "column "+table+"."+col)
			}
		}
	}
	if len(missing) == 0 {
		return nil
	}
	return fmt.Errorf("schema %s lacks %s (renamed or dropped?); restore it from a backup or rename it back, or point the provider's schema setting at a complete schema: %w",
		schema, strings.Join(missing, ", "), errSchema)
}
