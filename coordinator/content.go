package coordinator

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/memhost/memhost/sdk"
)

// Content is a message body as the HTTP API carries it: either a plain
// string or a list of typed blocks. Text blocks ({"type":"text","text":..})
// and tool results ({"type":"tool_result","content":..}, whose content is
// itself a string or blocks) hold text; every other block (images, tool
// calls, ...) is carried through verbatim. The zero Content is the empty
// string.
type Content struct {
	text     string
	blocks   []Block
	isBlocks bool
}

// Block is one content block. Type is always set. Text is the text of a
// "text" block; Nested is the content of a "tool_result" block. Raw holds
// the block as received, so fields memhost does not know survive a round
// trip untouched.
type Block struct {
	Type   string
	Text   string
	Nested *Content
	Raw    json.RawMessage
}

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
	for _, blk := range c.blocks {
		if limit >= 0 && b.Len() >= limit {
			return
		}
		switch {
		case blk.Type == BlockText && blk.Text != "":
			if b.Len() > 0 {
				b.WriteByte('\n')
			}
			writeLimited(b, blk.Text, limit)
		case blk.Type == BlockToolResult && blk.Nested != nil:
			blk.Nested.appendText(b, limit)
		}
	}
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
	var head struct {
		Type    *string         `json:"type"`
		Text    json.RawMessage `json:"text"`
		Content json.RawMessage `json:"content"`
	}
	if len(raw) == 0 || raw[0] != '{' {
		return contentError("a block must be a JSON object")
	}
	if err := json.Unmarshal(raw, &head); err != nil {
		return contentError("a block is not a valid JSON object")
	}
	if head.Type == nil || *head.Type == "" {
		return contentError(`a block has no "type"`)
	}
	*b = Block{Type: *head.Type, Raw: append(json.RawMessage(nil), raw...)}
	switch b.Type {
	case BlockText:
		if err := json.Unmarshal(head.Text, &b.Text); err != nil || len(head.Text) == 0 {
			return contentError(`a text block needs a string "text"`)
		}
	case BlockToolResult:
		if len(head.Content) == 0 || string(head.Content) == "null" {
			return nil
		}
		if depth >= maxNesting {
			return contentError(fmt.Sprintf("tool results nest deeper than %d", maxNesting))
		}
		var nested Content
		if err := nested.decode(head.Content, depth+1); err != nil {
			return err
		}
		b.Nested = &nested
	}
	return nil
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
	if b.Type != BlockText && b.Type != BlockToolResult {
		if len(b.Raw) == 0 {
			return json.Marshal(map[string]string{"type": b.Type})
		}
		return b.Raw, nil
	}
	if len(b.Raw) == 0 {
		if b.Type == BlockText {
			return json.Marshal(struct {
				Type string `json:"type"`
				Text string `json:"text"`
			}{b.Type, b.Text})
		}
		if b.Nested != nil {
			return json.Marshal(struct {
				Type    string   `json:"type"`
				Content *Content `json:"content"`
			}{b.Type, b.Nested})
		}
	}
	fields := map[string]json.RawMessage{}
	if len(b.Raw) > 0 {
		if err := json.Unmarshal(b.Raw, &fields); err != nil {
			return nil, fmt.Errorf("content block: %w", err)
		}
	}
	key, value := "text", any(b.Text)
	if b.Type == BlockToolResult {
		if b.Nested == nil {
			if len(b.Raw) > 0 {
				return b.Raw, nil
			}
			return json.Marshal(map[string]string{"type": b.Type})
		}
		key, value = "content", b.Nested
	}
	encoded, err := json.Marshal(value)
	if err != nil {
		return nil, err
	}
	if old, ok := fields[key]; ok && len(b.Raw) > 0 && jsonEqual(old, encoded) {
		return b.Raw, nil
	}
	typ, _ := json.Marshal(b.Type)
	fields["type"] = typ
	fields[key] = encoded
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

// mapText answers a copy of the content with every text passed through
// f, and the sum of the counts f reports. Blocks f leaves unchanged keep
// their original bytes; non-text blocks are never touched.
func (c Content) mapText(f func(string) (string, int)) (Content, int) {
	if !c.isBlocks {
		s, n := f(c.text)
		return Content{text: s}, n
	}
	total := 0
	out := make([]Block, len(c.blocks))
	for i, b := range c.blocks {
		out[i] = b
		switch {
		case b.Type == BlockText:
			s, n := f(b.Text)
			if n > 0 {
				out[i].Text = s
				total += n
			}
		case b.Type == BlockToolResult && b.Nested != nil:
			nested, n := b.Nested.mapText(f)
			if n > 0 {
				out[i].Nested = &nested
				total += n
			}
		}
	}
	return Content{blocks: out, isBlocks: true}, total
}
