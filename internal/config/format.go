package config

import (
	"bytes"
	"encoding/json"
	"github.com/memhost/memhost/sdk"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/hashicorp/hcl/v2/hclwrite"
	"github.com/zclconf/go-cty/cty"
)

// HCL renders the effective configuration as a canonical config file:
// every setting explicit, defaults included, paths absolute. Loading the
// output yields the same Config. Token secrets are never written, only the
// variables they are read from.
func (c *Config) HCL() []byte {
	f := hclwrite.NewEmptyFile()
	body := f.Body()
	body.SetAttributeValue("listen", cty.StringVal(c.Listen))
	body.SetAttributeValue("plugin_dir", cty.StringVal(c.PluginDir))
	body.SetAttributeValue("data_dir", cty.StringVal(c.DataDir))
	body.SetAttributeValue("log_format", cty.StringVal(c.LogFormat))
	body.SetAttributeValue("log_level", cty.StringVal(c.LogLevel))
	body.SetAttributeValue("allow_insecure_listen", cty.BoolVal(c.AllowInsecureListen))
	body.SetAttributeValue("default_realm", cty.StringVal(c.DefaultRealm))
	if c.HostKeyEnv != "" {
		body.SetAttributeValue("host_key_env", cty.StringVal(c.HostKeyEnv))
	}

	for _, in := range c.Instances {
		if c.ImplicitCompactor && in.Kind == sdk.KindCompactor && in.Name == DefaultCompactorInstance {
			continue // added again by Load, as it was the first time
		}
		body.AppendNewline()
		b := body.AppendNewBlock(string(in.Kind), []string{in.Name}).Body()
		if r := in.Remote; r != nil {
			for _, a := range [][2]string{{"address", r.Address}, {"tls_cert", r.TLSCert}, {"tls_key", r.TLSKey}, {"tls_ca", r.TLSCA}, {"tls_server_name", r.ServerName}} {
				if a[1] != "" {
					b.SetAttributeValue(a[0], cty.StringVal(a[1]))
				}
			}
			continue
		}
		b.SetAttributeValue("plugin", cty.StringVal(in.Plugin))
		if cfg := jsonTokens(in.Config); cfg != nil {
			b.SetAttributeRaw("config", cfg)
		}
	}
	if len(c.Realms) > 0 {
		body.AppendNewline()
	}
	for _, r := range c.Realms {
		b := body.AppendNewBlock("realm", []string{r.Name}).Body()
		b.SetAttributeValue("provider", cty.StringVal(r.Provider))
		if a := r.Archive; a != nil {
			b.SetAttributeValue("archive", cty.BoolVal(a.Enabled))
			b.SetAttributeValue("archive_max_age_days", cty.NumberIntVal(int64(a.MaxAge/(24*time.Hour))))
			b.SetAttributeValue("archive_max_records", cty.NumberIntVal(int64(a.MaxRecords)))
		}
		if r.Embedder != "" {
			b.SetAttributeValue("embedder", cty.StringVal(r.Embedder))
		}
		if w := r.SemanticWeight; w != nil {
			b.SetAttributeValue("semantic_weight", cty.NumberFloatVal(*w))
		}
		if d := r.QueryEmbedTimeout; d != nil {
			b.SetAttributeValue("query_embed_timeout_ms", cty.NumberIntVal(d.Milliseconds()))
		}
	}

	c.coordinatorHCL(body)

	body.AppendNewline()
	b := body.AppendNewBlock("server", nil).Body()
	b.SetAttributeValue("max_body_bytes", cty.NumberIntVal(c.Server.MaxBodyBytes))
	b.SetAttributeValue("read_timeout_ms", cty.NumberIntVal(c.Server.ReadTimeout.Milliseconds()))
	b.SetAttributeValue("shutdown_timeout_ms", cty.NumberIntVal(c.Server.ShutdownTimeout.Milliseconds()))
	if len(c.Server.AllowedHosts) > 0 {
		hosts := make([]cty.Value, len(c.Server.AllowedHosts))
		for i, h := range c.Server.AllowedHosts {
			hosts[i] = cty.StringVal(h)
		}
		b.SetAttributeValue("allowed_hosts", cty.TupleVal(hosts))
	}

	c.sessionsHCL(body)
	body.AppendNewline()
	b = body.AppendNewBlock("supervisor", nil).Body()
	b.SetAttributeValue("call_timeout_ms", cty.NumberIntVal(c.Supervisor.CallTimeout.Milliseconds()))
	b.SetAttributeValue("health_interval_ms", cty.NumberIntVal(c.Supervisor.HealthInterval.Milliseconds()))
	b.SetAttributeValue("health_timeout_ms", cty.NumberIntVal(c.Supervisor.HealthTimeout.Milliseconds()))
	b.SetAttributeValue("kill_grace_ms", cty.NumberIntVal(c.Supervisor.KillGrace.Milliseconds()))
	b.SetAttributeValue("max_backoff_ms", cty.NumberIntVal(c.Supervisor.MaxBackoff.Milliseconds()))
	b.SetAttributeValue("reindex_timeout_ms", cty.NumberIntVal(c.Supervisor.ReindexTimeout.Milliseconds()))
	b.SetAttributeValue("boot_wait_ms", cty.NumberIntVal(c.Supervisor.BootWait.Milliseconds()))
	b.SetAttributeValue("configure_timeout_ms", cty.NumberIntVal(c.Supervisor.ConfigureTimeout.Milliseconds()))
	c.sessionStoreHCL(body)
	c.consoleHCL(body)

	for _, t := range c.Tokens {
		body.AppendNewline()
		b := body.AppendNewBlock("token", []string{t.Name}).Body()
		b.SetAttributeValue("secret_env", cty.StringVal(t.SecretEnv))
		realms := make([]cty.Value, len(t.Realms))
		for i, r := range t.Realms {
			realms[i] = cty.StringVal(r)
		}
		b.SetAttributeValue("realms", cty.TupleVal(realms))
		b.SetAttributeValue("role", cty.StringVal(t.Role))
		b.SetAttributeValue("max_in_flight", cty.NumberIntVal(int64(t.MaxInFlight)))
		if len(t.Identities) > 0 {
			ids := make([]cty.Value, len(t.Identities))
			for i, id := range t.Identities {
				ids[i] = cty.StringVal(id)
			}
			b.SetAttributeValue("identity", cty.TupleVal(ids))
		}
	}
	return f.Bytes()
}

// jsonTokens renders a plugin's JSON config as an HCL object expression;
// nil for an empty object. Keys that are not plain identifiers, and the
// keywords null, true and false, are quoted so they read back as strings.
func jsonTokens(raw json.RawMessage) hclwrite.Tokens {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber() // numbers keep their exact text
	var v any
	if dec.Decode(&v) != nil {
		return nil
	}
	if m, ok := v.(map[string]any); !ok || len(m) == 0 {
		return nil
	}
	return appendJSONTokens(nil, v)
}

func appendJSONTokens(toks hclwrite.Tokens, v any) hclwrite.Tokens {
	tok := func(t hclsyntax.TokenType, s string) *hclwrite.Token {
		return &hclwrite.Token{Type: t, Bytes: []byte(s)}
	}
	switch v := v.(type) {
	case nil:
		return append(toks, tok(hclsyntax.TokenIdent, "null"))
	case bool:
		if v {
			return append(toks, tok(hclsyntax.TokenIdent, "true"))
		}
		return append(toks, tok(hclsyntax.TokenIdent, "false"))
	case json.Number:
		if n, neg := strings.CutPrefix(string(v), "-"); neg {
			return append(toks, tok(hclsyntax.TokenMinus, "-"), tok(hclsyntax.TokenNumberLit, n))
		}
		return append(toks, tok(hclsyntax.TokenNumberLit, string(v)))
	case string:
		return append(toks, hclwrite.TokensForValue(cty.StringVal(v))...)
	case []any:
		toks = append(toks, tok(hclsyntax.TokenOBrack, "["))
		for i, e := range v {
			if i > 0 {
				toks = append(toks, tok(hclsyntax.TokenComma, ","))
			}
			toks = appendJSONTokens(toks, e)
		}
		return append(toks, tok(hclsyntax.TokenCBrack, "]"))
	case map[string]any:
		if len(v) == 0 {
			return append(toks, tok(hclsyntax.TokenOBrace, "{"), tok(hclsyntax.TokenCBrace, "}"))
		}
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		toks = append(toks, tok(hclsyntax.TokenOBrace, "{"), tok(hclsyntax.TokenNewline, "\n"))
		for _, k := range keys {
			if hclsyntax.ValidIdentifier(k) && k != "null" && k != "true" && k != "false" {
				toks = append(toks, tok(hclsyntax.TokenIdent, k))
			} else {
				toks = append(toks, hclwrite.TokensForValue(cty.StringVal(k))...)
			}
			toks = append(toks, tok(hclsyntax.TokenEqual, "="))
			toks = appendJSONTokens(toks, v[k])
			toks = append(toks, tok(hclsyntax.TokenNewline, "\n"))
		}
		return append(toks, tok(hclsyntax.TokenCBrace, "}"))
	}
	return toks
}
