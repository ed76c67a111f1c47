package httpapi

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestStartingRefusalsCarryTheRequestID: while the host starts its
// plugins, a request's 503 carries its X-Request-Id, in the header and the
// body, as docs/api.md says of every answer on /v1 and /mcp; it carried
// neither, so a client could not match a failed call to the host's log.
func TestStartingRefusalsCarryTheRequestID(t *testing.T) {
	srv := httptest.NewServer(Starting())
	defer srv.Close()
	for _, sent := range []string{"client-id-1", ""} {
		for _, path := range []string{"/v1/recall", "/mcp"} {
			body := `{"identity":{"id":"alice"}}`
			req, _ := http.NewRequest("POST", srv.URL+path, strings.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			if sent != "" {
				req.Header.Set(HeaderRequestID, sent)
			}
			status, header, data := exchange(t, srv, req, []byte(body))
			var e errorBody
			json.Unmarshal(data, &e)
			id := header.Get(HeaderRequestID)
			if status != http.StatusServiceUnavailable || header.Get("Retry-After") == "" || id == "" || e.Error.RequestID != id || (sent != "" && id != sent) {
				t.Errorf("POST %s (X-Request-Id %q) while starting = %d, X-Request-Id %q, Retry-After %q, %s; want 503 with the id in the header and the body", path, sent, status, id, header.Get("Retry-After"), data)
			}
		}
	}
}
