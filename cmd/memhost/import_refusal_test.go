package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestImportRefusalNamesTheLine: a server's refusal of one record names
// that record's line in the file, not its index in the batch; a refusal of
// the batch as a whole names its lines; and a failure of the command
// (authentication, permission, no server) names no line and says its
// problem once, in plain words.
func TestImportRefusalNamesTheLine(t *testing.T) {
	// Lines 1, 2, 4, 5 and 6 are records; line 3 is bad and skipped, so
	// the batch's index 2 is line 4.
	var file bytes.Buffer
	for i := range 6 {
		if i == 2 {
			file.WriteString("not json\n")
			continue
		}
		file.Write(recordLine(t, i+1))
		file.WriteByte('\n')
	}
	refused := refusedAddr(t)
	for _, c := range []struct {
		name   string
		status int
		body   string
		addr   string // instead of a server answering status and body
		want   string // the whole error
	}{
		{"provider refuses a record", 409, `{"error":{"code":"conflict","message":"markdown: import: records[2]: /data/c2.md already exists and is not a valid record (see the log); fix or remove it first"}}`, "",
			"line 4: conflict: markdown: import: /data/c2.md already exists and is not a valid record (see the log); fix or remove it first"},
		{"field of a record", 400, `{"error":{"code":"invalid_argument","message":"records[3].scope: \"x\" is not identity:<id>, mob:<name>, operator:<name> or realm","field":"records[3].scope"}}`, "",
			`line 5: invalid_argument: scope: "x" is not identity:<id>, mob:<name>, operator:<name> or realm`},
		{"two records", 400, `{"error":{"code":"invalid_argument","message":"records[4].id: \"a\" is records[0]'s id too; an import holds each id once"}}`, "",
			`line 6: invalid_argument: id: "a" is line 1's id too; an import holds each id once`},
		{"the batch as a whole", 400, `{"error":{"code":"invalid_argument","message":"records: too many"}}`, "",
			"lines 1 to 6: invalid_argument: records: too many"},
		{"authentication", 401, `{"error":{"code":"unauthenticated","message":"the bearer token is not recognised"}}`, "",
			"unauthenticated: the bearer token is not recognised" + unauthenticatedHint()},
		{"permission", 403, `{"error":{"code":"permission_denied","message":"token \"agent\" has the agent role; export and import are an application's"}}`, "",
			`permission_denied: token "agent" has the agent role; export and import are an application's`},
		{"server unavailable", 503, `{"error":{"code":"unavailable","message":"the provider stopped"}}`, "",
			"unavailable: the provider stopped"},
		{"no server", 0, "", refused,
			"cannot reach memhost at " + refused + ": connection refused\nNo memhost listens there: start one with `memhost serve`, or use --local to start the plugins in this process"},
	} {
		t.Run(c.name, func(t *testing.T) {
			base := "http://" + c.addr
			if c.addr == "" {
				srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					w.Header().Set("Content-Type", "application/json")
					w.WriteHeader(c.status)
					w.Write([]byte(c.body))
				}))
				defer srv.Close()
				base = srv.URL
			}
			client := &apiClient{base: base, http: &http.Client{}, closer: func() {}}
			_, err := importFrom(context.Background(), client, importOptions{batch: 500}, bytes.NewReader(file.Bytes()), io.Discard, newProgress(io.Discard, int64(file.Len()), false))
			if err == nil || err.Error() != c.want {
				t.Fatalf("import failed with\n%v\nwant\n%s", err, c.want)
			}
			for _, leak := range []string{"records[", "Post ", "dial tcp", "http://"} {
				if strings.Contains(err.Error(), leak) {
					t.Errorf("the error names %q", leak)
				}
			}
		})
	}
}
