package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/big"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/memhost/memhost/sdk"
	"github.com/zclconf/go-cty/cty"
)

// MaxFileBytes bounds a config file; anything larger is surely not one.
const MaxFileBytes = 1 << 20

// maxNesting bounds how deeply brackets, braces and parentheses nest. HCL's
// parser recurses per level, and a file of nothing but "[" within
// MaxFileBytes overflows the goroutine stack: a fatal error, not a panic.
const maxNesting = 100

// Load reads, parses and validates the config file at path. A relative
// path is taken from WorkDir.
func (o Options) Load(path string) (*Config, error) {
	full := path
	if !filepath.IsAbs(full) {
		full = filepath.Join(o.workDir(), full)
	}
	f, err := os.Open(full)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	defer f.Close()
	src, err := io.ReadAll(io.LimitReader(f, MaxFileBytes+1))
	if err != nil {
		return nil, fmt.Errorf("config: read %s: %w", path, err)
	}
	if len(src) > MaxFileBytes {
		// Said once, as a config error (which wraps sdk.ErrInvalid
		// without printing it: ": invalid argument" read as the system's).
		return nil, newError(hcl.Diagnostics{{Severity: hcl.DiagError,
			Summary: fmt.Sprintf("config %s is larger than %d bytes (1 MiB)", path, MaxFileBytes),
			Detail:  "a config file is far smaller; is it the right file?"}})
	}
	return o.parse(path, full, src)
}

// Parse parses and validates config source as if read from the file
// filename: diagnostics name it, and relative paths resolve against its
// directory (taken from WorkDir when filename is relative).
func (o Options) Parse(filename string, src []byte) (*Config, error) {
	full := filename
	if !filepath.IsAbs(full) {
		full = filepath.Join(o.workDir(), full)
	}
	return o.parse(filename, full, src)
}

func (o Options) parse(name, full string, src []byte) (*Config, error) {
	if d := checkUTF8(name, src); d != nil {
		return nil, newError(hcl.Diagnostics{d})
	}
	if d := checkNesting(name, src); d != nil {
		return nil, newError(hcl.Diagnostics{d})
	}
	file, diags := hclsyntax.ParseConfig(src, name, hcl.InitialPos)
	if diags.HasErrors() {
		return nil, newError(diags)
	}
	d := &decoder{opts: o, dir: filepath.Dir(full), cfg: o.defaults(filepath.Dir(full))}
	d.cfg.File = name
	d.file(file.Body)
	c := d.cfg
	c.addDefaultProvider()
	c.bindDefaultRealm()
	c.addDefaultCompactor()
	if o.Override != nil {
		if err := o.Override(c); err != nil {
			return nil, err
		}
	}
	if d.diags.HasErrors() {
		// Every problem at once: the values the file did state are checked
		// too, so fixing a misspelt key does not reveal a second round. An
		// item the file got wrong was not decoded, and is not reported again
		// for the default it kept.
		c.undecoded = d.undecoded()
		diags := d.diags
		var verr *Error
		if errors.As(c.Validate(), &verr) {
			diags = append(diags, verr.Diagnostics...)
		}
		return nil, newError(diags)
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return c, nil
}

// undecoded answers the items a decoding error points into, and those a
// required argument the file left out would have set.
func (d *decoder) undecoded() map[string]bool {
	bad := map[string]bool{}
	for key, r := range d.cfg.pos {
		for _, diag := range d.diags {
			if s := diag.Subject; diag.Severity == hcl.DiagError && s != nil && s.Filename == r.Filename &&
				s.Start.Byte < r.End.Byte && r.Start.Byte < s.End.Byte {
				bad[key] = true
			}
		}
	}
	for key := range d.missing {
		bad[key] = true
	}
	return bad
}

// Schemas. Every block is closed: unknown arguments and blocks are errors.
var (
	// The SDK's table of plugin kinds is the one list: a new kind becomes
	// a config block, and a valid instance kind, with no edit here.
	instanceKinds = sdk.Kinds()

	fileSchema = func() *hcl.BodySchema {
		s := &hcl.BodySchema{
			Attributes: []hcl.AttributeSchema{
				{Name: "listen"}, {Name: "plugin_dir"}, {Name: "data_dir"}, {Name: "log_format"},
				{Name: "log_level"}, {Name: "allow_insecure_listen"}, {Name: "default_realm"},
				{Name: "host_key_env"}, {Name: "ui"},
			},
			Blocks: []hcl.BlockHeaderSchema{
				{Type: "realm", LabelNames: []string{"name"}},
				{Type: "coordinator"},
				{Type: "server"},
				{Type: "sessions"},
				{Type: "supervisor"},
				{Type: "session_store"},
				{Type: "proposals"},
				{Type: "trace"},
				{Type: "token", LabelNames: []string{"name"}},
			},
		}
		for _, k := range instanceKinds {
			s.Blocks = append(s.Blocks, hcl.BlockHeaderSchema{Type: string(k), LabelNames: []string{"name"}})
		}
		return s
	}()
	// An instance names a plugin (started by the host) or the address of
	// a remote one; Validate requires exactly one.
	instanceSchema = &hcl.BodySchema{Attributes: []hcl.AttributeSchema{
		{Name: "plugin"}, {Name: "config"},
		{Name: "address"}, {Name: "tls_cert"}, {Name: "tls_key"}, {Name: "tls_ca"}, {Name: "tls_server_name"},
	}}
	realmSchema = &hcl.BodySchema{Attributes: []hcl.AttributeSchema{
		{Name: "provider", Required: true},
		{Name: "archive"}, {Name: "archive_max_age_days"}, {Name: "archive_max_records"},
		{Name: "embedder"}, {Name: "semantic_weight"}, {Name: "query_embed_timeout_ms"},
	}}
	tokenSchema = &hcl.BodySchema{Attributes: []hcl.AttributeSchema{
		{Name: "secret_env", Required: true}, {Name: "realms", Required: true}, {Name: "role"}, {Name: "identity"},
		{Name: "max_in_flight"},
	}}
	serverSchema = &hcl.BodySchema{Attributes: []hcl.AttributeSchema{
		{Name: "max_body_bytes"}, {Name: "read_timeout_ms"}, {Name: "shutdown_timeout_ms"}, {Name: "allowed_hosts"},
	}}
	supervisorSchema = &hcl.BodySchema{Attributes: []hcl.AttributeSchema{
		{Name: "call_timeout_ms"}, {Name: "health_interval_ms"}, {Name: "health_timeout_ms"},
		{Name: "kill_grace_ms"}, {Name: "max_backoff_ms"}, {Name: "reindex_timeout_ms"}, {Name: "boot_wait_ms"},
		{Name: "configure_timeout_ms"},
	}}
)

// decoder turns the HCL body into a Config, collecting every diagnostic.
// It checks structure and types; Validate checks values.
type decoder struct {
	opts  Options
	dir   string // the config file's directory, for relative paths
	cfg   *Config
	diags hcl.Diagnostics
	// missing holds the items of required arguments the file left out.
	missing map[string]bool
}

func (d *decoder) file(body hcl.Body) {
	content, diags := body.Content(fileSchema)
	d.diags = append(d.diags, diags...)
	c := d.cfg

	d.str(content.Attributes, "listen", "listen", &c.Listen)
	d.path(content.Attributes, "plugin_dir", &c.PluginDir)
	d.path(content.Attributes, "data_dir", &c.DataDir)
	d.str(content.Attributes, "log_format", "log_format", &c.LogFormat)
	d.str(content.Attributes, "log_level", "log_level", &c.LogLevel)
	d.boolean(content.Attributes, "allow_insecure_listen", "allow_insecure_listen", &c.AllowInsecureListen)
	d.str(content.Attributes, "default_realm", "default_realm", &c.DefaultRealm)
	d.hostKeyEnv(content.Attributes)
	d.boolean(content.Attributes, "ui", "ui", &c.UI)

	seen := map[string]*hcl.Block{}
	for _, b := range content.Blocks {
		switch b.Type {
		case "coordinator", "server", "sessions", "supervisor", "session_store", "proposals", "trace":
			if first, dup := seen[b.Type]; dup {
				d.errorf(b.DefRange.Ptr(), "Duplicate "+b.Type+" block",
					"Only one %s block is allowed; the first is at %s.", b.Type, lineOf(first.DefRange))
				continue
			}
			seen[b.Type] = b
			switch b.Type {
			case "coordinator":
				d.coordinator(b)
			case "server":
				d.server(b)
			case "sessions":
				d.sessions(b)
			case "session_store":
				d.sessionStore(b)
			case "proposals":
				d.proposals(b)
			case "trace":
				d.trace(b)
			default:
				d.supervisor(b)
			}
		case "realm":
			d.realm(b)
		case "token":
			d.token(b)
		default:
			d.instance(sdk.PluginKind(b.Type), b)
		}
	}
}

func (d *decoder) instance(kind sdk.PluginKind, b *hcl.Block) {
	content, diags := b.Body.Content(instanceSchema)
	d.diags = append(d.diags, diags...)
	key := fmt.Sprintf("instance[%d]", len(d.cfg.Instances))
	in := Instance{Kind: kind, Name: b.Labels[0], Config: json.RawMessage("{}"), Pos: lineOf(b.DefRange)}
	d.at(key, labelRange(b))
	d.str(content.Attributes, "plugin", key+".plugin", &in.Plugin)
	var r Remote
	if d.str(content.Attributes, "address", key+".address", &r.Address) {
		d.instancePath(content.Attributes, "tls_cert", key, &r.TLSCert)
		d.instancePath(content.Attributes, "tls_key", key, &r.TLSKey)
		d.instancePath(content.Attributes, "tls_ca", key, &r.TLSCA)
		d.str(content.Attributes, "tls_server_name", key+".tls_server_name", &r.ServerName)
		in.Remote = &r
	} else {
		if _, ok := content.Attributes["plugin"]; !ok {
			d.left(key + ".plugin")
			d.errorf(b.Body.MissingItemRange().Ptr(), "Missing required argument",
				`The argument "plugin" (or "address", for a remote plugin) is required, but no definition was found.`)
		}
		for _, name := range []string{"tls_cert", "tls_key", "tls_ca", "tls_server_name"} {
			if attr, ok := content.Attributes[name]; ok {
				d.errorf(attr.NameRange.Ptr(), "Unexpected "+name, "%s %q: %s belongs to a remote plugin (one with an address).", kind, in.Name, name)
			}
		}
	}
	if attr, ok := content.Attributes["config"]; ok {
		d.at(key+".config", attr.Expr.Range())
		d.recordConfigPositions(key, attr.Expr, nil)
		if v, ok := d.value(attr); ok {
			if raw, ok := d.object(attr, v); ok {
				in.Config = raw
			}
		}
	}
	d.cfg.Instances = append(d.cfg.Instances, in)
}

func (d *decoder) realm(b *hcl.Block) {
	content, diags := b.Body.Content(realmSchema)
	d.diags = append(d.diags, diags...)
	key := fmt.Sprintf("realm[%d]", len(d.cfg.Realms))
	r := Realm{Name: b.Labels[0], Pos: lineOf(b.DefRange)}
	d.at(key, labelRange(b))
	d.required(content.Attributes, key, "provider")
	d.str(content.Attributes, "provider", key+".provider", &r.Provider)
	for _, name := range []string{"archive", "archive_max_age_days", "archive_max_records"} {
		if _, set := content.Attributes[name]; set && r.Archive == nil {
			a := DefaultArchive
			r.Archive = &a
		}
	}
	if a := r.Archive; a != nil {
		d.boolean(content.Attributes, "archive", key+".archive", &a.Enabled)
		days := int(a.MaxAge / (24 * time.Hour))
		if d.integer(content.Attributes, "archive_max_age_days", key+".archive_max_age_days", &days) {
			// A century bounds it, so the duration cannot overflow.
			a.MaxAge = time.Duration(min(days, maxArchiveDays+1)) * 24 * time.Hour
		}
		d.integer(content.Attributes, "archive_max_records", key+".archive_max_records", &a.MaxRecords)
	}
	d.str(content.Attributes, "embedder", key+".embedder", &r.Embedder)
	var w float64
	if d.float(content.Attributes, "semantic_weight", key+".semantic_weight", &w) {
		r.SemanticWeight = &w
	}
	var qt time.Duration
	if d.duration(content.Attributes, "query_embed_timeout_ms", key+".query_embed_timeout_ms", time.Millisecond, &qt) {
		r.QueryEmbedTimeout = &qt
	}
	d.cfg.Realms = append(d.cfg.Realms, r)
}

func (d *decoder) token(b *hcl.Block) {
	content, diags := b.Body.Content(tokenSchema)
	d.diags = append(d.diags, diags...)
	key := fmt.Sprintf("token[%d]", len(d.cfg.Tokens))
	t := Token{Name: b.Labels[0], Pos: lineOf(b.DefRange)}
	d.at(key, labelRange(b))
	d.required(content.Attributes, key, "secret_env", "realms")
	d.strings(content.Attributes, "realms", key+".realms", &t.Realms)
	d.identities(content.Attributes, key+".identity", &t.Identities)
	t.Role = RoleAgent
	t.MaxInFlight = DefaultMaxInFlight
	d.integer(content.Attributes, "max_in_flight", key+".max_in_flight", &t.MaxInFlight)
	if d.str(content.Attributes, "role", key+".role", &t.Role) && t.Role != RoleAgent && t.Role != RoleApplication {
		d.errorf(content.Attributes["role"].Expr.Range().Ptr(), "Invalid token role",
			"Token %q: role %q is neither %q nor %q.", t.Name, t.Role, RoleApplication, RoleAgent)
	}
	if d.str(content.Attributes, "secret_env", key+".secret_env", &t.SecretEnv) {
		attr := content.Attributes["secret_env"]
		switch secret, ok := d.opts.lookupEnv(t.SecretEnv); {
		case !validEnvName(t.SecretEnv):
			d.errorf(attr.Expr.Range().Ptr(), "Invalid secret_env",
				"Token %q: secret_env %s", t.Name, notAnEnvName)
		case !ok:
			d.errorf(attr.Expr.Range().Ptr(), "Token secret not set",
				"Token %q reads its secret from %s, which is not set.", t.Name, envVariable(t.SecretEnv))
		case secret == "":
			d.errorf(attr.Expr.Range().Ptr(), "Token secret not set",
				"Token %q reads its secret from %s, which is empty.", t.Name, envVariable(t.SecretEnv))
		default:
			t.Secret = secret
		}
	}
	d.cfg.Tokens = append(d.cfg.Tokens, t)
}

// identities decodes a token's identity: one string, or a list of them.
func (d *decoder) identities(attrs hcl.Attributes, key string, dst *[]string) {
	attr, ok := attrs["identity"]
	if !ok {
		return
	}
	if v, diags := attr.Expr.Value(nil); !diags.HasErrors() && v.Type().Equals(cty.String) {
		var one string
		if d.str(attrs, "identity", key, &one) {
			*dst = []string{one}
		}
		return
	}
	if d.strings(attrs, "identity", key, dst) && len(*dst) == 0 {
		// An empty list is a template that rendered nothing, or "none":
		// either way not the unbound token that omitting it declares.
		d.errorf(attr.Expr.Range().Ptr(), "Invalid identity",
			"identity must name at least one identity; omit it to let the token act as any identity of its realms.")
	}
}

func (d *decoder) server(b *hcl.Block) {
	content, diags := b.Body.Content(serverSchema)
	d.diags = append(d.diags, diags...)
	a, s := content.Attributes, &d.cfg.Server
	var maxBody int
	if d.integer(a, "max_body_bytes", "server.max_body_bytes", &maxBody) {
		s.MaxBodyBytes = int64(maxBody)
	}
	d.millis(a, "read_timeout_ms", "server.read_timeout_ms", &s.ReadTimeout)
	d.millis(a, "shutdown_timeout_ms", "server.shutdown_timeout_ms", &s.ShutdownTimeout)
	d.strings(a, "allowed_hosts", "server.allowed_hosts", &s.AllowedHosts)
}

func (d *decoder) supervisor(b *hcl.Block) {
	content, diags := b.Body.Content(supervisorSchema)
	d.diags = append(d.diags, diags...)
	a, s := content.Attributes, &d.cfg.Supervisor
	d.millis(a, "call_timeout_ms", "supervisor.call_timeout_ms", &s.CallTimeout)
	d.millis(a, "health_interval_ms", "supervisor.health_interval_ms", &s.HealthInterval)
	d.millis(a, "health_timeout_ms", "supervisor.health_timeout_ms", &s.HealthTimeout)
	d.millis(a, "kill_grace_ms", "supervisor.kill_grace_ms", &s.KillGrace)
	d.millis(a, "max_backoff_ms", "supervisor.max_backoff_ms", &s.MaxBackoff)
	d.millis(a, "reindex_timeout_ms", "supervisor.reindex_timeout_ms", &s.ReindexTimeout)
	d.millis(a, "boot_wait_ms", "supervisor.boot_wait_ms", &s.BootWait)
	d.millis(a, "configure_timeout_ms", "supervisor.configure_timeout_ms", &s.ConfigureTimeout)
}

// required notes the required arguments of the block at key that the
// file left out (HCL reports them).
func (d *decoder) required(attrs hcl.Attributes, key string, names ...string) {
	for _, name := range names {
		if _, ok := attrs[name]; !ok {
			d.left(key + "." + name)
		}
	}
}

// left notes that the file left out the required item key.
func (d *decoder) left(key string) {
	if d.missing == nil {
		d.missing = map[string]bool{}
	}
	d.missing[key] = true
}

// at records where the item key was set.
func (d *decoder) at(key string, r hcl.Range) {
	if key != "" {
		d.cfg.pos[key] = r
	}
}

func (d *decoder) errorf(subject *hcl.Range, summary, detail string, args ...any) {
	d.diags = append(d.diags, &hcl.Diagnostic{
		Severity: hcl.DiagError, Summary: summary, Detail: fmt.Sprintf(detail, args...), Subject: subject,
	})
}

// value evaluates a literal attribute. Config values are literals: with no
// variables or functions, operators, conditionals, for-expressions and
// interpolation could only obscure a constant (and nested loops could
// make a tiny file expensive to evaluate).
func (d *decoder) value(attr *hcl.Attribute) (cty.Value, bool) {
	if !d.literal(attr.Expr) {
		return cty.NilVal, false
	}
	v, diags := attr.Expr.Value(nil)
	d.diags = append(d.diags, diags...)
	if diags.HasErrors() || !v.IsWhollyKnown() {
		return cty.NilVal, false
	}
	return v, true
}

func (d *decoder) literal(e hcl.Expression) bool {
	switch e := e.(type) {
	case *hclsyntax.LiteralValueExpr:
		return true
	case *hclsyntax.TemplateExpr:
		// A quoted string or heredoc is a template whose parts are all
		// literal text; "${7077}" would be a literal number part.
		for _, p := range e.Parts {
			if lit, ok := p.(*hclsyntax.LiteralValueExpr); !ok || !lit.Val.Type().Equals(cty.String) {
				return d.notLiteral(p.Range())
			}
		}
		return true
	case *hclsyntax.UnaryOpExpr:
		if _, ok := e.Val.(*hclsyntax.LiteralValueExpr); ok && e.Op == hclsyntax.OpNegate {
			return true
		}
	case *hclsyntax.TupleConsExpr:
		ok := true
		for _, x := range e.Exprs {
			ok = d.literal(x) && ok
		}
		return ok
	case *hclsyntax.ObjectConsExpr:
		ok := true
		for _, item := range e.Items {
			ok = d.literal(item.KeyExpr) && ok
			ok = d.literal(item.ValueExpr) && ok
		}
		return ok
	case *hclsyntax.ObjectConsKeyExpr:
		if !e.ForceNonLiteral && hcl.ExprAsKeyword(e.Wrapped) != "" {
			return true // a bare key: `path = ...`
		}
		return d.literal(e.Wrapped)
	}
	return d.notLiteral(e.Range())
}

func (d *decoder) notLiteral(r hcl.Range) bool {
	d.errorf(r.Ptr(), "Expression not allowed",
		"Config values are literals: strings (without ${...} interpolation), numbers, true/false, lists and objects.")
	return false
}

// typed evaluates attr and checks its type exactly: config values are never
// coerced, so `listen = 7077` is a type error rather than "7077".
func (d *decoder) typed(attr *hcl.Attribute, want cty.Type) (cty.Value, bool) {
	v, ok := d.value(attr)
	if !ok {
		return v, false
	}
	if v.IsNull() {
		d.errorf(attr.Expr.Range().Ptr(), "Invalid value", "%s must not be null.", attr.Name)
		return v, false
	}
	if !v.Type().Equals(want) {
		d.errorf(attr.Expr.Range().Ptr(), "Incorrect type", "%s must be %s, not %s.", attr.Name, typeName(want), typeName(v.Type()))
		return v, false
	}
	return v, true
}

// str decodes a string attribute into dst and records its position under
// key. It reports whether the attribute was present and well typed.
func (d *decoder) str(attrs hcl.Attributes, name, key string, dst *string) bool {
	attr, ok := attrs[name]
	if !ok || dst == nil {
		return false
	}
	d.at(key, attr.Expr.Range())
	v, ok := d.typed(attr, cty.String)
	if ok {
		*dst = v.AsString()
		d.cfg.fileValues[key] = *dst
	}
	return ok
}

// path decodes a path attribute, resolving it against the file's directory.
func (d *decoder) path(attrs hcl.Attributes, name string, dst *string) {
	var p string
	if !d.str(attrs, name, name, &p) {
		return
	}
	switch {
	case p == "":
		*dst = "" // Validate reports it
	case filepath.IsAbs(p):
		*dst = filepath.Clean(p)
	default:
		*dst = filepath.Join(d.dir, p)
	}
	d.cfg.fileValues[name] = *dst
}

// instancePath reads an instance's file attribute, relative to the config
// file's directory.
func (d *decoder) instancePath(attrs hcl.Attributes, name, key string, dst *string) {
	if d.str(attrs, name, key+"."+name, dst) && *dst != "" && !filepath.IsAbs(*dst) {
		*dst = filepath.Join(d.dir, *dst)
	}
}

// float decodes a number attribute into dst; it reports whether the
// attribute was present and well typed.
func (d *decoder) float(attrs hcl.Attributes, name, key string, dst *float64) bool {
	attr, ok := attrs[name]
	if !ok {
		return false
	}
	d.at(key, attr.Expr.Range())
	v, ok := d.typed(attr, cty.Number)
	if ok {
		*dst, _ = v.AsBigFloat().Float64()
	}
	return ok
}

func (d *decoder) boolean(attrs hcl.Attributes, name, key string, dst *bool) {
	attr, ok := attrs[name]
	if !ok {
		return
	}
	d.at(key, attr.Expr.Range())
	if v, ok := d.typed(attr, cty.Bool); ok {
		*dst = v.True()
	}
}

// integer decodes a whole number within int32 range (every integer setting
// fits, and millisecond values then convert to time.Duration safely).
func (d *decoder) integer(attrs hcl.Attributes, name, key string, dst *int) bool {
	attr, ok := attrs[name]
	if !ok {
		return false
	}
	d.at(key, attr.Expr.Range())
	v, ok := d.typed(attr, cty.Number)
	if !ok {
		return false
	}
	bf := v.AsBigFloat()
	if !bf.IsInt() {
		d.errorf(attr.Expr.Range().Ptr(), "Invalid value", "%s must be a whole number.", name)
		return false
	}
	n, acc := bf.Int64()
	if acc != big.Exact || n > math.MaxInt32 || n < math.MinInt32 {
		d.errorf(attr.Expr.Range().Ptr(), "Invalid value", "%s is out of range (at most %d).", name, math.MaxInt32)
		return false
	}
	*dst = int(n)
	return true
}

func (d *decoder) millis(attrs hcl.Attributes, name, key string, dst *time.Duration) {
	d.duration(attrs, name, key, time.Millisecond, dst)
}

// duration decodes a whole number of units. A count within int32 range
// can still overflow a time.Duration (2562048 hours), so larger counts are
// refused rather than wrapped; a negative count stays negative, for
// Validate to report.
func (d *decoder) duration(attrs hcl.Attributes, name, key string, unit time.Duration, dst *time.Duration) bool {
	var n int
	if !d.integer(attrs, name, key, &n) {
		return false
	}
	limit := int64(math.MaxInt64 / unit)
	if int64(n) > limit {
		d.errorf(attrs[name].Expr.Range().Ptr(), "Invalid value", "%s is out of range (at most %d).", name, limit)
		return false
	}
	*dst = time.Duration(max(int64(n), -limit)) * unit
	return true
}

func (d *decoder) strings(attrs hcl.Attributes, name, key string, dst *[]string) bool {
	attr, ok := attrs[name]
	if !ok {
		return false
	}
	d.at(key, attr.Expr.Range())
	v, ok := d.value(attr)
	if !ok {
		return false
	}
	t := v.Type()
	if v.IsNull() || !(t.IsTupleType() || t.IsListType() || t.IsSetType()) {
		d.errorf(attr.Expr.Range().Ptr(), "Incorrect type", "%s must be a list of strings, not %s.", name, typeName(t))
		return false
	}
	out := []string{}
	for it := v.ElementIterator(); it.Next(); {
		_, e := it.Element()
		if e.IsNull() || !e.Type().Equals(cty.String) {
			d.errorf(attr.Expr.Range().Ptr(), "Incorrect type", "%s must be a list of strings; it holds %s.", name, typeName(e.Type()))
			return false
		}
		out = append(out, e.AsString())
	}
	*dst = out
	return true
}

// object converts an object value to the JSON a plugin's Configure takes.
func (d *decoder) object(attr *hcl.Attribute, v cty.Value) (json.RawMessage, bool) {
	if v.IsNull() {
		return json.RawMessage("{}"), true
	}
	if t := v.Type(); !t.IsObjectType() && !t.IsMapType() {
		d.errorf(attr.Expr.Range().Ptr(), "Incorrect type", "config must be an object like { key = \"value\" }, not %s.", typeName(t))
		return nil, false
	}
	var buf bytes.Buffer
	if err := writeJSON(&buf, v); err != nil {
		d.errorf(attr.Expr.Range().Ptr(), "Invalid value", "config: %v.", err)
		return nil, false
	}
	return json.RawMessage(buf.Bytes()), true
}

// writeJSON encodes a literal value. Numbers become JSON numbers a Go
// plugin can decode: integers exactly within int64, others as float64.
func writeJSON(buf *bytes.Buffer, v cty.Value) error {
	t := v.Type()
	switch {
	case v.IsNull():
		buf.WriteString("null")
	case t.Equals(cty.Bool):
		buf.WriteString(strconv.FormatBool(v.True()))
	case t.Equals(cty.String):
		writeJSONString(buf, v.AsString())
	case t.Equals(cty.Number):
		bf := v.AsBigFloat()
		if bf.IsInt() {
			if n, acc := bf.Int64(); acc == big.Exact {
				buf.WriteString(strconv.FormatInt(n, 10))
				return nil
			}
		}
		f, _ := bf.Float64()
		if math.IsInf(f, 0) || (f == 0 && bf.Sign() != 0) {
			return fmt.Errorf("a number is outside the range of a 64-bit float")
		}
		buf.WriteString(strconv.FormatFloat(f, 'g', -1, 64))
	case t.IsTupleType() || t.IsListType() || t.IsSetType():
		buf.WriteByte('[')
		for it, i := v.ElementIterator(), 0; it.Next(); i++ {
			if i > 0 {
				buf.WriteByte(',')
			}
			_, e := it.Element()
			if err := writeJSON(buf, e); err != nil {
				return err
			}
		}
		buf.WriteByte(']')
	case t.IsObjectType() || t.IsMapType():
		buf.WriteByte('{') // cty iterates keys in sorted order
		for it, i := v.ElementIterator(), 0; it.Next(); i++ {
			if i > 0 {
				buf.WriteByte(',')
			}
			k, e := it.Element()
			writeJSONString(buf, k.AsString())
			buf.WriteByte(':')
			if err := writeJSON(buf, e); err != nil {
				return err
			}
		}
		buf.WriteByte('}')
	default:
		return fmt.Errorf("%s cannot be expressed in JSON", typeName(t))
	}
	return nil
}

func writeJSONString(buf *bytes.Buffer, s string) {
	enc := json.NewEncoder(buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s) // a string always encodes
	buf.Truncate(buf.Len() - 1)
}

func typeName(t cty.Type) string {
	switch {
	case t.Equals(cty.String):
		return "a string"
	case t.Equals(cty.Number):
		return "a number"
	case t.Equals(cty.Bool):
		return "a bool"
	case t.IsTupleType(), t.IsListType(), t.IsSetType():
		return "a list"
	case t.IsObjectType(), t.IsMapType():
		return "an object"
	case t.Equals(cty.DynamicPseudoType):
		return "null"
	}
	return t.FriendlyName()
}

// lineOf is the "file:line" form of a range used in Pos fields.
func lineOf(r hcl.Range) string { return fmt.Sprintf("%s:%d", r.Filename, r.Start.Line) }

// labelRange points at a block's name label, where name errors belong.
func labelRange(b *hcl.Block) hcl.Range {
	if len(b.LabelRanges) > 0 {
		return b.LabelRanges[0]
	}
	return b.DefRange
}

// envVariable names the variable a config names, as errors show it: not a
// name that looks more like the secret pasted in its place.
func envVariable(name string) string {
	if shown := sdk.EnvNameShown(name); shown != name {
		return shown
	}
	return "the environment variable " + name
}

// notAnEnvName is the error for a value that should name an environment
// variable, said without repeating the value: what is pasted there is most
// often the secret itself, and errors reach logs.
const notAnEnvName = "must name an environment variable (letters, digits and '_', not starting with a digit); the value given does not, and is not shown in case it is the secret itself."

func validEnvName(s string) bool {
	if s == "" || s[0] >= '0' && s[0] <= '9' {
		return false
	}
	return strings.IndexFunc(s, func(r rune) bool {
		return !(r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9')
	}) < 0
}

// checkUTF8 reports the first byte that is not UTF-8. HCL requires UTF-8,
// but its scanner lets stray bytes through into keys and strings.
func checkUTF8(name string, src []byte) *hcl.Diagnostic {
	if utf8.Valid(src) {
		return nil
	}
	pos := hcl.Pos{Line: 1, Column: 1}
	for len(src) > 0 {
		r, size := utf8.DecodeRune(src)
		if r == utf8.RuneError && size <= 1 {
			end := pos
			end.Column++
			end.Byte++
			return &hcl.Diagnostic{
				Severity: hcl.DiagError, Summary: "Invalid UTF-8",
				Detail:  "A config file must be UTF-8 text; this byte is not.",
				Subject: &hcl.Range{Filename: name, Start: pos, End: end},
			}
		}
		pos.Byte += size
		pos.Column++
		if r == '\n' {
			pos.Line, pos.Column = pos.Line+1, 1
		}
		src = src[size:]
	}
	return nil
}

// checkNesting reports the first opening bracket, brace or parenthesis
// nested deeper than maxNesting. The scanner is not recursive, so this is
// safe to run before the parser, which is.
func checkNesting(name string, src []byte) *hcl.Diagnostic {
	depth := 0
	toks, _ := hclsyntax.LexConfig(src, name, hcl.InitialPos) // the parser reports lexical errors
	for _, tok := range toks {
		switch tok.Type {
		case hclsyntax.TokenOBrace, hclsyntax.TokenOBrack, hclsyntax.TokenOParen,
			hclsyntax.TokenTemplateInterp, hclsyntax.TokenTemplateControl:
			if depth++; depth > maxNesting {
				return &hcl.Diagnostic{
					Severity: hcl.DiagError, Summary: "Nested too deeply",
					Detail:  fmt.Sprintf("Blocks, lists and objects may nest at most %d levels deep.", maxNesting),
					Subject: tok.Range.Ptr(),
				}
			}
		case hclsyntax.TokenCBrace, hclsyntax.TokenCBrack, hclsyntax.TokenCParen, hclsyntax.TokenTemplateSeqEnd:
			depth = max(depth-1, 0)
		}
	}
	return nil
}
