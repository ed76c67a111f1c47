package config

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

// embedderDecl declares an embedder instance "e" for the realms below.
const embedderDecl = "provider \"main\" { plugin = \"sqlite\" }\n" +
	"embedder \"e\" {\n  plugin = \"openai\"\n  config = { base_url = \"http://localhost:8080/v1\", model = \"m\", dimensions = 4 }\n}\n"

// TestRealmSemanticSettings: a realm block's embedder, semantic_weight
// and query_embed_timeout_ms as the host reads them; a realm without a
// block has the default realm's, a block without the key the default
// 250 ms; the canonical HCL round-trips each.
func TestRealmSemanticSettings(t *testing.T) {
	weight := func(w float64) *float64 { return &w }
	for _, c := range []struct {
		name, hcl, realm string
		embedder         string
		weight           *float64
		timeout          time.Duration
	}{
		{"own block", `realm "default" {
  provider               = "main"
  embedder               = "e"
  semantic_weight        = 0.4
  query_embed_timeout_ms = 5000
}`, "default", "e", weight(0.4), 5 * time.Second},
		{"no timeout: the default", `realm "default" {
  provider = "main"
  embedder = "e"
}`, "default", "e", nil, DefaultQueryEmbedTimeout},
		{"the least allowed", `realm "default" {
  provider               = "main"
  embedder               = "e"
  query_embed_timeout_ms = 1
}`, "default", "e", nil, time.Millisecond},
		{"no block: the default realm's", `realm "default" {
  provider               = "main"
  embedder               = "e"
  query_embed_timeout_ms = 30000
}`, "acme", "e", nil, 30 * time.Second},
		{"own block without one: not the default realm's", `realm "default" {
  provider               = "main"
  embedder               = "e"
  query_embed_timeout_ms = 30000
}
realm "acme" {
  provider = "main"
  embedder = "e"
}`, "acme", "e", nil, DefaultQueryEmbedTimeout},
		{"a lexical realm", `realm "default" { provider = "main" }`, "default", "", nil, DefaultQueryEmbedTimeout},
		{"no realm block at all", ``, "acme", "", nil, DefaultQueryEmbedTimeout},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := mustParse(t, embedderDecl+c.hcl+"\n")
			name, w := cfg.EmbedderForRealm(c.realm)
			sameWeight := (w == nil) == (c.weight == nil) && (w == nil || *w == *c.weight)
			if name != c.embedder || !sameWeight {
				t.Errorf("EmbedderForRealm(%s) = %q, %v; want %q, %v", c.realm, name, w, c.embedder, c.weight)
			}
			if got := cfg.QueryEmbedTimeoutForRealm(c.realm); got != c.timeout {
				t.Errorf("QueryEmbedTimeoutForRealm(%s) = %s, want %s", c.realm, got, c.timeout)
			}
			out := string(cfg.HCL())
			if set := strings.Contains(c.hcl, "query_embed_timeout_ms"); strings.Contains(out, "query_embed_timeout_ms") != set {
				t.Errorf("canonical HCL writes query_embed_timeout_ms: %v, the file set it: %v\n%s", !set, set, out)
			}
			assertRoundTrip(t, testOptions(t), cfg)
		})
	}
}

// TestRealmSemanticSettingsRefused: each bad value is reported at its
// line with its message.
func TestRealmSemanticSettingsRefused(t *testing.T) {
	realm := func(lines string) string {
		return embedderDecl + "realm \"default\" {\n  provider = \"main\"\n" + lines + "}\n"
	}
	// embedderDecl is 5 lines; the realm's first key is on line 7.
	for _, c := range []struct {
		name, src string
		line      int
		want      string
	}{
		{"zero", realm("  embedder = \"e\"\n  query_embed_timeout_ms = 0\n"), 9,
			"Invalid query_embed_timeout_ms; query_embed_timeout_ms 0 must be at least 1"},
		{"negative", realm("  embedder = \"e\"\n  query_embed_timeout_ms = -250\n"), 9,
			"Invalid query_embed_timeout_ms; query_embed_timeout_ms -250 must be at least 1"},
		{"fraction", realm("  embedder = \"e\"\n  query_embed_timeout_ms = 0.5\n"), 9,
			"query_embed_timeout_ms must be a whole number"},
		{"out of range", realm("  embedder = \"e\"\n  query_embed_timeout_ms = 1e12\n"), 9,
			"query_embed_timeout_ms is out of range"},
		{"a string", realm("  embedder = \"e\"\n  query_embed_timeout_ms = \"30s\"\n"), 9,
			"query_embed_timeout_ms must be a number, not a string"},
		{"without an embedder", realm("  query_embed_timeout_ms = 1000\n"), 8,
			`query_embed_timeout_ms without an embedder; Realm "default" sets query_embed_timeout_ms but names no embedder`},
		{"semantic_weight without an embedder", realm("  semantic_weight = 0.5\n"), 8,
			`semantic_weight without an embedder; Realm "default" sets semantic_weight but names no embedder`},
		{"semantic_weight over 1", realm("  embedder = \"e\"\n  semantic_weight = 1.5\n"), 9,
			"Invalid semantic_weight; semantic_weight must be 0 to 1"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := parse(t, c.src)
			var cfgErr *Error
			if !errors.As(err, &cfgErr) {
				t.Fatalf("err = %v, want *config.Error", err)
			}
			prefix := fmt.Sprintf("memhost/memhost.hcl:%d,", c.line)
			for _, line := range strings.Split(err.Error(), "\n") {
				if strings.HasPrefix(line, prefix) && strings.Contains(line, c.want) {
					return
				}
			}
			t.Errorf("no problem %q at line %d in:\n%v", c.want, c.line, err)
		})
	}
}
