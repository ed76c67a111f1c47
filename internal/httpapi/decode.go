package httpapi

import (
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/memhost/memhost/sdk"
	"github.com/memhost/memhost/sdk/strictjson"
)

// decode reads exactly one JSON object into v through the strict decoder:
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
