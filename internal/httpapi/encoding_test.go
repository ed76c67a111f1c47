package httpapi

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/memhost/memhost/coordinator/coordinatortest"
	"github.com/memhost/memhost/internal/compaction"
	"github.com/memhost/memhost/internal/mcpserver"
)

// TestContentCodingsAreRefused: no route decodes a compressed body, so
// one sent with a Content-Encoding is refused as such (415
// unsupported_media_type), on every route that reads a body and on /mcp,
// rather than read as JSON and refused with "must be a JSON object" or
// "malformed payload", which sends the client looking in the wrong place.
// An identity coding is no coding.
func TestContentCodingsAreRefused(t *testing.T) {
	srv, p := newSurfacesWith(t, Options{Compaction: compaction.New(compaction.Options{Compactor: &echoCompactor{}})})
	gz := func(body string) []byte {
		var b bytes.Buffer
		w := gzip.NewWriter(&b)
		w.Write([]byte(body))
		w.Close()
		return b.Bytes()
	}
	post := func(path, coding string, body []byte) (int, errorBody) {
		req, _ := http.NewRequest("POST", srv.URL+path, bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Content-Encoding", coding)
		status, _, data := exchange(t, srv, req, body)
		var e errorBody
		json.Unmarshal(data, &e)
		return status, e
	}
	routes := New(Options{MCP: func(func(http.Header) (mcpserver.Caller, error)) http.Handler { return http.NotFoundHandler() }}).Routes()
	checked := 0
	for _, route := range routes {
		method, path, _ := strings.Cut(route, " ")
		if method != http.MethodPost || bodilessRoutes[route] {
			continue
		}
		path = strings.NewReplacer("{id}", "r1", "{key}", "s1", "/mcp", "/mcp?identity=a").Replace(path)
		if status, e := post(path, "gzip", gz(`{}`)); status != http.StatusUnsupportedMediaType || e.Error.Code != "unsupported_media_type" {
			t.Errorf("%s with a gzip body = %d %+v, want 415 unsupported_media_type", route, status, e)
		}
		checked++
	}
	if checked < 14 {
		t.Fatalf("checked %d routes; the route list is not what this test expects", checked)
	}
	bodies := map[string]string{
		"/v1/records":     `{"records":[{"scope":"realm","kind":"fact","title":"gzip"}]}`,
		"/v1/recall":      `{"identity":{"id":"alice"},"query":"gzip"}`,
		"/mcp?identity=a": `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"memory_remember","arguments":{"title":"gzip","body":"b"}}}`,
	}
	for path, body := range bodies {
		for _, coding := range []string{"gzip", "deflate", "br", "identity, gzip"} {
			status, e := post(path, coding, gz(body))
			if status != http.StatusUnsupportedMediaType || e.Error.Code != "unsupported_media_type" || !strings.Contains(e.Error.Message, "Content-Encoding") {
				t.Errorf("%s with Content-Encoding %s = %d %+v, want 415 unsupported_media_type naming Content-Encoding", path, coding, status, e)
			}
		}
		if status, e := post(path, "identity", []byte(body)); status != http.StatusOK {
			t.Errorf("%s with Content-Encoding identity = %d %+v, want 200", path, status, e)
		}
	}
	if n := p.Calls(coordinatortest.MethodRemember); n != 2 {
		t.Fatalf("%d writes reached the provider, want the 2 uncompressed ones", n)
	}
}
