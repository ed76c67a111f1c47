package compaction

import (
	"bytes"
	"encoding/json"
	"fmt"
	"github.com/memhost/memhost/sdk"
	"slices"
	"strings"

	"github.com/memhost/memhost/coordinator"
)

// Markers of non-text blocks in a flattened message. The template
// compactor recognises the tool markers; any compactor reads them as text.
const (
	ToolCallMarker   = "[tool call"
	ToolResultMarker = "[tool result]"
)

// maxToolInputBytes bounds the arguments of a tool call kept in a line:
// the call's name and the start of its input say what happened.
const maxToolInputBytes = 512

// Flatten renders message content (a string or blocks, as the HTTP API
// carries it) as the text a compactor sees: text blocks as they are, tool
// calls as "[tool call: name] input" (the input's escapes decoded), tool
// results as "[tool result] text", any other block as "[type]" and the
// texts a model reads in it.
func Flatten(c coordinator.Content) string {
	if !c.IsBlocks() {
		return c.String()
	}
	var parts []string
	for _, b := range c.Blocks() {
		switch b.Type {
		case coordinator.BlockText, "input_text", "output_text":
			// The OpenAI Responses API's text blocks are text as well.
			parts = append(parts, coordinator.BlockContent(b).Text())
		case coordinator.BlockToolResult:
			text := ""
			if b.Nested != nil {
				text = Flatten(*b.Nested)
			}
			parts = append(parts, quotedBlock(ToolResultMarker+" "+text))
		case "tool_use", "tool_call", "function_call":
			parts = append(parts, quotedBlock(toolCall(b.Raw)))
		default:
			// Any other block by its type and the texts a model reads in
			// it (a search result's title and content...); none for media.
			parts = append(parts, quotedBlock("["+b.Type+"] "+coordinator.BlockContent(b).Text()))
		}
	}
	return strings.Join(parts, "\n")
}

// ChatExtras are the OpenAI Chat Completions message fields beside its
// content that a summary needs: the speaker's name, the assistant's tool
// calls (each {"id","type","function":{"name","arguments"}}), a legacy
// function call ({"name","arguments"}) and a refusal.
type ChatExtras struct {
	Name         string
	ToolCalls    []json.RawMessage
	FunctionCall json.RawMessage
	Refusal      *string
}

// FlattenChat is Flatten for a chat message with its extras: the content,
// then a refusal and each call as a tool call block reads, the whole led
// by the speaker's name when there is one ("alice: …"). A call that is
// not an object (or whose function is not) is refused at its field
// ("tool_calls[1]", "function_call"): the summary would read it as a call
// of nothing.
func FlattenChat(c coordinator.Content, x ChatExtras) (string, error) {
	parts := []string{Flatten(c)}
	if x.Refusal != nil && *x.Refusal != "" {
		parts = append(parts, quotedBlock("[refusal] "+*x.Refusal))
	}
	for j, raw := range x.ToolCalls {
		fn := function(raw)
		if !isObject(raw) || present(fn) && !isObject(fn) {
			return "", &sdk.FieldError{Field: fmt.Sprintf("tool_calls[%d]", j), Problem: `must be an object ({"id","type","function":{"name","arguments"}})`, Err: sdk.ErrInvalid}
		}
		parts = append(parts, quotedBlock(toolCall(fn)))
	}
	if present(x.FunctionCall) {
		if !isObject(x.FunctionCall) {
			return "", &sdk.FieldError{Field: "function_call", Problem: `must be an object ({"name","arguments"}) or null`, Err: sdk.ErrInvalid}
		}
		parts = append(parts, quotedBlock(toolCall(function(x.FunctionCall))))
	}
	text := strings.Join(slices.DeleteFunc(parts, func(s string) bool { return s == "" }), "\n")
	if x.Name != "" {
		// An empty message has no block to set apart, and reads as it
		// did before the rule (the hash chains of absorbed ones match).
		if text == "" || leadsWithText(c) {
			text = x.Name + ": " + text
		} else {
			// On a line of its own: before a quoted block, the name would
			// make the block's first line read as the speaker's own words.
			text = x.Name + ":\n" + text
		}
	}
	return text, nil
}

// leadsWithText reports whether c's flattened text begins with the
// message's own words (a string, or a text block first) rather than a
// quoted block.
func leadsWithText(c coordinator.Content) bool {
	if !c.IsBlocks() {
		return c.String() != ""
	}
	blocks := c.Blocks()
	if len(blocks) == 0 {
		return false
	}
	switch blocks[0].Type {
	case coordinator.BlockText, "input_text", "output_text":
		return true
	}
	return false
}

// function answers a call's "function" member when it has one, as an
// OpenAI tool call does, else the call itself.
func function(raw json.RawMessage) json.RawMessage {
	var call struct {
		Function json.RawMessage `json:"function"`
	}
	if json.Unmarshal(raw, &call) == nil && len(call.Function) > 0 {
		return call.Function
	}
	return raw
}

// present reports whether a member was sent, and not as null.
func present(raw json.RawMessage) bool { return len(raw) > 0 && string(raw) != "null" }

// isObject reports whether raw is a JSON object.
func isObject(raw json.RawMessage) bool {
	var v map[string]json.RawMessage
	return json.Unmarshal(raw, &v) == nil && v != nil
}

// quotedBlock is a non-text block's text with its further lines indented,
// so the whole block reads as one quoted run beginning at its bracketed
// type (sdk/classify): a line of a tool result or a document never starts
// a line that reads as the user's own words.
func quotedBlock(s string) string {
	s = strings.TrimSpace(lineBreaks.Replace(s))
	return strings.ReplaceAll(s, "\n", "\n  ")
}

// lineBreaks turns every line break a reader may honour into "\n".
var lineBreaks = strings.NewReplacer("\r\n", "\n", "\r", "\n", "\v", "\n", "\f", "\n", "\u0085", "\n", "\u2028", "\n", "\u2029", "\n")

func toolCall(raw json.RawMessage) string {
	var call struct {
		Name      string          `json:"name"`
		Input     json.RawMessage `json:"input"`
		Arguments json.RawMessage `json:"arguments"`
	}
	_ = json.Unmarshal(raw, &call) // a block that decoded once decodes again
	args := call.Input
	if len(args) == 0 {
		args = call.Arguments
	}
	// OpenAI's arguments are JSON inside a string: read as the JSON.
	var inner string
	if len(args) > 0 && args[0] == '"' && json.Unmarshal(args, &inner) == nil && json.Valid([]byte(inner)) {
		args = json.RawMessage(inner)
	}
	out := ToolCallMarker
	if call.Name != "" {
		out += ": " + call.Name
	}
	out += "]"
	if len(args) > 0 && string(args) != "null" {
		s := readableJSON(args)
		if len(s) > maxToolInputBytes {
			s = cut(s, maxToolInputBytes) + " …"
		}
		out += " " + s
	}
	return out
}

// readableJSON answers JSON as a reader sees it: escapes decoded, so a
// marker spelled with \u escapes is as visible to the defanger as it is
// to a compactor that decodes them; raw JSON that does not decode is kept.
func readableJSON(raw json.RawMessage) string {
	var v any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if dec.Decode(&v) != nil {
		return string(raw)
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if enc.Encode(v) != nil {
		return string(raw)
	}
	return strings.TrimSuffix(b.String(), "\n")
}

func cut(s string, n int) string {
	for n > 0 && n < len(s) && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n]
}
