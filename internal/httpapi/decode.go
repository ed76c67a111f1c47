package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"unicode/utf8"

	"github.com/memhost/memhost/sdk"
)

// decode reads exactly one JSON object into v. Unknown fields are an error
// (a misspelled field must never silently drop data), as is a body over
// the server's limit or trailing data.
func (s *Server) decode(w http.ResponseWriter, r *http.Request, v any) error {
	body := http.MaxBytesReader(w, r.Body, s.opts.MaxBodyBytes)
	data, err := io.ReadAll(body)
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return fmt.Errorf("request body is over the %d-byte limit: %w", s.opts.MaxBodyBytes, sdk.ErrTooLarge)
		}
		return badRequest("read body: %v", err)
	}
	// encoding/json would silently turn invalid UTF-8 into U+FFFD, storing
	// something other than what the client sent.
	if !utf8.Valid(data) {
		return badRequest("request body is not valid UTF-8")
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return badRequest("request body is empty; a JSON object is expected")
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return badRequest("request body: %s", describeJSONError(err))
	}
	if dec.More() {
		return badRequest("request body: trailing data after the JSON object")
	}
	return nil
}

func describeJSONError(err error) string {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syn):
		return fmt.Sprintf("invalid JSON at byte %d: %v", syn.Offset, syn)
	case errors.As(err, &typ):
		if typ.Field != "" {
			return fmt.Sprintf("field %q must be %s, not %s", typ.Field, typ.Type, typ.Value)
		}
		return fmt.Sprintf("expected %s, not %s", typ.Type, typ.Value)
	}
	// encoding/json says `json: unknown field "x"`; keep its words.
	return err.Error()
}
