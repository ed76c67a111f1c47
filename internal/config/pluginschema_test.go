package config

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/memhost/memhost/sdk"
)

// Manifests shaped like the first-party plugins' own (bin/plugins/*.plugin.json).
var testPlugins = map[string]Plugin{
	"sqlite": {Kinds: []sdk.PluginKind{sdk.KindProvider}, Schema: json.RawMessage(`{"$schema":"https://json-schema.org/draft/2020-12/schema","type":"object","additionalProperties":false,
		"properties":{"path":{"type":"string","minLength":1},"posting_budget":{"type":"integer","minimum":0}}}`)},
	"llm": {Kinds: []sdk.PluginKind{sdk.KindSelector, sdk.KindCompactor}, Schema: json.RawMessage(`{"type":"object","additionalProperties":false,"required":["base_url","model"],
		"properties":{"base_url":{"type":"string"},"model":{"type":"string"},"api_key_env":{"type":"string","pattern":"^[A-Za-z_][A-Za-z0-9_]*$"},"max_rows":{"type":"integer","minimum":1,"maximum":4000},
		"headers":{"type":"object","additionalProperties":false,"properties":{"x_team":{"type":"string"}}},
		"stop":{"type":"array","items":{"type":"string"}}}}`)},
	"template": {Kinds: []sdk.PluginKind{sdk.KindCompactor}}, // declares no schema: left to the plugin
	"bleve":    {Refused: "executable memhost-plugin-bleve is not an executable regular file"},
}

func TestCheckPlugins(t *testing.T) {
	cases := []struct {
		name string
		src  string
		want []string // each a line of the error, in order; none means valid
	}{
		{"valid", `provider "main" {
  plugin = "sqlite"
  config = { path = "m.db", posting_budget = 64 }
}
`, nil},
		{"misspelled key", `provider "main" {
  plugin = "sqlite"
  config = {
    pth = "m.db"
  }
}
`, []string{`memhost.hcl:4,5-17: Invalid plugin config; provider "main" config: pth: unknown key (the plugin's schema allows path, posting_budget).`}},
		{"every problem of every instance", `provider "main" {
  plugin = "sqlite"
  config = {
    path           = 7
    posting_budget = -1
  }
}
compactor "c" {
  plugin = "template"
  config = { anything = true }
}
selector "s" {
  plugin = "llm"
  config = {
    base_url = "http://127.0.0.1:1/v1"
    max_rows = 5000
    headers  = { x_tema = "a" }
    stop     = ["a", 3]
  }
}
realm "default" {
  provider = "main"
}
`, []string{
			`memhost.hcl:4,5-23: Invalid plugin config; provider "main" config: path: got number, want string.`,
			`memhost.hcl:5,5-24: Invalid plugin config; provider "main" config: posting_budget: minimum: got -1, want 0.`,
			`memhost.hcl:14,12-19,4: Invalid plugin config; selector "s" config: (the whole config): the required key model is missing.`,
			`memhost.hcl:16,5-20: Invalid plugin config; selector "s" config: max_rows: maximum: got 5,000, want 4,000.`,
			`memhost.hcl:17,18-30: Invalid plugin config; selector "s" config: headers.x_tema: unknown key (the plugin's schema allows x_team).`,
			`memhost.hcl:18,22-23: Invalid plugin config; selector "s" config: stop.1: got number, want string.`,
		}},
		// The key pasted where its variable's name goes is not repeated:
		// the position points at it.
		{"pasted secret", `selector "s" {
  plugin = "llm"
  config = { base_url = "http://127.0.0.1:1/v1", model = "m", api_key_env = "sk-proj-SECRET0123456789" }
}
`, []string{`memhost.hcl:3,63-103: Invalid plugin config; selector "s" config: api_key_env: the value does not match the pattern ^[A-Za-z_][A-Za-z0-9_]*$.`}},
		{"plugin not there, and of another kind", `provider "main" {
  plugin = "sqlit"
}
selector "other" {
  plugin = "template"
  config = { unknown = 1 }
}
`, []string{
			`memhost.hcl:2,12-19: Unknown plugin; provider "main": no plugin named "sqlit" in the plugin directory /opt/memhost/bin/plugins (serving provider: sqlite).`,
			`memhost.hcl:5,12-22: Wrong plugin kind; selector "other": plugin "template" serves compactor, not selector (serving selector: llm).`,
		}},
		// Its manifest is there: the instance says why it was refused,
		// and a refused plugin is not offered as serving the kind.
		{"plugin refused", `provider "main" {
  plugin = "bleve"
}
`, []string{
			`memhost.hcl:2,12-19: Refused plugin; provider "main": plugin "bleve" in the plugin directory /opt/memhost/bin/plugins was refused: executable memhost-plugin-bleve is not an executable regular file.`,
		}},
		{"no config attribute", `selector "s" {
  plugin = "llm"
}
`, []string{`memhost.hcl:1,10-13: Invalid plugin config; selector "s" config: (the whole config): the required key base_url is missing.`,
			`memhost.hcl:1,10-13: Invalid plugin config; selector "s" config: (the whole config): the required key model is missing.`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := testOptions(t).Parse("memhost.hcl", []byte(tc.src))
			if err != nil {
				t.Fatalf("load: %v", err)
			}
			err = c.CheckPlugins(testPlugins)
			if tc.want == nil {
				if err != nil {
					t.Fatalf("valid config refused: %v", err)
				}
				return
			}
			if !errors.Is(err, sdk.ErrInvalid) {
				t.Fatalf("error %v does not wrap ErrInvalid", err)
			}
			got := strings.Split(err.Error(), "\n")
			if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Fatalf("got\n%s\nwant\n%s", err, strings.Join(tc.want, "\n"))
			}
		})
	}
}

// TestCheckPluginsRefusesBadSchemas: a schema the host cannot use,
// or one that reaches outside itself, is the plugin's bug and is reported,
// never followed.
func TestCheckPluginsRefusesBadSchemas(t *testing.T) {
	for name, schema := range map[string]string{
		"external ref": `{"$ref":"file:///etc/passwd"}`,
		"bad keyword":  `{"type":"objet"}`,
	} {
		c, err := testOptions(t).Parse("memhost.hcl", []byte("provider \"main\" {\n  plugin = \"x\"\n}\n"))
		if err != nil {
			t.Fatal(err)
		}
		err = c.CheckPlugins(map[string]Plugin{"x": {Kinds: []sdk.PluginKind{sdk.KindProvider}, Schema: json.RawMessage(schema)}})
		if err == nil || !strings.Contains(err.Error(), "memhost.hcl:1") || !strings.Contains(err.Error(), "config_schema") {
			t.Errorf("%s: %v, want a config_schema problem at the instance", name, err)
		}
	}
}
