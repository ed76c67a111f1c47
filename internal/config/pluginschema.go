package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/memhost/memhost/sdk"
	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"github.com/zclconf/go-cty/cty"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
)

// A plugin instance's config is checked at load against the JSON Schema
// its plugin's manifest declares (config_schema), before any plugin starts,
// so a misspelled key points at its line in the config file. The plugin's
// own Configure still validates: the schema is the first line, not the
// only one.

// errSchemaRef refuses every external $ref: a plugin's schema must be
// self-contained, and the host never reads a file or URL a manifest names.
var errSchemaRef = errors.New("external references are not allowed in a plugin's config_schema")

type noLoader struct{}

func (noLoader) Load(string) (any, error) { return nil, errSchemaRef }

// Plugin is what the host knows of a discovered plugin before it starts
// one: the kinds its manifest declares and its config_schema (nil: none),
// or, for a manifest the plugin directory refused, why.
type Plugin struct {
	Kinds   []sdk.PluginKind
	Schema  json.RawMessage
	Refused string
}

// CheckPlugins checks every instance against the plugin directory, whose
// plugins maps a plugin (manifest) name to what its manifest declares: the
// plugin is there and not refused, serves the instance's kind, and the instance's config
// passes its schema. A plugin that declares no schema leaves its config to
// its own Configure. A remote instance is checked when dialled. Every
// problem of every instance is reported in one *Error, each at the config
// file line of the key, else of the attribute, else of the instance block,
// before the host writes anything.
func (c *Config) CheckPlugins(plugins map[string]Plugin) error {
	var diags hcl.Diagnostics
	compiled := map[string]*compiledSchema{}
	for i, in := range c.Instances {
		if in.Remote != nil {
			continue
		}
		key := fmt.Sprintf("instance[%d]", i)
		what := fmt.Sprintf("%s %q config", in.Kind, in.Name)
		p, found := plugins[in.Plugin]
		switch {
		case !found:
			diags = append(diags, c.diag(key+".plugin", "Unknown plugin",
				"%s %q: no plugin named %q in the plugin directory %s (%s).", in.Kind, in.Name, in.Plugin, c.PluginDir, servingKind(plugins, in.Kind)))
			continue
		case p.Refused != "":
			// Not "no plugin named": its manifest is there, and the
			// operator needs the reason it was refused.
			diags = append(diags, c.diag(key+".plugin", "Refused plugin",
				"%s %q: plugin %q in the plugin directory %s was refused: %s.", in.Kind, in.Name, in.Plugin, c.PluginDir, p.Refused))
			continue
		case !slices.Contains(p.Kinds, in.Kind):
			diags = append(diags, c.diag(key+".plugin", "Wrong plugin kind",
				"%s %q: plugin %q serves %s, not %s (%s).", in.Kind, in.Name, in.Plugin, kindList(p.Kinds), in.Kind, servingKind(plugins, in.Kind)))
			continue
		}
		raw := p.Schema
		if len(bytes.TrimSpace(raw)) == 0 {
			continue
		}
		sch, ok := compiled[in.Plugin]
		if !ok {
			var err error
			if sch, err = compileSchema(in.Plugin, raw); err != nil {
				diags = append(diags, c.diag(key, "Invalid plugin config schema",
					"%s: plugin %s declares a config_schema this host cannot use (%v); fix or rebuild the plugin's manifest.", what, in.Plugin, err))
				continue
			}
			compiled[in.Plugin] = sch
		}
		v, err := jsonschema.UnmarshalJSON(bytes.NewReader(in.Config))
		if err != nil {
			diags = append(diags, c.diag(key+".config", "Invalid config", "%s: %v.", what, err))
			continue
		}
		var verr *jsonschema.ValidationError
		if err := sch.schema.Validate(v); errors.As(err, &verr) {
			for _, p := range sch.problems(verr) {
				diags = append(diags, c.diag(c.configKeyAt(key, p.path), "Invalid plugin config", "%s: %s.", what, p.text))
			}
		} else if err != nil {
			diags = append(diags, c.diag(key+".config", "Invalid config", "%s: %v.", what, err))
		}
	}
	if len(diags) > 0 {
		return newError(diags)
	}
	return nil
}

// servingKind names the directory's plugins that serve kind, for an
// instance that named the wrong one.
func servingKind(plugins map[string]Plugin, kind sdk.PluginKind) string {
	var names []string
	for name, p := range plugins {
		if slices.Contains(p.Kinds, kind) {
			names = append(names, name)
		}
	}
	if len(names) == 0 {
		return "none there serves " + string(kind) + "; see `memhost plugins list`"
	}
	slices.Sort(names)
	return "serving " + string(kind) + ": " + strings.Join(names, ", ")
}

func kindList(kinds []sdk.PluginKind) string {
	names := make([]string, len(kinds))
	for i, k := range kinds {
		names[i] = string(k)
	}
	return strings.Join(names, " and ")
}

// diag is a diagnostic at the recorded position of key, if any.
func (c *Config) diag(key, summary, detail string, args ...any) *hcl.Diagnostic {
	p := &problems{c: c}
	p.add(key, summary, detail, args...)
	return p.diags[0]
}

// configKeyAt answers the deepest recorded position along path inside an
// instance's config: the key itself, else an enclosing key, else the
// config attribute, else the block.
func (c *Config) configKeyAt(instance string, path []string) string {
	for n := len(path); n > 0; n-- {
		if k := configPathKey(instance, path[:n]); c.hasPos(k) {
			return k
		}
	}
	if c.hasPos(instance + ".config") {
		return instance + ".config"
	}
	return instance
}

func (c *Config) hasPos(key string) bool {
	_, ok := c.pos[key]
	return ok
}

// configPathKey names a value inside an instance's config in the position
// map; NUL separates the segments, since a key may hold any other byte.
func configPathKey(instance string, path []string) string {
	return instance + ".config\x00" + strings.Join(path, "\x00")
}

// recordConfigPositions records where each key and element of a config
// object literal is written, so a schema problem points at its line.
func (d *decoder) recordConfigPositions(instance string, e hcl.Expression, path []string) {
	switch e := e.(type) {
	case *hclsyntax.ObjectConsExpr:
		// HCL keeps the last of a repeated key, which would silently drop
		// the first: the file is strict, as a manifest is.
		first := map[string]hcl.Range{}
		for _, item := range e.Items {
			k, diags := item.KeyExpr.Value(nil)
			if diags.HasErrors() || k.IsNull() || !k.IsKnown() || !k.Type().Equals(cty.String) {
				continue // the decoder reports a bad key
			}
			if r, dup := first[k.AsString()]; dup {
				d.errorf(item.KeyExpr.Range().Ptr(), "Duplicate key",
					"config key %q is set twice; the first is at %s:%d.", k.AsString(), r.Filename, r.Start.Line)
				continue
			}
			first[k.AsString()] = item.KeyExpr.Range()
			p := append(slices.Clip(path), k.AsString())
			d.at(configPathKey(instance, p), hcl.RangeBetween(item.KeyExpr.Range(), item.ValueExpr.Range()))
			d.recordConfigPositions(instance, item.ValueExpr, p)
		}
	case *hclsyntax.TupleConsExpr:
		for i, x := range e.Exprs {
			p := append(slices.Clip(path), strconv.Itoa(i))
			d.at(configPathKey(instance, p), x.Range())
			d.recordConfigPositions(instance, x, p)
		}
	}
}

type compiledSchema struct {
	schema *jsonschema.Schema
	doc    any // the schema document, to list an object's allowed keys
}

func compileSchema(plugin string, raw json.RawMessage) (*compiledSchema, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, err
	}
	comp := jsonschema.NewCompiler()
	comp.UseLoader(noLoader{})
	comp.DefaultDraft(jsonschema.Draft2020)
	url := "memhost-plugin:///" + plugin + "/config_schema.json"
	if err := comp.AddResource(url, doc); err != nil {
		return nil, err
	}
	sch, err := comp.Compile(url)
	if err != nil {
		return nil, err
	}
	return &compiledSchema{schema: sch, doc: doc}, nil
}

// problem is one broken rule at a path inside the config.
type problem struct {
	path []string
	text string
}

var printer = message.NewPrinter(language.Und)

// problems flattens a validation error into its leaves, one per broken
// rule, in the words a config author needs: the key path first.
func (s *compiledSchema) problems(e *jsonschema.ValidationError) []problem {
	if len(e.Causes) > 0 {
		var out []problem
		for _, c := range e.Causes {
			out = append(out, s.problems(c)...)
		}
		return out
	}
	at := func(path []string, format string, args ...any) problem {
		name := strings.Join(path, ".")
		if name == "" {
			name = "(the whole config)"
		}
		return problem{path: path, text: name + ": " + fmt.Sprintf(format, args...)}
	}
	loc := slices.Clip(e.InstanceLocation)
	switch k := e.ErrorKind.(type) {
	case *kind.AdditionalProperties:
		allowed := s.allowedKeys(e.SchemaURL)
		var out []problem
		for _, p := range k.Properties {
			if len(allowed) > 0 {
				out = append(out, at(append(loc, p), "unknown key (the plugin's schema allows %s)", strings.Join(allowed, ", ")))
			} else {
				out = append(out, at(append(loc, p), "unknown key (the plugin's schema allows no keys here)"))
			}
		}
		return out
	case *kind.Required:
		var out []problem
		for _, m := range k.Missing {
			out = append(out, at(loc, "the required key %s is missing", m))
		}
		return out
	case *kind.Pattern:
		// The message would quote the value, and a key meant to name a
		// variable most often holds the secret pasted there by mistake;
		// the position already points at it.
		return []problem{at(loc, "the value does not match the pattern %s", k.Want)}
	case *kind.Format:
		return []problem{at(loc, "the value is not a valid %s", k.Want)}
	}
	return []problem{at(loc, "%s", e.ErrorKind.LocalizedString(printer))}
}

// allowedKeys lists the properties of the schema object at schemaURL's
// fragment (a JSON pointer into this schema), sorted.
func (s *compiledSchema) allowedKeys(schemaURL string) []string {
	_, frag, _ := strings.Cut(schemaURL, "#")
	node := s.doc
	for _, tok := range strings.Split(strings.TrimPrefix(frag, "/"), "/") {
		if tok == "" {
			continue
		}
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		switch n := node.(type) {
		case map[string]any:
			node = n[tok]
		case []any:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(n) {
				return nil
			}
			node = n[i]
		default:
			return nil
		}
	}
	obj, _ := node.(map[string]any)
	props, _ := obj["properties"].(map[string]any)
	keys := make([]string, 0, len(props))
	for k := range props {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
