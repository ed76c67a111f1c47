package config

import (
	"cmp"
	"encoding/json"
	"fmt"
	"github.com/memhost/memhost/coordinator"
	"net"
	"net/netip"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/memhost/memhost/sdk"
	sdkhost "github.com/memhost/memhost/sdk/host"
)

// Limits on values.
const (
	maxNameBytes        = 64 // instance, realm and token names (as sdk realms)
	maxArchiveDays      = 36500
	MinTokenSecretBytes = 16
	tokenSecretAlphabet = "visible ASCII (no spaces)"
)

// instanceKindsMessage lists the kinds as "a, b or c".
func instanceKindsMessage() string {
	names := make([]string, len(instanceKinds))
	for i, k := range instanceKinds {
		names[i] = string(k)
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}

// Error reports every problem found in a configuration. Each line starts
// with the file:line,column of the offending item when it came from a
// file, in HCL's own format:
//
//	memhost.hcl:12,3-8: Unsupported argument; An argument named "bogus" is not expected here.
//
// It wraps sdk.ErrInvalid.
type Error struct {
	Diagnostics hcl.Diagnostics
}

func (e *Error) Error() string { return strings.Join(e.Problems(), "\n") }

// Problems says each problem on its own, as Error does: one a line,
// though a detail may span lines itself (a plugin's config_schema error
// quotes its causes one a line).
func (e *Error) Problems() []string {
	lines := make([]string, 0, len(e.Diagnostics))
	for _, d := range e.Diagnostics {
		var b strings.Builder
		if d.Subject != nil {
			b.WriteString(d.Subject.String())
			b.WriteString(": ")
		}
		b.WriteString(d.Summary)
		if d.Detail != "" {
			b.WriteString("; ")
			b.WriteString(d.Detail)
		}
		lines = append(lines, b.String())
	}
	return lines
}

func (e *Error) Unwrap() error { return sdk.ErrInvalid }

// newError orders the problems as they appear in the file (HCL reports
// some in map order), those without a position last.
func newError(diags hcl.Diagnostics) *Error {
	var errs hcl.Diagnostics
	for _, d := range diags {
		if d.Severity == hcl.DiagError {
			errs = append(errs, d)
		}
	}
	slices.SortStableFunc(errs, func(a, b *hcl.Diagnostic) int {
		switch {
		case a.Subject == nil || b.Subject == nil:
			return cmp.Compare(boolInt(a.Subject == nil), boolInt(b.Subject == nil))
		case a.Subject.Filename != b.Subject.Filename:
			return strings.Compare(a.Subject.Filename, b.Subject.Filename)
		}
		return cmp.Compare(a.Subject.Start.Byte, b.Subject.Start.Byte)
	})
	return &Error{Diagnostics: errs}
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// problems collects diagnostics against a Config's recorded positions.
type problems struct {
	c     *Config
	diags hcl.Diagnostics
}

func (p *problems) add(key, summary, detail string, args ...any) {
	if p.c.undecoded[key] {
		return // its decoding error is the problem
	}
	var subject *hcl.Range
	if flag, ok := p.c.flags[key]; ok {
		summary = flag + ": " + summary
	} else if r, ok := p.c.pos[key]; ok && !p.c.changed(key) {
		subject = r.Ptr()
	}
	p.diags = append(p.diags, &hcl.Diagnostic{
		Severity: hcl.DiagError, Summary: summary, Detail: fmt.Sprintf(detail, args...), Subject: subject,
	})
}

// changed reports whether a top-level setting no longer holds the value
// the file gave it.
func (c *Config) changed(key string) bool {
	fileValue, ok := c.fileValues[key]
	if !ok {
		return false
	}
	current := map[string]string{
		"listen": c.Listen, "plugin_dir": c.PluginDir, "data_dir": c.DataDir,
		"log_format": c.LogFormat, "log_level": c.LogLevel, "default_realm": c.DefaultRealm,
	}
	now, top := current[key]
	return top && now != fileValue
}

// where is the "file:line" of key, for "first declared at" details.
func (c *Config) where(key string) string {
	if r, ok := c.pos[key]; ok {
		return lineOf(r)
	}
	return "a built-in default"
}

// Validate checks every value and cross-reference. Load calls it; call it
// again after changing a loaded Config (for example Listen from a flag).
func (c *Config) Validate() error {
	p := &problems{c: c}
	c.validateTop(p)
	c.validateInstances(p)
	c.validateRealms(p)
	c.validateCoordinator(p)
	c.validateServer(p)
	c.validateSessions(p)
	c.validateSupervisor(p)
	c.validateSessionStore(p)
	c.validateConsole(p)
	c.validateTokens(p)
	if len(p.diags) > 0 {
		return newError(p.diags)
	}
	return nil
}

func (c *Config) validateTop(p *problems) {
	if problem := checkListen(c.Listen); problem != "" {
		p.add("listen", "Invalid listen address", "%s", problem)
	} else if !c.AllowInsecureListen && len(c.Tokens) == 0 && !isLoopbackListen(c.Listen) {
		p.add("listen", "Insecure listen address",
			"%q is not a loopback address and no token is declared, so anyone who can reach it could read and write every realm. Declare a token block, listen on 127.0.0.1, or set allow_insecure_listen = true.", c.Listen)
	}
	for _, dir := range []struct{ key, value string }{{"plugin_dir", c.PluginDir}, {"data_dir", c.DataDir}} {
		switch {
		case dir.value == "":
			p.add(dir.key, "Invalid "+dir.key, "%s must not be empty.", dir.key)
		case !filepath.IsAbs(dir.value):
			p.add(dir.key, "Invalid "+dir.key, "%s %q must be absolute (Load resolves relative paths against the config file).", dir.key, dir.value)
		}
	}
	if c.LogFormat != LogFormatText && c.LogFormat != LogFormatJSON {
		p.add("log_format", "Invalid log_format", "%q is not a log format; use %q or %q.", c.LogFormat, LogFormatText, LogFormatJSON)
	}
	if !slices.Contains(LogLevels, c.LogLevel) {
		p.add("log_level", "Invalid log_level", "%q is not a log level; use one of %s.", c.LogLevel, strings.Join(LogLevels, ", "))
	}
	if problem := checkName(c.DefaultRealm); problem != "" {
		p.add("default_realm", "Invalid default_realm", "The realm name %s", problem)
	}
}

func (c *Config) validateInstances(p *problems) {
	first := map[string]int{}
	for i, in := range c.Instances {
		key := fmt.Sprintf("instance[%d]", i)
		if !slices.Contains(instanceKinds, in.Kind) {
			p.add(key, "Invalid instance kind", "%q is not a plugin kind; use %s.", in.Kind, instanceKindsMessage())
		}
		if problem := checkName(in.Name); problem != "" {
			p.add(key, "Invalid instance name", "The %s name %s", in.Kind, problem)
		} else if j, dup := first[in.Name]; dup {
			firstKey := fmt.Sprintf("instance[%d]", j)
			if _, declared := c.pos[key]; !declared {
				// The built-in default provider clashes with a declared name.
				p.add(firstKey, "Duplicate instance name",
					"%s %q takes the name of the default provider, which is added when no provider is declared; rename it or declare a provider.",
					c.Instances[j].Kind, in.Name)
			} else {
				p.add(key, "Duplicate instance name",
					"%s %q: the name is already used by %s %q at %s; instance names are unique across all kinds.",
					in.Kind, in.Name, c.Instances[j].Kind, in.Name, c.where(firstKey))
			}
		} else {
			first[in.Name] = i
		}
		switch {
		case in.Remote != nil:
			c.validateRemote(p, key, in)
		default:
			if problem := checkName(in.Plugin); problem != "" {
				p.add(key+".plugin", "Invalid plugin name", "%s %q: the plugin (manifest) name %s", in.Kind, in.Name, problem)
			}
		}
		if !isJSONObject(in.Config) {
			p.add(key+".config", "Invalid config", "%s %q: config must be a JSON object.", in.Kind, in.Name)
		}
	}
}

// validateRemote checks an instance with an address: no plugin or config
// beside it (a remote plugin is configured where it runs, since hosts
// share it), and mutual TLS off loopback.
func (c *Config) validateRemote(p *problems, key string, in Instance) {
	if in.Plugin != "" {
		p.add(key+".plugin", "Plugin and address", "%s %q: give plugin (the host starts it) or address (a remote plugin), not both.", in.Kind, in.Name)
	}
	if _, set := c.pos[key+".config"]; set {
		p.add(key+".config", "Config of a remote plugin", "%s %q: a remote plugin is configured where it runs (serve --config), not by each host.", in.Kind, in.Name)
	}
	r := in.Remote
	remote := sdkhost.Remote{Address: r.Address, CertFile: r.TLSCert, KeyFile: r.TLSKey, CAFile: r.TLSCA, ServerName: r.ServerName}
	if err := remote.Check(); err != nil {
		p.add(key+".address", "Invalid remote plugin", "%s %q: %s.", in.Kind, in.Name, strings.TrimSuffix(err.Error(), ": "+sdk.ErrInvalid.Error()))
	}
}

// checkLabel reports the name of the i-th block of a kind ("realm",
// "token") when it is not a safe name or repeats an earlier one; first
// maps each name to the index that declared it. It answers the block's key.
func (c *Config) checkLabel(p *problems, first map[string]int, kind string, i int, name string) string {
	key := fmt.Sprintf("%s[%d]", kind, i)
	title := strings.ToUpper(kind[:1]) + kind[1:]
	if problem := checkName(name); problem != "" {
		p.add(key, "Invalid "+kind+" name", "The "+kind+" name %s", problem)
	} else if j, dup := first[name]; dup {
		p.add(key, "Duplicate "+kind, title+" %q is already declared at %s.", name, c.where(fmt.Sprintf("%s[%d]", kind, j)))
	} else {
		first[name] = i
	}
	return key
}

func (c *Config) validateRealms(p *problems) {
	first := map[string]int{}
	for i, r := range c.Realms {
		key := c.checkLabel(p, first, "realm", i, r.Name)
		c.checkRef(p, key+".provider", "realm "+strconv.Quote(r.Name)+" provider", r.Provider, sdk.KindProvider)
		if r.Embedder != "" {
			c.checkRef(p, key+".embedder", "realm "+strconv.Quote(r.Name)+" embedder", r.Embedder, sdk.KindEmbedder)
		}
		if w := r.SemanticWeight; w != nil && !(*w >= 0 && *w <= 1) {
			p.add(key+".semantic_weight", "Invalid semantic_weight", "semantic_weight must be 0 to 1 (the semantic share of the fused score; the lexical share is the rest).")
		}
		if r.SemanticWeight != nil && r.Embedder == "" {
			p.add(key+".semantic_weight", "semantic_weight without an embedder", "Realm %q sets semantic_weight but names no embedder; add embedder = \"<embedder instance>\" or remove it.", r.Name)
		}
		if d := r.QueryEmbedTimeout; d != nil && d.Milliseconds() < 1 {
			p.add(key+".query_embed_timeout_ms", "Invalid query_embed_timeout_ms", "query_embed_timeout_ms %d must be at least 1 (the milliseconds a recall gives the embedder to embed its query).", d.Milliseconds())
		}
		if r.QueryEmbedTimeout != nil && r.Embedder == "" {
			p.add(key+".query_embed_timeout_ms", "query_embed_timeout_ms without an embedder", "Realm %q sets query_embed_timeout_ms but names no embedder; add embedder = \"<embedder instance>\" or remove it.", r.Name)
		}
		if a := r.Archive; a != nil && (a.MaxAge < 0 || a.MaxAge > maxArchiveDays*24*time.Hour) {
			p.add(key+".archive_max_age_days", "Invalid archive_max_age_days", "archive_max_age_days must be 0 to %d (0 keeps episodes until the conversation is deleted).", maxArchiveDays)
		}
		if a := r.Archive; a != nil && a.MaxRecords < 0 {
			p.add(key+".archive_max_records", "Invalid archive_max_records", "archive_max_records must be at least 0 (0 keeps every episode).")
		}
	}
	if _, ok := c.realm(c.DefaultRealm); ok || checkName(c.DefaultRealm) != "" {
		return
	}
	providers := c.InstancesOf(sdk.KindProvider)
	names := make([]string, 0, len(providers))
	for _, in := range providers {
		if q := strconv.Quote(in.Name); !slices.Contains(names, q) {
			names = append(names, q)
		}
	}
	if len(providers) > 1 && len(names) == 1 {
		return // one provider declared twice: the duplicate name is the problem
	}
	key := "default_realm"
	if _, set := c.pos[key]; !set && len(providers) > 1 {
		// Point at the second provider: the one that made the choice ambiguous.
		for i := range c.Instances {
			if c.Instances[i].Kind == sdk.KindProvider && c.Instances[i].Name == providers[1].Name {
				key = fmt.Sprintf("instance[%d]", i)
				break
			}
		}
	}
	if len(providers) == 0 {
		p.add(key, "No provider", "The default realm %q needs a provider, and no provider instance is declared.", c.DefaultRealm)
		return
	}
	p.add(key, "Default realm has no provider",
		"Several providers are declared (%s), so say which serves the default realm: realm %q { provider = %s }.",
		strings.Join(names, ", "), c.DefaultRealm, names[0])
}

// checkRef checks that name (set at key) names an instance of kind.
func (c *Config) checkRef(p *problems, key, what, name string, kind sdk.PluginKind) {
	if _, ok := c.Instance(kind, name); ok {
		return // a bad instance name is reported at the instance
	}
	if name == "" {
		p.add(key, "Missing instance name", "%s must name a %s instance.", what, kind)
		return
	}
	for _, in := range c.Instances {
		if in.Name == name {
			p.add(key, "Wrong instance kind", "%s names %s %q, which is not a %s.", what, in.Kind, name, kind)
			return
		}
	}
	declared := []string{}
	for _, in := range c.InstancesOf(kind) {
		declared = append(declared, strconv.Quote(in.Name))
	}
	list := "none is declared"
	if len(declared) > 0 {
		list = "declared: " + strings.Join(declared, ", ")
	}
	p.add(key, "Unknown instance", "%s names %q, but no %s of that name is declared (%s).", what, name, kind, list)
}

func (c *Config) validateServer(p *problems) {
	s := &c.Server
	if s.MaxBodyBytes < 1 {
		p.add("server.max_body_bytes", "Invalid max_body_bytes", "max_body_bytes must be at least 1.")
	}
	if s.ReadTimeout.Milliseconds() < 1 {
		p.add("server.read_timeout_ms", "Invalid read_timeout_ms", "read_timeout_ms must be at least 1.")
	}
	if s.ShutdownTimeout.Milliseconds() < 1 {
		p.add("server.shutdown_timeout_ms", "Invalid shutdown_timeout_ms", "shutdown_timeout_ms must be at least 1.")
	}
	for _, h := range s.AllowedHosts {
		if !hostNameRE.MatchString(h) || len(h) > 253 {
			p.add("server.allowed_hosts", "Invalid allowed host", "%q is not a host name: give the name alone (letters, digits, underscores, hyphens and dots; no port, scheme or wildcard), as a client puts it in the Host header.", h)
		}
	}
}

// hostNameRE is a host name: dot-separated labels of letters, digits,
// underscores (container names hold them) and inner hyphens.
var hostNameRE = regexp.MustCompile(`^(?i)[a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9_])?(\.[a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9_])?)*$`)

func (c *Config) validateSupervisor(p *problems) {
	s := &c.Supervisor
	for _, v := range []struct {
		key string
		d   time.Duration
	}{
		{"call_timeout_ms", s.CallTimeout}, {"health_interval_ms", s.HealthInterval},
		{"health_timeout_ms", s.HealthTimeout}, {"kill_grace_ms", s.KillGrace}, {"max_backoff_ms", s.MaxBackoff},
		{"reindex_timeout_ms", s.ReindexTimeout}, {"boot_wait_ms", s.BootWait},
		{"configure_timeout_ms", s.ConfigureTimeout},
	} {
		if v.d.Milliseconds() < 1 {
			p.add("supervisor."+v.key, "Invalid "+v.key, "%s must be at least 1.", v.key)
		}
	}
}

// validateTokens never puts a secret into a message: only the token's
// name and the variable it came from.
func (c *Config) validateTokens(p *problems) {
	first := map[string]int{}
	bySecret := map[string]int{}
	for i, t := range c.Tokens {
		key := c.checkLabel(p, first, "token", i, t.Name)

		source := "its secret"
		if t.SecretEnv != "" {
			source = "the secret in " + t.SecretEnv
		}
		switch {
		case t.Secret == "":
			p.add(key+".secret_env", "Token secret not set", "Token %q has no secret.", t.Name)
		case len(t.Secret) < MinTokenSecretBytes:
			p.add(key+".secret_env", "Token secret too short",
				"Token %q: %s is shorter than %d bytes; generate one with `openssl rand -hex 32`.", t.Name, source, MinTokenSecretBytes)
		case strings.ContainsFunc(t.Secret, func(r rune) bool { return r <= ' ' || r > '~' }):
			p.add(key+".secret_env", "Invalid token secret",
				"Token %q: %s must be %s, as it travels in an Authorization header.", t.Name, source, tokenSecretAlphabet)
		case first[t.Name] != i && checkName(t.Name) == "":
			// A block declared twice (its name's problem) shares its
			// secret too; that is not a second problem.
		default:
			if j, dup := bySecret[t.Secret]; dup {
				p.add(key+".secret_env", "Duplicate token secret",
					"Tokens %q and %q have the same secret, so a request could not tell them apart.", c.Tokens[j].Name, t.Name)
			} else {
				bySecret[t.Secret] = i
			}
		}

		if len(t.Realms) == 0 {
			p.add(key+".realms", "Invalid realms", "Token %q must name at least one realm.", t.Name)
		}
		if t.MaxInFlight < 1 {
			p.add(key+".max_in_flight", "Invalid max_in_flight", "Token %q: max_in_flight must be at least 1.", t.Name)
		}
		seen := map[string]bool{}
		for _, r := range t.Realms {
			if problem := checkName(r); problem != "" {
				p.add(key+".realms", "Invalid realms", "Token %q: the realm name %s", t.Name, problem)
			} else if seen[r] {
				p.add(key+".realms", "Invalid realms", "Token %q names realm %q twice.", t.Name, r)
			}
			seen[r] = true
		}
		seenID := map[string]bool{}
		for _, id := range t.Identities {
			if err := (sdk.Identity{Realm: sdk.DefaultRealm, ID: id}).Validate(); err != nil {
				p.add(key+".identity", "Invalid identity", "Token %q: identity %q %s.", t.Name, id, strings.TrimPrefix(err.Error(), "identity.id: "))
			} else if seenID[id] {
				p.add(key+".identity", "Invalid identity", "Token %q names identity %q twice.", t.Name, id)
			}
			seenID[id] = true
		}
	}
}

// Warnings lists settings that are legal but probably not meant, each
// prefixed with file:line where known, for the caller to log at start.
func (c *Config) Warnings() []string {
	var out []string
	warn := func(key, format string, args ...any) {
		msg := fmt.Sprintf(format, args...)
		if r, ok := c.pos[key]; ok {
			msg = lineOf(r) + ": " + msg
		}
		out = append(out, msg)
	}
	co := &c.Coordinator
	used := map[string]bool{co.Selector: true, co.MobResolver: true, co.OperatorResolver: true, co.Compactor: true}
	for _, r := range c.Realms {
		used[r.Provider] = true
		used[r.Embedder] = true
	}
	for i, in := range c.Instances {
		if !used[in.Name] {
			what := "coordinator." + string(in.Kind) + " does not name it"
			switch in.Kind {
			case sdk.KindProvider:
				what = "no realm block names it"
			case sdk.KindEmbedder:
				what = "no realm block names it (realm \"<name>\" { embedder = ... })"
			}
			warn(fmt.Sprintf("instance[%d]", i), "%s %q is declared but unused: %s.", in.Kind, in.Name, what)
		}
	}
	if co.OperatorScope == coordinator.OperatorScopeProvisional && co.OperatorResolver == "" {
		warn("coordinator.operator_scope", `operator_scope = "provisional" has no effect without coordinator.operator_resolver.`)
	}
	if co.OperatorScope == coordinator.OperatorScopeOff && co.OperatorResolver != "" {
		warn("coordinator.operator_resolver", `operator_resolver has no effect while operator_scope = "off".`)
	}
	if len(c.Tokens) > 0 && len(c.Server.AllowedHosts) > 0 {
		warn("server.allowed_hosts", "allowed_hosts has no effect: a host with tokens answers requests addressed to any name.")
	}
	if c.AllowInsecureListen && len(c.Tokens) == 0 && checkListen(c.Listen) == "" && !isLoopbackListen(c.Listen) {
		warn("allow_insecure_listen", "listening on %s without tokens: anyone who can reach it can read and write every realm.", c.Listen)
	}
	c.sessionStoreWarnings(warn)
	return out
}

// checkName returns "" for a safe name, else what is wrong, as the end of
// a sentence. Safe names can label files, metrics and logs unescaped.
func checkName(s string) string {
	switch {
	case s == "":
		return "must not be empty."
	case len(s) > maxNameBytes:
		return fmt.Sprintf("%q is longer than %d bytes.", s, maxNameBytes)
	case s[0] == '.':
		return fmt.Sprintf("%q must not start with '.'.", s)
	}
	for i := 0; i < len(s); i++ {
		ch := s[i]
		if !(ch >= 'a' && ch <= 'z' || ch >= 'A' && ch <= 'Z' || ch >= '0' && ch <= '9' || ch == '-' || ch == '_' || ch == '.') {
			return fmt.Sprintf("%q may hold only letters, digits, '-', '_' and '.'.", s)
		}
	}
	return ""
}

// checkListen returns "" for host:port with a numeric port.
func checkListen(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Sprintf("%q is not host:port (for example %q or \"[::1]:7077\").", addr, DefaultListen)
	}
	if n, err := strconv.ParseUint(port, 10, 16); err != nil || port != strconv.FormatUint(n, 10) {
		return fmt.Sprintf("%q: the port must be a number from 0 to 65535.", addr)
	}
	if host == "" {
		return "" // every interface
	}
	if _, err := netip.ParseAddr(host); err == nil {
		return ""
	}
	if len(host) > 253 || strings.ContainsFunc(host, func(r rune) bool {
		return !(r == '-' || r == '.' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9')
	}) {
		return fmt.Sprintf("%q: %q is neither an IP address nor a host name.", addr, host)
	}
	return ""
}

// isLoopbackListen reports whether a valid listen address only accepts
// local connections: 127.0.0.0/8, ::1 or "localhost".
func isLoopbackListen(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.Unmap().IsLoopback()
}

func isJSONObject(raw json.RawMessage) bool {
	var obj map[string]json.RawMessage
	return json.Unmarshal(raw, &obj) == nil && obj != nil
}
