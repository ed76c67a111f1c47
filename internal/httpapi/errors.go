package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/memhost/memhost/internal/compaction"
	"github.com/memhost/memhost/internal/pluginhost"
	"github.com/memhost/memhost/internal/proposal"
	"github.com/memhost/memhost/internal/redact"
	"github.com/memhost/memhost/sdk"
)

// errUnauthenticated is answered 401 (no or unknown bearer token).
var errUnauthenticated = errors.New("unauthenticated")

// noEndpoint is the refusal (404) of a path no route serves. The path is
// the client's own, so its message is not shortened as a host path is.
type noEndpoint struct{ method, path string }

func (e noEndpoint) Error() string {
	return fmt.Sprintf("no such endpoint: %s %s: %v", e.method, e.path, sdk.ErrNotFound)
}

func (e noEndpoint) Unwrap() error { return sdk.ErrNotFound }

// errMethodNotAllowed is answered 405 (a known path, another method).
var errMethodNotAllowed = errors.New("method not allowed")

// statusOf maps an error's stable code to its HTTP status.
func statusOf(code string) int {
	switch code {
	case string(sdk.CodeInvalidArgument):
		return http.StatusBadRequest
	case "unauthenticated":
		return http.StatusUnauthorized
	case "method_not_allowed":
		return http.StatusMethodNotAllowed
	case codeUnsupportedMediaType:
		return http.StatusUnsupportedMediaType
	case string(sdk.CodePermissionDenied):
		return http.StatusForbidden
	case string(sdk.CodeNotFound):
		return http.StatusNotFound
	case string(sdk.CodeConflict):
		return http.StatusConflict
	case string(sdk.CodeTooLarge):
		return http.StatusRequestEntityTooLarge
	case string(sdk.CodeUnsupported):
		return http.StatusNotImplemented
	case string(sdk.CodeUnavailable), CodeProviderUnavailable:
		return http.StatusServiceUnavailable
	case string(sdk.CodeDeadlineExceeded):
		return http.StatusGatewayTimeout
	case string(sdk.CodeStorageFull), string(sdk.CodeReadOnly):
		return http.StatusInsufficientStorage
	case compaction.CodeHistoryMismatch, codeTargetChanged:
		return http.StatusConflict
	case codeTooManyProposals, codeTooManyRequests:
		return http.StatusTooManyRequests
	case compaction.CodeFailed, compaction.CodeEmpty, compaction.CodeTooLarge:
		return http.StatusBadGateway
	}
	return http.StatusInternalServerError
}

func codeOf(err error) string {
	if errors.Is(err, errUnauthenticated) {
		return "unauthenticated"
	}
	if code, ok := compaction.CodeOf(err); ok {
		return code
	}
	if errors.Is(err, errMethodNotAllowed) {
		return "method_not_allowed"
	}
	if errors.Is(err, errUnsupportedMediaType) {
		return codeUnsupportedMediaType
	}
	if errors.Is(err, proposal.ErrTooMany) {
		return codeTooManyProposals
	}
	if errors.Is(err, proposal.ErrTargetChanged) {
		return codeTargetChanged
	}
	if errors.Is(err, errTooManyInFlight) {
		return codeTooManyRequests
	}
	if errors.Is(err, pluginhost.ErrProviderUnavailable) {
		return CodeProviderUnavailable
	}
	return string(sdk.CodeOf(err))
}

// codeUnsupportedMediaType (415) refuses a body the endpoint cannot read:
// /mcp's in another content type than JSON, or any in a content coding.
const codeUnsupportedMediaType = "unsupported_media_type"

// CodeProviderUnavailable (503) says the realm's provider instance is not
// serving: it could not start (a damaged store, a remote plugin out of
// reach) or is restarting; /readyz says why, and other realms still serve.
const CodeProviderUnavailable = "provider_unavailable"

type errorBody struct {
	Error ErrorDetail `json:"error"`
}

// ErrorDetail is the body of the error envelope: a stable code, the
// message, and the request id and refused field when there are.
type ErrorDetail struct {
	Code      string `json:"code"`
	Message   string `json:"message"`
	RequestID string `json:"request_id,omitempty"`
	// Field is the request field refused, when the refusal named one
	// (a plugin's too: sdk.FieldError crosses the plugin boundary).
	Field string `json:"field,omitempty"`
}

// refuseUnrouted answers err to a request no route took, with its request
// id, and counts it under RouteUnmatched.
func (s *Server) refuseUnrouted(w http.ResponseWriter, r *http.Request, err error) {
	reqID := requestID(r)
	w.Header().Set(HeaderRequestID, reqID)
	s.writeError(w, err, reqID)
	s.opts.Metrics.countUnmatched(statusOf(codeOf(err)))
}

// writeError answers err in the error envelope, its message sanitised
// (see redact.ForClient); it reports whether sanitising changed the message,
// so the caller can log the full text.
func (s *Server) writeError(w http.ResponseWriter, err error, requestID string) bool {
	var body errorBody
	body.Error.RequestID = requestID
	body.Error.Code = codeOf(err)
	msg, changed := redact.ForClient(s.opts.Coordinator, clientMessage(err))
	var unknown noEndpoint
	if errors.As(err, &unknown) {
		msg = redact.ClientText(s.opts.Coordinator, clientMessage(err))
		changed = msg != clientMessage(err)
	}
	body.Error.Message = msg
	var fe *sdk.FieldError
	if errors.As(err, &fe) {
		// A field's path may hold a member name the client chose.
		field, fieldChanged := redact.ForClient(s.opts.Coordinator, fe.Field)
		body.Error.Field, changed = field, changed || fieldChanged
	}
	status := statusOf(body.Error.Code)
	if status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="memhost"`)
	}
	if status == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", strconv.Itoa(RetryAfterSeconds))
	}
	if err := writeJSON(w, status, body); err != nil {
		writeBuffer(w, http.StatusInternalServerError, bytes.NewBufferString(errorFallback))
	}
	return changed
}

// RetryAfterSeconds is the Retry-After of every 503: an outage's cause (a
// plugin restarting, the database down or out of connections) is shared
// by every host, so a client backs off rather than retrying at once.
const RetryAfterSeconds = 2

// writeJSON answers v with status. A v that encoding/json refuses (a
// number that is not finite, a year past 9999) is not answered: the error
// goes back to the route, which answers 500 in the error envelope and logs
// it, where an empty 200 would pass for success.
func writeJSON(w http.ResponseWriter, status int, v any) error {
	// Encoded whole first, into a reused buffer: the answer then goes out
	// with a Content-Length in one write rather than in chunks, which is a
	// measurable share of a sub-millisecond recall.
	buf := jsonBuffers.Get().(*bytes.Buffer)
	defer putJSONBuffer(buf)
	enc := json.NewEncoder(buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return encodeError(err)
	}
	writeBuffer(w, status, buf)
	return nil
}

// encodeError says why an answer could not be encoded, without
// encoding/json's wording, which names Go types.
func encodeError(err error) error {
	what := "a value JSON cannot hold"
	var uv *json.UnsupportedValueError
	if errors.As(err, &uv) {
		what = "the value " + uv.Str + ", which JSON cannot hold"
	}
	return fmt.Errorf("the answer could not be encoded: it holds %s", what)
}

// errorFallback is the envelope answered if an error's own envelope could
// not be encoded; its fields are strings, so that should never happen.
const errorFallback = `{"error":{"code":"internal","message":"the error could not be encoded"}}` + "\n"

// writeBuffer sends buf, a whole JSON answer, with its length.
func writeBuffer(w http.ResponseWriter, status int, buf *bytes.Buffer) {
	_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(AnswerWriteTimeout))
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(buf.Len()))
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

var jsonBuffers = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// putJSONBuffer returns buf to the pool unless one large answer (an
// export page, say) grew it past what is worth keeping.
func putJSONBuffer(buf *bytes.Buffer) {
	if buf.Cap() > 1<<20 {
		return
	}
	buf.Reset()
	jsonBuffers.Put(buf)
}

// fieldRefusal refuses a request field: a field error of class err, so
// the field is named in "field" as in the message.
func fieldRefusal(field string, err error, format string, args ...any) error {
	return &sdk.FieldError{Field: field, Problem: fmt.Sprintf(format, args...), Err: err}
}

func badRequest(format string, args ...any) error {
	return fmt.Errorf("%s: %w", fmt.Sprintf(format, args...), sdk.ErrInvalid)
}

// sentinels are the class errors a message may end with; the code already
// says the class, so the message states the problem once, without it.
var sentinels = []error{
	sdk.ErrInvalid, sdk.ErrNotFound, sdk.ErrConflict, sdk.ErrTooLarge, sdk.ErrUnsupported,
	sdk.ErrUnavailable, sdk.ErrDeadline, sdk.ErrPermission, sdk.ErrNoSpace, sdk.ErrReadOnly, errUnauthenticated, errMethodNotAllowed, errUnsupportedMediaType,
	errTooManyInFlight, proposal.ErrTooMany, proposal.ErrTargetChanged,
}

// clientMessage is err's text without a trailing sentinel ("...: invalid
// argument") that repeats the code.
func clientMessage(err error) string {
	msg := err.Error()
	for _, s := range sentinels {
		if trimmed, ok := strings.CutSuffix(msg, ": "+s.Error()); ok && errors.Is(err, s) {
			return trimmed
		}
	}
	return msg
}

// inRecord re-homes a record's refusal under its place in the request
// ("records[1].kind"), in the field member as in the message.
func inRecord(i int, err error) error { return under(fmt.Sprintf("records[%d]", i), err) }

// under re-homes a refusal of a part of the request under the part's
// place (prefix), in the field member as in the message.
func under(prefix string, err error) error {
	var fe *sdk.FieldError
	if errors.As(err, &fe) {
		return &sdk.FieldError{Field: prefix + "." + fe.Field, Problem: fe.Problem, Err: fe.Err}
	}
	return fmt.Errorf("%s: %w", prefix, err)
}

// asField re-homes a value's refusal under the request field that held it
// ("scopes[1]"): the value's own field name ("scope") gives way to the
// field's path, in the field member as in the message.
func asField(field string, err error) error {
	var fe *sdk.FieldError
	if errors.As(err, &fe) {
		return &sdk.FieldError{Field: field, Problem: fe.Problem, Err: fe.Err}
	}
	return fmt.Errorf("%s: %w", field, err)
}
