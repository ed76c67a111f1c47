// Package template is memhost's deterministic compactor: no model, no
// network, the same summary for the same input on every host. A summary is
// a header, then one section per class of line (sdk/classify): standing
// instructions, decisions, open items, facts, and the other messages, tool
// calls and results marked. Under the byte cap a class never loses a line
// to a less important one; standing instructions are kept oldest first
// until a later one retires them ("stop answering in French"), every other
// class newest first: losing an instruction at compaction is what agent
// users complain about most, losing small talk is not.
package template

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/memhost/memhost/sdk"
	"github.com/memhost/memhost/sdk/classify"
)

// Version is the plugin's version, reported by Info and the manifest.
const Version = "0.1.0"

// Config bounds and defaults.
const (
	DefaultMaxBytes  = 4096
	MinMaxBytes      = 256
	MaxMaxBytes      = 1 << 20
	DefaultLineBytes = 400
	MinLineBytes     = 40
	DefaultHeader    = "Summary of earlier conversation"
	MaxHeaderBytes   = 200
)

// Section headings, one per class, most important first; the next
// compaction parses its carry-over by them.
var headings = map[classify.Class]string{
	classify.Instruction: "Standing instructions:",
	classify.Decision:    "Decisions:",
	classify.OpenItem:    "Open items:",
	classify.Fact:        "Facts:",
	classify.Chatter:     "Earlier messages:",
}

// legacyHeading is the one key section of summaries written before the
// classes: its lines are classified afresh.
const legacyHeading = "Instructions, decisions and constraints:"

const bullet = "- "

// shares caps each class's part of the budget on the first pass, so a flood
// of facts or open items cannot fill a summary; what is left over goes to
// the classes again in order. Instructions are never capped, and no class
// takes budget a more important one could still use.
var shares = map[classify.Class]float64{
	classify.Instruction: 1, classify.Decision: 0.4, classify.OpenItem: 0.25, classify.Fact: 0.25, classify.Chatter: 1,
}

const configSchema = `{
  "type": "object",
  "additionalProperties": false,
  "properties": {
    "max_bytes":  {"type": "integer", "minimum": 256, "maximum": 1048576, "default": 4096, "description": "byte cap of a summary (the host's cap applies too)"},
    "line_bytes": {"type": "integer", "minimum": 40, "default": 400, "description": "byte cap of one message's line"},
    "header":     {"type": "string", "maxLength": 200, "pattern": "^[^\\r\\n]*\\S[^\\r\\n]*$", "default": "Summary of earlier conversation"}
  }
}`

// Config is the plugin's configuration.
type Config struct {
	MaxBytes  int    `json:"max_bytes"`
	LineBytes int    `json:"line_bytes"`
	Header    string `json:"header"`
}

// ParseConfig decodes and validates a configuration, defaults filled.
func ParseConfig(raw json.RawMessage) (Config, error) {
	c := Config{MaxBytes: DefaultMaxBytes, LineBytes: DefaultLineBytes, Header: DefaultHeader}
	if err := sdk.DecodeConfig(raw, &c); err != nil {
		return Config{}, fmt.Errorf("template config: %w", err)
	}
	bad := func(format string, args ...any) (Config, error) {
		return Config{}, fmt.Errorf("template config: "+format+": %w", append(args, sdk.ErrInvalid)...)
	}
	switch {
	case c.MaxBytes < MinMaxBytes || c.MaxBytes > MaxMaxBytes:
		return bad("max_bytes %d is outside %d..%d", c.MaxBytes, MinMaxBytes, MaxMaxBytes)
	case c.LineBytes < MinLineBytes || c.LineBytes > c.MaxBytes:
		return bad("line_bytes %d is outside %d..max_bytes (%d)", c.LineBytes, MinLineBytes, c.MaxBytes)
	case strings.TrimSpace(c.Header) == "":
		return bad("header must not be empty")
	case len(c.Header) > MaxHeaderBytes || strings.ContainsAny(c.Header, "\r\n"):
		return bad("header must be one line of at most %d bytes", MaxHeaderBytes)
	}
	return c, nil
}

// Compactor is the template compactor plugin.
type Compactor struct {
	mu  sync.RWMutex
	cfg *Config
}

// New answers an unconfigured compactor.
func New() *Compactor { return &Compactor{} }

func (c *Compactor) Info() sdk.Info {
	return sdk.Info{
		Name: "template", Version: Version, Kinds: []sdk.PluginKind{sdk.KindCompactor},
		Protocols: []int{sdk.ProtocolVersion}, ConfigSchema: json.RawMessage(configSchema),
	}
}

func (c *Compactor) Configure(_ context.Context, raw json.RawMessage) error {
	cfg, err := ParseConfig(raw)
	if err != nil {
		return err
	}
	c.mu.Lock()
	c.cfg = &cfg
	c.mu.Unlock()
	return nil
}

// ErrNotConfigured answers a Compact before Configure.
var ErrNotConfigured = fmt.Errorf("template compactor is not configured: %w", sdk.ErrUnavailable)

// Compact renders the summary of the carry-over and the evicted messages.
func (c *Compactor) Compact(ctx context.Context, req sdk.CompactRequest) (sdk.Message, error) {
	if err := ctx.Err(); err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			return sdk.Message{}, fmt.Errorf("template compactor: %w", sdk.ErrDeadline)
		}
		return sdk.Message{}, fmt.Errorf("template compactor: %w: %w", err, sdk.ErrUnavailable)
	}
	c.mu.RLock()
	cfg := c.cfg
	c.mu.RUnlock()
	if cfg == nil {
		return sdk.Message{}, ErrNotConfigured
	}
	limit := cfg.MaxBytes
	if req.MaxBytes > 0 && req.MaxBytes < limit {
		limit = req.MaxBytes
	}
	return sdk.Message{Role: "system", Content: Render(*cfg, limit, req.CarryOver, req.Evicted)}, nil
}

// line is one line of a summary and what it is kept as.
type line struct {
	text string
	kind classify.Message
}

// Render is the summary, at most limit bytes (limit must leave room for
// the header; Compact guarantees at least MinMaxBytes).
func Render(cfg Config, limit int, carry *sdk.Message, evicted []sdk.Message) string {
	var lines []line
	if carry != nil {
		lines = parseCarry(carry.Content, cfg.Header, cfg.LineBytes)
	}
	for _, m := range evicted {
		lines = append(lines, messageLines(m, cfg.LineBytes)...)
	}
	lines = dedup(retire(lines))

	header := cfg.Header
	budget := limit - len(header) - 1
	kept := fit(lines, budget)

	var b strings.Builder
	b.WriteString(header)
	b.WriteByte('\n')
	for _, class := range classify.Classes {
		first := true
		for i, l := range lines {
			if !kept[i] || l.kind.Class != class {
				continue
			}
			if first {
				b.WriteString(headings[class] + "\n")
				first = false
			}
			b.WriteString(l.text + "\n")
		}
	}
	out := strings.TrimRight(b.String(), "\n")
	return sdk.CutText(out, limit)
}

// retire drops every instruction a later one withdraws or replaces (and a
// retraction that did its work).
func retire(lines []line) []line {
	kinds := make([]classify.Message, len(lines))
	for i, l := range lines {
		kinds[i] = l.kind
	}
	dropped := classify.Retired(kinds)
	out := lines[:0:0]
	for i, l := range lines {
		if !dropped[i] {
			out = append(out, l)
		}
	}
	return out
}

// dedup drops repeated lines: an instruction keeps its first place (it has
// stood since then), any other line its newest.
func dedup(lines []line) []line {
	seen := map[string]bool{}
	keep := make([]bool, len(lines))
	for i, l := range lines {
		if l.kind.Class == classify.Instruction && !seen[l.text] {
			seen[l.text], keep[i] = true, true
		}
	}
	for i := len(lines) - 1; i >= 0; i-- {
		if l := lines[i]; l.kind.Class != classify.Instruction && !seen[l.text] {
			seen[l.text], keep[i] = true, true
		}
	}
	out := lines[:0:0]
	for i, l := range lines {
		if keep[i] {
			out = append(out, l)
		}
	}
	return out
}

// fit chooses the lines that fit budget bytes: classes in order of
// importance, instructions oldest first (a standing instruction is never
// pushed out by newer ones), every other class newest first; a first pass
// holds each class to its share, a second hands out what is left.
func fit(lines []line, budget int) []bool {
	kept := make([]bool, len(lines))
	opened := map[classify.Class]bool{}
	for pass := range 2 {
		for _, class := range classify.Classes {
			limit := budget
			if pass == 0 {
				limit = min(budget, int(shares[class]*float64(budget)))
			}
			used := 0
			try := func(i int) {
				l := lines[i]
				if kept[i] || l.kind.Class != class {
					return
				}
				cost := len(l.text) + 1
				if !opened[class] {
					cost += len(headings[class]) + 1
				}
				if cost > limit-used || cost > budget {
					return
				}
				kept[i], opened[class] = true, true
				used += cost
				budget -= cost
			}
			if class == classify.Instruction {
				for i := range lines {
					try(i)
				}
			} else {
				for i := len(lines) - 1; i >= 0; i-- {
					try(i)
				}
			}
		}
	}
	return kept
}

// parseCarry reads a previous summary back into lines. A summary this
// plugin wrote is read by its headings, its first line (the header)
// skipped, also when no heading follows it (a summary of nothing); any
// other text (another compactor's, or an older version's key section) is
// classified afresh.
func parseCarry(s, header string, lineBytes int) []line {
	byHeading := map[string]classify.Class{}
	for c, h := range headings {
		byHeading[h] = c
	}
	rows := strings.Split(s, "\n")
	ours := false
	for _, r := range rows {
		if _, ok := byHeading[strings.TrimSpace(r)]; ok || strings.TrimSpace(r) == legacyHeading {
			ours = true
		}
	}
	var out []line
	section, known := classify.Chatter, false
	for i, r := range rows {
		r = strings.TrimSpace(r)
		if c, ok := byHeading[r]; ok {
			section, known = c, true
			continue
		}
		switch {
		case r == "":
			continue
		case r == legacyHeading:
			known = false
			continue
		case i == 0 && (ours || r == strings.TrimSpace(header)):
			continue // this plugin's previous header
		}
		role, text := "earlier", r
		if rest, ok := strings.CutPrefix(r, bullet); ok {
			if rl, tx, ok := strings.Cut(rest, ": "); ok && !strings.ContainsAny(rl, " ") {
				role, text = rl, tx
			} else {
				text = rest
			}
		}
		text = oneLine(text)
		// A foreign summary speaks for the conversation: its rules are
		// read as the system's.
		kind := classify.Classify(classRole(role), text)
		if known {
			kind.Class = section
			if section == classify.Instruction && len(kind.Topic()) == 0 {
				kind = classify.Classify("system", text)
				kind.Class = section
			}
		}
		out = append(out, line{text: cutLine(bullet+role+": "+text, lineBytes), kind: kind})
	}
	return out
}

func classRole(role string) string {
	if role == "earlier" {
		return "system"
	}
	return role
}

// messageLines renders one message as its summary lines: one line per
// directive sentence of an instruction (each stands, and is retired, on
// its own), one line for any other message. Tool output is never an
// instruction: text a tool returned does not get to instruct the agent.
func messageLines(m sdk.Message, lineBytes int) []line {
	text := oneLine(m.Content)
	if text == "" {
		return nil
	}
	role := oneLine(m.Role)
	if role == "" || strings.ContainsAny(role, " :") {
		role = "message"
	}
	switch strings.ToLower(role) {
	case "tool", "function", "tool_result":
		if !strings.HasPrefix(text, "[tool result") {
			text = "[tool result] " + text
		}
	}
	// Classified with its lines, not as the one line it is written on: a
	// tool result or a document in a user's message is known by them (a
	// bracketed run, its further lines indented), and does not instruct.
	kind := classify.Classify(role, m.Content)
	if kind.Class != classify.Instruction {
		return []line{{text: cutLine(bullet+role+": "+text, lineBytes), kind: kind}}
	}
	out := make([]line, 0, len(kind.Sentences))
	for _, s := range kind.Sentences {
		out = append(out, line{text: cutLine(bullet+role+": "+s, lineBytes), kind: classify.Classify(role, s)})
	}
	return out
}

// oneLine collapses all whitespace (line breaks included) to single spaces.
func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// cutLine shortens a line to max bytes, marking the cut.
func cutLine(s string, max int) string {
	if len(s) <= max {
		return s
	}
	const mark = " …"
	return sdk.CutText(s, max-len(mark)) + mark
}
