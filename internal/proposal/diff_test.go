package proposal

import (
	"fmt"
	"testing"

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
