package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/memhost/memhost/sdk"
)

// TestExportOfAForeignAnswer: an answer memhost would not give (JSON of
// another shape, another server's HTML page, a cursor that does not
// advance) fails the export in one plain line naming the status and at
// most a short excerpt, never a Go decode error or the whole page, and
// writes nothing.
func TestExportOfAForeignAnswer(t *testing.T) {
	line, _ := json.Marshal(archiveLine(1, sdk.StatusActive))
	page := `<!DOCTYPE HTML PUBLIC "-//W3C//DTD HTML 4.01//EN"
        "http://www.w3.org/TR/html4/strict.dtd">
<html>
    <head>
        <meta http-equiv="Content-Type" content="text/html;charset=utf-8">
        <title>Error response</title>
    </head>
    <body>
        <h1>Error response</h1>
        <p>Error code: 501</p>
        <p>Message: Unsupported method ('POST').</p>
    </body>
</html>
`
	for _, c := range []struct {
		name    string
		handler http.HandlerFunc
		want    string // after "the answer from ADDR is not memhost's: " or "memhost at ADDR "
	}{
		{"wrong JSON", func(w http.ResponseWriter, r *http.Request) {
			w.Write([]byte(`{"records":[{"id":5}],"next":""}`))
		}, `is not memhost's: 200 OK, {"records":[{"id":5}],"next":""}`},
		{"HTML page", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/html")
			w.WriteHeader(http.StatusNotImplemented)
			w.Write([]byte(page))
		}, `is not memhost's: 501 Not Implemented, <!DOCTYPE HTML PUBLIC "-//W3C//DTD HTML 4.01//EN" "http://www.w3.o …`},
		{"empty error", func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusBadGateway)
		}, `is not memhost's: 502 Bad Gateway`},
		{"cursor that stays", func(w http.ResponseWriter, r *http.Request) {
			w.Write([]byte(`{"records":[` + string(line) + `],"next":"imp-0000001"}`))
		}, `answered the export cursor "imp-0000001" a second time, so its pages would repeat for ever; stopped`},
		{"cursor that goes back", func(w http.ResponseWriter, r *http.Request) {
			var req struct{ After string }
			_ = json.NewDecoder(r.Body).Decode(&req)
			next := map[string]string{"": "a", "a": "b", "b": "a"}[req.After]
			w.Write([]byte(`{"records":[` + string(line) + `],"next":"` + next + `"}`))
		}, `answered the export cursor "a" a second time`},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv := httptest.NewServer(c.handler)
			defer srv.Close()
			addr := strings.TrimPrefix(srv.URL, "http://")
			path := filepath.Join(t.TempDir(), "x.jsonl")
			done := make(chan error, 1)
			go func() {
				_, err := runRoot(t, "export", "--addr", addr, path)
				done <- err
			}()
			var err error
			select {
			case err = <-done:
			case <-time.After(30 * time.Second):
				t.Fatal("the export still runs after 30 s")
			}
			if err == nil || !strings.HasPrefix(err.Error(), path+" not written: ") || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("export = %v, want %q", err, c.want)
			}
			msg := err.Error()
			if strings.Count(msg, addr) != 1 || strings.Contains(msg, "\n") || len(msg) > 300 {
				t.Errorf("the error is not one short line naming the server once: %q", msg)
			}
			for _, leak := range []string{"json:", "Go struct", "unmarshal", "<html>"} {
				if strings.Contains(msg, leak) {
					t.Errorf("the error holds %q", leak)
				}
			}
			if _, serr := os.Stat(path); serr == nil {
				t.Errorf("a failed export wrote %s", path)
			}
		})
	}
}

// TestOneLineExcerpt: an excerpt is one line, its white space and
// control characters each one space, cut at a rune.
func TestOneLineExcerpt(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"", ""},
		{"  \n\t ", ""},
		{"a\r\n  b\x00c", "a b c"},
		{"ééééé", "ééé …"},
		{"abc", "abc"},
		{"\xffab", "\uFFFDab"},
	} {
		if got := oneLineExcerpt([]byte(c.in), 3); got != c.want {
			t.Errorf("oneLineExcerpt(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}
