// Package template is memhost's deterministic compactor: no model, no
// network, the same summary for the same input on every host. A summary is
// a header, then the lines that state instructions, decisions or
// constraints, then the other messages, one line each, tool calls and
// results marked. Under the byte cap the key lines are kept ahead of the
// chatter and, within each section, the newest lines ahead of the oldest:
// losing an instruction at compaction is what agent users complain about
// most, losing small talk is not.
package template

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"

	"github.com/memhost/memhost/sdk"
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

// Section headings; the next compaction parses its carry-over by them.
const (
	keyHeading   = "Instructions, decisions and constraints:"
	otherHeading = "Earlier messages:"
	bullet       = "- "
)

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

// Render is the summary, at most limit bytes (limit must leave room for
// the header; Compact guarantees at least MinMaxBytes).
func Render(cfg Config, limit int, carry *sdk.Message, evicted []sdk.Message) string {
	var keys, others []string
	if carry != nil {
		keys, others = parseCarry(carry.Content, cfg.LineBytes)
	}
	for _, m := range evicted {
		line, key := messageLine(m, cfg.LineBytes)
		if line == "" {
			continue
		}
		if key {
			keys = append(keys, line)
		} else {
			others = append(others, line)
		}
	}
	keys = dedupKeepLast(keys)

	header := cfg.Header
	budget := limit - len(header) - 1
	// Newest first within each section, key lines before any chatter.
	keptKeys := fitNewest(keys, &budget, len(keyHeading)+1)
	keptOthers := fitNewest(others, &budget, len(otherHeading)+1)

	var b strings.Builder
	b.WriteString(header)
	b.WriteByte('\n')
	if len(keptKeys) > 0 {
		b.WriteString(keyHeading + "\n")
		for _, l := range keptKeys {
			b.WriteString(l + "\n")
		}
	}
	if len(keptOthers) > 0 {
		b.WriteString(otherHeading + "\n")
		for _, l := range keptOthers {
			b.WriteString(l + "\n")
		}
	}
	out := strings.TrimRight(b.String(), "\n")
	return cutUTF8(out, limit)
}

// fitNewest keeps the newest lines that fit the budget (each plus a line
// break, and the section heading once), answering them in original order.
func fitNewest(lines []string, budget *int, heading int) []string {
	if len(lines) == 0 || *budget < heading {
		return nil
	}
	left := *budget - heading
	first := len(lines)
	for i := len(lines) - 1; i >= 0; i-- {
		n := len(lines[i]) + 1
		if n > left {
			break
		}
		left -= n
		first = i
	}
	if first == len(lines) {
		return nil
	}
	*budget = left
	return lines[first:]
}

// parseCarry splits a previous summary into its key lines and its other
// lines. A summary this plugin wrote is read by its headings; any other
// text (another compactor's) has each line classified afresh.
func parseCarry(s string, lineBytes int) (keys, others []string) {
	lines := strings.Split(s, "\n")
	ours := strings.Contains(s, "\n"+keyHeading+"\n") || strings.Contains(s, "\n"+otherHeading+"\n")
	section := ""
	for i, l := range lines {
		l = strings.TrimSpace(l)
		switch {
		case l == "":
			continue
		case l == keyHeading || l == otherHeading:
			section = l
			continue
		case i == 0 && ours:
			continue // this plugin's previous header
		}
		if !strings.HasPrefix(l, bullet) {
			l = bullet + "earlier: " + oneLine(l)
		}
		l = cutLine(l, lineBytes)
		switch section {
		case keyHeading:
			keys = append(keys, l)
		case otherHeading:
			others = append(others, l)
		default:
			if statesRule(l) {
				keys = append(keys, l)
			} else {
				others = append(others, l)
			}
		}
	}
	return keys, others
}

// messageLine renders one message as a bullet line and says whether it
// states an instruction, decision or constraint. Tool output is never a
// key line: text a tool returned does not get to instruct the agent.
func messageLine(m sdk.Message, lineBytes int) (string, bool) {
	text := oneLine(m.Content)
	if text == "" {
		return "", false
	}
	role := oneLine(m.Role)
	tool := false
	switch strings.ToLower(role) {
	case "tool", "function", "tool_result":
		tool = true
		if !strings.HasPrefix(text, "[tool result") {
			text = "[tool result] " + text
		}
	}
	if strings.HasPrefix(text, "[tool call") || strings.HasPrefix(text, "[tool result") {
		tool = true
	}
	return cutLine(bullet+role+": "+text, lineBytes), !tool && statesRule(text)
}

// ruleWords mark a sentence as an instruction, decision or constraint.
// Matched on whole words of the lower-cased text.
var ruleWords = []string{
	"always", "never", "must", "mustn't", "should", "shouldn't", "don't", "do not", "make sure", "ensure",
	"remember", "important", "instruction", "instructions", "rule", "rules", "constraint", "constraints",
	"require", "requires", "required", "requirement", "decided", "decide", "decision", "agreed",
	"from now on", "going forward", "prefer", "preference", "deadline", "only use", "avoid", "forbidden",
	"not allowed", "we will", "let's go with", "use only",
}

func statesRule(text string) bool {
	lower := " " + strings.Map(func(r rune) rune {
		if unicode.IsLetter(r) || unicode.IsDigit(r) || r == '\'' {
			return unicode.ToLower(r)
		}
		return ' '
	}, text) + " "
	lower = strings.Join(strings.Fields(lower), " ")
	lower = " " + lower + " "
	for _, w := range ruleWords {
		if strings.Contains(lower, " "+w+" ") {
			return true
		}
	}
	return false
}

// oneLine collapses all whitespace (line breaks included) to single spaces.
func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// cutLine shortens a line to max bytes, marking the cut.
func cutLine(s string, max int) string {
	if len(s) <= max {
		return s
	}
	const mark = " …"
	return cutUTF8(s, max-len(mark)) + mark
}

func cutUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// dedupKeepLast drops repeated lines, keeping each one's newest place, so
// an instruction restated every slice does not crowd out the others.
func dedupKeepLast(lines []string) []string {
	seen := map[string]bool{}
	out := make([]string, 0, len(lines))
	for i := len(lines) - 1; i >= 0; i-- {
		if seen[lines[i]] {
			continue
		}
		seen[lines[i]] = true
		out = append(out, lines[i])
	}
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return out
}
