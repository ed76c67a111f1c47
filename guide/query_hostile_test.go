package guide

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"
	"unsafe"

	"github.com/memhost/memhost/sdk"
)

// TestQueryCutKeepsWholeCharacters: a task or message over the query's
// byte bound is cut on a character boundary. A cut that leaves a lead
// byte behind makes the query invalid UTF-8, which a provider plugin
// cannot even receive (a protobuf string must be UTF-8): the session-start
// recall would fail, and that failure is fatal to the session.
func TestQueryCutKeepsWholeCharacters(t *testing.T) {
	pad := func(n int) string { return strings.Repeat("a", n) }
	cases := []struct {
		name, in, want string
	}{
		{"ascii over the bound", pad(maxQueryBytes + 10), pad(maxQueryBytes)},
		{"2-byte char ends at the bound", pad(maxQueryBytes-2) + "é" + "tail", pad(maxQueryBytes-2) + "é"},
		{"2-byte char across the bound", pad(maxQueryBytes-1) + "é" + "tail", pad(maxQueryBytes - 1)},
		{"3-byte char across the bound", pad(maxQueryBytes-2) + "€" + "tail", pad(maxQueryBytes - 2)},
		{"3-byte char ends at the bound", pad(maxQueryBytes-3) + "€" + "tail", pad(maxQueryBytes-3) + "€"},
		{"4-byte char across the bound", pad(maxQueryBytes-1) + "😀" + "tail", pad(maxQueryBytes - 1)},
		{"4-byte char ends at the bound", pad(maxQueryBytes-4) + "😀" + "tail", pad(maxQueryBytes-4) + "😀"},
		{"only 2-byte chars", strings.Repeat("é", maxQueryBytes), strings.Repeat("é", maxQueryBytes/2)},
		{"only 3-byte chars", strings.Repeat("咖", maxQueryBytes), strings.Repeat("咖", maxQueryBytes/3)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := compactQuery(tc.in)
			if !utf8.ValidString(got) {
				t.Fatalf("query is not valid UTF-8: ends %q", got[max(0, len(got)-8):])
			}
			if got != tc.want {
				t.Fatalf("query is %d bytes ending %q, want %d bytes ending %q", len(got), got[max(0, len(got)-8):], len(tc.want), tc.want[max(0, len(tc.want)-8):])
			}
		})
	}
}

// utf8Source refuses a query that is not UTF-8, as a provider across the
// plugin boundary does.
type utf8Source struct{ *spySource }

func (s utf8Source) Recall(ctx context.Context, id sdk.Identity, query string, limit int) ([]sdk.Hit, error) {
	if !utf8.ValidString(query) {
		return nil, fmt.Errorf("query: string field contains invalid UTF-8: %w", sdk.ErrInvalid)
	}
	return s.spySource.Recall(ctx, id, query, limit)
}

func TestLongNonASCIITaskStartsASession(t *testing.T) {
	f := newFixture(t)
	f.add(rec("咖啡", "我喜欢咖啡"))
	s := NewSessions(utf8Source{f.src}, SessionsOptions{})
	for _, task := range []string{
		strings.Repeat("咖啡", maxQueryBytes),
		"a" + strings.Repeat("咖啡", maxQueryBytes),
		strings.Repeat("é", maxQueryBytes),
	} {
		block, err := s.SessionStart(context.Background(), alice, "s", task, Filters{})
		if err != nil {
			t.Fatalf("session start with a %d-byte task: %v", len(task), err)
		}
		if !strings.Contains(block, "咖啡") && strings.HasPrefix(task, "咖") {
			t.Fatalf("nothing recalled:\n%s", block)
		}
		if _, err := s.BeforeIteration(context.Background(), alice, "s", task+"x", Filters{}); err != nil {
			t.Fatal(err)
		}
		if strings.Contains(f.logs.String(), "failed") {
			t.Fatalf("a recall failed: %s", f.logs)
		}
	}
}

// TestQueryHoldsNoneOfTheRequest: a session keeps its query as long as it
// lives, so the query must not share memory with the task or message it
// was cut from. A task of one 4 MB word once kept all 4 MB per session.
func TestQueryHoldsNoneOfTheRequest(t *testing.T) {
	word := strings.Repeat("apple", 2*maxQueryBytes)
	for _, in := range []string{
		word,                          // one word over the bound
		"apple",                       // one word under it
		"  apple  ",                   // one word, trimmed
		word[:maxQueryBytes/2] + " b", // several words
	} {
		t.Run(fmt.Sprintf("%d bytes", len(in)), func(t *testing.T) {
			if got := compactQuery(in); sharesMemory(got, in) {
				t.Fatalf("the %d-byte query shares the %d-byte input's memory", len(got), len(in))
			}
		})
	}
	// And as a session keeps it.
	f := newFixture(t)
	s := NewSessions(f.src, SessionsOptions{})
	if _, err := s.SessionStart(context.Background(), alice, "s", word, Filters{}); err != nil {
		t.Fatal(err)
	}
	if q := s.entry(alice, "s").st.query; q == "" || sharesMemory(q, word) {
		t.Fatalf("the session's %d-byte query shares the task's memory (or is empty)", len(q))
	}
}

// sharesMemory reports whether a's bytes lie inside b's.
func sharesMemory(a, b string) bool {
	if a == "" || b == "" {
		return false
	}
	pa, pb := uintptr(unsafe.Pointer(unsafe.StringData(a))), uintptr(unsafe.Pointer(unsafe.StringData(b)))
	return pa >= pb && pa < pb+uintptr(len(b))
}
