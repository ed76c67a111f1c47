// Package strictjson is the one JSON decoder memhost uses for what arrives
// from outside: HTTP API bodies, plugin manifests and configs, archive
// lines and the static resolver's bindings. It
// refuses whatever the standard decoder would silently reinterpret, so data
// is either taken exactly as sent or refused whole:
//
//   - member names match struct tags exactly ({"Identity":...} is unknown);
//   - unknown members, duplicate members and trailing data are errors;
//   - invalid UTF-8 and lone surrogate escapes are errors, never replaced
//     with U+FFFD.
//
// Errors are *Error values naming the field path ("records[0].title") and
// the problem in words a client can act on, never Go type names.
package strictjson

import (
	"encoding"
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
)

// Error is a refused JSON document: the path of the offending field (empty
// for the document itself) and what is wrong with it.
type Error struct {
	Path    string
	Problem string
	// Offset is the byte offset in the input where the problem was found
	// (0 when not known), for callers that report a line.
	Offset int64
	// Err is the refusal of the field type's own decoder (its
	// UnmarshalJSON or UnmarshalText), nil when strictjson refused the
	// value itself; errors.Is and errors.As reach it.
	Err error
}

func (e *Error) Unwrap() error { return e.Err }

func (e *Error) Error() string {
	if e.Path == "" {
		return e.Problem
	}
	return e.Path + ": " + e.Problem
}

// rfc3339Case reads a time's "t" and "z" in either case, as RFC 3339
// (§5.6) and JSON Schema's date-time allow; the decoder reads only "T"
// and "Z". Everything else about the time is the decoder's to judge.
var rfc3339Case = json.WithUnmarshalers(json.UnmarshalFromFunc(func(dec *jsontext.Decoder, t *time.Time) error {
	if dec.PeekKind() != '"' {
		return errors.ErrUnsupported
	}
	raw, err := dec.ReadValue()
	if err != nil {
		return err
	}
	b := []byte(raw)
	// "2006-01-02t15:04:05z": the date's end, then the zone's letter.
	if len(b) > 12 && b[11] == 't' {
		b = slices.Clone(b)
		b[11] = 'T'
		if b[len(b)-2] == 'z' {
			b[len(b)-2] = 'Z'
		}
	} else if len(b) > 12 && b[len(b)-2] == 'z' {
		b = slices.Clone(b)
		b[len(b)-2] = 'Z'
	}
	return json.Unmarshal(b, t)
}))

// Decode decodes data, which must be exactly one JSON value, into v.
func Decode(data []byte, v any) error {
	err := json.Unmarshal(data, v, json.RejectUnknownMembers(true), rfc3339Case)
	if err == nil {
		return nil
	}
	return describe(err)
}

// DecodeTolerant is Decode for documents whose format grows over time
// (plugin manifests, which a newer memhost may write): members v does not
// know are skipped and their paths answered, sorted, so the caller can warn
// about them; everything else Decode refuses (duplicate members, trailing
// data, invalid UTF-8, a member named in another case) is still refused.
func DecodeTolerant(data []byte, v any) (unknown []string, err error) {
	if err := json.Unmarshal(data, v, rfc3339Case); err != nil {
		return nil, describe(err)
	}
	var tree any
	if err := json.Unmarshal(data, &tree); err != nil {
		return nil, describe(err)
	}
	collectUnknown(reflect.TypeOf(v), tree, "", &unknown)
	slices.Sort(unknown)
	return unknown, nil
}

// collectUnknown walks a decoded JSON tree beside the Go type it was
// decoded into and appends the paths of members the type has no field for.
// A type that decodes itself reads its members its own way, so none of
// them is unknown here.
func collectUnknown(t reflect.Type, tree any, at string, out *[]string) {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil || hasOwnDecoder(t) {
		return
	}
	switch node := tree.(type) {
	case map[string]any:
		switch t.Kind() {
		case reflect.Map:
			for k, child := range node {
				collectUnknown(t.Elem(), child, join(at, k), out)
			}
		case reflect.Struct:
			fields := jsonFields(t)
			for k, child := range node {
				ft, ok := fields[k]
				if !ok {
					*out = append(*out, join(at, k))
					continue
				}
				collectUnknown(ft, child, join(at, k), out)
			}
		}
	case []any:
		if t.Kind() == reflect.Slice || t.Kind() == reflect.Array {
			for i, child := range node {
				collectUnknown(t.Elem(), child, at+"["+strconv.Itoa(i)+"]", out)
			}
		}
	}
}

func join(at, name string) string {
	if at == "" {
		return name
	}
	return at + "." + name
}

// jsonFields maps a struct's JSON member names to their field types
// (embedded structs' fields included, "-" fields left out).
func jsonFields(t reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" || (!f.IsExported() && !f.Anonymous) {
			continue
		}
		if f.Anonymous && name == "" {
			ft := f.Type
			for ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				for k, v := range jsonFields(ft) {
					out[k] = v
				}
				continue
			}
		}
		if name == "" {
			name = f.Name
		}
		out[name] = f.Type
	}
	return out
}

// describe turns a decoder error into an *Error.
func describe(err error) error {
	var sem *json.SemanticError
	var syn *jsontext.SyntacticError
	switch {
	case errors.As(err, &syn):
		return &Error{Path: path(string(syn.JSONPointer)), Problem: syntaxProblem(syn), Offset: syn.ByteOffset}
	case errors.As(err, &sem):
		e := &Error{Path: path(string(sem.JSONPointer)), Offset: sem.ByteOffset}
		switch {
		case errors.Is(sem.Err, json.ErrUnknownName):
			e.Problem = "unknown field"
		case isTime(sem.GoType) && sem.JSONKind == '"':
			e.Problem = "is not an RFC 3339 time (like 2026-01-02T15:04:05Z)"
		case isTime(sem.GoType) && sem.JSONKind != 0:
			e.Problem = fmt.Sprintf("must be an RFC 3339 time string, not %s", kindName(sem.JSONKind))
		case hasOwnDecoder(sem.GoType) && sem.Err != nil && sem.Err.Error() != errNonString:
			// The type's own decoder refused the value: its words, under
			// the path where the value sat.
			ownRefusal(e, sem.Err)
		case errors.Is(sem.Err, strconv.ErrRange) && sem.GoType != nil:
			e.Problem = outOfRange(sem.GoType)
		case sem.GoType != nil && sem.GoType.Kind() == reflect.Array && sem.Err != nil && strings.HasSuffix(sem.Err.Error(), "array elements"):
			e.Problem = fmt.Sprintf("must be an array of exactly %d elements", sem.GoType.Len())
		case sem.JSONKind == '0' && isInteger(sem.GoType):
			// "must be an integer, not a number" would refuse 1.5 for
			// being what an integer is too.
			e.Problem = fmt.Sprintf("must be %s (no fraction or exponent)", jsonKindOf(sem.GoType))
		case sem.GoType != nil && sem.JSONKind != 0:
			e.Problem = fmt.Sprintf("must be %s, not %s", jsonKindOf(sem.GoType), kindName(sem.JSONKind))
		case sem.Err != nil:
			e.Problem = sem.Err.Error()
		default:
			e.Problem = "has a value of the wrong kind"
		}
		return e
	}
	return &Error{Problem: strings.TrimPrefix(err.Error(), "json: ")}
}

// ownRefusal words err, the refusal of a type's own decoder, into e. A
// strictjson refusal from inside the decoder (which decoded the value it
// was given with Decode) continues e's path; another
// error keeps its words, less a leading "name: " naming the field e's path
// already ends in (as an sdk.FieldError names its own field).
func ownRefusal(e *Error, err error) {
	e.Err = err
	var inner *Error
	if errors.As(err, &inner) {
		e.Path = cut(joinPath(e.Path, inner.Path))
		e.Problem = inner.Problem
		return
	}
	e.Problem = err.Error()
	if last := lastName(e.Path); last != "" {
		if rest, ok := strings.CutPrefix(e.Problem, last+": "); ok && rest != "" {
			e.Problem = rest
		}
	}
	if e.Problem == "" {
		e.Problem = "is refused"
	}
}

// joinPath appends the field path sub to at.
func joinPath(at, sub string) string {
	switch {
	case sub == "":
		return at
	case at == "" || sub[0] == '[':
		return at + sub
	}
	return at + "." + sub
}

// lastName is the member name a field path ends in ("title" for
// "records[0].title"), "" when it ends in an index.
func lastName(p string) string {
	if strings.HasSuffix(p, "]") {
		return ""
	}
	return p[strings.LastIndexAny(p, ".]")+1:]
}

// errNonString is the decoder's refusal of a value other than a string
// for a type with only an UnmarshalText method.
const errNonString = "JSON value must be string type"

var (
	jsonUnmarshaler     = reflect.TypeFor[json.Unmarshaler]()
	jsonUnmarshalerFrom = reflect.TypeFor[json.UnmarshalerFrom]()
	textUnmarshaler     = reflect.TypeFor[encoding.TextUnmarshaler]()
)

// hasOwnDecoder reports whether t (or *t) decodes itself, with an
// UnmarshalJSON, UnmarshalJSONFrom or UnmarshalText method.
func hasOwnDecoder(t reflect.Type) bool {
	if t == nil {
		return false
	}
	for _, u := range []reflect.Type{jsonUnmarshaler, jsonUnmarshalerFrom, textUnmarshaler} {
		if t.Implements(u) || (t.Kind() != reflect.Pointer && reflect.PointerTo(t).Implements(u)) {
			return true
		}
	}
	return false
}

// isInteger reports whether t (or what it points to) is an integer type.
func isInteger(t reflect.Type) bool {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil {
		return false
	}
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return true
	}
	return false
}

// outOfRange words a number too large (or too small) for t.
func outOfRange(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Int, reflect.Int64, reflect.Uint, reflect.Uint64:
		// Go's whole range is no field's: the field's own bound, if any,
		// is checked once the number is read.
		return "is a number out of range"
	case reflect.Int8, reflect.Int16, reflect.Int32:
		bits := t.Bits()
		return fmt.Sprintf("must be an integer from %d to %d", int64(-1)<<(bits-1), int64(uint64(1)<<(bits-1)-1))
	case reflect.Uint8, reflect.Uint16, reflect.Uint32:
		return fmt.Sprintf("must be an integer from 0 to %d", uint64(math.MaxUint64)>>(64-t.Bits()))
	}
	return "is a number too large to hold"
}

func syntaxProblem(syn *jsontext.SyntacticError) string {
	msg := ""
	if syn.Err != nil {
		msg = syn.Err.Error()
	}
	switch {
	case errors.Is(syn.Err, jsontext.ErrDuplicateName):
		return "appears more than once"
	case strings.Contains(msg, "invalid UTF-8"):
		return "is not valid UTF-8"
	case strings.Contains(msg, "surrogate"):
		return "holds a lone UTF-16 surrogate, which is not a character"
	case strings.Contains(msg, "after top-level value"):
		return fmt.Sprintf("trailing data after the JSON value at byte %d", syn.ByteOffset)
	case strings.Contains(msg, "unexpected EOF"):
		return "the JSON is empty or cut short"
	}
	return fmt.Sprintf("invalid JSON at byte %d: %s", syn.ByteOffset, msg)
}

// maxPath bounds a field path in an error, in bytes: a path as deep as
// the decoder's nesting limit, or a member name megabytes long, would be
// echoed whole to the client and the logs.
const maxPath = 256

// path turns a JSON pointer ("/records/0/title") into the field path
// callers read elsewhere ("records[0].title"), cut to maxPath bytes and
// marked with "…" when longer.
func path(pointer string) string {
	if pointer == "" {
		return ""
	}
	var b strings.Builder
	for _, tok := range strings.Split(strings.TrimPrefix(pointer, "/"), "/") {
		if b.Len() > maxPath {
			break
		}
		tok = strings.NewReplacer("~1", "/", "~0", "~").Replace(tok)
		if _, err := strconv.Atoi(tok); err == nil && b.Len() > 0 {
			b.WriteString("[" + tok + "]")
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		b.WriteString(tok)
	}
	return cut(b.String())
}

// cut shortens p to maxPath bytes, at a character boundary, marked "…".
func cut(p string) string {
	if len(p) <= maxPath {
		return p
	}
	n := maxPath
	for n > 0 && !utf8.RuneStart(p[n]) {
		n--
	}
	return p[:n] + "…"
}

// isTime reports whether t is a time.Time or a pointer to one.
func isTime(t reflect.Type) bool {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t != nil && t.PkgPath() == "time" && t.Name() == "Time"
}

// jsonKindOf names the JSON a Go type accepts.
func jsonKindOf(t reflect.Type) string {
	if isTime(t) {
		return "an RFC 3339 time string"
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if p := reflect.PointerTo(t); p.Implements(textUnmarshaler) && !p.Implements(jsonUnmarshaler) && !p.Implements(jsonUnmarshalerFrom) {
		return "a string"
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return "an integer"
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a non-negative integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Struct, reflect.Map:
		return "an object"
	}
	return "another kind of value"
}

// kindName names a JSON kind as a client would.
func kindName(k jsontext.Kind) string {
	switch k {
	case 'n':
		return "null"
	case 'f', 't':
		return "a boolean"
	case '"':
		return "a string"
	case '0':
		return "a number"
	case '{':
		return "an object"
	case '[':
		return "an array"
	}
	return "something else"
}
