package coordinator

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/memhost/memhost/sdk"
	"github.com/memhost/memhost/sdk/strictjson"
)

// Content is a message body as the HTTP API carries it: either a plain
// string or a list of typed blocks. Every string of a block, at any depth,
// is text a model may read, except the few fields that never reach one
// (see hiddenFields: ids, "type", media data, URLs); inside a tool call's
// arguments every string and member name is. A tool result's "content"
// (itself a string or blocks) is also decoded as Nested. Blocks are kept as
// received, so fields memhost does not know survive a round trip
// untouched. The zero Content is the empty string.
type Content struct {
	text     string
	blocks   []Block
	isBlocks bool
}

// Block is one content block. Type is always set. Text is the string
// "text" field (always present on a "text" block); Nested is the content
// of a "tool_result" block. Raw holds the block as received.
type Block struct {
	Type   string
	Text   string
	Nested *Content
	Raw    json.RawMessage
	// hasText marks a string "text" field on a block of another type.
	hasText bool
	// texts are the model-readable strings of Raw, in document order.
	texts []string
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

// Text answers all the text the content carries, joined by line breaks:
// string content, or every model-readable string of the blocks.
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
		return sdk.CutText(c.text, limit)
	}
	var b strings.Builder
	c.appendText(&b, limit)
	return sdk.CutText(b.String(), limit)
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
	if b.Raw != nil {
		for _, t := range b.texts {
			if !fn(t) {
				return false
			}
		}
		return true
	}
	if b.carriesText() && !fn(b.Text) {
		return false
	}
	return b.Nested == nil || b.Nested.eachText(fn)
}

func writeLimited(b *strings.Builder, s string, limit int) {
	if limit >= 0 {
		s = sdk.CutText(s, max(limit-b.Len(), 0))
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
		if c.decodeList(data, depth) {
			return nil
		}
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

// decodeList reads data, a list of blocks, from one strict parse of the
// whole list, each block by its byte span, as the blocks of a tool
// result's content are read. It answers false, with c untouched, when the
// list is refused in any way: the reading block by block below then names
// the problem and the block, in its own words. Checked, parsed and copied
// one block at a time, 100,000 small text blocks (4 MB) cost 0.9 s of CPU
// per request.
func (c *Content) decodeList(data []byte, depth int) bool {
	nodes, err := parseList(data)
	if err != nil {
		return false
	}
	kept := slices.Clone(data)
	blocks := make([]Block, len(nodes))
	for i, n := range nodes {
		if n.kind != '{' || blocks[i].fromTree(kept, n, depth) != nil {
			return false
		}
	}
	*c = Content{blocks: blocks, isBlocks: true}
	return true
}

func contentError(problem string) error {
	return &sdk.FieldError{Field: "content", Problem: problem, Err: sdk.ErrInvalid}
}

func (b *Block) decode(raw json.RawMessage, depth int) error {
	if len(raw) == 0 || raw[0] != '{' {
		return contentError("a block must be a JSON object")
	}
	// Field names are matched exactly, as a model API reads them: a
	// "TEXT" field is not the text; and a repeated name is refused, since
	// a model API may read either copy.
	// The strict decoder of the API names what is wrong (a repeated
	// name, invalid UTF-8, a lone surrogate) in plain words.
	var probe any
	if err := strictjson.Decode(raw, &probe); err != nil {
		return contentError("a block is refused: " + err.Error())
	}
	tree, err := parseJSON(raw)
	if err != nil {
		return contentError("a block " + err.Error())
	}
	return b.fromTree(append(json.RawMessage(nil), raw...), tree, depth)
}

// fromTree reads the block from tree, parsed from data, and keeps its
// bytes in data. The blocks of a tool result's content are read from their part
// of tree and raw, checked and parsed with it: read again from their
// bytes at each level, 8 nested tool results cost 5 s of CPU for 4 MB.
func (b *Block) fromTree(data []byte, tree *jsonNode, depth int) error {
	typ, ok := tree.memberString("type")
	if !ok || typ == "" {
		return contentError(`a block has no "type"`)
	}
	*b = Block{Type: typ, Raw: tree.span(data)}
	if s, ok := tree.memberString("text"); ok {
		b.Text, b.hasText = s, b.Type != BlockText
	} else if b.Type == BlockText {
		return contentError(`a text block needs a string "text"`)
	}
	if b.Type == BlockToolResult {
		var err error
		if b.Nested, err = decodeNested(data, tree.member("content"), depth); err != nil {
			return err
		}
	}
	tree.walkText(false, func(s string) string { b.texts = append(b.texts, s); return s })
	return nil
}

// decodeNested decodes the content inside a block, v of the block's tree
// parsed from data; nil when absent.
func decodeNested(data []byte, v *jsonNode, depth int) (*Content, error) {
	if v == nil || v.kind == 'n' {
		return nil, nil
	}
	if depth >= maxNesting {
		return nil, contentError(fmt.Sprintf("tool results nest deeper than %d", maxNesting))
	}
	var nested Content
	if err := nested.fromTree(data, v, depth+1); err != nil {
		if fe := (*sdk.FieldError)(nil); errors.As(err, &fe) && err == error(fe) {
			// The nested content itself, not one of its blocks: the
			// block's member names it.
			return nil, fmt.Errorf("content: %w", err)
		}
		return nil, err
	}
	return &nested, nil
}

// fromTree reads the content from v, parsed from data, as decode reads it
// from v's bytes.
func (c *Content) fromTree(data []byte, v *jsonNode, depth int) error {
	switch v.kind {
	case '"':
		*c = Content{text: v.str}
		return nil
	case '[':
		blocks := make([]Block, len(v.vals))
		for i, e := range v.vals {
			err := contentError("a block must be a JSON object")
			if e.kind == '{' {
				err = blocks[i].fromTree(data, e, depth)
			}
			if err != nil {
				return fmt.Errorf("content[%d]: %w", i, err)
			}
		}
		*c = Content{blocks: blocks, isBlocks: true}
		return nil
	}
	return contentError("must be a string or a list of blocks")
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
	if len(b.Raw) > 0 {
		return b.Raw, nil
	}
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

// replaceText answers a copy of the content with its texts, in eachText
// order, replaced by texts. Blocks whose texts are unchanged keep their
// original bytes; a changed block is written again with its members in
// their order and only its strings changed; a text block emptied by the
// replacement is dropped.
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
		var nb Block
		nb, texts = b.replaceFrom(texts)
		// A text block emptied by the replacement held nothing but the
		// pieces of a marker, and models refuse empty text blocks.
		dropped := b.Text != "" && nb.Text == "" && isTextBlock(b.Type)
		if !dropped {
			blocks = append(blocks, nb)
		}
	}
	return Content{blocks: blocks, isBlocks: true}, texts
}

// replaceFrom answers the block with its texts taken from the front of
// texts, and the rest of texts. An unchanged block is itself.
func (b Block) replaceFrom(texts []string) (Block, []string) {
	if b.Raw == nil {
		nb := b
		if b.carriesText() {
			nb.Text, texts = texts[0], texts[1:]
		}
		if b.Nested != nil {
			var n Content
			n, texts = b.Nested.replaceFrom(texts)
			nb.Nested = &n
		}
		return nb, texts
	}
	mine, rest := texts[:len(b.texts)], texts[len(b.texts):]
	if slices.Equal(mine, b.texts) {
		return b, rest
	}
	tree, err := parseJSON(b.Raw)
	if err != nil {
		panic("coordinator: a decoded block no longer parses: " + err.Error())
	}
	held := tree.textBlocks()
	k := 0
	tree.walkText(false, func(string) string { k++; return mine[k-1] })
	// A text block nested in this one (a tool result's) emptied the same
	// way is dropped too: models refuse one at any depth.
	tree.dropEmptied(held)
	out, err := tree.encode()
	var nb Block
	if err == nil {
		err = nb.decode(out, 0)
	}
	if err != nil {
		// Only strings changed, each to valid UTF-8 (renamed members made
		// unique), so the block is as valid as it was.
		panic("coordinator: a defanged block is not valid: " + err.Error())
	}
	return nb, rest
}

// isTextBlock reports whether a block of type typ is text and nothing
// else; the OpenAI Responses API's text blocks are text as well.
func isTextBlock(typ string) bool {
	return typ == BlockText || typ == "input_text" || typ == "output_text"
}

// texts answers every text the content carries, in eachText order.
func (c Content) texts() []string {
	var out []string
	c.eachText(func(s string) bool { out = append(out, s); return true })
	return out
}

// textBytes answers the bytes of the texts the content carries.
func (c Content) textBytes() int {
	n := 0
	c.eachText(func(s string) bool { n += len(s); return true })
	return n
}
