// Package apispec holds the HTTP API to its OpenAPI document
// (docs/openapi.yaml): tests check that every route served is documented,
// that every documented path is served, and that the requests and answers
// they exchange with a real server match the document's schemas.
package apispec

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"
)

// NDJSON is the media type of a JSON Lines answer (a streamed reindex).
// The document gives such a body an array schema, one item per line, and
// the decoder registered below reads it so.
const NDJSON = "application/x-ndjson"

func init() {
	openapi3filter.RegisterBodyDecoder(NDJSON, decodeLines)
}

// decodeLines answers a JSON Lines body as the array of its lines.
func decodeLines(body io.Reader, _ http.Header, _ *openapi3.SchemaRef, _ openapi3filter.EncodingFn) (any, error) {
	lines := []any{}
	dec := json.NewDecoder(body)
	dec.UseNumber()
	for {
		var v any
		err := dec.Decode(&v)
		if errors.Is(err, io.EOF) {
			return lines, nil
		}
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", len(lines)+1, err)
		}
		lines = append(lines, v)
	}
}

// Spec is a loaded and validated OpenAPI document.
type Spec struct {
	doc    *openapi3.T
	router routers.Router
}

// Load reads and validates the document at path.
func Load(path string) (*Spec, error) {
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromFile(path)
	if err != nil {
		return nil, fmt.Errorf("load %s: %w", path, err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		return nil, fmt.Errorf("%s is not a valid OpenAPI document: %w", path, err)
	}
	// Requests are matched by path alone: the document's server URL names
	// the default listen address, tests listen elsewhere.
	doc.Servers = nil
	router, err := gorillamux.NewRouter(doc)
	if err != nil {
		return nil, fmt.Errorf("route %s: %w", path, err)
	}
	return &Spec{doc: doc, router: router}, nil
}

// Operations lists the documented operations as "METHOD /path", sorted.
func (s *Spec) Operations() []string {
	var out []string
	for path, item := range s.doc.Paths.Map() {
		for method := range item.Operations() {
			out = append(out, strings.ToUpper(method)+" "+path)
		}
	}
	slices.Sort(out)
	return out
}

// QueryParameters lists the query parameters the document declares for
// an operation ("METHOD /path"), its path's and its own, sorted.
func (s *Spec) QueryParameters(op string) []string {
	method, path, _ := strings.Cut(op, " ")
	item := s.doc.Paths.Value(path)
	if item == nil {
		return nil
	}
	params := slices.Clone(item.Parameters)
	if o := item.GetOperation(method); o != nil {
		params = append(params, o.Parameters...)
	}
	var out []string
	for _, p := range params {
		if p.Value != nil && p.Value.In == openapi3.ParameterInQuery && !slices.Contains(out, p.Value.Name) {
			out = append(out, p.Value.Name)
		}
	}
	slices.Sort(out)
	return out
}

// Check validates one exchange against the document: the request (its
// body given separately, as it was sent) and the answer.
func (s *Spec) Check(req *http.Request, reqBody []byte, status int, header http.Header, respBody []byte) error {
	r := req.Clone(context.Background())
	r.Body = io.NopCloser(bytes.NewReader(reqBody))
	route, params, err := s.router.FindRoute(r)
	if err != nil && (status == http.StatusNotFound || status == http.StatusMethodNotAllowed) {
		// The server agrees there is no such operation; its refusal is
		// still the documented error envelope.
		return s.checkRefusal(status, header, respBody)
	}
	if err != nil {
		return fmt.Errorf("%s %s is not in the API document: %w", req.Method, req.URL.Path, err)
	}
	in := &openapi3filter.RequestValidationInput{
		Request: r, PathParams: params, Route: route,
		Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc, MultiError: true},
	}
	// Tests send bad requests on purpose; only a well-formed exchange (2xx)
	// must match the request schema, every answer must match its own.
	if status < 300 {
		if err := openapi3filter.ValidateRequest(context.Background(), in); err != nil {
			return fmt.Errorf("%s %s: request does not match the API document: %w", req.Method, req.URL.Path, err)
		}
	}
	out := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: in, Status: status, Header: header,
		Options: &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true},
	}
	out.SetBodyBytes(respBody)
	if err := openapi3filter.ValidateResponse(context.Background(), out); err != nil {
		return fmt.Errorf("%s %s -> %d: answer does not match the API document: %w", req.Method, req.URL.Path, status, err)
	}
	return nil
}

// CheckRequest validates a request alone (its body given separately)
// against the document: a request the server refuses as malformed, the
// document should refuse too, so a client checking against it learns of
// the refusal before sending.
func (s *Spec) CheckRequest(req *http.Request, reqBody []byte) error {
	r := req.Clone(context.Background())
	r.Body = io.NopCloser(bytes.NewReader(reqBody))
	route, params, err := s.router.FindRoute(r)
	if err != nil {
		return fmt.Errorf("%s %s is not in the API document: %w", req.Method, req.URL.Path, err)
	}
	return openapi3filter.ValidateRequest(context.Background(), &openapi3filter.RequestValidationInput{
		Request: r, PathParams: params, Route: route,
		Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc, MultiError: true},
	})
}

// checkRefusal checks the answer to a request for no documented
// operation: the Error response (its envelope), and a 405's Allow header.
func (s *Spec) checkRefusal(status int, header http.Header, body []byte) error {
	if status == http.StatusMethodNotAllowed && header.Get("Allow") == "" {
		return errors.New("a 405 answer without an Allow header")
	}
	if ct := header.Get("Content-Type"); ct != "application/json" {
		return fmt.Errorf("a %d answer of type %q, not the JSON error envelope", status, ct)
	}
	ref := s.doc.Components.Responses["Error"]
	if ref == nil || ref.Value == nil || ref.Value.Content.Get("application/json") == nil {
		return errors.New("the API document has no Error response")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return fmt.Errorf("a %d answer that is not JSON: %w", status, err)
	}
	if err := ref.Value.Content.Get("application/json").Schema.Value.VisitJSON(v); err != nil {
		return fmt.Errorf("a %d answer that is not the error envelope: %w", status, err)
	}
	return nil
}
