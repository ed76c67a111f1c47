package httpapi

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestAnErrorQuotingALongValueStaysShort: a refusal quoting a request's
// text (a 900 KB scope) is answered short, its code and field kept: the
// whole value came back, grown by escaping, in an error as large as the
// request.
func TestAnErrorQuotingALongValueStaysShort(t *testing.T) {
	srv, _ := newTestServer(t, Options{})
	body, _ := json.Marshal(map[string]any{"realm": "default", "records": []map[string]any{{
		"scope": "identity:" + strings.Repeat("a\x7f", 450<<10), "kind": "fact", "title": "t", "body": "b",
	}}})
	status, e := call(t, srv, "POST", "/v1/records", "", body)
	if status != 400 || e.Error.Code != "invalid_argument" || e.Error.Field != "records[0].scope" {
		t.Fatalf("POST = %d %s %q, want 400 invalid_argument on records[0].scope", status, e.Error.Code, e.Error.Field)
	}
	if n := len(e.Error.Message); n > 8<<10 {
		t.Fatalf("the message is %d bytes, want a few KiB", n)
	}
}
