package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/memhost/memhost/coordinator/coordinatortest"
	"github.com/memhost/memhost/internal/compaction"
	"github.com/memhost/memhost/sdk"
)

// TestErrorAnswersMatchTheDocument: every status of the error table is
// answered as docs/openapi.yaml describes it (the envelope, Retry-After on
// a 503), including those no end-to-end test provokes against the
// document: a provider's storage_full and read_only (507), a compactor's
// failure (502), a plugin's conflict, outage and timeout, and an internal
// error.
func TestErrorAnswersMatchTheDocument(t *testing.T) {
	comp := &echoCompactor{mode: "fail"}
	srv, p := newSurfacesWith(t, Options{Compaction: compaction.New(compaction.Options{Compactor: comp})})
	const write = `{"records":[{"scope":"realm","kind":"fact","title":"t","body":"b"}]}`
	cases := []struct {
		fault  error
		status int
		code   string
	}{
		{fmt.Errorf("disk: %w", sdk.ErrNoSpace), 507, "storage_full"},
		{fmt.Errorf("mount: %w", sdk.ErrReadOnly), 507, "read_only"},
		{fmt.Errorf("plugin restarting: %w", sdk.ErrUnavailable), 503, "unavailable"},
		{fmt.Errorf("plugin slow: %w", sdk.ErrDeadline), 504, "deadline_exceeded"},
		{fmt.Errorf("raced: %w", sdk.ErrConflict), 409, "conflict"},
		{fmt.Errorf("no writes: %w", sdk.ErrUnsupported), 501, "unsupported"},
		{errors.New("something broke"), 500, "internal"},
	}
	for _, c := range cases {
		t.Run(c.code, func(t *testing.T) {
			p.SetHook(coordinatortest.MethodRemember, func(context.Context, any) error { return c.fault })
			defer p.SetHook(coordinatortest.MethodRemember, nil)
			req, _ := http.NewRequest("POST", srv.URL+"/v1/records", strings.NewReader(write))
			req.Header.Set("Content-Type", "application/json")
			status, header, data := exchange(t, srv, req, []byte(write))
			var e errorBody
			json.Unmarshal(data, &e)
			if status != c.status || e.Error.Code != c.code {
				t.Fatalf("= %d %s, want %d %s", status, data, c.status, c.code)
			}
			if (status == 503) != (header.Get("Retry-After") != "") {
				t.Fatalf("status %d with Retry-After %q", status, header.Get("Retry-After"))
			}
		})
	}
	body := `{"identity":{"id":"alice"},"evicted":[{"role":"user","content":"hi"}]}`
	req, _ := http.NewRequest("POST", srv.URL+"/v1/conversations/c1/compact", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if status, _, data := exchange(t, srv, req, []byte(body)); status != 502 || !strings.Contains(string(data), `"compaction_failed"`) {
		t.Fatalf("a failing compactor = %d %s, want 502 compaction_failed", status, data)
	}
}
