// Package pgstate keeps the host state that many hosts must share in
// PostgreSQL: session budgets and dedup sets (a coordinator.SessionStore)
// and compaction state (a compaction.Store). With it, any host behind a
// load balancer can serve any turn of any session.
//
// There is no cache in front of the database: a cached state would be
// stale the moment another host wrote the session. A read-only visit is
// one SELECT; a visit that changes state is one transaction that locks
// the session's row (SELECT ... FOR UPDATE), so concurrent turns of one
// session on any number of hosts are applied one after another.
package pgstate

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/memhost/memhost/sdk"
	"github.com/memhost/memhost/sdk/dialer"
	"github.com/memhost/memhost/sdk/fairgate"
)

// Defaults of Options.
const (
	DefaultSchema           = "memhost_state"
	DefaultPoolSize         = 8
	DefaultStatementTimeout = 5 * time.Second
)

// ErrInvalid marks a connection string or schema name that cannot be used.
var ErrInvalid = errors.New("invalid shared state settings")

// ErrNewerSchema marks a schema a newer host migrated: the settings are
// fine, the host is too old for it. Its text says what to do.
var ErrNewerSchema = errors.New("written by a newer host: upgrade the host")

var schemaNameRE = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,62}$`)

// Options tune a DB. Zero values take the defaults.
type Options struct {
	// Schema holds the tables; created on first start. It may sit in the
	// provider's database, beside the provider's own schema.
	Schema           string
	PoolSize         int
	StatementTimeout time.Duration
}

// DB is a pool on the shared state database, migrated.
type DB struct {
	pool   pool
	schema string
	prefix string // the quoted schema and a dot
	// closed ends the work left behind by visits (Sessions' noted reads).
	closed atomic.Bool
	// listings bounds the connections trace and proposal listings hold
	// to half the pool, let in by realm (the realm listing least first):
	// one realm's flood of listings could otherwise hold every connection
	// and every realm's turns would wait for one.
	listings *fairgate.Gate
	// renewals is the connection compaction holds are renewed on.
	renewals *renewer
}

// listing waits, within ctx, until realm may run a listing, and answers
// the function that ends it.
func (db *DB) listing(ctx context.Context, realm string) (done func(), err error) {
	if err := db.listings.Acquire(ctx, realm, 1); err != nil {
		return nil, err
	}
	return func() { db.listings.Release(realm, 1) }, nil
}

// Open connects to dsn and migrates the schema. Errors never repeat dsn,
// which may hold a password.
func Open(ctx context.Context, dsn string, opts Options) (*DB, error) {
	if opts.Schema == "" {
		opts.Schema = DefaultSchema
	}
	if opts.PoolSize <= 0 {
		opts.PoolSize = DefaultPoolSize
	}
	if opts.StatementTimeout <= 0 {
		opts.StatementTimeout = DefaultStatementTimeout
	}
	if !schemaNameRE.MatchString(opts.Schema) {
		return nil, fmt.Errorf("shared state: schema %q must be 1-63 lower-case letters, digits or underscores: %w", opts.Schema, ErrInvalid)
	}
	pc, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("shared state: the connection string does not parse: %w", ErrInvalid)
	}
	pc.MaxConns = int32(opts.PoolSize)
	rp := pc.ConnConfig.RuntimeParams
	rp["statement_timeout"] = fmt.Sprint(opts.StatementTimeout.Milliseconds())
	// A turn holds its session's row within a transaction: a host frozen
	// or cut off inside it would keep the row locked for every other host
	// until the operating system drops the connection (hours), so the
	// server ends a transaction idle as long as a statement may run.
	rp["idle_in_transaction_session_timeout"] = rp["statement_timeout"]
	if rp["application_name"] == "" {
		rp["application_name"] = "memhost-host"
	}
	if pc.ConnConfig.ConnectTimeout == 0 {
		pc.ConnConfig.ConnectTimeout = 10 * time.Second
	}
	// pgx closes a connection whose call timed out, waiting up to 15 s
	// for a silent server while its pool keeps the place (sdk/dialer).
	pc.ConnConfig.DialFunc = dialer.CloseOnTimeout(pc.ConnConfig.DialFunc)
	return openPool(ctx, pc, opts.Schema)
}

// openPool connects with pc and migrates schema (Open's second half).
func openPool(ctx context.Context, pc *pgxpool.Config, schema string) (*DB, error) {
	p, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		return nil, fmt.Errorf("shared state: connect: %w", classify(err))
	}
	db := &DB{pool: pool{p}, schema: schema, prefix: pgx.Identifier{schema}.Sanitize() + ".", listings: fairgate.New(max(1, int64(pc.MaxConns)/2)), renewals: newRenewer(pc.ConnConfig)}
	if err := db.migrate(ctx); err != nil {
		p.Close()
		return nil, err
	}
	if err := db.CheckSchema(ctx); err != nil {
		p.Close()
		return nil, err
	}
	return db, nil
}

// catalogColumns lists a schema's tables and their live columns, whatever
// the role's privileges on them (information_schema would hide some).
const catalogColumns = `SELECT c.relname, a.attname FROM pg_catalog.pg_attribute a
	JOIN pg_catalog.pg_class c ON c.oid = a.attrelid
	JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
	WHERE n.nspname = $1 AND c.relkind IN ('r', 'p') AND a.attnum > 0 AND NOT a.attisdropped`

// ErrSchema marks a schema that lacks a table or column the store needs
// (renamed or dropped behind the host's back).
var ErrSchema = errors.New("shared state schema incomplete")

// requiredColumns is every table and column the stores read or write;
// TestRequiredColumnsMatchMigrations holds it to the migrations.
var requiredColumns = map[string][]string{
	"state_migrations": {"version", "applied_at"},
	"sessions":         {"realm", "identity", "session", "state", "touched_at"},
	"compaction_state": {"realm", "conversation", "watermark", "prefix_hash", "artifact_role", "artifact_content", "updated_at_ms", "reset_identity", "reset_session", "identity"},
	"host_key":         {"id", "verifier", "created_at"},
	"proposals":        {"realm", "id", "identity", "proposer", "created_ms", "claimed_ms", "held"},
	"turn_trace":       {"realm", "seq", "session", "identity", "at_ms", "bytes", "trace", "records"},
	"compaction_holds": {"realm", "identity", "conversation", "holder", "until_ms"},
	"console_sessions": {"digest", "token", "csrf", "expires_ms"},
	"realm_settings":   {"realm", "digest", "updated_ms"},
}

// CheckSchema answers an error wrapping ErrSchema, naming what is missing,
// when the schema lacks a table or column the stores need: the version row
// alone does not prove the tables are still there. Start and /readyz run
// it.
func (db *DB) CheckSchema(ctx context.Context) error {
	rows, err := db.pool.Query(ctx, catalogColumns, db.schema)
	if err != nil {
		return fmt.Errorf("shared state: check the schema: %w", classify(err))
	}
	have := map[string]bool{}
	var table, column string
	_, err = pgx.ForEachRow(rows, []any{&table, &column}, func() error {
		have[table] = true
		have[table+"."+column] = true
		return nil
	})
	if err != nil {
		return fmt.Errorf("shared state: check the schema: %w", classify(err))
	}
	return missingFrom(db.schema, requiredColumns, have)
}

// missingFrom names what of required the catalog rows in have lack.
func missingFrom(schema string, required map[string][]string, have map[string]bool) error {
	var missing []string
	for _, table := range slices.Sorted(maps.Keys(required)) {
		if !have[table] {
			missing = append(missing, "table "+table)
			continue
		}
		for _, col := range required[table] {
			if !have[table+"."+col] {
				missing = append(missing, "column "+table+"."+col)
			}
		}
	}
	if len(missing) == 0 {
		return nil
	}
	return fmt.Errorf("shared state: schema %s lacks %s (renamed or dropped?); restore it from a backup or rename it back, or point session_store.schema at a complete schema: %w",
		schema, strings.Join(missing, ", "), ErrSchema)
}

// q qualifies the table names of a statement with the schema: statements
// never rely on search_path, which a connection pooler (PgBouncer) may not
// pass through, and which the postgres provider sets to its own schema.
func (db *DB) q(sql string) string {
	return tableRE.ReplaceAllStringFunc(sql, func(t string) string { return db.prefix + t })
}

var tableRE = regexp.MustCompile(`\b(console_sessions|realm_settings|sessions|compaction_state|compaction_holds|host_key|proposals|turn_trace)\b`)

// Close closes the pool.
func (db *DB) Close() {
	db.closed.Store(true)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	db.renewals.close(ctx)
	db.pool.Close()
}

// migrations are the schema steps; append, never edit.
var migrations = []string{
	`CREATE TABLE sessions (
		realm      text        NOT NULL,
		identity   text        NOT NULL,
		session    text        NOT NULL,
		state      jsonb       NOT NULL,
		touched_at timestamptz NOT NULL,
		PRIMARY KEY (realm, identity, session)
	);
	CREATE INDEX sessions_by_realm_age ON sessions (realm, touched_at);
	CREATE INDEX sessions_by_age ON sessions (touched_at);
	CREATE TABLE compaction_state (
		realm            text   NOT NULL,
		conversation     text   NOT NULL,
		watermark        bigint NOT NULL,
		prefix_hash      text   NOT NULL,
		artifact_role    text   NOT NULL,
		artifact_content text   NOT NULL,
		updated_at_ms    bigint NOT NULL,
		PRIMARY KEY (realm, conversation)
	);`,
	// A compaction's session reset owed and not yet made (see
	// compaction.State.Pending); '' when none.
	`ALTER TABLE compaction_state
		ADD COLUMN reset_identity text NOT NULL DEFAULT '',
		ADD COLUMN reset_session  text NOT NULL DEFAULT '';`,
	// The verifier of the host key every host sharing the state must use
	// (see CheckHostKey); one row.
	`CREATE TABLE host_key (
		id         int         PRIMARY KEY CHECK (id = 1),
		verifier   text        NOT NULL,
		created_at timestamptz NOT NULL DEFAULT now()
	);`,
	consoleMigration,
	// The identity that first compacted a conversation; '' for a row
	// saved before (replaced by identity, below).
	`ALTER TABLE compaction_state ADD COLUMN owner text NOT NULL DEFAULT '';`,
	// Conversations are keyed by identity too (compaction.Key), so two
	// identities using one conversation id never meet. A row moves to its
	// owner's identity, which replaces the owner column; one saved before
	// owners were recorded to '', which only an application reaches.
	`ALTER TABLE compaction_state ADD COLUMN identity text NOT NULL DEFAULT '';
	UPDATE compaction_state SET identity = owner;
	ALTER TABLE compaction_state DROP CONSTRAINT compaction_state_pkey,
		ADD PRIMARY KEY (realm, identity, conversation),
		DROP COLUMN owner;`,
	// The realm bound evicts per identity (Sessions.bound), which walks a
	// realm's sessions by identity, newest first; the realm-wide age order
	// is no longer read.
	`DROP INDEX sessions_by_realm_age;
	CREATE INDEX sessions_by_realm_identity_age ON sessions (realm, identity, touched_at DESC, session DESC);`,
	// When a review claimed a proposal (proposal.Ledger.Claim); 0 when
	// none did.
	`ALTER TABLE proposals ADD COLUMN claimed_ms bigint NOT NULL DEFAULT 0;`,
	// A compaction under way holds its conversation (Compaction.Hold)
	// until until_ms on the database's clock.
	`CREATE TABLE compaction_holds (
		realm        text   NOT NULL,
		identity     text   NOT NULL,
		conversation text   NOT NULL,
		holder       text   NOT NULL,
		until_ms     bigint NOT NULL,
		PRIMARY KEY (realm, identity, conversation)
	);`,
	// The ids of the records each trace names (turntrace.Named), indexed,
	// so a forget or a record's history reads the traces naming the
	// record, not every trace of the realm. A host of an earlier version,
	// still running beside this one in a rolling upgrade, writes traces
	// without the column: the trigger fills it from the trace, or its
	// records could never be forgotten there.
	`ALTER TABLE turn_trace ADD COLUMN records text[] NOT NULL DEFAULT '{}';
	CREATE FUNCTION turn_trace_named(trace jsonb) RETURNS text[] LANGUAGE sql IMMUTABLE AS $$
		SELECT ARRAY(SELECT r->>'id' FROM jsonb_array_elements(
			CASE WHEN jsonb_typeof(trace->'included') = 'array' THEN trace->'included' ELSE '[]' END ||
			CASE WHEN jsonb_typeof(trace->'excluded') = 'array' THEN trace->'excluded' ELSE '[]' END) AS r
		WHERE jsonb_typeof(r) = 'object' AND r->>'id' IS NOT NULL) $$;
	UPDATE turn_trace SET records = turn_trace_named(trace);
	CREATE FUNCTION turn_trace_fill_records() RETURNS trigger LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
	BEGIN
		IF NEW.records = '{}' THEN
			NEW.records := turn_trace_named(NEW.trace);
		END IF;
		RETURN NEW;
	END $$;
	CREATE TRIGGER turn_trace_fill_records BEFORE INSERT ON turn_trace
		FOR EACH ROW EXECUTE FUNCTION turn_trace_fill_records();
	CREATE INDEX turn_trace_by_record ON turn_trace USING gin (records);`,
	// What a review took out of the store and has not written back
	// (proposal.Ledger.Hold).
	`ALTER TABLE proposals ADD COLUMN held bytea;`,
	// The console's sign-ins (ConsoleSessions), so every host behind the
	// load balancer knows them: by the SHA-256 of the cookie.
	`CREATE TABLE console_sessions (
		digest     text   PRIMARY KEY,
		token      text   NOT NULL,
		csrf       text   NOT NULL,
		expires_ms bigint NOT NULL
	);
	CREATE INDEX console_sessions_by_token ON console_sessions (token, expires_ms);
	CREATE INDEX console_sessions_by_age ON console_sessions (expires_ms);`,
	// A digest of each realm's settings that shape the shared state, as
	// the host started last recorded it (DB.CompareRealmSettings).
	`CREATE TABLE realm_settings (
		realm      text   PRIMARY KEY,
		digest     text   NOT NULL,
		updated_ms bigint NOT NULL
	);`,
}

// errReadOnlyServer refuses a server whose transactions are read-only.
var errReadOnlyServer = errors.New("the server accepts read-only transactions only (a standby, or default_transaction_read_only is on); point the connection string at the primary")

// migrateLockKey is the first key of the migration advisory lock ("mhst");
// the second is the schema's hash, so two schemas migrate independently.
const migrateLockKey = 0x6d687374

// migrate applies missing steps in one transaction under an advisory
// lock, so hosts starting together apply each step once.
func (db *DB) migrate(ctx context.Context) error {
	err := pgx.BeginFunc(ctx, db.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1, hashtext($2))`, migrateLockKey, db.schema); err != nil {
			return err
		}
		// A read-only server (a standby) must fail here, not on every
		// write after a start that looked healthy: a migrated schema
		// needs no write to open.
		var readOnly bool
		if err := tx.QueryRow(ctx, `SELECT current_setting('transaction_read_only') = 'on'`).Scan(&readOnly); err != nil {
			return err
		}
		if readOnly {
			return errReadOnlyServer
		}
		ident := pgx.Identifier{db.schema}.Sanitize()
		// CREATE ... IF NOT EXISTS needs the CREATE privilege (on the
		// database, on the schema) even when the object exists, which a
		// role given only its own schema, or only its tables, lacks:
		// create only what is missing.
		var haveSchema, haveVersions bool
		if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_namespace WHERE nspname = $1),
			EXISTS (SELECT 1 FROM pg_catalog.pg_tables WHERE schemaname = $1 AND tablename = 'state_migrations')`, db.schema).Scan(&haveSchema, &haveVersions); err != nil {
			return err
		}
		if !haveSchema {
			if _, err := tx.Exec(ctx, `CREATE SCHEMA IF NOT EXISTS `+ident); err != nil {
				return err
			}
		}
		if !haveVersions {
			if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS `+ident+`.state_migrations (version int PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())`); err != nil {
				return err
			}
		}
		var have int
		if err := tx.QueryRow(ctx, `SELECT coalesce(max(version), 0) FROM `+ident+`.state_migrations`).Scan(&have); err != nil {
			return err
		}
		if have > len(migrations) {
			return fmt.Errorf("schema %s is at version %d, this host's is %d: %w", db.schema, have, len(migrations), ErrNewerSchema)
		}
		for v := have; v < len(migrations); v++ {
			if _, err := tx.Exec(ctx, `SET LOCAL search_path TO `+ident); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, migrations[v]); err != nil {
				return fmt.Errorf("step %d: %w", v+1, err)
			}
			if _, err := tx.Exec(ctx, `INSERT INTO `+ident+`.state_migrations (version) VALUES ($1)`, v+1); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("shared state: migrate: %w", classify(err))
	}
	return nil
}

// SQLSTATE codes branched on.
const (
	codeSerialization      = "40001"
	codeDeadlock           = "40P01"
	codeQueryCanceled      = "57014"
	codeAdminShutdown      = "57P01"
	codeCrashShutdown      = "57P02"
	codeCannotConnectNow   = "57P03"
	codeIdleSessionTimeout = "57P05"
	codeReadOnlySQLTx      = "25006"
	codeDiskFull           = "53100"
)

// classify marks a server that cannot be reached, refuses a connection
// or is going down as sdk.ErrUnavailable, a timeout as sdk.ErrDeadline and
// a full disk as sdk.ErrNoSpace, so the API answers 503 / 504 / 507 rather
// than 500. A
// connection failure's text (pgconn's names the user, database and
// host:port) is kept out of the message, which reaches clients.
func classify(err error) error {
	if err == nil || errors.Is(err, sdk.ErrUnavailable) || errors.Is(err, sdk.ErrDeadline) || errors.Is(err, ErrInvalid) || errors.Is(err, ErrNewerSchema) {
		return err
	}
	// Connect-time first: a refusal at connect (too many connections,
	// starting up, authentication) is a PgError inside a ConnectError.
	var ce *pgconn.ConnectError
	var pe *pgconn.PgError
	if errors.As(err, &ce) {
		return unavailable(connectFailure(err), err)
	}
	if errors.As(err, &pe) {
		switch {
		case pe.Code == codeQueryCanceled:
			return fmt.Errorf("%w: %w", sdk.ErrDeadline, err)
		case pe.Code == codeDeadlock, pe.Code == codeSerialization:
			// Lost to another writer past the retries: the same call
			// succeeds once the others are done.
			return unavailable("the write lost its race with other writers", err)
		case pe.Code == codeReadOnlySQLTx:
			// A primary demoted, or a failover's address still on the
			// standby: the writes go through once it points at a primary.
			return unavailable("the database accepts no writes", err)
		case pe.Code == codeDiskFull:
			// The write stored nothing and reads go on, as on any
			// provider's full disk: the same code, so a client branches
			// on it whatever the backend.
			return &hiddenError{msg: insufficientResource(pe.Code) + " (SQLSTATE " + pe.Code + ")", sentinel: sdk.ErrNoSpace, cause: err}
		case strings.HasPrefix(pe.Code, "53"):
			// The server is up and answers reads: the message names the
			// resource it ran out of, for the operator to add.
			return unavailable(insufficientResource(pe.Code), err)
		case pe.Code == codeAdminShutdown, pe.Code == codeCrashShutdown, pe.Code == codeCannotConnectNow, pe.Code == codeIdleSessionTimeout,
			strings.HasPrefix(pe.Code, "08"): // connection exceptions
			return unavailable("the database is unavailable", err)
		}
		return err
	}
	if errors.Is(err, context.DeadlineExceeded) {
		// pgx's text ("timeout: context deadline exceeded") would say it
		// twice beside the code's own.
		return &hiddenError{msg: "the database did not answer in time", sentinel: sdk.ErrDeadline, cause: err}
	}
	var ne net.Error
	if errors.As(err, &ne) || pgconn.SafeToRetry(err) || errors.Is(err, pgx.ErrTxClosed) || pgconn.Timeout(err) ||
		// A connection dropped mid-statement surfaces as a bare EOF.
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, net.ErrClosed) {
		return unavailable("the connection to the database failed", err)
	}
	return err
}

// insufficientResource names what the server ran out of (SQLSTATE class
// 53): a write refused on a full disk must not read as an outage.
func insufficientResource(code string) string {
	switch code {
	case codeDiskFull:
		return "the database's disk is full"
	case "53200":
		return "the database is out of memory"
	case "53300":
		return "the database has too many connections"
	}
	return "the database ran out of a resource"
}

// connectFailure says why a new connection failed: a host name that does
// not resolve, or a server that does not answer, is no refusal, and the
// operator fixing the connection string must know which it is.
func connectFailure(err error) string {
	var de *net.DNSError
	var ne net.Error
	switch {
	case errors.As(err, &de):
		return "the database's host name does not resolve"
	case pgconn.Timeout(err) || errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ne) && ne.Timeout():
		return "the database did not answer a new connection in time"
	}
	return "the database refused a new connection"
}

// unavailable is sdk.ErrUnavailable with a message fit for a client: what
// happened and the SQLSTATE, if any. The cause stays reachable for
// errors.As, and the host logs the full error of a failed request.
func unavailable(what string, cause error) error {
	var se *os.SyscallError
	if code := sqlState(cause); code != "" {
		what += " (SQLSTATE " + code + ")"
	} else if errors.As(cause, &se) {
		what += " (" + se.Err.Error() + ")" // "connection refused", with no address
	}
	// Not sdk.ErrUnavailable's text ("plugin unavailable"): the shared
	// state is the host's, no plugin's.
	return &hiddenError{msg: what, sentinel: sdk.ErrUnavailable, cause: cause}
}

// hiddenError answers msg while wrapping a sentinel and a cause whose text
// must not reach a client.
type hiddenError struct {
	msg      string
	sentinel error
	cause    error
}

func (e *hiddenError) Error() string   { return e.msg }
func (e *hiddenError) Unwrap() []error { return []error{e.sentinel, e.cause} }

func sqlState(err error) string {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code
	}
	return ""
}
