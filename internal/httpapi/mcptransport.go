package httpapi

import (
	"bytes"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strings"

	"github.com/memhost/memhost/coordinator"
	"github.com/memhost/memhost/internal/mcpserver"
	"github.com/memhost/memhost/sdk"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// errUnsupportedMediaType is answered 415: a body in a content type or
// content coding the endpoint does not read.
var errUnsupportedMediaType = errors.New("unsupported media type")

// maxRefusalText bounds the MCP SDK's refusal text kept for the envelope.
const maxRefusalText = 1024

// mcpAnswer passes the MCP handler's answer through, except a plain-text
// error: the SDK's own refusals of the transport (a wrong method, content
// type or Accept header, a body that is not JSON-RPC or over the limit),
// which it holds back so that the server answers them in the error
// envelope, rendered for the client, like every other refusal.
//
// A JSON-RPC error the transport answers itself (a header that does not
// match the body, an unknown method under 2026-07-28) is held back too:
// it quotes what the client sent and never passes the server's
// renderedErrors, so it is answered with its message rendered.
type mcpAnswer struct {
	http.ResponseWriter
	status    int // the held-back refusal's status; 0 when none
	jsonError bool
	text      bytes.Buffer
}

func (a *mcpAnswer) WriteHeader(code int) {
	if a.status == 0 && code >= 400 {
		switch ct := a.Header().Get("Content-Type"); {
		case strings.HasPrefix(ct, "text/plain"):
			a.status = code
			return
		case strings.HasPrefix(ct, "application/json"):
			a.status, a.jsonError = code, true
			return
		}
	}
	a.ResponseWriter.WriteHeader(code)
}

func (a *mcpAnswer) Write(p []byte) (int, error) {
	if a.status == 0 {
		return a.ResponseWriter.Write(p)
	}
	limit := maxRefusalText
	if a.jsonError {
		limit = maxRefusalJSON
	}
	if room := limit - a.text.Len(); room > 0 {
		a.text.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}

// maxRefusalJSON bounds a held-back JSON-RPC error: it quotes headers.
const maxRefusalJSON = 64 << 10

// writeRenderedError answers the held-back JSON-RPC error, its message
// and data rendered for the client; false when there is none, or it is
// not one (refusal then answers it).
func (a *mcpAnswer) writeRenderedError(c *coordinator.Coordinator) bool {
	if !a.jsonError {
		return false
	}
	var data []byte
	msg, err := jsonrpc.DecodeMessage(a.text.Bytes())
	resp, ok := msg.(*jsonrpc.Response)
	var wire *jsonrpc.Error
	if err == nil && ok && errors.As(resp.Error, &wire) {
		data, err = jsonrpc.EncodeMessage(&jsonrpc.Response{ID: resp.ID, Error: mcpserver.RenderError(c, wire)})
	}
	if err != nil || data == nil {
		// Not a JSON-RPC error (or cut at the bound): answered in the
		// envelope, never as sent.
		a.jsonError = false
		a.text.Reset()
		a.text.WriteString("the message could not be answered")
		return false
	}
	a.ResponseWriter.WriteHeader(a.status)
	a.ResponseWriter.Write(data)
	return true
}

// Unwrap lets http.ResponseController reach the connection.
func (a *mcpAnswer) Unwrap() http.ResponseWriter { return a.ResponseWriter }

// Flush passes a streamed answer on; a held-back refusal is not one.
func (a *mcpAnswer) Flush() {
	if f, ok := a.ResponseWriter.(http.Flusher); a.status == 0 && ok {
		f.Flush()
	}
}

// refusal is the held-back refusal as an error of the class its status
// says, nil when there is none. A wrong method and a body over the limit
// are said in /v1's words; other refusals keep the SDK's text.
func (a *mcpAnswer) refusal(r *http.Request, limit int64) error {
	if a.status == 0 {
		return nil
	}
	text := sdkRefusalText(a.status, strings.TrimSpace(a.text.String()))
	if a.status == http.StatusBadRequest && namesGoTypes(text) {
		text = "the body is not a JSON-RPC message: an object with jsonrpc, method and (for a request) an id that is a string or a number"
	}
	var class error
	switch a.status {
	case http.StatusBadRequest:
		class = sdk.ErrInvalid
	case http.StatusForbidden:
		class = sdk.ErrPermission
	case http.StatusNotFound:
		class = sdk.ErrNotFound
	case http.StatusMethodNotAllowed:
		allow := a.Header().Get("Allow")
		return fmt.Errorf("%s is not allowed on %s (allowed: %s): %w", r.Method, r.URL.Path, allow, errMethodNotAllowed)
	case http.StatusConflict:
		class = sdk.ErrConflict
	case http.StatusRequestEntityTooLarge:
		return fmt.Errorf("request body is over the %d-byte limit: %w", limit, sdk.ErrTooLarge)
	case http.StatusUnsupportedMediaType:
		class = errUnsupportedMediaType
	default:
		return fmt.Errorf("mcp: %s (status %d)", text, a.status)
	}
	return fmt.Errorf("%s: %w", text, class)
}

// notHandled is the SDK's refusal of a method it has no handler for.
var notHandled = regexp.MustCompile(`^JSON RPC not handled: ("(?:[^"\\]|\\.)*") unsupported$`)

// sdkRefusalText is the SDK's refusal text said once: without the status
// text it starts with ("Bad Request: "), which the envelope's code says,
// and an unknown method named as such rather than in the JSON-RPC
// library's words ("JSON RPC not handled: \"x\" unsupported").
func sdkRefusalText(status int, text string) string {
	text = strings.TrimPrefix(text, http.StatusText(status)+": ")
	if m := notHandled.FindStringSubmatch(text); m != nil {
		return fmt.Sprintf("method %s is not one this MCP server answers", m[1])
	}
	return text
}

// namesGoTypes reports whether the SDK's refusal text speaks of Go's
// types (its decoder's words) rather than the client's message.
func namesGoTypes(text string) bool {
	for _, word := range []string{"Go value", "Go struct", "interface {}", "jsonrpc2.", "map["} {
		if strings.Contains(text, word) {
			return true
		}
	}
	return false
}
