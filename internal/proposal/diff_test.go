package proposal

import (
	"fmt"
	"testing"
	"time"

	"github.com/memhost/memhost/sdk"
)

func TestDiff(t *testing.T) {
	cases := []struct {
		name     string
		old, new sdk.Record
		want     string
	}{
		{"body line changed",
			sdk.Record{Title: "T", Body: "a\nb\nc"}, sdk.Record{Title: "T", Body: "a\nB\nc"},
			"[{body = a} {body - b} {body + B} {body = c}]"},
		{"title and tags, proposal tag ignored",
			sdk.Record{Title: "Old", Body: "x", Tags: []string{"b", "a"}}, sdk.Record{Title: "New", Body: "x", Tags: []string{"a", Tag, "b"}},
			"[{title - Old} {title + New} {body = x}]"},
		// From an outside review: approval carries these into the copy
		// that supersedes the old record, so a reviewer must see them.
		{"expiry, occurrence and thread",
			sdk.Record{Title: "T", Body: "x", OccurredAt: time.Date(2024, 5, 1, 0, 0, 0, 0, time.UTC)},
			sdk.Record{Title: "T", Body: "x", ExpiresAt: time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC), Thread: &sdk.Thread{ID: "chat", Seq: 3}},
			"[{expires_at - } {expires_at + 2025-01-02T03:04:05Z} {occurred_at - 2024-05-01T00:00:00Z} {occurred_at + } {thread - } {thread + chat #3} {body = x}]"},
		{"empty old body",
			sdk.Record{Title: "T"}, sdk.Record{Title: "T", Body: "new"},
			"[{body + new}]"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := fmt.Sprint(Diff(&c.old, &c.new)); got != c.want {
				t.Errorf("Diff = %s, want %s", got, c.want)
			}
		})
	}
}

// A body past the line bound is compared with its tail as one line, not
// expanded into a table quadratic in its lines.
func TestDiffBoundsLines(t *testing.T) {
	body := ""
	for i := range 2 * maxDiffLines {
		body += fmt.Sprintf("line %d\n", i)
	}
	d := lineDiff("body", body, body+"more")
	if len(d) > maxDiffLines+1 {
		t.Fatalf("%d diff lines for a %d-line body, want at most %d", len(d), 2*maxDiffLines, maxDiffLines+1)
	}
}
