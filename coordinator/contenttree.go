package coordinator

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"

	"github.com/go-json-experiment/json/jsontext"
)

// maxJSONDepth bounds the nesting of one content block, so hostile JSON
// cannot recurse without end.
const maxJSONDepth = 64

// jsonNode is a JSON value kept in document order, so a block can be
// walked the way a model reads it and written back with only its strings
// changed.
type jsonNode struct {
	kind jsontext.Kind  // '{', '[', '"' or another scalar's kind
	str  string         // a string's value
	raw  jsontext.Value // another scalar as received
	keys []string       // an object's member names
	vals []*jsonNode    // an object's member values or an array's elements
	// start and end bound the value in the parsed bytes, with the white
	// space and separator before it (see span).
	start, end int64
}

// parseJSON parses one JSON value strictly: duplicate member names and
// invalid UTF-8 are errors, because a model API and memhost could read
// such a block differently.
func parseJSON(data []byte) (*jsonNode, error) {
	p := &treeParser{dec: jsontext.NewDecoder(bytes.NewReader(data))}
	n, err := p.node(0)
	if err != nil {
		return nil, err
	}
	if _, err := p.dec.ReadToken(); err != io.EOF {
		return nil, errors.New("trailing data after the value")
	}
	return n, nil
}

// parseList parses a JSON list as parseJSON does, each element a value
// on its own as parseJSON parses one (its depth counted from the element,
// a number refused where strictjson.Decode refuses one), and answers the
// elements.
func parseList(data []byte) ([]*jsonNode, error) {
	p := &treeParser{dec: jsontext.NewDecoder(bytes.NewReader(data))}
	dec := p.dec
	if tok, err := dec.ReadToken(); err != nil || tok.Kind() != '[' {
		return nil, errors.New("not a list")
	}
	var nodes []*jsonNode
	for dec.PeekKind() != ']' {
		n, err := p.node(0)
		if err != nil {
			return nil, err
		}
		nodes = append(nodes, n)
	}
	if _, err := dec.ReadToken(); err != nil {
		return nil, err
	}
	if _, err := dec.ReadToken(); err != io.EOF {
		return nil, errors.New("trailing data after the value")
	}
	return nodes, nil
}

// treeParser reads JSON values from dec into nodes taken from a slab, a few
// allocations for many small values rather than one each.
type treeParser struct {
	dec  *jsontext.Decoder
	slab []jsonNode
}

func (p *treeParser) alloc(n jsonNode) *jsonNode {
	if len(p.slab) == 0 {
		p.slab = make([]jsonNode, 128)
	}
	at := &p.slab[0]
	p.slab = p.slab[1:]
	*at = n
	return at
}

func (p *treeParser) node(depth int) (*jsonNode, error) {
	n, err := p.value(depth)
	if err != nil {
		return nil, err
	}
	n.end = p.dec.InputOffset()
	return n, nil
}

func (p *treeParser) value(depth int) (*jsonNode, error) {
	dec := p.dec
	if depth > maxJSONDepth {
		return nil, fmt.Errorf("nests deeper than %d", maxJSONDepth)
	}
	start := dec.InputOffset() // before the white space and separator, which span trims
	switch kind := dec.PeekKind(); kind {
	case '{', '[':
		if _, err := dec.ReadToken(); err != nil {
			return nil, err
		}
		n := p.alloc(jsonNode{kind: kind, start: start})
		end := jsontext.Kind('}')
		if kind == '[' {
			end = ']'
		}
		for dec.PeekKind() != end {
			if kind == '{' {
				name, err := dec.ReadToken()
				if err != nil {
					return nil, err
				}
				if n.keys == nil {
					n.keys = make([]string, 0, 4)
				}
				n.keys = append(n.keys, name.String())
			}
			v, err := p.node(depth + 1)
			if err != nil {
				return nil, err
			}
			if n.vals == nil {
				n.vals = make([]*jsonNode, 0, 4)
			}
			n.vals = append(n.vals, v)
		}
		if _, err := dec.ReadToken(); err != nil {
			return nil, err
		}
		return n, nil
	case '"':
		tok, err := dec.ReadToken()
		if err != nil {
			return nil, err
		}
		return p.alloc(jsonNode{kind: kind, str: tok.String(), start: start}), nil
	default:
		v, err := dec.ReadValue()
		if err != nil {
			return nil, err
		}
		if kind == '0' {
			// strictjson.Decode reads a number as a float64 and refuses
			// one beyond its range.
			if _, err := strconv.ParseFloat(string(v), 64); err != nil {
				return nil, errors.New("holds a number out of range")
			}
		}
		return p.alloc(jsonNode{kind: kind, raw: slices.Clone(v), start: start}), nil
	}
}

// span answers the bytes of the value within data, the bytes it was
// parsed from.
func (n *jsonNode) span(data []byte) []byte {
	s := bytes.TrimLeft(data[n.start:n.end], " \t\r\n,:")
	return s[:len(s):len(s)] // appending to it must not write over what follows
}

// encode writes the value back, members in their order.
func (n *jsonNode) encode() ([]byte, error) {
	var buf bytes.Buffer
	enc := jsontext.NewEncoder(&buf)
	if err := n.write(enc); err != nil {
		return nil, err
	}
	return bytes.TrimRight(buf.Bytes(), "\n"), nil
}

func (n *jsonNode) write(enc *jsontext.Encoder) error {
	switch n.kind {
	case '{', '[':
		begin, end := jsontext.BeginObject, jsontext.EndObject
		if n.kind == '[' {
			begin, end = jsontext.BeginArray, jsontext.EndArray
		}
		if err := enc.WriteToken(begin); err != nil {
			return err
		}
		for i, v := range n.vals {
			if n.kind == '{' {
				if err := enc.WriteToken(jsontext.String(n.keys[i])); err != nil {
					return err
				}
			}
			if err := v.write(enc); err != nil {
				return err
			}
		}
		return enc.WriteToken(end)
	case '"':
		return enc.WriteToken(jsontext.String(n.str))
	default:
		return enc.WriteValue(n.raw)
	}
}

// member answers an object's member by name, or nil.
func (n *jsonNode) member(name string) *jsonNode {
	if i := slices.Index(n.keys, name); i >= 0 {
		return n.vals[i]
	}
	return nil
}

// memberString answers an object's string member by name.
func (n *jsonNode) memberString(name string) (string, bool) {
	if v := n.member(name); v != nil && v.kind == '"' {
		return v.str, true
	}
	return "", false
}

// Fields of a content value that never reach a model, outside a tool
// call's arguments: the discriminator, identifiers, signatures and cache
// hints, media types, image URLs, file handles, opaque encrypted
// payloads, and "data" (base64 media) unless it is the data of a
// {"type":"text"} source. Every other string of a block, at any depth, is
// model text.
var hiddenFields = map[string]bool{
	"type": true, "id": true, "tool_use_id": true, "call_id": true, "signature": true,
	"cache_control": true, "media_type": true, "mime_type": true, "image_url": true,
	"file_id": true, "file_data": true, "encrypted_content": true, "encrypted_index": true,
}

// hiddenURL reports whether a "url" member of an object of type typ is a
// place the API fetches from, not text: a media source ({"type":"url"})
// or an untyped object (an image_url's {"url", "detail"}). A search
// result's, a fetched page's or a citation's url is text the model reads
// and cites, and its path is whatever the site's owner chose.
func hiddenURL(typ string) bool { return typ == "" || typ == "url" }

// freeFormFields hold a tool call's arguments: JSON the model reads whole,
// names included, where no field is exempt.
var freeFormFields = map[string]bool{"input": true, "arguments": true}

// walkText calls visit with every model-readable string of n in document
// order, and sets each to what visit answers. Inside a tool call's
// arguments member names are model text too; a renamed member that would
// repeat another's name gets an underscore, and when that is taken too, an
// underscore and a number from 2 that makes it unique.
func (n *jsonNode) walkText(free bool, visit func(string) string) {
	switch n.kind {
	case '"':
		n.str = visit(n.str)
	case '[':
		for _, v := range n.vals {
			v.walkText(free, visit)
		}
	case '{':
		typ, _ := n.memberString("type")
		var names *memberNames // built at the first rename
		for i, k := range n.keys {
			switch {
			case free:
				if name := visit(k); name != k {
					if names == nil {
						names = newMemberNames(n.keys)
					}
					n.keys[i] = names.rename(k, name)
				}
				n.vals[i].walkText(true, visit)
			case hiddenFields[k] || (k == "data" && typ != "text") || (k == "url" && hiddenURL(typ)):
			default:
				n.vals[i].walkText(freeFormFields[k], visit)
			}
		}
	}
}

// memberNames are an object's member names while walkText renames them, so
// that a renamed member is made unique in time linear in the members: many
// names defanged to one (case and spacing variants of one token) each found
// its place by a scan of every name for each underscore added, cubic in
// their count, with names quadratic in bytes (4,000 such names, 52 KB,
// took 4.5 s of CPU and answered 2 MB).
type memberNames struct {
	taken map[string]bool
	next  map[string]int // the number to try next after a name and "_"
}

func newMemberNames(keys []string) *memberNames {
	m := &memberNames{taken: make(map[string]bool, len(keys)), next: map[string]int{}}
	for _, k := range keys {
		m.taken[k] = true
	}
	return m
}

// rename answers the name member old is renamed to, name made unique: as
// is, with an underscore, or with an underscore and a number.
func (m *memberNames) rename(old, name string) string {
	delete(m.taken, old)
	unique := name
	if m.taken[unique] {
		unique = name + "_"
	}
	for m.taken[unique] {
		i := max(m.next[name], 2)
		m.next[name] = i + 1
		unique = name + "_" + strconv.Itoa(i)
	}
	m.taken[unique] = true
	return unique
}

// textBlock answers the "text" string of n when n is a text block, else nil.
func (n *jsonNode) textBlock() *jsonNode {
	if n.kind != '{' {
		return nil
	}
	if typ, ok := n.memberString("type"); !ok || !isTextBlock(typ) {
		return nil
	}
	if v := n.member("text"); v != nil && v.kind == '"' {
		return v
	}
	return nil
}

// textBlocks answers the texts of the text blocks listed inside n, outside
// a tool call's arguments (which are the tool's data), that are not empty.
func (n *jsonNode) textBlocks() map[*jsonNode]bool {
	held := map[*jsonNode]bool{}
	n.eachListed(func(list *jsonNode, i int) {
		if t := list.vals[i].textBlock(); t != nil && t.str != "" {
			held[t] = true
		}
	})
	return held
}

// dropEmptied removes from the lists inside n the text blocks whose text
// was in held and is now empty.
func (n *jsonNode) dropEmptied(held map[*jsonNode]bool) {
	n.eachListed(func(list *jsonNode, i int) {
		if t := list.vals[i].textBlock(); t != nil && held[t] && t.str == "" {
			list.vals[i] = nil
		}
	})
}

// eachListed calls fn with every list inside n and the index of each of
// its elements, outside a tool call's arguments, deepest first; elements
// fn sets to nil are removed.
func (n *jsonNode) eachListed(fn func(list *jsonNode, i int)) {
	for i, v := range n.vals {
		if n.kind == '{' && freeFormFields[n.keys[i]] {
			continue
		}
		v.eachListed(fn)
	}
	if n.kind == '[' {
		for i := range n.vals {
			fn(n, i)
		}
		n.vals = slices.DeleteFunc(n.vals, func(v *jsonNode) bool { return v == nil })
	}
}
