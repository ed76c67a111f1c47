package postgres

import (
	"encoding/json"
	"fmt"
	"regexp"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/memhost/memhost/sdk"
	"github.com/memhost/memhost/sdk/dialer"
)

// Configuration defaults.
const (
	DefaultDSNEnv           = "MEMHOST_POSTGRES_DSN"
	DefaultSchema           = "memhost"
	DefaultPoolSize         = 8
	DefaultStatementTimeout = 10 * time.Second
	maxPoolSize             = 200
	maxStatementTimeout     = 10 * time.Minute

	DefaultReplicaPollInterval = time.Second
	DefaultReplicaReadWait     = 200 * time.Millisecond
	DefaultReplicaMaxLag       = 2 * time.Second
	DefaultChangeRetention     = time.Hour
)

// configSchema is the JSON Schema of Config, published in Info.
const configSchema = `{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "title": "memhost postgres provider",
  "type": "object",
  "properties": {
    "dsn_env": {
      "type": "string",
      "description": "Environment variable holding the PostgreSQL connection string (URL or key=value form). The string itself never sits in the config file.",
      "default": "MEMHOST_POSTGRES_DSN",
      "pattern": "^[A-Za-z_][A-Za-z0-9_]*$"
    },
    "schema": {
      "type": "string",
      "description": "PostgreSQL schema holding the provider's tables; created on first start. Deployments sharing a database use different schemas.",
      "default": "memhost",
      "pattern": "^[a-z_][a-z0-9_]{0,62}$"
    },
    "pool_size": {
      "type": "integer",
      "description": "Most connections the plugin holds open.",
      "default": 8,
      "minimum": 1,
      "maximum": 200
    },
    "statistics": {
      "type": "string",
      "enum": ["store", "realm"],
      "description": "What BM25's collection statistics (record count, mean length, document frequencies) are taken over: \"realm\", the query's realm only (as the sqlite provider takes them), so one realm's writes never move another's scores and no realm can read another's term counts from its own scores; \"store\", every realm of the schema, only for a schema whose realms are one tenant's.",
      "default": "realm"
    },
    "transaction_pooling": {
      "type": "boolean",
      "description": "Set when the connection string reaches PostgreSQL through a pooler in transaction mode (PgBouncer pool_mode = transaction): statements are not prepared by name, and the schema and statement timeout are set in each transaction instead of at connection start.",
      "default": false
    },
    "statement_timeout": {
      "type": "string",
      "description": "PostgreSQL statement_timeout for every statement, as a Go duration (\"10s\", \"1500ms\").",
      "default": "10s"
    },
    ` + sdk.LedgerBoundsSchema + `,
    "replica": {
      "type": "object",
      "description": "The in-memory replica recall answers from (see docs/deployment.md): every plugin process keeps the schema's active records in an exact in-process index, kept current from the change log, and answers recall from it when it is current; PostgreSQL stays the only truth.",
      "properties": {
        "enabled": {"type": "boolean", "description": "Keep a replica; off under transaction_pooling (a transaction pooler does not carry LISTEN). Default: on unless transaction_pooling."},
        "poll_interval": {"type": "string", "description": "How often the replica reads the change log without a notification (the fallback for missed ones), 10ms to 1m.", "default": "1s"},
        "read_wait": {"type": "string", "description": "How long a recall waits for the replica to apply the changes it must include (this process's acknowledged writes, and every change committed before the recall read the log's head), 0 to 10s; past it the recall answers from SQL. A recall with a query vector also waits this long for a replica that is loading or catching up, since SQL ranks without the vector.", "default": "200ms"},
        "max_lag": {"type": "string", "description": "A replica that has known of unapplied changes for longer than this answers from SQL until it catches up, 10ms to 1m.", "default": "2s"},
        "change_retention": {"type": "string", "description": "Change log entries older than this are trimmed even when a live replica has not applied them (it reloads), 1m to 720h, except those after the snapshot of a live replica's load.", "default": "1h"}
      },
      "additionalProperties": false
    }
  },
  "additionalProperties": false
}`

// Config is the provider's configuration, as the deployment writes it.
type Config struct {
	DSNEnv           string `json:"dsn_env"`
	Schema           string `json:"schema"`
	PoolSize         int    `json:"pool_size"`
	StatementTimeout string `json:"statement_timeout"`
	Statistics       string `json:"statistics"`
	// TransactionPooling: see configSchema.
	TransactionPooling bool           `json:"transaction_pooling"`
	Replica            *ReplicaConfig `json:"replica"`
	// LedgerBounds bound the injection ledger.
	sdk.LedgerBounds
}

// ReplicaConfig configures the in-memory replica (see configSchema).
type ReplicaConfig struct {
	Enabled         *bool  `json:"enabled"`
	PollInterval    string `json:"poll_interval"`
	ReadWait        string `json:"read_wait"`
	MaxLag          string `json:"max_lag"`
	ChangeRetention string `json:"change_retention"`
}

// replicaSettings is a validated ReplicaConfig.
type replicaSettings struct {
	enabled                bool
	poll, readWait, maxLag time.Duration
	retention              time.Duration
}

// settings is a validated Config with the connection string read.
type settings struct {
	dsnEnv           string
	schema           string
	poolSize         int
	statementTimeout time.Duration
	realmStats       bool
	// transactionPooling: see pgdb.
	transactionPooling bool
	replica            replicaSettings
	ledger             ledgerBound
	pool               *pgxpool.Config
}

// ledgerBound is how much of the injection ledger is kept.
type ledgerBound struct {
	retention time.Duration
	maxRows   int64
}

var (
	envNameRE    = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	schemaNameRE = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,62}$`)
)

func fieldErr(field, problem string) error {
	return &sdk.FieldError{Field: field, Problem: problem, Err: sdk.ErrInvalid}
}

// parseConfig decodes a configuration strictly and reads the connection
// string from the environment (getenv). Errors wrap sdk.ErrInvalid and
// never repeat the connection string, which may hold a password.
func parseConfig(raw json.RawMessage, getenv func(string) string) (settings, error) {
	cfg := Config{DSNEnv: DefaultDSNEnv, Schema: DefaultSchema, PoolSize: DefaultPoolSize}
	if err := sdk.DecodeConfig(raw, &cfg); err != nil {
		return settings{}, fmt.Errorf("postgres: config: %w", err)
	}
	s := settings{dsnEnv: cfg.DSNEnv, schema: cfg.Schema, poolSize: cfg.PoolSize, statementTimeout: DefaultStatementTimeout}
	bad := func(err error) (settings, error) { return settings{}, fmt.Errorf("postgres: config: %w", err) }
	if !envNameRE.MatchString(cfg.DSNEnv) {
		// Not quoted: what is pasted here is most often the connection
		// string itself, password and all.
		return bad(fieldErr("dsn_env", "must name an environment variable (letters, digits, underscores); the value given is not one, and is not shown in case it is the connection string"))
	}
	if !schemaNameRE.MatchString(cfg.Schema) {
		return bad(fieldErr("schema", fmt.Sprintf("%q must be 1-63 lower-case letters, digits or underscores, not starting with a digit", cfg.Schema)))
	}
	if cfg.PoolSize < 1 || cfg.PoolSize > maxPoolSize {
		return bad(fieldErr("pool_size", fmt.Sprintf("is %d, must be 1 to %d", cfg.PoolSize, maxPoolSize)))
	}
	switch cfg.Statistics {
	case "", "realm":
		s.realmStats = true
	case "store":
	default:
		return bad(fieldErr("statistics", fmt.Sprintf("is %q, must be \"store\" or \"realm\"", cfg.Statistics)))
	}
	var err error
	if s.statementTimeout, err = parseDuration("statement_timeout", cfg.StatementTimeout, DefaultStatementTimeout, time.Millisecond, maxStatementTimeout); err != nil {
		return bad(err)
	}
	if s.ledger.retention, s.ledger.maxRows, err = cfg.Limits(); err != nil {
		return bad(err)
	}
	s.transactionPooling = cfg.TransactionPooling
	if s.replica, err = parseReplica(cfg.Replica, cfg.TransactionPooling); err != nil {
		return bad(err)
	}
	dsn := getenv(cfg.DSNEnv)
	if dsn == "" {
		variable := "environment variable " + cfg.DSNEnv
		if shown := sdk.EnvNameShown(cfg.DSNEnv); shown != cfg.DSNEnv {
			variable = shown
		}
		return bad(fieldErr("dsn_env", fmt.Sprintf("%s is unset or empty; set it to the PostgreSQL connection string", variable)))
	}
	pc, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		// pgx's message quotes the string; say only where it came from.
		return bad(fieldErr("dsn_env", fmt.Sprintf("the connection string in %s does not parse (check its syntax)", cfg.DSNEnv)))
	}
	pc.MaxConns = int32(s.poolSize)
	pc.MinConns = 0
	rp := pc.ConnConfig.RuntimeParams
	if s.transactionPooling {
		// One round trip per statement and nothing named on the server,
		// which the next transaction may not reach (see pgdb).
		pc.ConnConfig.DefaultQueryExecMode = pgx.QueryExecModeExec
		pc.ConnConfig.StatementCacheCapacity = 0
		pc.ConnConfig.DescriptionCacheCapacity = 0
	} else {
		rp["search_path"] = s.schema
		rp["statement_timeout"] = fmt.Sprint(s.statementTimeout.Milliseconds())
		// A transaction whose client stopped (a host frozen or cut off)
		// would keep its locks, the change log's among them, so every
		// host's writes, until the OS notices the connection is dead
		// (hours): the server ends it once it idles as long as a
		// statement may run.
		rp["idle_in_transaction_session_timeout"] = rp["statement_timeout"]
	}
	if rp["application_name"] == "" {
		rp["application_name"] = "memhost-postgres"
	}
	if pc.ConnConfig.ConnectTimeout == 0 {
		pc.ConnConfig.ConnectTimeout = 10 * time.Second
	}
	// pgx closes a connection whose call timed out, waiting up to 15 s
	// for a silent server while its pool keeps the place (sdk/dialer).
	pc.ConnConfig.DialFunc = dialer.CloseOnTimeout(pc.ConnConfig.DialFunc)
	s.pool = pc
	return s, nil
}

// parseDuration reads an optional duration field (def when empty) within
// [lo, hi].
func parseDuration(field, v string, def, lo, hi time.Duration) (time.Duration, error) {
	if v == "" {
		return def, nil
	}
	d, err := time.ParseDuration(v)
	switch {
	case err != nil:
		return 0, fieldErr(field, fmt.Sprintf("%q is not a duration such as \"10s\"", v))
	case d < lo || d > hi:
		return 0, fieldErr(field, fmt.Sprintf("is %v, must be %v to %v", d, lo, hi))
	}
	return d, nil
}

// parseReplica validates the replica block; the replica is on by default,
// except behind a transaction pooler, which cannot carry the LISTEN its
// notifications need.
func parseReplica(c *ReplicaConfig, transactionPooling bool) (replicaSettings, error) {
	if c == nil {
		c = &ReplicaConfig{}
	}
	r := replicaSettings{enabled: !transactionPooling}
	if c.Enabled != nil {
		if *c.Enabled && transactionPooling {
			return r, fieldErr("replica.enabled", "cannot be true with transaction_pooling: a transaction pooler does not carry the LISTEN the replica needs")
		}
		r.enabled = *c.Enabled
	}
	var err error
	if r.poll, err = parseDuration("replica.poll_interval", c.PollInterval, DefaultReplicaPollInterval, 10*time.Millisecond, time.Minute); err != nil {
		return r, err
	}
	if r.readWait, err = parseDuration("replica.read_wait", c.ReadWait, DefaultReplicaReadWait, 0, 10*time.Second); err != nil {
		return r, err
	}
	if r.maxLag, err = parseDuration("replica.max_lag", c.MaxLag, DefaultReplicaMaxLag, 10*time.Millisecond, time.Minute); err != nil {
		return r, err
	}
	if r.retention, err = parseDuration("replica.change_retention", c.ChangeRetention, DefaultChangeRetention, time.Minute, 720*time.Hour); err != nil {
		return r, err
	}
	return r, nil
}

// describeTarget names the server and database a pool connects to, for
// errors: never the password.
func describeTarget(pc *pgxpool.Config) string {
	cc := pc.ConnConfig
	return fmt.Sprintf("database %q on %s:%d as %q", cc.Database, cc.Host, cc.Port, cc.User)
}
