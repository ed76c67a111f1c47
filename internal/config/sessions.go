package config

import (
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclwrite"
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
	MaxPerRealm int           // sessions kept per realm; its oldest go first
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
	var minutes int
	if d.integer(a, "idle_ttl_minutes", "sessions.idle_ttl_minutes", &minutes) {
		s.IdleTTL = time.Duration(minutes) * time.Minute
	}
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
		d.errorf(attr.Expr.Range().Ptr(), "Invalid host_key_env",
			"%q is not an environment variable name (letters, digits and '_', not starting with a digit).", name)
	case !ok || v == "":
		d.errorf(attr.Expr.Range().Ptr(), "Host key not set",
			"host_key_env names the environment variable %s, which is unset or empty.", name)
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
