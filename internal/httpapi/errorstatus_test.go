package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/memhost/memhost/coordinator/coordinatortest"
	"github.com/memhost/memhost/internal/compaction"
	"github.com/memhost/memhost/internal/pluginhost"
	"github.com/memhost/memhost/internal/proposal"
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

var (
	// errorTableRow is a row of docs/api.md's error table:
	// "| 502 | `compaction_failed`, `compaction_empty` | when |".
	errorTableRow = regexp.MustCompile("(?m)^\\| ([0-9]{3}) \\| ((?:`[a-z_]+`(?:, )?)+) \\|")
	tableCode     = regexp.MustCompile("`([a-z_]+)`")
	// statusMention is a status and its code in prose: "503 `unavailable`".
	statusMention = regexp.MustCompile("\\b([45][0-9]{2}) `([a-z_]+)`")
)

// documentedErrors answers docs/api.md's error table: status by code.
func documentedErrors(t *testing.T) map[string]int {
	t.Helper()
	doc, err := os.ReadFile("../../docs/api.md")
	if err != nil {
		t.Fatal(err)
	}
	table := map[string]int{}
	for _, row := range errorTableRow.FindAllStringSubmatch(string(doc), -1) {
		status, _ := strconv.Atoi(row[1])
		for _, c := range tableCode.FindAllStringSubmatch(row[2], -1) {
			table[c[1]] = status
		}
	}
	if len(table) < 10 {
		t.Fatalf("found %d codes in the error table of docs/api.md; the pattern no longer matches the page", len(table))
	}
	return table
}

// TestDocumentedErrorStatuses: every status and code the documents name
// together ("a 503 `unavailable`") is one the server answers together, and
// one the error table of docs/api.md lists. config.md and plugins.md said
// a host starting its plugins answers 503 `starting`; it answers 503
// `unavailable` (only /readyz says "starting").
func TestDocumentedErrorStatuses(t *testing.T) {
	table := documentedErrors(t)
	docs, err := filepath.Glob("../../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range append(docs, "../../README.md") {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		name := strings.TrimPrefix(path, "../../")
		for _, m := range statusMention.FindAllStringSubmatch(string(data), -1) {
			status, _ := strconv.Atoi(m[1])
			if served := statusOf(m[2]); served != status {
				t.Errorf("%s says %s; the server answers %s with %d", name, m[0], m[2], served)
			}
			if listed, ok := table[m[2]]; !ok || listed != status {
				t.Errorf("%s says %s; the error table of docs/api.md does not list it so", name, m[0])
			}
		}
	}
}

// compactionCoded is a compaction refusal carrying its stable code.
type compactionCoded string

func (c compactionCoded) Error() string     { return string(c) }
func (c compactionCoded) ErrorCode() string { return string(c) }

// TestTheErrorTableListsEveryCode: every code the server answers an
// error with is a row of docs/api.md's error table, at the status it is
// answered with. The table left out 500 internal, which any error no
// class covers (a plugin's own failure) is answered with.
func TestTheErrorTableListsEveryCode(t *testing.T) {
	table := documentedErrors(t)
	errs := []error{
		errUnauthenticated, errMethodNotAllowed, errUnsupportedMediaType, errTooManyInFlight,
		noEndpoint{"GET", "/v1/nope"}, proposal.ErrTooMany, proposal.ErrTargetChanged, pluginhost.ErrProviderUnavailable,
		sdk.ErrInvalid, sdk.ErrNotFound, sdk.ErrConflict, sdk.ErrTooLarge, sdk.ErrUnsupported, sdk.ErrUnavailable,
		sdk.ErrDeadline, sdk.ErrPermission, sdk.ErrNoSpace, sdk.ErrReadOnly, context.Canceled,
		errors.New("a plugin's own failure"),
		compactionCoded(compaction.CodeFailed), compactionCoded(compaction.CodeEmpty),
		compactionCoded(compaction.CodeTooLarge), compactionCoded(compaction.CodeHistoryMismatch),
	}
	for _, err := range errs {
		code := codeOf(err)
		if listed, ok := table[code]; !ok || listed != statusOf(code) {
			t.Errorf("%v is answered %d %s; the error table of docs/api.md does not list it so", err, statusOf(code), code)
		}
	}
}
