package console

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// Agents write proposals, so agents choose how big the review queue is:
// a full page of proposals, each restating a record with a body at the
// SDK's 64 KiB limit, must still give the operator a page a browser
// shows at once, saying what it left out and where to read it all.
func TestQueueOfHugeProposalsStaysSmall(t *testing.T) {
	line := strings.Repeat("a line an agent wrote ", 8)
	body := strings.Repeat(line+"\n", 64<<10/(len(line)+1))
	var props []map[string]any
	for i := 0; i < 50; i++ {
		var diff []map[string]string
		for j := 0; j < 400; j++ {
			diff = append(diff, map[string]string{"field": "body", "op": "+", "text": line + strings.Repeat("x", 300)})
		}
		props = append(props,
			map[string]any{"id": "p-restating", "record": map[string]any{"title": "t", "body": body}, "supersedes": map[string]any{"id": "old", "title": "o", "body": body}, "diff": diff},
			map[string]any{"id": "p-new", "record": map[string]any{"title": "t", "body": body}})
	}
	page, _ := json.Marshal(map[string]any{"pending": len(props), "proposals": props})
	c, err := New(Options{API: &scriptedAPI{answers: map[string]string{"/v1/proposals": string(page)}}, Realms: []string{"default"}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	w := httptest.NewRecorder()
	c.ServeHTTP(w, httptest.NewRequest("GET", "/ui/proposals", nil))
	if w.Code != http.StatusOK {
		t.Fatalf("the queue = %d", w.Code)
	}
	if n := w.Body.Len(); n > 1<<20 {
		t.Errorf("the queue page is %d KiB over %d KiB of proposals, want at most 1024", n>>10, len(page)>>10)
	}
	out := w.Body.String()
	if got := strings.Count(out, "more lines of the difference"); got != 50 {
		t.Errorf("%d of 50 cut differences say so", got)
	}
	if got := strings.Count(out, "more characters"); got != 50 {
		t.Errorf("%d of 50 cut bodies say so", got)
	}
}
