package coordinator

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/memhost/memhost/sdk"
)

// Content is a message body as the HTTP API carries it: either a plain
// string or a list of typed blocks. Text reaches a model from every block
// with a string "text" field (text, input_text, output_text, a tool result
// that has one, block types memhost does not know), from the "content" of
// a tool result (itself a string or blocks) and from a document's title,
// context and text source ({"type":"text","data":..} or
// {"type":"content","content":..}); everything else (images, tool calls,
// ...) is carried through verbatim. The zero Content is the empty string.
type Content struct {
	text     string
	blocks   []Block
	isBlocks bool
}

// Block is one content block. Type is always set. Text is the string
// "text" field (always read on a "text" block); Nested is the content of
// a "tool_result" block. Raw holds the block as received, so fields
// memhost does not know survive a round trip untouched.
type Block struct {
	Type   string
	Text   string
	Nested *Content
	Raw    json.RawMessage
	// hasText marks a string "text" field on a block of another type.
	hasText bool
	// extra are the other text-bearing fields, by JSON path.
	extra []textField
}

// textField is a text-bearing field of a block at a JSON path: a string,
// or content when nested is set.
type textField struct {
	path   []string
	text   string
	nested *Content
}

func (b *Block) carriesText() bool { return b.Type == BlockText || b.hasText }

// Block types that carry text.
const (
	BlockText       = "text"
	BlockToolResult = "tool_result"
)

// TextContent is content made of one plain string.
func TextContent(s string) Content { return Content{text: s} }

// BlockContent is content made of blocks.
func BlockContent(blocks ...Block) Content { return Content{blocks: blocks, isBlocks: true} }

// TextBlock is a {"type":"text"} block.
func TextBlock(s string) Block { return Block{Type: BlockText, Text: s} }

// IsBlocks reports whether the content is a block list rather than a string.
func (c Content) IsBlocks() bool { return c.isBlocks }

// Blocks answers the blocks (nil for string content). The slice is shared:
// do not modify it.
func (c Content) Blocks() []Block { return c.blocks }

// String answers the plain string of string content ("" for blocks).
func (c Content) String() string { return c.text }

// Text answers all the text the content carries, blocks joined by a line
// break: string content, text blocks and the text inside tool results.
func (c Content) Text() string {
	if !c.isBlocks {
		return c.text
	}
	var b strings.Builder
	c.appendText(&b, -1)
	return b.String()
}

// textPrefix answers about the first limit bytes of Text without copying
// the rest: enormous content costs no more than its start.
func (c Content) textPrefix(limit int) string {
	if !c.isBlocks {
		return cutUTF8(c.text, limit)
	}
	var b strings.Builder
	c.appendText(&b, limit)
	return cutUTF8(b.String(), limit)
}

// appendText appends the content's text until b holds limit bytes (no
// bound when limit < 0).
func (c Content) appendText(b *strings.Builder, limit int) {
	if limit >= 0 && b.Len() >= limit {
		return
	}
	if !c.isBlocks {
		if c.text != "" {
			if b.Len() > 0 {
				b.WriteByte('\n')
			}
			writeLimited(b, c.text, limit)
		}
		return
	}
	c.eachText(func(s string) bool {
		if limit >= 0 && b.Len() >= limit {
			return false
		}
		if s != "" {
			if b.Len() > 0 {
				b.WriteByte('\n')
			}
			writeLimited(b, s, limit)
		}
		return true
	})
}

// eachText calls fn with every text the content carries, in order, until
// fn answers false; it answers false when stopped.
func (c Content) eachText(fn func(string) bool) bool {
	if !c.isBlocks {
		return fn(c.text)
	}
	for i := range c.blocks {
		if !c.blocks[i].eachText(fn) {
			return false
		}
	}
	return true
}

func (b *Block) eachText(fn func(string) bool) bool {
	if b.carriesText() && !fn(b.Text) {
		return false
	}
	if b.Nested != nil && !b.Nested.eachText(fn) {
		return false
	}
	for _, f := range b.extra {
		if f.nested != nil {
			if !f.nested.eachText(fn) {
				return false
			}
		} else if !fn(f.text) {
			return false
		}
	}
	return true
}

func writeLimited(b *strings.Builder, s string, limit int) {
	if limit >= 0 {
		s = cutUTF8(s, max(limit-b.Len(), 0))
	}
	b.WriteString(s)
}

// maxNesting bounds tool results inside tool results, so hostile JSON
// cannot recurse without end.
const maxNesting = 8

// UnmarshalJSON accepts a string or a list of blocks; anything else is an
// error wrapping sdk.ErrInvalid.
func (c *Content) UnmarshalJSON(data []byte) error {
	return c.decode(data, 0)
}

func (c *Content) decode(data []byte, depth int) error {
	data = bytes.TrimSpace(data)
	if len(data) == 0 {
		return contentError("is empty")
	}
	switch data[0] {
	case '"':
		var s string
		if err := json.Unmarshal(data, &s); err != nil {
			return contentError("is not a valid JSON string")
		}
		*c = Content{text: s}
		return nil
	case '[':
		var raws []json.RawMessage
		if err := json.Unmarshal(data, &raws); err != nil {
			return contentError("is not a valid list of blocks")
		}
		blocks := make([]Block, len(raws))
		for i, raw := range raws {
			if err := blocks[i].decode(raw, depth); err != nil {
				return fmt.Errorf("content[%d]: %w", i, err)
			}
		}
		*c = Content{blocks: blocks, isBlocks: true}
		return nil
	case 'n':
		if string(data) == "null" {
			*c = Content{}
			return nil
		}
	}
	return contentError("must be a string or a list of blocks")
}

func contentError(problem string) error {
	return &sdk.FieldError{Field: "content", Problem: problem, Err: sdk.ErrInvalid}
}

func (b *Block) decode(raw json.RawMessage, depth int) error {
	if len(raw) == 0 || raw[0] != '{' {
		return contentError("a block must be a JSON object")
	}
	// Field names are matched exactly, as a model API reads them: a
	// "TEXT" field is not the text (encoding/json would take it for it,
	// and the defanged text would then sit beside the forged one).
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil {
		return contentError("a block is not a valid JSON object")
	}
	typ, ok := jsonString(fields["type"])
	if !ok || typ == "" {
		return contentError(`a block has no "type"`)
	}
	head := struct{ Text, Content, Title, Context, Source json.RawMessage }{
		fields["text"], fields["content"], fields["title"], fields["context"], fields["source"],
	}
	*b = Block{Type: typ, Raw: append(json.RawMessage(nil), raw...)}
	if b.Type == BlockText {
		if err := json.Unmarshal(head.Text, &b.Text); err != nil || len(head.Text) == 0 {
			return contentError(`a text block needs a string "text"`)
		}
	} else if s, ok := jsonString(head.Text); ok {
		b.Text, b.hasText = s, true
	}
	switch b.Type {
	case BlockToolResult:
		nested, err := decodeNested(head.Content, depth)
		if err != nil {
			return err
		}
		b.Nested = nested
	case blockDocument:
		for _, f := range []struct {
			name string
			raw  json.RawMessage
		}{{"title", head.Title}, {"context", head.Context}} {
			if s, ok := jsonString(f.raw); ok {
				b.extra = append(b.extra, textField{path: []string{f.name}, text: s})
			}
		}
		var src map[string]json.RawMessage
		if len(head.Source) == 0 || head.Source[0] != '{' || json.Unmarshal(head.Source, &src) != nil {
			return nil
		}
		srcType, _ := jsonString(src["type"])
		switch srcType {
		case "text":
			if s, ok := jsonString(src["data"]); ok {
				b.extra = append(b.extra, textField{path: []string{"source", "data"}, text: s})
			}
		case "content":
			nested, err := decodeNested(src["content"], depth)
			if err != nil {
				return err
			}
			if nested != nil {
				b.extra = append(b.extra, textField{path: []string{"source", "content"}, nested: nested})
			}
		}
	}
	return nil
}

// blockDocument is a document block; its source may hold text.
const blockDocument = "document"

// jsonString decodes a JSON string; anything else is not one.
func jsonString(raw json.RawMessage) (string, bool) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || raw[0] != '"' {
		return "", false
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return "", false
	}
	return s, true
}

// decodeNested decodes the content inside a block; nil when absent.
func decodeNested(raw json.RawMessage, depth int) (*Content, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	if depth >= maxNesting {
		return nil, contentError(fmt.Sprintf("tool results nest deeper than %d", maxNesting))
	}
	var nested Content
	if err := nested.decode(raw, depth+1); err != nil {
		return nil, err
	}
	return &nested, nil
}

// MarshalJSON writes the content back in the shape it came in. A block
// whose text did not change is written byte for byte as received.
func (c Content) MarshalJSON() ([]byte, error) {
	if !c.isBlocks {
		return json.Marshal(c.text)
	}
	if len(c.blocks) == 0 {
		return []byte("[]"), nil
	}
	var buf bytes.Buffer
	buf.WriteByte('[')
	for i, b := range c.blocks {
		if i > 0 {
			buf.WriteByte(',')
		}
		out, err := b.MarshalJSON()
		if err != nil {
			return nil, err
		}
		buf.Write(out)
	}
	buf.WriteByte(']')
	return buf.Bytes(), nil
}

// MarshalJSON writes the block, keeping every field memhost did not touch.
func (b Block) MarshalJSON() ([]byte, error) {
	if len(b.Raw) == 0 {
		switch {
		case b.carriesText():
			return json.Marshal(struct {
				Type string `json:"type"`
				Text string `json:"text"`
			}{b.Type, b.Text})
		case b.Type == BlockToolResult && b.Nested != nil:
			return json.Marshal(struct {
				Type    string   `json:"type"`
				Content *Content `json:"content"`
			}{b.Type, b.Nested})
		}
		return json.Marshal(map[string]string{"type": b.Type})
	}
	out := []byte(b.Raw)
	var err error
	if b.carriesText() {
		if out, err = setJSONPath(out, []string{"text"}, b.Text); err != nil {
			return nil, err
		}
	}
	if b.Nested != nil {
		if out, err = setJSONPath(out, []string{"content"}, b.Nested); err != nil {
			return nil, err
		}
	}
	for _, f := range b.extra {
		var v any = f.text
		if f.nested != nil {
			v = f.nested
		}
		if out, err = setJSONPath(out, f.path, v); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// setJSONPath answers the object raw with the value at path set to v;
// raw itself when the value there already means v.
func setJSONPath(raw []byte, path []string, v any) ([]byte, error) {
	fields := map[string]json.RawMessage{}
	if err := json.Unmarshal(raw, &fields); err != nil {
		return nil, fmt.Errorf("content block: %w", err)
	}
	old := fields[path[0]]
	var encoded []byte
	var err error
	if len(path) > 1 {
		if len(old) == 0 {
			old = json.RawMessage("{}")
		}
		encoded, err = setJSONPath(old, path[1:], v)
	} else {
		encoded, err = json.Marshal(v)
	}
	if err != nil {
		return nil, err
	}
	if len(old) > 0 && jsonEqual(old, encoded) {
		return raw, nil
	}
	fields[path[0]] = encoded
	return json.Marshal(fields)
}

// jsonEqual compares two JSON values by meaning, not spelling.
func jsonEqual(a, b json.RawMessage) bool {
	if bytes.Equal(a, b) {
		return true
	}
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	ax, _ := json.Marshal(x)
	by, _ := json.Marshal(y)
	return bytes.Equal(ax, by)
}

// replaceText answers a copy of the content with its texts, in eachText
// order, replaced by texts. Blocks whose texts are unchanged keep their
// original bytes; a text block emptied by the replacement is dropped (it
// held nothing but the pieces of a marker, and models refuse empty text
// blocks); non-text blocks are never touched.
func (c Content) replaceText(texts []string) Content {
	out, _ := c.replaceFrom(texts)
	return out
}

func (c Content) replaceFrom(texts []string) (Content, []string) {
	if !c.isBlocks {
		return Content{text: texts[0]}, texts[1:]
	}
	blocks := make([]Block, 0, len(c.blocks))
	for _, b := range c.blocks {
		nb := b
		dropped := false
		if b.carriesText() {
			nb.Text, texts = texts[0], texts[1:]
			dropped = nb.Text == "" && b.Text != "" && (b.Type == BlockText || b.Type == "input_text" || b.Type == "output_text")
		}
		if b.Nested != nil {
			var n Content
			n, texts = b.Nested.replaceFrom(texts)
			nb.Nested = &n
		}
		if len(b.extra) > 0 {
			nb.extra = make([]textField, len(b.extra))
			for i, f := range b.extra {
				nb.extra[i] = f
				if f.nested != nil {
					var n Content
					n, texts = f.nested.replaceFrom(texts)
					nb.extra[i].nested = &n
				} else {
					nb.extra[i].text, texts = texts[0], texts[1:]
				}
			}
		}
		if !dropped {
			blocks = append(blocks, nb)
		}
	}
	return Content{blocks: blocks, isBlocks: true}, texts
}

// texts answers every text the content carries, in eachText order.
func (c Content) texts() []string {
	var out []string
	c.eachText(func(s string) bool { out = append(out, s); return true })
	return out
}
