package config

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclwrite"
	"github.com/memhost/memhost/coordinator"
	"github.com/memhost/memhost/sdk"
	"github.com/zclconf/go-cty/cty"
)

// Coordinator is the coordinator block. Its settings are the
// coordinator's own Config: defaults come from coordinator.DefaultConfig
// and values are checked by coordinator.Config.Validate, so there is one
// default and one rule per setting. The block adds only the names of the
// helper instances, which are the config's business.
type Coordinator struct {
	coordinator.Config // DefaultRealm is ignored here: the top-level default_realm sets it

	// Instance names of the optional helpers; "" means none.
	Selector         string
	MobResolver      string
	OperatorResolver string
	Compactor        string
}

// setting is one key of the coordinator block and the field it sets;
// exactly one of the pointers is non-nil.
type setting struct {
	name string
	str  *string
	num  *int
	ms   *time.Duration // written in the file as whole milliseconds
	flag *bool
	ref  bool // an instance name: written only when set
}

// settings lists the block's keys in file order. The table is the one
// list: the schema, the decoder and the canonical HCL are derived from it.
func (co *Coordinator) settings() []setting {
	c := &co.Config
	return []setting{
		{name: "per_turn_injection", str: (*string)(&c.PerTurnInjection)},
		{name: "selection", str: (*string)(&c.Selection)},
		{name: "selector_fallback", flag: &c.SelectorFallback},
		{name: "max_entries", num: &c.MaxEntries},
		{name: "thread_neighbours", num: &c.ThreadNeighbours},
		{name: "recall_timeout_ms", ms: &c.RecallTimeout},
		{name: "recall_failure_policy", str: (*string)(&c.RecallFailurePolicy)},
		{name: "defang_inbound", flag: &c.DefangInbound},
		{name: "instruction_header", str: &c.InstructionHeader},
		{name: "operator_scope", str: (*string)(&c.OperatorScope)},
		{name: "selector", str: &co.Selector, ref: true},
		{name: "mob_resolver", str: &co.MobResolver, ref: true},
		{name: "operator_resolver", str: &co.OperatorResolver, ref: true},
		{name: "compactor", str: &co.Compactor, ref: true},
		{name: "session_cache_size", num: &c.SessionCacheSize},
		{name: "resolver_cache_ms", ms: &c.ResolverCacheTTL},
		{name: "sweep_timeout_ms", ms: &c.SweepTimeout},
		{name: "turn_budget_bytes", num: &c.Budgets.TurnBytes},
		{name: "session_budget_bytes", num: &c.Budgets.SessionBytes},
		{name: "build_budget_bytes", num: &c.Budgets.BuildBytes},
	}
}

var coordinatorSchema = func() *hcl.BodySchema {
	s := &hcl.BodySchema{}
	for _, k := range new(Coordinator).settings() {
		s.Attributes = append(s.Attributes, hcl.AttributeSchema{Name: k.name})
	}
	return s
}()

func defaultCoordinator() Coordinator {
	return Coordinator{Config: coordinator.DefaultConfig()}
}

func (d *decoder) coordinator(b *hcl.Block) {
	d.at("coordinator", b.DefRange)
	content, diags := b.Body.Content(coordinatorSchema)
	d.diags = append(d.diags, diags...)
	a := content.Attributes
	for _, k := range d.cfg.Coordinator.settings() {
		key := "coordinator." + k.name
		switch {
		case k.str != nil:
			d.str(a, k.name, key, k.str)
		case k.num != nil:
			d.integer(a, k.name, key, k.num)
		case k.ms != nil:
			d.millis(a, k.name, key, k.ms)
		case k.flag != nil:
			d.boolean(a, k.name, key, k.flag)
		}
	}
}

// CoordinatorConfig is the coordinator's configuration: the block's
// settings with the top-level default realm.
func (c *Config) CoordinatorConfig() coordinator.Config {
	cc := c.Coordinator.Config
	cc.DefaultRealm = c.DefaultRealm
	return cc
}

// validateCoordinator applies the coordinator's own rules and reports each
// broken one at the line that set it.
func (c *Config) validateCoordinator(p *problems) {
	err := c.CoordinatorConfig().Validate()
	var errs []error
	if multi, ok := err.(interface{ Unwrap() []error }); ok {
		errs = multi.Unwrap()
	} else if err != nil {
		errs = []error{err}
	}
	for _, err := range errs {
		var fe *sdk.FieldError
		if !errors.As(err, &fe) {
			p.add("", "Invalid coordinator settings", "%v.", err)
			continue
		}
		key, name := fe.Field, strings.TrimPrefix(fe.Field, "coordinator.")
		if name == "default_realm" {
			if checkName(c.DefaultRealm) != "" {
				continue // validateTop already reported it
			}
			key = name
		}
		p.add(c.coordinatorKeyAt(key, fe.Problem), "Invalid "+name, "%s %s.", name, fe.Problem)
	}
	co := &c.Coordinator
	for _, ref := range []struct {
		name, value string
		kind        sdk.PluginKind
	}{
		{"selector", co.Selector, sdk.KindSelector},
		{"mob_resolver", co.MobResolver, sdk.KindMobResolver},
		{"operator_resolver", co.OperatorResolver, sdk.KindOperatorResolver},
		{"compactor", co.Compactor, sdk.KindCompactor},
	} {
		if ref.value != "" {
			c.checkRef(p, "coordinator."+ref.name, "coordinator."+ref.name, ref.value, ref.kind)
		}
	}
}

// coordinatorKeyAt answers where to report a coordinator problem: its own
// key when the file set it, else another key of the block that the
// problem names and the file set (a relation such as "exceeds
// session_budget_bytes 511" broken by that line), else the block itself.
func (c *Config) coordinatorKeyAt(key, problem string) string {
	if _, ok := c.pos[key]; ok || !strings.HasPrefix(key, "coordinator.") {
		return key
	}
	for _, k := range c.Coordinator.settings() {
		other := "coordinator." + k.name
		if _, ok := c.pos[other]; ok && strings.Contains(problem, k.name) {
			return other
		}
	}
	return "coordinator"
}

func (c *Config) coordinatorHCL(body *hclwrite.Body) {
	body.AppendNewline()
	b := body.AppendNewBlock("coordinator", nil).Body()
	for _, k := range c.Coordinator.settings() {
		var v cty.Value
		switch {
		case k.name == "compactor" && c.ImplicitCompactor:
			continue // the default, added again by Load
		case k.name == "compactor" && *k.str == "":
			v = cty.StringVal("") // compaction turned off, as the file said
		case k.ref && *k.str == "":
			continue
		case k.str != nil:
			v = cty.StringVal(*k.str)
		case k.num != nil:
			v = cty.NumberIntVal(int64(*k.num))
		case k.ms != nil:
			v = cty.NumberIntVal(k.ms.Milliseconds())
		case k.flag != nil:
			v = cty.BoolVal(*k.flag)
		default:
			panic(fmt.Sprintf("config: coordinator setting %s has no field", k.name))
		}
		b.SetAttributeValue(k.name, v)
	}
}
