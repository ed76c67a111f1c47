package config

import (
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclwrite"
	"github.com/zclconf/go-cty/cty"
)

// The operator console's settings (top-level ui), the bound on agents'
// pending proposals (block proposals) and the turn trace store's
// retention (block trace) live in this file.

const (
	defaultProposalMaxPending    = 1000
	defaultProposalRetryAfter    = time.Minute
	defaultTraceRetention        = 7 * 24 * time.Hour
	defaultTraceMaxTurnsPerRealm = 10000
)

// Proposals bounds what agents may leave for review.
type Proposals struct {
	// MaxPending is how many pending proposals one agent token may have
	// in one realm; beyond it a proposal is refused (429).
	MaxPending int
	// RetryAfter is the Retry-After the refusal carries.
	RetryAfter time.Duration
}

// Trace bounds the per-realm turn trace store.
type Trace struct {
	Retention        time.Duration // a turn older than this is dropped
	MaxTurnsPerRealm int           // turns kept per realm; the busiest identity's oldest go first
}

var (
	proposalsSchema = &hcl.BodySchema{Attributes: []hcl.AttributeSchema{
		{Name: "max_pending"}, {Name: "retry_after_seconds"},
	}}
	traceSchema = &hcl.BodySchema{Attributes: []hcl.AttributeSchema{
		{Name: "retention_hours"}, {Name: "max_turns_per_realm"},
	}}
)

func defaultProposals() Proposals {
	return Proposals{MaxPending: defaultProposalMaxPending, RetryAfter: defaultProposalRetryAfter}
}

func defaultTrace() Trace {
	return Trace{Retention: defaultTraceRetention, MaxTurnsPerRealm: defaultTraceMaxTurnsPerRealm}
}

func (d *decoder) proposals(b *hcl.Block) {
	content, diags := b.Body.Content(proposalsSchema)
	d.diags = append(d.diags, diags...)
	a, p := content.Attributes, &d.cfg.Proposals
	d.integer(a, "max_pending", "proposals.max_pending", &p.MaxPending)
	d.duration(a, "retry_after_seconds", "proposals.retry_after_seconds", time.Second, &p.RetryAfter)
}

func (d *decoder) trace(b *hcl.Block) {
	content, diags := b.Body.Content(traceSchema)
	d.diags = append(d.diags, diags...)
	a, t := content.Attributes, &d.cfg.Trace
	d.duration(a, "retention_hours", "trace.retention_hours", time.Hour, &t.Retention)
	d.integer(a, "max_turns_per_realm", "trace.max_turns_per_realm", &t.MaxTurnsPerRealm)
}

func (c *Config) validateConsole(p *problems) {
	if c.Proposals.MaxPending < 1 {
		p.add("proposals.max_pending", "Invalid max_pending", "max_pending must be at least 1.")
	}
	if c.Proposals.RetryAfter < time.Second {
		p.add("proposals.retry_after_seconds", "Invalid retry_after_seconds", "retry_after_seconds must be at least 1.")
	}
	if c.Trace.Retention < time.Hour {
		p.add("trace.retention_hours", "Invalid retention_hours", "retention_hours must be at least 1.")
	}
	if c.Trace.MaxTurnsPerRealm < 1 {
		p.add("trace.max_turns_per_realm", "Invalid max_turns_per_realm", "max_turns_per_realm must be at least 1.")
	}
}

// consoleHCL writes what differs from the defaults, so existing configs
// print as before.
func (c *Config) consoleHCL(body *hclwrite.Body) {
	if !c.UI {
		body.SetAttributeValue("ui", cty.False)
	}
	if c.Proposals != defaultProposals() {
		body.AppendNewline()
		b := body.AppendNewBlock("proposals", nil).Body()
		b.SetAttributeValue("max_pending", cty.NumberIntVal(int64(c.Proposals.MaxPending)))
		b.SetAttributeValue("retry_after_seconds", cty.NumberIntVal(int64(c.Proposals.RetryAfter/time.Second)))
	}
	if c.Trace != defaultTrace() {
		body.AppendNewline()
		b := body.AppendNewBlock("trace", nil).Body()
		b.SetAttributeValue("retention_hours", cty.NumberIntVal(int64(c.Trace.Retention/time.Hour)))
		b.SetAttributeValue("max_turns_per_realm", cty.NumberIntVal(int64(c.Trace.MaxTurnsPerRealm)))
	}
}
