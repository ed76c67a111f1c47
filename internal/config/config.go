// Package config loads the memhost deployment configuration: one HCL file
// naming the plugin instances, which provider serves which realm, the
// coordinator's settings, the HTTP server's limits and the auth tokens.
//
// Load parses and validates a file; Default is the configuration used when
// there is no file. Every problem in a file is reported at once, each with
// the file:line,column of the offending item (see Error). docs/config.md is
// the reference for every key.
package config

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/memhost/memhost/coordinator"
	"github.com/memhost/memhost/internal/pluginhost"
	"github.com/memhost/memhost/sdk"
	"github.com/memhost/memhost/sdk/host"
)

// Defaults of the host's own settings. The coordinator block's defaults
// are the coordinator's (coordinator.DefaultConfig).
const (
	DefaultListen            = "127.0.0.1:7077"
	DefaultPluginDirName     = "plugins"      // beside the executable
	DefaultDataDirName       = "memhost-data" // beside the config file, or in the working directory
	DefaultProviderInstance  = "main"
	DefaultProviderPlugin    = "sqlite"
	DefaultCompactorInstance = "summary"
	DefaultCompactorPlugin   = "template"
	defaultProviderConfig    = `{"path":"memory.db"}`
	defaultLogFormat         = "text"
	defaultLogLevel          = "info"
	defaultMaxBodyBytes      = 4 << 20
	defaultReadTimeout       = 30 * time.Second
	defaultShutdownTimeout   = 10 * time.Second
)

// Allowed values of the enumerated settings.
const (
	LogFormatText = "text"
	LogFormatJSON = "json"
)

// LogLevels are the accepted log_level values, most verbose first.
var LogLevels = []string{"trace", "debug", "info", "warn", "error"}

// Config is a loaded, validated deployment configuration. Paths are
// absolute. The zero value is not useful: start from Load or Default.
type Config struct {
	// File is the config file as named to Load; "" for Default.
	File string

	Listen              string // host:port
	PluginDir           string // absolute
	DataDir             string // absolute; also every plugin's working directory
	LogFormat           string // LogFormatText or LogFormatJSON
	LogLevel            string // one of LogLevels
	AllowInsecureListen bool   // serve a non-loopback address without tokens
	DefaultRealm        string // the realm of requests that name none (also the coordinator's)

	// Instances lists the plugin instances in declaration order (kinds
	// interleaved as written). Names are unique across all kinds.
	Instances []Instance
	// Realms lists the realms with their own provider. The default realm
	// is always present; any other realm is served by the default realm's
	// provider (see ProviderForRealm).
	Realms      []Realm
	Coordinator Coordinator
	Server      Server
	Supervisor  Supervisor
	Tokens      []Token
	// Sessions and HostKeyEnv configure durable session state (sessions.go).
	Sessions Sessions
	// SessionStore says where session and compaction state live.
	SessionStore SessionStore
	HostKeyEnv   string // the variable holding the host key; "" keeps it in data_dir
	// UI serves the operator console at /ui; Proposals and Trace bound
	// what it shows (console.go).
	UI        bool
	Proposals Proposals
	Trace     Trace

	// ImplicitCompactor: the compactor instance "summary" was added by
	// default, not declared (see DropImplicitCompactor).
	ImplicitCompactor bool

	// pos maps an item's path ("listen", "coordinator.selector",
	// "instance[2].plugin") to where the file set it, so Validate can
	// point at the offending line. Items absent from the map (defaults,
	// values set by the caller) are reported without a position.
	pos map[string]hcl.Range
	// fileValues holds the top-level strings as the file set them: a
	// problem with a value changed since (a --listen flag) has no position.
	fileValues map[string]string
	// undecoded holds the items the file got wrong: Validate does not
	// report them again for the defaults they kept.
	undecoded map[string]bool
	// flags maps a top-level setting a command-line flag set to the flag
	// ("listen" to "--listen"), which its problems then name.
	flags map[string]string
}

// SetByFlag notes that the command-line flag (as typed: "--listen") set
// the top-level setting key ("listen"): a problem with its value names
// the flag rather than the file's line or nothing.
func (c *Config) SetByFlag(key, flag string) {
	if c.flags == nil {
		c.flags = map[string]string{}
	}
	c.flags[key] = flag
}

// Instance is one configured plugin instance: a kind, a unique name and the
// plugin (manifest name) that implements it.
type Instance struct {
	Kind   sdk.PluginKind
	Name   string
	Plugin string
	// Remote, instead of Plugin, is a plugin another process serves
	// (`<plugin> serve --listen`): the host dials it and never starts it.
	Remote *Remote
	// Config is the instance's JSON object for the plugin's Configure;
	// "{}" when the file gives none.
	Config json.RawMessage
	// Pos is "file:line" of the block; "" for built-in defaults.
	Pos string
}

// Remote is where a remote plugin serves and the files of the host's
// side of its mutual TLS (all three, or none on a loopback address).
type Remote struct {
	Address    string
	TLSCert    string // the host's client certificate (PEM)
	TLSKey     string // its key
	TLSCA      string // the CA, or the plugin's pinned certificate, its server certificate must chain to
	ServerName string // the name the server certificate must carry (default: the address's host)
}

// Realm binds a realm to the provider instance that stores its records.
type Realm struct {
	Name     string
	Provider string // a provider instance name
	Pos      string // "file:line"; "" when implied
	// Archive is the realm's compaction archive setting; nil is the
	// default (DefaultArchive).
	Archive *RealmArchive
	// Embedder names the embedder instance that gives the realm semantic
	// recall; "" keeps it lexical.
	Embedder string
	// SemanticWeight is the semantic share of the fused score (the
	// lexical share is the rest); nil leaves the provider's default.
	SemanticWeight *float64
	// QueryEmbedTimeout is the most a recall gives the embedder to embed
	// its query (query_embed_timeout_ms); nil is
	// DefaultQueryEmbedTimeout.
	QueryEmbedTimeout *time.Duration
}

// DefaultQueryEmbedTimeout is the query embedding time of a realm whose
// block sets no query_embed_timeout_ms: enough for a local embedder, not
// always for a remote endpoint.
const DefaultQueryEmbedTimeout = 250 * time.Millisecond

// RealmArchive says whether a realm's compactions keep the absorbed
// messages as episode records, and for how long.
type RealmArchive struct {
	Enabled bool
	// MaxAge expires an episode that long after it was archived; 0 never.
	MaxAge time.Duration
	// MaxRecords keeps a conversation's newest episodes; 0 keeps them all.
	MaxRecords int
}

// DefaultArchive is the archive of a realm whose block says nothing of it.
var DefaultArchive = RealmArchive{Enabled: true, MaxRecords: 10000}

// Server holds the HTTP server's limits.
type Server struct {
	MaxBodyBytes    int64
	ReadTimeout     time.Duration // reading a whole request, body included
	ShutdownTimeout time.Duration // draining requests at shutdown
	// AllowedHosts are the names, beside localhost and IP addresses, a
	// host without tokens on a loopback address answers (a proxy's).
	AllowedHosts []string
}

// Supervisor holds how plugin processes are supervised.
type Supervisor struct {
	CallTimeout      time.Duration // bounds a plugin call off the recall paths
	HealthInterval   time.Duration // between health checks of one plugin
	HealthTimeout    time.Duration // a plugin that misses it is killed and restarted
	KillGrace        time.Duration // a plugin being killed may exit cleanly for this long
	MaxBackoff       time.Duration // longest wait between restarts of a crash-looping plugin
	ReindexTimeout   time.Duration // bounds one reindex, request and plugin call alike
	ConfigureTimeout time.Duration // bounds a plugin's Configure, which opens its store (a migration at an upgrade)
	BootWait         time.Duration // how long serve waits for plugins' first starts before serving without the slow ones
	// RequireAll (serve --require-all) fails the start when any instance
	// cannot start, instead of serving the other realms.
	RequireAll bool
}

// Token roles (DESIGN 5.3): what a token's caller may do beyond its realms.
const (
	RoleApplication = "application"
	RoleAgent       = "agent"
)

// Token is a bearer token, the realms it may touch and its caller's role
// (RoleAgent unless the block says otherwise). Its String, GoString and
// JSON forms never contain the secret.
type Token struct {
	Name      string
	SecretEnv string // the environment variable the secret was read from
	Secret    string `json:"-"`
	Realms    []string
	Role      string
	// Identities, when any, are the only identities the token may act
	// as; none leaves it free to act as any identity of its realms (an
	// agent runtime serving many users).
	Identities []string
	// MaxInFlight bounds the token's requests being served at once; one
	// beyond it is answered 429 (DefaultMaxInFlight unless the block
	// says otherwise).
	MaxInFlight int
	Pos         string // "file:line"
}

// DefaultMaxInFlight is a token's max_in_flight when its block sets none.
const DefaultMaxInFlight = 64

// String describes the token without its secret.
func (t Token) String() string {
	ids := ""
	if len(t.Identities) > 0 {
		ids = "; identities " + strings.Join(t.Identities, ", ")
	}
	return fmt.Sprintf("token %q (%s; realms %s%s; secret from $%s)", t.Name, t.Role, strings.Join(t.Realms, ", "), ids, t.SecretEnv)
}

// GoString keeps the secret out of %#v.
func (t Token) GoString() string { return t.String() }

// Allows reports whether the token may touch realm.
func (t *Token) Allows(realm string) bool { return slices.Contains(t.Realms, realm) }

// Options adjusts how a configuration is loaded. The zero value reads the
// real process environment.
type Options struct {
	// ExecutableDir holds the default plugin directory ("plugins" inside
	// it); "" means the directory of the running executable.
	ExecutableDir string
	// WorkDir resolves a relative config path, and relative paths when
	// there is no config file; "" means the process working directory.
	WorkDir string
	// LookupEnv reads token secrets; nil means os.LookupEnv.
	LookupEnv func(string) (string, bool)
	// Override, when set, changes the file's values before they are
	// checked: command-line flags win over the file, so a value the flag
	// replaces is not refused.
	Override func(*Config) error
}

// Default is the configuration used without a config file.
func Default() *Config { return Options{}.Default() }

// Load reads, parses and validates the config file at path.
func Load(path string) (*Config, error) { return Options{}.Load(path) }

// Default is the configuration used without a config file: listen on
// 127.0.0.1:7077, plugins beside the executable, data under ./memhost-data,
// realm "default" served by the sqlite provider instance "main", and the
// template compactor instance "summary", so compaction works out of the
// box (also with a config file that declares no compactor).
func (o Options) Default() *Config {
	c := o.defaults(o.workDir())
	c.addDefaultProvider()
	c.bindDefaultRealm()
	c.addDefaultCompactor()
	return c
}

// addDefaultCompactor declares the default compactor, so compaction works
// out of the box, unless the file declares a compactor or sets
// coordinator.compactor itself (compactor = "" turns compaction off).
func (c *Config) addDefaultCompactor() {
	if _, set := c.pos["coordinator.compactor"]; set || len(c.InstancesOf(sdk.KindCompactor)) > 0 {
		return
	}
	// Names are unique across kinds: a file's own "summary" wins.
	if slices.ContainsFunc(c.Instances, func(in Instance) bool { return in.Name == DefaultCompactorInstance }) {
		return
	}
	c.Instances = append(c.Instances, Instance{
		Kind: sdk.KindCompactor, Name: DefaultCompactorInstance, Plugin: DefaultCompactorPlugin, Config: json.RawMessage("{}"),
	})
	c.Coordinator.Compactor = DefaultCompactorInstance
	c.ImplicitCompactor = true
}

// DropImplicitCompactor removes the default compactor the config added on
// its own (not one the file declared) and answers whether it did: a host
// whose plugin directory lacks the template plugin serves without
// compaction rather than refusing to start.
func (c *Config) DropImplicitCompactor() bool {
	if !c.ImplicitCompactor {
		return false
	}
	c.Instances = slices.DeleteFunc(c.Instances, func(in Instance) bool {
		return in.Kind == sdk.KindCompactor && in.Name == DefaultCompactorInstance
	})
	c.Coordinator.Compactor, c.ImplicitCompactor = "", false
	return true
}

// defaults is a Config with every scalar default set and no instances;
// relative default paths resolve against baseDir.
func (o Options) defaults(baseDir string) *Config {
	return &Config{
		Listen:       DefaultListen,
		PluginDir:    filepath.Join(o.executableDir(), DefaultPluginDirName),
		DataDir:      filepath.Join(baseDir, DefaultDataDirName),
		LogFormat:    defaultLogFormat,
		LogLevel:     defaultLogLevel,
		DefaultRealm: coordinator.DefaultConfig().DefaultRealm,
		Coordinator:  defaultCoordinator(),
		Sessions:     defaultSessions(),
		SessionStore: defaultSessionStore(),
		UI:           true,
		Proposals:    defaultProposals(),
		Trace:        defaultTrace(),
		Server: Server{
			MaxBodyBytes:    defaultMaxBodyBytes,
			ReadTimeout:     defaultReadTimeout,
			ShutdownTimeout: defaultShutdownTimeout,
		},
		Supervisor: Supervisor{
			CallTimeout:      pluginhost.DefaultCallTimeout,
			HealthInterval:   pluginhost.DefaultHealthInterval,
			HealthTimeout:    pluginhost.DefaultHealthTimeout,
			KillGrace:        host.DefaultKillGrace,
			MaxBackoff:       pluginhost.DefaultMaxBackoff,
			ReindexTimeout:   pluginhost.DefaultReindexTimeout,
			BootWait:         pluginhost.DefaultBootWait,
			ConfigureTimeout: pluginhost.DefaultConfigureTimeout,
		},
		pos:        map[string]hcl.Range{},
		fileValues: map[string]string{},
	}
}

// addDefaultProvider declares the default provider when none is declared.
func (c *Config) addDefaultProvider() {
	if len(c.InstancesOf(sdk.KindProvider)) > 0 {
		return
	}
	c.Instances = append(c.Instances, Instance{
		Kind: sdk.KindProvider, Name: DefaultProviderInstance, Plugin: DefaultProviderPlugin,
		Config: json.RawMessage(defaultProviderConfig),
	})
}

// bindDefaultRealm gives the default realm the only provider when the file
// leaves it unbound; with several providers the choice is the user's, and
// Validate reports it.
func (c *Config) bindDefaultRealm() {
	if _, ok := c.realm(c.DefaultRealm); ok || checkName(c.DefaultRealm) != "" {
		return // a bad default_realm is reported as such
	}
	if providers := c.InstancesOf(sdk.KindProvider); len(providers) == 1 {
		c.Realms = append(c.Realms, Realm{Name: c.DefaultRealm, Provider: providers[0].Name})
	}
}

func (o Options) executableDir() string {
	if o.ExecutableDir != "" {
		return o.ExecutableDir
	}
	exe, err := os.Executable()
	if err != nil {
		// Without an executable path the working directory is the best
		// guess; plugin discovery then reports the missing directory.
		return o.workDir()
	}
	if resolved, err := filepath.EvalSymlinks(exe); err == nil {
		exe = resolved
	}
	return filepath.Dir(exe)
}

func (o Options) workDir() string {
	if o.WorkDir != "" {
		return o.WorkDir
	}
	wd, err := os.Getwd()
	if err != nil {
		return string(filepath.Separator)
	}
	return wd
}

func (o Options) lookupEnv(name string) (string, bool) {
	if o.LookupEnv != nil {
		return o.LookupEnv(name)
	}
	return os.LookupEnv(name)
}

// InstancesOf lists the instances of one kind, in declaration order.
func (c *Config) InstancesOf(kind sdk.PluginKind) []Instance {
	var out []Instance
	for _, in := range c.Instances {
		if in.Kind == kind {
			out = append(out, in)
		}
	}
	return out
}

// Instance finds the instance of kind named name.
func (c *Config) Instance(kind sdk.PluginKind, name string) (*Instance, bool) {
	for i := range c.Instances {
		if c.Instances[i].Kind == kind && c.Instances[i].Name == name {
			return &c.Instances[i], true
		}
	}
	return nil, false
}

// ProviderForRealm is the provider instance that stores realm's records:
// the realm's own binding, else the default realm's provider. Realms are
// partitions inside a provider, so undeclared realms need no block.
func (c *Config) ProviderForRealm(realm string) (*Instance, bool) {
	r, ok := c.realm(realm)
	if !ok {
		if r, ok = c.realm(c.DefaultRealm); !ok {
			return nil, false
		}
	}
	return c.Instance(sdk.KindProvider, r.Provider)
}

// ArchiveForRealm is the compaction archive setting of realm: its own
// block's, else the default realm's (whose provider it shares), else
// DefaultArchive.
func (c *Config) ArchiveForRealm(realm string) RealmArchive {
	r, ok := c.realm(realm)
	if !ok {
		r, ok = c.realm(c.DefaultRealm)
	}
	if !ok || r.Archive == nil {
		return DefaultArchive
	}
	return *r.Archive
}

// EmbedderForRealm answers the embedder instance that gives realm
// semantic recall ("" for none) and its semantic weight (nil: the
// provider's default). A realm without a block has the default realm's,
// as it has its provider.
func (c *Config) EmbedderForRealm(realm string) (string, *float64) {
	r := c.embeddingRealm(realm)
	return r.Embedder, r.SemanticWeight
}

// QueryEmbedTimeoutForRealm is the most a recall in realm gives its
// embedder to embed the query: its block's query_embed_timeout_ms, else
// DefaultQueryEmbedTimeout. A realm without a block has the default
// realm's, as it has its embedder.
func (c *Config) QueryEmbedTimeoutForRealm(realm string) time.Duration {
	if d := c.embeddingRealm(realm).QueryEmbedTimeout; d != nil {
		return *d
	}
	return DefaultQueryEmbedTimeout
}

// embeddingRealm is the block that sets realm's semantic recall: its
// own, else the default realm's.
func (c *Config) embeddingRealm(realm string) Realm {
	r, ok := c.realm(realm)
	if !ok {
		r, _ = c.realm(c.DefaultRealm)
	}
	return r
}

func (c *Config) realm(name string) (Realm, bool) {
	for _, r := range c.Realms {
		if r.Name == name {
			return r, true
		}
	}
	return Realm{}, false
}

// TokenFor finds the token whose secret is secret. It compares digests in
// constant time and visits every token, so timing reveals neither a
// secret's length nor which token matched.
func (c *Config) TokenFor(secret string) (*Token, bool) {
	want := sha256.Sum256([]byte(secret))
	found := -1
	for i := range c.Tokens {
		have := sha256.Sum256([]byte(c.Tokens[i].Secret))
		if subtle.ConstantTimeCompare(want[:], have[:]) == 1 && c.Tokens[i].Secret != "" {
			found = i
		}
	}
	if found < 0 {
		return nil, false
	}
	return &c.Tokens[found], true
}

// RequiresAuth reports whether requests must carry a bearer token.
func (c *Config) RequiresAuth() bool { return len(c.Tokens) > 0 }
