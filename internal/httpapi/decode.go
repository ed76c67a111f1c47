package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/memhost/memhost/internal/mcpserver"
	"io"
	"math"
	"net/http"
	"regexp"
	"strings"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/memhost/memhost/coordinator"
	"github.com/memhost/memhost/sdk"
	"github.com/memhost/memhost/sdk/strictjson"
)

// decode reads exactly one JSON object into v (null or another value is
// refused) through the strict decoder:
// unknown or case-folded field names, duplicate keys, trailing data,
// invalid UTF-8 and lone surrogates are refused, so nothing is stored other
// than what the client sent. A body over the server's limit is refused too.
func (s *Server) decode(w http.ResponseWriter, r *http.Request, v any) error {
	_, err := s.decodeBody(w, r, v)
	return err
}

// decodeBody is decode, answering the body's bytes as well, for a route
// that reads more from them than v holds.
func (s *Server) decodeBody(w http.ResponseWriter, r *http.Request, v any) ([]byte, error) {
	data, err := s.readBody(w, r)
	if err != nil {
		return nil, err
	}
	return data, decodeObject(data, v)
}

// readBody reads the whole body, in no content coding and within the
// server's limit.
func (s *Server) readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	if err := contentCoding(r); err != nil {
		return nil, err
	}
	body := http.MaxBytesReader(w, r.Body, s.opts.MaxBodyBytes)
	data, err := io.ReadAll(body)
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return nil, fmt.Errorf("request body is over the %d-byte limit: %w", s.opts.MaxBodyBytes, sdk.ErrTooLarge)
		}
		return nil, badRequest("request body could not be read")
	}
	if n := int64(len(data)); n >= largeBody {
		// Decoded, a body of many small values takes tens of times its
		// bytes (320,000 empty content blocks in 4 MiB took 115 MB): the
		// large ones in flight together are bounded, held until their
		// requests end. The wait has the request's deadline: r's
		// context is the connection's, which only the client ends.
		wait, cancel := context.WithTimeout(r.Context(), s.opts.RequestTimeout)
		defer cancel()
		holder := bodyHolder(r)
		if err := s.bodies.Acquire(wait, holder, n); err != nil {
			return nil, fmt.Errorf("a request body of %d bytes waited for other large request bodies being served: %w", n, sdk.ErrUnavailable)
		}
		context.AfterFunc(r.Context(), func() { s.bodies.Release(holder, n) })
	}
	return data, nil
}

type bodyHolderKey struct{}

// withBodyHolder answers r naming c's token as the holder of its body at
// the large bodies' gate, whose fairness it keys.
func withBodyHolder(r *http.Request, c caller) *http.Request {
	return r.WithContext(context.WithValue(r.Context(), bodyHolderKey{}, c.name()))
}

// bodyHolder answers the token withBodyHolder named for r ("" for none,
// or a server without tokens).
func bodyHolder(r *http.Request) string {
	name, _ := r.Context().Value(bodyHolderKey{}).(string)
	return name
}

// largeBody is the size from which a request body counts against the
// large bodies a server holds at once: largeBodiesHeld bodies at the
// limit, or more smaller ones.
const (
	largeBody       = 64 << 10
	largeBodiesHeld = 2
)

// decodeObject decodes data, a body, into v by decode's rules.
func decodeObject(data []byte, v any) error {
	// Every body is an object: null (or any other value) would decode
	// into the zero request and act on defaults, such as the default realm.
	if trimmed := bytes.TrimLeft(data, " \t\r\n"); len(trimmed) > 0 && trimmed[0] != '{' {
		return &sdk.FieldError{Field: "request body", Problem: "must be a JSON object", Err: sdk.ErrInvalid}
	}
	if err := strictjson.Decode(data, v); err != nil {
		return invalidJSON("request body", err)
	}
	return nil
}

// MaxMCPBatch bounds the messages of one JSON-RPC batch sent to /mcp.
const MaxMCPBatch = 16

// MaxMCPDepth bounds how deep an /mcp message nests its values: far past
// any tool's arguments, and short of the SDK decoder's own limit, which
// it refuses in its own words.
const MaxMCPDepth = 64

// MaxMCPValues bounds the JSON values (names included) of one /mcp body:
// far past a batch of tool calls at their largest (16 recalls of 1,000
// tags each), and short of what makes the decoded message many times its
// bytes. A 4 MiB body of empty objects decoded to 200 MB, and a token's
// max_in_flight of them together to gigabytes.
const MaxMCPValues = 1 << 15

// valuesOver reports whether data, a JSON text, holds more than limit
// values and names. It reads them one at a time and keeps none, so it
// answers before anything is decoded; invalid JSON is left to the
// decoder, which says what is wrong with it.
func valuesOver(data []byte, limit int) bool {
	dec := jsontext.NewDecoder(bytes.NewReader(data))
	n := 0
	for {
		tok, err := dec.ReadToken()
		if err != nil {
			return false
		}
		if k := tok.Kind(); k != '}' && k != ']' {
			if n++; n > limit {
				return true
			}
		}
	}
}

// nestedDeeper reports whether v, a decoded JSON value, nests objects and
// arrays more than limit deep.
func nestedDeeper(v any, limit int) bool {
	switch v := v.(type) {
	case map[string]any:
		if limit == 0 {
			return true
		}
		for _, e := range v {
			if nestedDeeper(e, limit-1) {
				return true
			}
		}
	case []any:
		if limit == 0 {
			return true
		}
		for _, e := range v {
			if nestedDeeper(e, limit-1) {
				return true
			}
		}
	}
	return false
}

// strictMCPBody reads an MCP message whole and refuses, as /v1 refuses a
// body, JSON that repeats a name at any depth (or holds a lone
// surrogate); r then reads it again. The
// SDK's decoder keeps the last of two "name"s or "arguments", where a
// gateway in front may have read the first: the tool it let through is
// not the one that would run. It answers how many messages the body holds.
func (s *Server) strictMCPBody(w http.ResponseWriter, r *http.Request) (int, error) {
	// Read as /v1 reads a body, so a large one counts against the large
	// bodies served at once: the SDK decodes it again, several times its
	// bytes.
	data, err := s.readBody(w, r)
	if err != nil {
		return 0, err
	}
	if valuesOver(data, MaxMCPValues) {
		return 0, &sdk.FieldError{Field: "request body", Problem: fmt.Sprintf("holds more than %d JSON values; send fewer at a time", MaxMCPValues), Err: sdk.ErrInvalid}
	}
	// Refused whatever the SDK would make of it: its decoder reads the
	// first value of a body with trailing data ("{...} x", or a second
	// message), so a refusal here only when the whole body was valid JSON
	// let junk after it switch every check below off.
	var message any
	if err := strictjson.Decode(data, &message); err != nil {
		return 0, invalidJSON("request body", err)
	}
	if nestedDeeper(message, MaxMCPDepth) {
		return 0, &sdk.FieldError{Field: "request body", Problem: fmt.Sprintf("nests values more than %d deep", MaxMCPDepth), Err: sdk.ErrInvalid}
	}
	// The SDK runs a batch's calls at once: one request of thousands
	// would be thousands of concurrent recalls against every tenant's.
	if batch, ok := message.([]any); ok {
		if len(batch) > MaxMCPBatch {
			return 0, &sdk.FieldError{Field: "request body", Problem: fmt.Sprintf("is a batch of %d messages, over the limit of %d; send fewer at a time", len(batch), MaxMCPBatch), Err: sdk.ErrInvalid}
		}
		// Answers are matched to requests by id: two requests of one id
		// got one answer, and the other call ran (or not) unseen.
		seen := map[string]int{}
		for i, m := range batch {
			obj, ok := m.(map[string]any)
			id, has := obj["id"]
			if !ok || !has || id == nil {
				continue // a notification, or not a message: the SDK says so
			}
			// The SDK reads a number id as the integer it truncates to
			// (7.5 is 7): keyed so, or 7 and 7.5 would pass as two.
			key := fmt.Sprintf("%T:%v", id, id)
			if n, isNumber := id.(float64); isNumber {
				key = fmt.Sprintf("number:%d", int64(n))
			}
			if j, dup := seen[key]; dup {
				return 0, &sdk.FieldError{Field: fmt.Sprintf("request body[%d].id", i), Problem: fmt.Sprintf("repeats the id of message %d; each request of a batch needs its own id", j), Err: sdk.ErrInvalid}
			}
			seen[key] = i
		}
	}
	if err := eachMessage(message, checkMessage); err != nil {
		return 0, err
	}
	r.Body = io.NopCloser(bytes.NewReader(data))
	if batch, ok := message.([]any); ok {
		return len(batch), nil
	}
	return 1, nil
}

// eachMessage runs check on the message, or on each message of a batch,
// with the path of its fields.
func eachMessage(message any, check func(path string, m map[string]any) error) error {
	batch, isBatch := message.([]any)
	if !isBatch {
		batch = []any{message}
	}
	for i, m := range batch {
		obj, ok := m.(map[string]any)
		if !ok {
			continue // not a message: the SDK says so
		}
		path := ""
		if isBatch {
			path = fmt.Sprintf("request body[%d].", i)
		}
		if err := check(path, obj); err != nil {
			return err
		}
	}
	return nil
}

// checkMessage refuses what the SDK would refuse in the words of its Go
// types ("unmarshaling into a *mcp.ListToolsParams"), or misanswer: an id
// that is a number but not an integer (answered 1.5 as 1, which a client
// matching answers by id never finds), params that are not an object,
// and a tool call's or an initialize's members of the wrong type.
func checkMessage(path string, m map[string]any) error {
	bad := func(field, problem string) error {
		return &sdk.FieldError{Field: path + field, Problem: problem, Err: sdk.ErrInvalid}
	}
	// The SDK refuses an id of another type in its Go words ("invalid ID
	// type bool").
	switch m["id"].(type) {
	case nil, string, float64:
	default:
		return bad("id", "must be a string or an integer")
	}
	if n, ok := m["id"].(float64); ok && n != math.Trunc(n) {
		return bad("id", fmt.Sprintf("%v is not an integer; an id is a string or an integer", n))
	}
	// The SDK reads a number id through a float64: past 2^53 it answers
	// another integer (9007199254740993 as ...992, 1e30 as -2^63), which
	// the client never matches.
	if n, ok := m["id"].(float64); ok && math.Abs(n) > mcpserver.MaxExactID {
		return bad("id", fmt.Sprintf("is outside -%d..%d; send a larger id as a string", mcpserver.MaxExactID, mcpserver.MaxExactID))
	}
	// A message naming no method is a response (the client's answer to
	// a request of the server's): without a result or an error it is no
	// message at all, which the SDK dropped with a 202 and no answer.
	method, hasMethod := m["method"]
	_, hasResult := m["result"]
	_, hasError := m["error"]
	switch _, isString := method.(string); {
	case hasMethod && !isString:
		return bad("method", "must be a string")
	case !hasMethod && !hasResult && !hasError:
		return bad("method", "is required: a request or notification names its method, a response carries a result or an error")
	}
	raw, has := m["params"]
	if !has || raw == nil {
		return nil
	}
	params, ok := raw.(map[string]any)
	if !ok {
		return bad("params", "must be an object")
	}
	want := map[string]string{"_meta": "object"}
	switch m["method"] {
	case "tools/call":
		want["name"], want["arguments"] = "string", "object"
	case "initialize":
		want["protocolVersion"], want["capabilities"], want["clientInfo"] = "string", "object", "object"
	}
	for field, kind := range want {
		v, has := params[field]
		if !has || v == nil {
			continue
		}
		if _, isString := v.(string); kind == "string" && !isString {
			return bad("params."+field, "must be a string")
		}
		if _, isObject := v.(map[string]any); kind == "object" && !isObject {
			return bad("params."+field, "must be an object")
		}
	}
	// Any other member of the wrong kind (tools/list's cursor, a client
	// capability) the SDK refuses naming its Go types.
	if method, ok := m["method"].(string); ok {
		var fe *sdk.FieldError
		if err := mcpserver.CheckParamsValue(method, params); errors.As(err, &fe) {
			return bad(fe.Field, fe.Problem)
		}
	}
	return nil
}

// contentCoding refuses a body sent in a content coding (gzip, say): no
// route decodes one, and read as JSON it would be refused for a reason
// that sends the client looking in the wrong place.
func contentCoding(r *http.Request) error {
	for _, v := range r.Header.Values("Content-Encoding") {
		for _, coding := range strings.Split(v, ",") {
			if coding = strings.TrimSpace(coding); coding != "" && !strings.EqualFold(coding, "identity") {
				return fmt.Errorf("Content-Encoding %q is not accepted; send the body uncompressed: %w", coding, errUnsupportedMediaType)
			}
		}
	}
	return nil
}

// invalidJSON names the refused field (or the document) and the problem
// once, as a field error the client can branch on.
func invalidJSON(doc string, err error) error {
	var e *strictjson.Error
	if errors.As(err, &e) && e.Path != "" {
		return &sdk.FieldError{Field: e.Path, Problem: e.Problem, Err: sdk.ErrInvalid}
	}
	return &sdk.FieldError{Field: doc, Problem: err.Error(), Err: sdk.ErrInvalid}
}

// rawContent is a request's content as sent. The body's strict decoder
// checks its JSON (a repeated name, invalid UTF-8, a lone surrogate), and
// decodeContent then reads it by the coordinator's content rules. Decoded
// in one pass, a refusal by those rules would reach the client in the
// strict decoder's words for the Go type behind the field ("content: must
// be an object, not an array"), whatever the problem was.
type rawContent = json.RawMessage

// decodeContent reads raw, the request field at path, as coordinator
// content; nil when it is absent or null. A refusal names the refused
// block's path ("content[0].content[1]") and the problem once.
func decodeContent(path string, raw rawContent) (*coordinator.Content, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var c coordinator.Content
	if err := c.UnmarshalJSON(raw); err != nil {
		return nil, contentRefusal(path, err)
	}
	return &c, nil
}

// contentRefusal re-homes the content decoder's refusal under path. The
// decoder names each block it descends into ("content[0]: content[1]:
// content: a text block needs …", "content[0]: content: content: must
// be a string…" for a block's nested content itself); the blocks become
// the path (path[0].content[1], path[0].content) and the problem is said
// once. A refusal of another
// shape keeps its words under path.
func contentRefusal(path string, err error) error {
	var fe *sdk.FieldError
	if !errors.As(err, &fe) {
		return &sdk.FieldError{Field: path, Problem: err.Error(), Err: sdk.ErrInvalid}
	}
	at := path
	if prefix, ok := strings.CutSuffix(err.Error(), fe.Error()); ok && fe.Field == "content" {
		for i, block := range strings.Split(prefix, ": ") {
			if block == "" {
				continue
			}
			if block == "content" && i > 0 {
				at += ".content" // a block's nested content itself
				continue
			}
			index, ok := strings.CutPrefix(block, "content")
			if !ok || !blockIndex.MatchString(index) {
				at = path
				break
			}
			if i > 0 {
				at += ".content"
			}
			at += index
		}
	}
	return &sdk.FieldError{Field: at, Problem: fe.Problem, Err: fe.Err}
}

// blockIndex is a block's place in a content list, as the content decoder
// writes it.
var blockIndex = regexp.MustCompile(`^\[[0-9]+\]$`)
