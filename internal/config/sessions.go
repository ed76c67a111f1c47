package config

import (
	"regexp"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclwrite"
	"github.com/memhost/memhost/coordinator"
	"github.com/zclconf/go-cty/cty"
)

// The session store's settings and the host key (DESIGN 5.7) live in this
// file, apart from the rest of the schema.

const (
	defaultSessionIdleTTL     = 24 * time.Hour
	defaultSessionMaxPerRealm = 10000
)

// Sessions holds the durable session store's settings.
type Sessions struct {
	IdleTTL     time.Duration // a session idle this long is dropped
	MaxPerRealm int           // sessions kept per realm; past it, the least recently used session of the identity holding the most goes first
}

var sessionsSchema = &hcl.BodySchema{Attributes: []hcl.AttributeSchema{
	{Name: "idle_ttl_minutes"}, {Name: "max_per_realm"},
}}

func defaultSessions() Sessions {
	return Sessions{IdleTTL: defaultSessionIdleTTL, MaxPerRealm: defaultSessionMaxPerRealm}
}

func (d *decoder) sessions(b *hcl.Block) {
	content, diags := b.Body.Content(sessionsSchema)
	d.diags = append(d.diags, diags...)
	a, s := content.Attributes, &d.cfg.Sessions
	d.duration(a, "idle_ttl_minutes", "sessions.idle_ttl_minutes", time.Minute, &s.IdleTTL)
	d.integer(a, "max_per_realm", "sessions.max_per_realm", &s.MaxPerRealm)
}

// hostKeyEnv decodes the top-level host_key_env. The key itself is read
// where it is used (cmd/memhost); the file only names the variable, and
// loading checks that it is set so a missing key points at its line.
func (d *decoder) hostKeyEnv(attrs hcl.Attributes) {
	if !d.str(attrs, "host_key_env", "host_key_env", &d.cfg.HostKeyEnv) {
		return
	}
	attr, name := attrs["host_key_env"], d.cfg.HostKeyEnv
	switch v, ok := d.opts.lookupEnv(name); {
	case !validEnvName(name):
		d.errorf(attr.Expr.Range().Ptr(), "Invalid host_key_env", "host_key_env %s", notAnEnvName)
	case !ok || v == "":
		d.errorf(attr.Expr.Range().Ptr(), "Host key not set",
			"host_key_env names %s, which is unset or empty.", envVariable(name))
	case len(strings.TrimSpace(v)) < coordinator.MinHostKeyBytes:
		// As serve reads it (internal/hostkey): surrounding space is not
		// part of the key. Only the length is shown, never the key.
		d.errorf(attr.Expr.Range().Ptr(), "Host key too short",
			"host_key_env names the environment variable %s, which holds %d bytes; the host key needs at least %d (for example `openssl rand -hex 32`).",
			name, len(strings.TrimSpace(v)), coordinator.MinHostKeyBytes)
	}
}

func (c *Config) validateSessions(p *problems) {
	if c.Sessions.IdleTTL < time.Minute {
		p.add("sessions.idle_ttl_minutes", "Invalid idle_ttl_minutes", "idle_ttl_minutes must be at least 1.")
	}
	if c.Sessions.MaxPerRealm < 1 {
		p.add("sessions.max_per_realm", "Invalid max_per_realm", "max_per_realm must be at least 1.")
	}
}

func (c *Config) sessionsHCL(body *hclwrite.Body) {
	body.AppendNewline()
	b := body.AppendNewBlock("sessions", nil).Body()
	b.SetAttributeValue("idle_ttl_minutes", cty.NumberIntVal(int64(c.Sessions.IdleTTL/time.Minute)))
	b.SetAttributeValue("max_per_realm", cty.NumberIntVal(int64(c.Sessions.MaxPerRealm)))
}

// Session store kinds.
const (
	SessionStoreLocal    = "local"    // the host's own state database
	SessionStorePostgres = "postgres" // shared by every host on one PostgreSQL
)

// DefaultSessionStoreDSNEnv is the postgres provider's own default, so one
// variable serves both when they share a database.
const DefaultSessionStoreDSNEnv = "MEMHOST_POSTGRES_DSN"

// DefaultSessionStoreSchema keeps host state apart from the provider's
// schema ("memhost") when both use one database.
const DefaultSessionStoreSchema = "memhost_state"

// SessionStore says where session and compaction state live.
type SessionStore struct {
	Kind   string // SessionStoreLocal or SessionStorePostgres
	DSNEnv string // postgres: the variable holding the connection string
	Schema string // postgres: the schema holding the tables
}

var sessionStoreSchema = &hcl.BodySchema{Attributes: []hcl.AttributeSchema{
	{Name: "kind"}, {Name: "dsn_env"}, {Name: "schema"},
}}

func defaultSessionStore() SessionStore {
	return SessionStore{Kind: SessionStoreLocal, DSNEnv: DefaultSessionStoreDSNEnv, Schema: DefaultSessionStoreSchema}
}

func (d *decoder) sessionStore(b *hcl.Block) {
	content, diags := b.Body.Content(sessionStoreSchema)
	d.diags = append(d.diags, diags...)
	a, s := content.Attributes, &d.cfg.SessionStore
	_, hasKind := a["kind"]
	kindOK := d.str(a, "kind", "session_store.kind", &s.Kind)
	d.str(a, "schema", "session_store.schema", &s.Schema)
	hasEnv := d.str(a, "dsn_env", "session_store.dsn_env", &s.DSNEnv)
	if s.Kind != SessionStorePostgres {
		// A local store reads neither key: a block that names a database
		// but forgot kind = "postgres" would run every host on its own
		// sessions, with nothing said.
		if s.Kind == SessionStoreLocal && (kindOK || !hasKind) {
			for _, name := range []string{"dsn_env", "schema"} {
				if attr, ok := a[name]; ok {
					d.errorf(attr.NameRange.Ptr(), "Unexpected "+name,
						`session_store.%s applies only to kind = "postgres"; this store is "local", which keeps sessions in data_dir.`, name)
				}
			}
		}
		return
	}
	// Like host_key_env: a missing connection string points at its line.
	subject := b.DefRange.Ptr()
	if hasEnv {
		subject = a["dsn_env"].Expr.Range().Ptr()
	}
	switch v, ok := d.opts.lookupEnv(s.DSNEnv); {
	case !validEnvName(s.DSNEnv):
		d.errorf(subject, "Invalid dsn_env", "dsn_env %s", notAnEnvName)
	case !ok || v == "":
		d.errorf(subject, "Connection string not set",
			"session_store.dsn_env names %s, which is unset or empty; set it to the PostgreSQL connection string.", envVariable(s.DSNEnv))
	}
}

func (c *Config) validateSessionStore(p *problems) {
	s := &c.SessionStore
	switch s.Kind {
	case SessionStoreLocal:
	case SessionStorePostgres:
		if !schemaNameRE.MatchString(s.Schema) {
			p.add("session_store.schema", "Invalid schema", "schema %q must be 1-63 lower-case letters, digits or underscores, not starting with a digit.", s.Schema)
		}
	default:
		p.add("session_store.kind", "Invalid session store kind", `kind is %q; it must be "local" or "postgres".`, s.Kind)
	}
}

var schemaNameRE = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,62}$`)

// sessionStoreWarnings: hosts sharing sessions but not a host key mint
// different nonces for one session.
func (c *Config) sessionStoreWarnings(warn func(key, format string, args ...any)) {
	if c.SessionStore.Kind == SessionStorePostgres && c.HostKeyEnv == "" {
		warn("session_store.kind", `session_store kind = "postgres" without host_key_env: each host keeps its own key in data_dir, so hosts mint different nonces for one session; set host_key_env to one key shared by every host.`)
	}
}

// sessionStoreHCL writes the block only when it is not the default, so
// single-host configs print as before.
func (c *Config) sessionStoreHCL(body *hclwrite.Body) {
	s := c.SessionStore
	if s == defaultSessionStore() {
		return
	}
	body.AppendNewline()
	b := body.AppendNewBlock("session_store", nil).Body()
	b.SetAttributeValue("kind", cty.StringVal(s.Kind))
	b.SetAttributeValue("dsn_env", cty.StringVal(s.DSNEnv))
	b.SetAttributeValue("schema", cty.StringVal(s.Schema))
}
