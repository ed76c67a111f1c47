package httpapi

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/memhost/memhost/sdk"
	"github.com/memhost/memhost/sdk/strictjson"
)

// decode reads exactly one JSON object into v (null or another value is
// refused) through the strict decoder:
// unknown or case-folded field names, duplicate keys, trailing data,
// invalid UTF-8 and lone surrogates are refused, so nothing is stored other
// than what the client sent. A body over the server's limit is refused too.
func (s *Server) decode(w http.ResponseWriter, r *http.Request, v any) error {
	body := http.MaxBytesReader(w, r.Body, s.opts.MaxBodyBytes)
	data, err := io.ReadAll(body)
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return fmt.Errorf("request body is over the %d-byte limit: %w", s.opts.MaxBodyBytes, sdk.ErrTooLarge)
		}
		return badRequest("request body could not be read")
	}
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

// invalidJSON names the refused field (or the document) and the problem
// once, as a field error the client can branch on.
func invalidJSON(doc string, err error) error {
	var e *strictjson.Error
	if errors.As(err, &e) && e.Path != "" {
		return &sdk.FieldError{Field: e.Path, Problem: e.Problem, Err: sdk.ErrInvalid}
	}
	return &sdk.FieldError{Field: doc, Problem: err.Error(), Err: sdk.ErrInvalid}
}
