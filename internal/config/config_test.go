package config

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/memhost/memhost/coordinator"
	"github.com/memhost/memhost/internal/pluginhost"
	"github.com/memhost/memhost/sdk"
)

// parse loads src as /srv/memhost/memhost.hcl with the fixed test environment.
func parse(t *testing.T, src string) (*Config, error) {
	t.Helper()
	opts := testOptions(t)
	opts.WorkDir = "/srv"
	return opts.Parse("memhost/memhost.hcl", []byte(src))
}

func mustParse(t *testing.T, src string) *Config {
	t.Helper()
	c, err := parse(t, src)
	if err != nil {
		t.Fatalf("parse: %v", err)
	}
	return c
}

func TestDefault(t *testing.T) {
	c := Options{ExecutableDir: "/opt/memhost/bin", WorkDir: "/home/me"}.Default()
	if err := c.Validate(); err != nil {
		t.Fatalf("Default is invalid: %v", err)
	}
	checks := []struct{ name, got, want string }{
		{"listen", c.Listen, "127.0.0.1:7077"},
		{"plugin_dir", c.PluginDir, "/opt/memhost/bin/plugins"},
		{"data_dir", c.DataDir, "/home/me/memhost-data"},
		{"log_format", c.LogFormat, "text"},
		{"log_level", c.LogLevel, "info"},
		{"default_realm", c.DefaultRealm, "default"},
		{"header", c.Coordinator.InstructionHeader, "Agent memory"},
	}
	for _, ch := range checks {
		if ch.got != ch.want {
			t.Errorf("%s = %q, want %q", ch.name, ch.got, ch.want)
		}
	}
	if len(c.Instances) != 2 {
		t.Fatalf("instances = %+v, want the default provider and compactor", c.Instances)
	}
	if comp, ok := c.Instance(sdk.KindCompactor, c.Coordinator.Compactor); !ok || comp.Name != "summary" || comp.Plugin != "template" {
		t.Errorf("default compactor = %+v, %v, want instance summary of plugin template", comp, ok)
	}
	p, ok := c.ProviderForRealm("default")
	if !ok || p.Name != "main" || p.Plugin != "sqlite" || string(p.Config) != `{"path":"memory.db"}` {
		t.Errorf("default realm provider = %+v, %v", p, ok)
	}
	for _, kind := range []sdk.PluginKind{sdk.KindSelector, sdk.KindMobResolver, sdk.KindOperatorResolver} {
		if got := c.InstancesOf(kind); len(got) != 0 {
			t.Errorf("default has %s instances %+v", kind, got)
		}
	}
	// The coordinator's own defaults, not a copy of them.
	if got, want := c.CoordinatorConfig(), coordinator.DefaultConfig(); !reflect.DeepEqual(got, want) {
		t.Errorf("coordinator config = %+v, want coordinator.DefaultConfig() %+v", got, want)
	}
	if c.RequiresAuth() {
		t.Error("default requires auth")
	}
}

func TestDefaultUsesTheRunningExecutable(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Skip(err)
	}
	exe, _ = filepath.EvalSymlinks(exe)
	c := Default()
	if want := filepath.Join(filepath.Dir(exe), "plugins"); c.PluginDir != want {
		t.Errorf("PluginDir = %q, want %q", c.PluginDir, want)
	}
	if !filepath.IsAbs(c.DataDir) {
		t.Errorf("DataDir %q is not absolute", c.DataDir)
	}
}

func TestLoadMissingFile(t *testing.T) {
	_, err := Load(filepath.Join(t.TempDir(), "nope.hcl"))
	if !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), "nope.hcl") {
		t.Fatalf("err = %v, want a not-exist error naming the file", err)
	}
}

func TestLoadTooLarge(t *testing.T) {
	path := filepath.Join(t.TempDir(), "big.hcl")
	if err := os.WriteFile(path, []byte(strings.Repeat("#", MaxFileBytes+1)), 0o600); err != nil {
		t.Fatal(err)
	}
	// From an outside review: the message ended in ": invalid argument",
	// the wrapped sentinel's text, read as the system's error.
	want := "config " + path + " is larger than 1048576 bytes (1 MiB); a config file is far smaller"
	if _, err := Load(path); !errors.Is(err, sdk.ErrInvalid) || err.Error() != want+"; is it the right file?" {
		t.Fatalf("err = %v, want ErrInvalid saying %q", err, want)
	}
}

func TestLoadRealEnvironment(t *testing.T) {
	t.Setenv("MEMHOST_TEST_TOKEN", "from-the-environment-1234")
	path := filepath.Join(t.TempDir(), "memhost.hcl")
	src := "token \"t\" {\n  secret_env = \"MEMHOST_TEST_TOKEN\"\n  realms = [\"default\"]\n}\n"
	if err := os.WriteFile(path, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if tok, ok := c.TokenFor("from-the-environment-1234"); !ok || tok.Name != "t" {
		t.Fatalf("TokenFor = %v, %v", tok, ok)
	}
	if c.DataDir != filepath.Join(filepath.Dir(path), "memhost-data") {
		t.Errorf("DataDir = %q, want beside the file", c.DataDir)
	}
}

func TestRelativePaths(t *testing.T) {
	tests := []struct{ src, plugins, data string }{
		{``, "/opt/memhost/bin/plugins", "/srv/memhost/memhost-data"},
		{"plugin_dir = \"bin/plugins\"\ndata_dir = \"../var/data\"", "/srv/memhost/bin/plugins", "/srv/var/data"},
		{"plugin_dir = \"/usr/lib/memhost/\"\ndata_dir = \"/var/lib/memhost\"", "/usr/lib/memhost", "/var/lib/memhost"},
		{"data_dir = \".\"", "/opt/memhost/bin/plugins", "/srv/memhost"},
	}
	for _, tt := range tests {
		c := mustParse(t, tt.src)
		if c.PluginDir != tt.plugins || c.DataDir != tt.data {
			t.Errorf("%q: plugin_dir %q data_dir %q, want %q %q", tt.src, c.PluginDir, c.DataDir, tt.plugins, tt.data)
		}
	}
}

// TestErrorPositions checks that each problem is reported at its line.
func TestErrorPositions(t *testing.T) {
	tests := []struct {
		name string
		src  string
		line int
		want string
	}{
		{"unknown argument", "listen = \"127.0.0.1:1\"\n\nbogus = 1\n", 3, `An argument named "bogus" is not expected here`},
		{"unknown block", "\nstore \"x\" {}\n", 2, `Blocks of type "store" are not expected here`},
		{"unknown nested argument", "provider \"p\" {\n  plugin = \"sqlite\"\n  dir = \"x\"\n}\n", 3, `"dir" is not expected`},
		{"string as number", "coordinator {\n  max_entries = \"8\"\n}\n", 2, "max_entries must be a number, not a string"},
		{"number as string", "\nlisten = 7077\n", 2, "listen must be a string, not a number"},
		{"string as bool", "coordinator {\n\n  defang_inbound = \"false\"\n}\n", 3, "defang_inbound must be a bool"},
		{"fraction", "server {\n  read_timeout_ms = 1.5\n}\n", 2, "must be a whole number"},
		{"huge integer", "server {\n  max_body_bytes = 1e12\n}\n", 2, "out of range"},
		{"allowed host with port", "server {\n\n  allowed_hosts = [\"memhost.internal:7077\"]\n}\n", 3, `"memhost.internal:7077" is not a host name`},
		{"allowed host wildcard", "server {\n  allowed_hosts = [\"*.internal\"]\n}\n", 2, `"*.internal" is not a host name`},
		{"allowed host url", "server {\n  allowed_hosts = [\"http://memhost\"]\n}\n", 2, "no port, scheme or wildcard"},
		{"null", "log_level = null\n", 1, "log_level must not be null"},
		{"list of numbers", "token \"t\" {\n  secret_env = \"MEMHOST_TOKEN_OPS\"\n  realms = [1]\n}\n", 3, "realms must be a list of strings"},
		{"bad log level", "log_format = \"json\"\nlog_level = \"loud\"\n", 2, `"loud" is not a log level`},
		{"bad policy", "coordinator {\n  recall_failure_policy = \"retry\"\n}\n", 2, `recall_failure_policy "retry" is not skip or fail`},
		{"zero max entries", "coordinator {\n  max_entries = 0\n}\n", 2, "max_entries 0 is outside 1..100"},
		{"negative timeout", "coordinator {\n\n\n  recall_timeout_ms = -5\n}\n", 4, "recall_timeout_ms -5 ms must be positive"},
		{"zero boot wait", "supervisor {\n  boot_wait_ms = 0\n}\n", 2, "boot_wait_ms must be at least 1"},
		{"tiny budget", "coordinator {\n  session_budget_bytes = 511\n}\n", 2, "turn_budget_bytes 20480 exceeds session_budget_bytes 511"},
		{"blank header", "coordinator {\n  instruction_header = \"  \"\n}\n", 2, "must not be blank"},
		{"undeclared realm provider", "provider \"main\" { plugin = \"sqlite\" }\nrealm \"acme\" {\n  provider = \"fts\"\n}\n", 3, `no provider of that name is declared (declared: "main")`},
		{"realm provider of wrong kind", "provider \"main\" { plugin = \"sqlite\" }\nselector \"s\" { plugin = \"lexical\" }\nrealm \"acme\" { provider = \"s\" }\n", 3, `names selector "s", which is not a provider`},
		{"undeclared selector", "coordinator {\n  selector = \"rerank\"\n}\n", 2, `no selector of that name is declared (none is declared)`},
		{"compactor of wrong kind", "provider \"p\" { plugin = \"sqlite\" }\ncoordinator {\n  compactor = \"p\"\n}\n", 3, `names provider "p", which is not a compactor`},
		{"duplicate instance", "provider \"a\" { plugin = \"sqlite\" }\n\ncompactor \"a\" { plugin = \"template\" }\n", 3, `already used by provider "a" at memhost/memhost.hcl:1`},
		{"name of the default provider", "\nselector \"main\" { plugin = \"lexical\" }\n", 2, `selector "main" takes the name of the default provider`},
		{"duplicate realm", "realm \"default\" { provider = \"main\" }\nrealm \"default\" { provider = \"main\" }\n", 2, `already declared at memhost/memhost.hcl:1`},
		{"unsafe instance name", "\n\nprovider \"a/b\" { plugin = \"sqlite\" }\n", 3, `may hold only letters, digits`},
		{"unsafe realm name", "realm \"a b\" { provider = \"main\" }\n", 1, `may hold only letters, digits`},
		{"long name", "provider \"" + strings.Repeat("x", 65) + "\" { plugin = \"sqlite\" }\n", 1, "longer than 64 bytes"},
		{"two providers no default", "provider \"a\" { plugin = \"sqlite\" }\nprovider \"b\" { plugin = \"bleve\" }\n", 2, `Several providers are declared ("a", "b")`},
		{"default realm named", "default_realm = \"acme\"\nprovider \"a\" { plugin = \"sqlite\" }\nprovider \"b\" { plugin = \"bleve\" }\n", 1, `realm "acme" { provider = "a" }`},
		{"listen without port", "listen = \"127.0.0.1\"\n", 1, "is not host:port"},
		{"listen named port", "listen = \"127.0.0.1:http\"\n", 1, "the port must be a number"},
		{"listen bad host", "listen = \"exa mple:80\"\n", 1, "neither an IP address nor a host name"},
		{"insecure all interfaces", "\nlisten = \"0.0.0.0:7077\"\n", 2, "is not a loopback address and no token is declared"},
		{"insecure host name", "listen = \"memhost.internal:7077\"\n", 1, "is not a loopback address"},
		{"token env unset", "token \"ops\" {\n  realms = [\"default\"]\n  secret_env = \"MEMHOST_TOKEN_UNSET\"\n}\n", 3, `Token "ops" reads its secret from the environment variable MEMHOST_TOKEN_UNSET, which is not set`},
		{"token env empty", "token \"ops\" {\n  secret_env = \"MEMHOST_TOKEN_EMPTY\"\n  realms = [\"default\"]\n}\n", 2, "MEMHOST_TOKEN_EMPTY, which is empty"},
		{"token no realms", "token \"ops\" {\n  secret_env = \"MEMHOST_TOKEN_OPS\"\n  realms = []\n}\n", 3, "must name at least one realm"},
		{"token missing realms", "token \"ops\" {\n  secret_env = \"MEMHOST_TOKEN_OPS\"\n}\n", 1, `The argument "realms" is required`},
		{"token bad identity", "token \"ops\" {\n  secret_env = \"MEMHOST_TOKEN_OPS\"\n  realms = [\"default\"]\n  identity = \"a b\"\n}\n", 4, `Token "ops": identity "a b"`},
		{"token identity twice", "token \"ops\" {\n  secret_env = \"MEMHOST_TOKEN_OPS\"\n  realms = [\"default\"]\n  identity = [\"al\", \"al\"]\n}\n", 4, `names identity "al" twice`},
		{"token no identities", "token \"ops\" {\n  secret_env = \"MEMHOST_TOKEN_OPS\"\n  realms = [\"default\"]\n  identity = []\n}\n", 4, "identity must name at least one identity"},
		{"config key twice", "provider \"p\" {\n  plugin = \"sqlite\"\n  config = {\n    path = \"a.db\"\n    \"path\" = \"b.db\"\n  }\n}\n", 5, `config key "path" is set twice; the first is at memhost/memhost.hcl:4`},
		{"token identity number", "token \"ops\" {\n  secret_env = \"MEMHOST_TOKEN_OPS\"\n  realms = [\"default\"]\n  identity = 7\n}\n", 4, "identity must be a list of strings"},
		{"interpolation", "listen = \"127.0.0.1:${7077}\"\n", 1, "Expression not allowed"},
		{"variable", "\ndata_dir = home\n", 2, "Expression not allowed"},
		{"function in config", "provider \"p\" {\n  plugin = \"sqlite\"\n  config = {\n    path = lower(\"X\")\n  }\n}\n", 4, "Expression not allowed"},
		{"arithmetic", "coordinator {\n  max_entries = 4 * 2\n}\n", 2, "Expression not allowed"},
		{"config list", "provider \"p\" {\n  plugin = \"sqlite\"\n  config = [1]\n}\n", 3, "config must be an object"},
		{"dsn_env of a local store", "session_store {\n\n  dsn_env = \"MEMHOST_POSTGRES_DSN\"\n}\n", 3, `session_store.dsn_env applies only to kind = "postgres"`},
		{"schema of a local store", "session_store {\n  kind = \"local\"\n  schema = \"state\"\n}\n", 3, `session_store.schema applies only to kind = "postgres"`},
		{"duplicate coordinator", "coordinator {}\n\ncoordinator {}\n", 3, "the first is at memhost/memhost.hcl:1"},
		{"syntax", "provider \"p\" {\n  plugin = \n}\n", 2, "Invalid expression"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := parse(t, tt.src)
			var cfgErr *Error
			if !errors.As(err, &cfgErr) {
				t.Fatalf("err = %v, want *config.Error", err)
			}
			prefix := fmt.Sprintf("memhost/memhost.hcl:%d,", tt.line)
			for _, line := range strings.Split(err.Error(), "\n") {
				if strings.HasPrefix(line, prefix) && strings.Contains(line, tt.want) {
					return
				}
			}
			t.Errorf("no problem %q at line %d in:\n%v", tt.want, tt.line, err)
		})
	}
}

func TestSecretsStayOutOfOutput(t *testing.T) {
	const secret = "s3cr3t-value-0123456789"
	opts := testOptions(t)
	opts.LookupEnv = func(string) (string, bool) { return secret, true }
	c, err := opts.Parse("m.hcl", []byte("token \"a\" {\n secret_env = \"A\"\n realms = [\"default\"]\n}\n"))
	if err != nil {
		t.Fatal(err)
	}
	js, _ := json.Marshal(c)
	outputs := map[string]string{
		"%v": fmt.Sprintf("%v", c), "%+v": fmt.Sprintf("%+v", c), "%#v": fmt.Sprintf("%#v", c),
		"token %v": fmt.Sprintf("%v", c.Tokens[0]), "token %#v": fmt.Sprintf("%#v", c.Tokens[0]),
		"json": string(js), "HCL": string(c.HCL()), "warnings": strings.Join(c.Warnings(), "\n"),
	}
	for name, out := range outputs {
		if strings.Contains(out, secret) {
			t.Errorf("%s reveals the secret: %s", name, out)
		}
	}
	if !strings.Contains(outputs["token %v"], `token "a"`) || !strings.Contains(outputs["token %v"], "$A") {
		t.Errorf("token String = %q, want its name and variable", outputs["token %v"])
	}

	// Two tokens with one secret, and a short one: errors name tokens, not secrets.
	opts.LookupEnv = func(name string) (string, bool) {
		if name == "SHORT" {
			return "short", true
		}
		return secret, true
	}
	_, err = opts.Parse("m.hcl", []byte(`
token "a" {
  secret_env = "A"
  realms = ["default"]
}
token "b" {
  secret_env = "B"
  realms = ["default"]
}
token "c" {
  secret_env = "SHORT"
  realms = ["default"]
}`))
	if err == nil || strings.Contains(err.Error(), secret) || strings.Contains(err.Error(), "short,") {
		t.Fatalf("err = %v", err)
	}
	if !strings.Contains(err.Error(), `m.hcl:7,`) || !strings.Contains(err.Error(), `Tokens "a" and "b" have the same secret`) {
		t.Errorf("duplicate secret not reported at line 7: %v", err)
	}
	if !strings.Contains(err.Error(), `m.hcl:11,`) || !strings.Contains(err.Error(), `the secret in SHORT is shorter than 16 bytes`) {
		t.Errorf("short secret not reported at line 11: %v", err)
	}
}

// TestPastedSecretsAreNotRepeated: a value where a variable's name belongs
// is most often the secret itself, and the refusal reaches logs.
func TestPastedSecretsAreNotRepeated(t *testing.T) {
	const key = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
	const dsn = "postgres://memhost:hunter2@db.internal/memhost"
	for _, tc := range []struct{ name, src, secret, want string }{
		{"secret_env", "token \"ops\" {\n  secret_env = \"" + key + "\"\n  realms = [\"default\"]\n}\n", key, "secret_env must name an environment variable"},
		{"host_key_env", "host_key_env = \"" + key + "\"\n", key, "host_key_env must name an environment variable"},
		{"dsn_env", "session_store {\n  kind = \"postgres\"\n  dsn_env = \"" + dsn + "\"\n}\n", "hunter2", "dsn_env must name an environment variable"},
		// Secrets that could be a variable's name: refused as unset,
		// still without repeating them.
		{"secret_env that could be a name", "token \"ops\" {\n  secret_env = \"ghp_R2d2C3po4Bb8Xy7Zq1Wv9Ut6Sr5Qp3On0Ml\"\n  realms = [\"default\"]\n}\n", "R2d2C3po4Bb8", "which is not set"},
		{"host_key_env that could be a name", "host_key_env = \"af" + key[2:] + "\"\n", key[2:], "which is unset or empty"},
		{"dsn_env that could be a name", "session_store {\n  kind = \"postgres\"\n  dsn_env = \"AF86D081884C7D659A2FEAA0C55AD015\"\n}\n", "AF86D081884C7D659A2FEAA0C55AD015", "which is unset or empty"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parse(t, tc.src)
			if err == nil {
				t.Fatal("loaded")
			}
			if strings.Contains(err.Error(), tc.secret) {
				t.Errorf("the refusal repeats the secret: %v", err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("the refusal does not say what is wrong (%s): %v", tc.want, err)
			}
		})
	}
}

// TestTokenIdentities: identity takes one string or a list, and the
// formatted config keeps it.
func TestTokenIdentities(t *testing.T) {
	c := mustParse(t, `
token "one" {
  secret_env = "MEMHOST_TOKEN_OPS"
  realms     = ["default"]
  identity   = "alice"
}
token "many" {
  secret_env = "MEMHOST_TOKEN_CI"
  realms     = ["default"]
  identity   = ["bob", "carol"]
}`)
	if got := fmt.Sprint(c.Tokens[0].Identities, c.Tokens[1].Identities); got != "[alice] [bob carol]" {
		t.Errorf("identities = %s", got)
	}
	if out := string(c.HCL()); !regexp.MustCompile(`identity +\= \["bob", "carol"\]`).MatchString(out) {
		t.Errorf("formatted config lost the identities:\n%s", out)
	}
}

// TestTokenSettingsRoundTrip: the formatted config keeps every setting
// of a token. It wrote no role, so an application token read back as an
// agent.
func TestTokenSettingsRoundTrip(t *testing.T) {
	c := mustParse(t, `
token "app" {
  secret_env    = "MEMHOST_TOKEN_OPS"
  realms        = ["default"]
  role          = "application"
  max_in_flight = 8
}`)
	if tok := c.Tokens[0]; tok.Role != RoleApplication || tok.MaxInFlight != 8 {
		t.Fatalf("token = %+v", tok)
	}
	assertRoundTrip(t, testOptions(t), c)
	if d := mustParse(t, `
token "agent" {
  secret_env = "MEMHOST_TOKEN_OPS"
  realms     = ["default"]
}`); d.Tokens[0].MaxInFlight != DefaultMaxInFlight {
		t.Errorf("max_in_flight unset = %d, want %d", d.Tokens[0].MaxInFlight, DefaultMaxInFlight)
	}
}

func TestTokenFor(t *testing.T) {
	c := mustParse(t, `
listen = "0.0.0.0:7077"
token "ops" {
  secret_env = "MEMHOST_TOKEN_OPS"
  realms     = ["default", "acme"]
}
token "ci" {
  secret_env = "MEMHOST_TOKEN_CI"
  realms     = ["ci"]
}`)
	if !c.RequiresAuth() {
		t.Error("RequiresAuth is false with tokens")
	}
	tests := []struct {
		secret, token string
		realm         string
		allowed       bool
	}{
		{testEnv["MEMHOST_TOKEN_OPS"], "ops", "acme", true},
		{testEnv["MEMHOST_TOKEN_OPS"], "ops", "ci", false},
		{testEnv["MEMHOST_TOKEN_CI"], "ci", "ci", true},
		{testEnv["MEMHOST_TOKEN_CI"], "ci", "default", false},
		{"", "", "", false},
		{testEnv["MEMHOST_TOKEN_OPS"] + "x", "", "", false},
		{testEnv["MEMHOST_TOKEN_OPS"][1:], "", "", false},
		{strings.ToUpper(testEnv["MEMHOST_TOKEN_OPS"]), "", "", false},
	}
	for _, tt := range tests {
		tok, ok := c.TokenFor(tt.secret)
		if tt.token == "" {
			if ok {
				t.Errorf("TokenFor(%q) = %v, want none", tt.secret, tok)
			}
			continue
		}
		if !ok || tok.Name != tt.token {
			t.Errorf("TokenFor(%q) = %v, %v, want %s", tt.secret, tok, ok, tt.token)
			continue
		}
		if got := tok.Allows(tt.realm); got != tt.allowed {
			t.Errorf("%s.Allows(%q) = %v, want %v", tok.Name, tt.realm, got, tt.allowed)
		}
	}
}

func TestInstancesAndRealms(t *testing.T) {
	c := mustParse(t, `
provider "main" { plugin = "sqlite" }
provider "fts" { plugin = "bleve" }
selector "rerank" { plugin = "lexical" }
compactor "summary" { plugin = "template" }
realm "default" { provider = "main" }
realm "acme" { provider = "fts" }
coordinator {
  selector = "rerank"
}`)
	if got := c.InstancesOf(sdk.KindProvider); len(got) != 2 || got[0].Name != "main" || got[1].Name != "fts" {
		t.Errorf("providers = %+v", got)
	}
	if in, ok := c.Instance(sdk.KindSelector, "rerank"); !ok || in.Plugin != "lexical" || string(in.Config) != "{}" || in.Pos != "memhost/memhost.hcl:4" {
		t.Errorf("Instance(selector, rerank) = %+v, %v", in, ok)
	}
	if _, ok := c.Instance(sdk.KindProvider, "rerank"); ok {
		t.Error("Instance matched a selector as a provider")
	}
	for realm, want := range map[string]string{"default": "main", "acme": "fts", "undeclared": "main"} {
		if p, ok := c.ProviderForRealm(realm); !ok || p.Name != want {
			t.Errorf("ProviderForRealm(%q) = %+v, %v, want %s", realm, p, ok, want)
		}
	}
	warnings := strings.Join(c.Warnings(), "\n")
	if !strings.Contains(warnings, `memhost/memhost.hcl:5: compactor "summary" is declared but unused`) {
		t.Errorf("warnings = %q, want the unused compactor", warnings)
	}
}

func TestDefaultProviderRules(t *testing.T) {
	tests := []struct {
		name, src      string
		providers      []string
		defaultServer  string
		defaultRealmIs string
	}{
		{"no provider declared gets the default", `realm "acme" { provider = "main" }`, []string{"main"}, "main", "default"},
		{"one provider serves the default realm", `provider "fts" { plugin = "bleve" }`, []string{"fts"}, "fts", "default"},
		{"renamed default realm", "default_realm = \"acme\"\nprovider \"fts\" { plugin = \"bleve\" }", []string{"fts"}, "fts", "acme"},
		{"explicit binding wins", "provider \"a\" { plugin = \"sqlite\" }\nprovider \"b\" { plugin = \"bleve\" }\nrealm \"default\" { provider = \"b\" }", []string{"a", "b"}, "b", "default"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := mustParse(t, tt.src)
			var names []string
			for _, in := range c.InstancesOf(sdk.KindProvider) {
				names = append(names, in.Name)
			}
			if strings.Join(names, ",") != strings.Join(tt.providers, ",") {
				t.Errorf("providers = %v, want %v", names, tt.providers)
			}
			if c.DefaultRealm != tt.defaultRealmIs {
				t.Errorf("DefaultRealm = %q", c.DefaultRealm)
			}
			if p, ok := c.ProviderForRealm(c.DefaultRealm); !ok || p.Name != tt.defaultServer {
				t.Errorf("default realm served by %+v, want %s", p, tt.defaultServer)
			}
		})
	}
}

func TestPluginConfigJSON(t *testing.T) {
	tests := []struct{ hcl, json string }{
		{`{}`, `{}`},
		{`null`, `{}`},
		{`{ path = "memory.db" }`, `{"path":"memory.db"}`},
		{`{ b = 1, a = 2 }`, `{"a":2,"b":1}`},
		{`{ "a b" = true, c = false, n = null }`, `{"a b":true,"c":false,"n":null}`},
		{`{ n = -3, f = 0.25, e = 1e3, big = 9007199254740993 }`, `{"big":9007199254740993,"e":1000,"f":0.25,"n":-3}`},
		{`{ l = [1, "two", [3], { four = 4 }] }`, `{"l":[1,"two",[3],{"four":4}]}`},
		{`{ m = { n = { o = "deep" } } }`, `{"m":{"n":{"o":"deep"}}}`},
		{`{ html = "<a & b>", esc = "tab\tq\"" }`, `{"esc":"tab\tq\"","html":"<a & b>"}`},
		{"{ h = <<EOT\nline\nEOT\n}", `{"h":"line\n"}`},
		{`{ dollar = "$${x}" }`, `{"dollar":"${x}"}`},
	}
	for _, tt := range tests {
		c, err := parse(t, "provider \"p\" {\n  plugin = \"sqlite\"\n  config = "+tt.hcl+"\n}\n")
		if err != nil {
			t.Errorf("%s: %v", tt.hcl, err)
			continue
		}
		got := string(c.Instances[0].Config)
		if got != tt.json {
			t.Errorf("config = %s\n got %s\nwant %s", tt.hcl, got, tt.json)
		}
		if !json.Valid(c.Instances[0].Config) {
			t.Errorf("%s: invalid JSON %s", tt.hcl, got)
		}
	}
	if _, err := parse(t, "provider \"p\" {\n  plugin = \"sqlite\"\n  config = { x = 1e400 }\n}\n"); err == nil || !strings.Contains(err.Error(), "memhost/memhost.hcl:3,") {
		t.Errorf("a number beyond float64 range: err = %v, want an error at line 3", err)
	}
}

func TestListenLoopback(t *testing.T) {
	tests := []struct {
		addr   string
		secure bool // accepted without tokens
	}{
		{"127.0.0.1:7077", true},
		{"127.8.9.10:1", true},
		{"[::1]:7077", true},
		{"localhost:7077", true},
		{"LocalHost:0", true},
		{"[::ffff:127.0.0.1]:80", true},
		{"0.0.0.0:7077", false},
		{":7077", false},
		{"[::]:7077", false},
		{"10.0.0.5:7077", false},
		{"128.0.0.1:7077", false},
		{"localhost.example.com:7077", false},
	}
	for _, tt := range tests {
		c := mustParse(t, "")
		c.Listen = tt.addr
		err := c.Validate()
		if (err == nil) != tt.secure {
			t.Errorf("listen %s without tokens: err = %v, want accepted=%v", tt.addr, err, tt.secure)
		}
		c.AllowInsecureListen = true
		if err := c.Validate(); err != nil {
			t.Errorf("listen %s with allow_insecure_listen: %v", tt.addr, err)
		}
	}
}

// TestOverrideListen is what `memhost serve --listen` does: change a
// loaded Config and validate again. The error has no file position, since
// the value did not come from the file.
func TestOverrideListen(t *testing.T) {
	c := mustParse(t, "listen = \"127.0.0.1:9000\"\n")
	c.Listen = "0.0.0.0:9000"
	err := c.Validate()
	if err == nil || strings.Contains(err.Error(), "memhost.hcl") || !strings.Contains(err.Error(), `"0.0.0.0:9000" is not a loopback address`) {
		t.Fatalf("err = %v", err)
	}
}

// TestFlagProblemsNameTheFlag: from an outside review. A value a flag set
// (`serve --listen nohostport`, `--log-level verbose`) was refused with
// neither a position nor the flag, so the operator looked for it in the
// file; it names the flag the caller typed.
func TestFlagProblemsNameTheFlag(t *testing.T) {
	for _, tc := range []struct {
		src, key, flag, value, want string
	}{
		{"", "listen", "--listen", "nohostport", `--listen: Invalid listen address; "nohostport" is not host:port`},
		{"listen = \"127.0.0.1:9000\"\n", "listen", "--listen", "0.0.0.0:9000", `--listen: Insecure listen address; "0.0.0.0:9000" is not a loopback address`},
		{"log_level = \"info\"\n", "log_level", "--log-level", "verbose", `--log-level: Invalid log_level; "verbose" is not a log level`},
		// The same value as the file's: the flag is still what set it.
		{"log_level = \"loud\"\n", "log_level", "--log-level", "loud", `--log-level: Invalid log_level; "loud"`},
	} {
		opts := testOptions(t)
		opts.Override = func(c *Config) error {
			switch tc.key {
			case "listen":
				c.Listen = tc.value
			case "log_level":
				c.LogLevel = tc.value
			}
			c.SetByFlag(tc.key, tc.flag)
			return nil
		}
		_, err := opts.Parse("memhost.hcl", []byte(tc.src))
		if err == nil || !strings.HasPrefix(err.Error(), tc.want) || strings.Count(err.Error(), "\n") > 0 {
			t.Errorf("%s %s over %q: err = %v, want one line starting %q", tc.flag, tc.value, tc.src, err, tc.want)
		}
	}
}

func TestValidateProgrammaticConfig(t *testing.T) {
	c := Options{ExecutableDir: "/x", WorkDir: "/y"}.Default()
	c.DataDir = "relative"
	c.Instances = append(c.Instances, Instance{Kind: "storage", Name: "s", Plugin: "p", Config: json.RawMessage(`[]`)})
	c.Tokens = []Token{{Name: "t", Realms: []string{"default"}}}
	err := c.Validate()
	if err == nil {
		t.Fatal("Validate accepted a broken config")
	}
	for _, want := range []string{`data_dir "relative" must be absolute`, `"storage" is not a plugin kind`, "config must be a JSON object", `Token "t" has no secret`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("missing %q in:\n%v", want, err)
		}
	}
}

func TestWarnings(t *testing.T) {
	tests := []struct{ src, want string }{
		{"coordinator {\n  operator_scope = \"provisional\"\n}", `memhost/memhost.hcl:2: operator_scope = "provisional" has no effect`},
		{"operator_resolver \"o\" { plugin = \"static\" }\ncoordinator {\n  operator_resolver = \"o\"\n}", `memhost/memhost.hcl:3: operator_resolver has no effect while operator_scope = "off"`},
		{"provider \"a\" { plugin = \"sqlite\" }\nprovider \"b\" { plugin = \"bleve\" }\nrealm \"default\" { provider = \"a\" }", `memhost/memhost.hcl:2: provider "b" is declared but unused: no realm block names it`},
		{"selector \"s\" { plugin = \"lexical\" }", `memhost/memhost.hcl:1: selector "s" is declared but unused: coordinator.selector does not name it`},
		{"embedder \"e\" {\n  plugin = \"openai\"\n  config = { base_url = \"http://localhost:8080/v1\", model = \"m\", dimensions = 4 }\n}", `memhost/memhost.hcl:1: embedder "e" is declared but unused: no realm block names it`},
		{"token \"ops\" {\n  secret_env = \"MEMHOST_TOKEN_OPS\"\n  realms = [\"default\"]\n}\nserver {\n  allowed_hosts = [\"memhost_api\"]\n}", `memhost/memhost.hcl:6: allowed_hosts has no effect`},
	}
	for _, tt := range tests {
		w := strings.Join(mustParse(t, tt.src).Warnings(), "\n")
		if !strings.Contains(w, tt.want) {
			t.Errorf("%q: warnings %q, want %q", tt.src, w, tt.want)
		}
	}
	if w := mustParse(t, "").Warnings(); len(w) != 0 {
		t.Errorf("default config warns: %v", w)
	}
}

// TestDocs keeps docs/config.md honest: its complete example loads, and
// every key and block the parser knows is documented.
func TestDocs(t *testing.T) {
	raw, err := os.ReadFile("../../docs/config.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(raw)
	_, example, ok := strings.Cut(doc, "## Complete example")
	if !ok {
		t.Fatal("docs/config.md has no complete example")
	}
	_, example, _ = strings.Cut(example, "```hcl\n")
	example, _, _ = strings.Cut(example, "```")
	opts := testOptions(t)
	opts.LookupEnv = func(string) (string, bool) { return "doc-secret-0123456789", true }
	if _, err := opts.Parse("/srv/memhost.hcl", []byte(example)); err == nil {
		t.Error("the example loaded although two tokens share one secret; the test environment is wrong")
	}
	n := 0
	opts.LookupEnv = func(string) (string, bool) { n++; return fmt.Sprintf("doc-secret-%d-0123456789", n), true }
	c, err := opts.Parse("/srv/memhost.hcl", []byte(example))
	if err != nil {
		t.Fatalf("the complete example does not load: %v", err)
	}
	if len(c.Realms) != 3 || c.Coordinator.Selector != "rerank" || c.DataDir != "/srv/memhost-data" {
		t.Errorf("example loaded as %+v", c)
	}

	schemas := []*hcl.BodySchema{fileSchema, instanceSchema, realmSchema, tokenSchema, coordinatorSchema, serverSchema, sessionsSchema, supervisorSchema, sessionStoreSchema, proposalsSchema, traceSchema}
	for _, s := range schemas {
		for _, a := range s.Attributes {
			if !strings.Contains(doc, "| `"+a.Name+"` |") {
				t.Errorf("key %q has no row in docs/config.md", a.Name)
			}
		}
		for _, b := range s.Blocks {
			if !strings.Contains(doc, "`"+b.Type) {
				t.Errorf("block %q is not documented", b.Type)
			}
		}
	}
}

// TestDefaultCompactor: a config without a compactor keeps the default one
// (compaction stays on), compactor = "" turns it off, and a declared one
// is the file's own choice; the canonical HCL round-trips each.
func TestDefaultCompactor(t *testing.T) {
	cases := []struct {
		name, body string
		want       string
		implicit   bool
	}{
		{"no compactor", `provider "notes" {
  plugin = "markdown"
}
`, DefaultCompactorInstance, true},
		{"turned off", `coordinator { compactor = "" }
`, "", false},
		{"declared", `compactor "model" {
  plugin = "llm"
}
coordinator { compactor = "model" }
`, "model", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg, err := Options{WorkDir: t.TempDir()}.Parse("memhost.hcl", []byte(c.body))
			if err != nil {
				t.Fatal(err)
			}
			if cfg.Coordinator.Compactor != c.want || cfg.ImplicitCompactor != c.implicit || len(cfg.InstancesOf(sdk.KindCompactor)) != min(len(c.want), 1) {
				t.Fatalf("compactor %q (implicit %v, instances %v), want %q (implicit %v)", cfg.Coordinator.Compactor, cfg.ImplicitCompactor, cfg.InstancesOf(sdk.KindCompactor), c.want, c.implicit)
			}
			again, err := Options{WorkDir: t.TempDir()}.Parse("memhost.hcl", cfg.HCL())
			if err != nil {
				t.Fatal(err)
			}
			if again.Coordinator.Compactor != cfg.Coordinator.Compactor || again.ImplicitCompactor != cfg.ImplicitCompactor {
				t.Fatalf("round trip: compactor %q (implicit %v), want %q (implicit %v)\n%s", again.Coordinator.Compactor, again.ImplicitCompactor, cfg.Coordinator.Compactor, cfg.ImplicitCompactor, cfg.HCL())
			}
			if c.implicit != cfg.DropImplicitCompactor() || cfg.Coordinator.Compactor != "" && c.implicit {
				t.Fatalf("DropImplicitCompactor on %s left compactor %q", c.name, cfg.Coordinator.Compactor)
			}
		})
	}
}

// The supervisor's boot wait is read from the file, and defaults to the
// supervisor's own default.
func TestBootWait(t *testing.T) {
	cfg, err := parse(t, "supervisor {\n  boot_wait_ms = 2500\n}\n")
	if err != nil || cfg.Supervisor.BootWait != 2500*time.Millisecond {
		t.Fatalf("boot_wait_ms = 2500: %v, %v", cfg.Supervisor.BootWait, err)
	}
	cfg, err = parse(t, "")
	if err != nil || cfg.Supervisor.BootWait != pluginhost.DefaultBootWait {
		t.Fatalf("default boot wait: %v, %v", cfg.Supervisor.BootWait, err)
	}
}
