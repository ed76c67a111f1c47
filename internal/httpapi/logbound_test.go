package httpapi

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"

	hclog "github.com/hashicorp/go-hclog"
	"github.com/memhost/memhost/coordinator/coordinatortest"
	"github.com/memhost/memhost/internal/mcpserver"
)

// lockedBuffer is a log output read after the server is closed.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestRefusalLogLinesAreBounded: a refusal quoting the request's text
// whole (a 900 KB scope) is shortened for the client, which made it a
// "sanitised" refusal logged at warn with the full error: one request put
// 900 KB in one line of the default log, and a client could repeat it at
// will. The line keeps the error's start and end within a bound.
func TestRefusalLogLinesAreBounded(t *testing.T) {
	scope := "identity:" + strings.Repeat("a", 900<<10) + "/etc/passwd"
	remember, _ := json.Marshal(map[string]any{"records": []map[string]any{{"scope": scope, "kind": "fact", "title": "t", "body": "b"}}})
	tool, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": map[string]any{
		"name": "memory_remember", "arguments": map[string]any{"scope": scope, "title": "t", "body": "b"}}})
	for _, c := range []struct {
		name, path string
		body       []byte
	}{
		{"v1 route", "/v1/records", remember},
		{"mcp tool", "/mcp?identity=alice", tool},
	} {
		t.Run(c.name, func(t *testing.T) {
			var logs lockedBuffer
			logger := hclog.New(&hclog.LoggerOptions{Output: &logs, Level: hclog.Info})
			_, providers, coord := coordinatorWith(t, testConfig(), coordinatortest.AllCapabilities...)
			srv := newServerOver(t, Options{Logger: logger, MaxBodyBytes: 4 << 20, Provider: providers, Coordinator: coord,
				MCP: func(bind func(http.Header) (mcpserver.Caller, error)) http.Handler {
					return mcpserver.Handler(mcpserver.Options{Provider: providers, Coordinator: coord, Bind: bind, Logger: logger})
				}})
			req, _ := http.NewRequest("POST", srv.URL+c.path, bytes.NewReader(c.body))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			srv.Close() // the log is complete once the server is
			out := logs.String()
			if !strings.Contains(out, "bytes left out") {
				t.Fatalf("the refusal was not logged shortened (status %d):\n%.600s", resp.StatusCode, out)
			}
			for _, line := range strings.Split(out, "\n") {
				if len(line) > 20<<10 {
					t.Errorf("one log line of %d bytes: %.200s…", len(line), line)
				}
			}
		})
	}
}
