package coordinator

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/memhost/memhost/sdk/tokenize"
)

// longBody is a record body of filler sentences with one that answers
// "which hotel in Lisbon" in the middle.
func longBody() string {
	var b strings.Builder
	for i := range 30 {
		fmt.Fprintf(&b, "Filler sentence number %d talks about gardening and tomatoes. ", i)
		if i == 15 {
			b.WriteString("We booked the Pestana hotel in Lisbon for the conference week. ")
		}
	}
	return b.String()
}

func TestExcerpt(t *testing.T) {
	body := longBody()
	for _, tc := range []struct {
		name     string
		body     string
		query    string
		limit    int
		ok       bool
		contains []string
		lacks    []string
	}{
		{"the matching sentence and its neighbours", body, "which hotel in Lisbon", 400, true,
			[]string{"We booked the Pestana hotel in Lisbon for the conference week.", "number 15", "number 16", excerptGap}, []string{"number 0 "}},
		{"a body that fits is not cut", "short body about Lisbon", "Lisbon", 400, false, nil, nil},
		{"no term in the body: shown whole", body, "espresso", 400, false, nil, nil},
		{"no query terms", body, "", 400, false, nil, nil},
		{"every matching sentence before any neighbour", body + " Lisbon again. ", "hotel Lisbon", 240, true,
			[]string{"We booked the Pestana hotel in Lisbon for the conference week. Filler", "Lisbon again."}, []string{"number 0 "}},
		{"text without sentence breaks is cut into runs of words", strings.Repeat("word ", 300) + "lisbon " + strings.Repeat("word ", 300), "lisbon", 200, true,
			[]string{"lisbon"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := excerpt(tc.body, tokenize.Terms(tc.query), tc.limit)
			if ok != tc.ok {
				t.Fatalf("excerpt = %q, %v; want ok %v", got, ok, tc.ok)
			}
			if !ok {
				return
			}
			if len(got) > tc.limit || !utf8.ValidString(got) {
				t.Errorf("excerpt of %d bytes (limit %d), valid UTF-8 %v", len(got), tc.limit, utf8.ValidString(got))
			}
			for _, want := range tc.contains {
				if !strings.Contains(got, want) {
					t.Errorf("excerpt lacks %q:\n%s", want, got)
				}
			}
			for _, not := range tc.lacks {
				if strings.Contains(got, not) {
					t.Errorf("excerpt holds %q:\n%s", not, got)
				}
			}
		})
	}
}

// FuzzExcerpt: whatever the body and query, an excerpt stays within its
// limit, is valid UTF-8 when the body is, and holds a query term.
func FuzzExcerpt(f *testing.F) {
	f.Add(longBody(), "hotel Lisbon", 300)
	f.Add("a. b. c.\n\nd?\te! "+strings.Repeat("é", 400), "é d", 64)
	f.Add(strings.Repeat("x", 5000), "x", 100)
	f.Fuzz(func(t *testing.T, body, query string, limit int) {
		limit = max(0, limit%4096)
		terms := tokenize.Terms(query)
		got, ok := excerpt(body, terms, limit)
		if !ok {
			return
		}
		if len(got) > limit {
			t.Fatalf("%d bytes over the limit %d", len(got), limit)
		}
		if utf8.ValidString(body) && !utf8.ValidString(got) {
			t.Fatalf("invalid UTF-8 from a valid body: %q", got)
		}
	})
}

// TestTurnInjectsAnExcerptThenTheWhole: a long record is injected as the
// passage that matches the turn, framed and marked with its record id; a
// later turn of the session that finds it again injects it whole, and
// after that it is never injected again.
func TestTurnInjectsAnExcerptThenTheWhole(t *testing.T) {
	f := newFixture(t, nil)
	ids := f.add(rec("Travel notes", longBody()+"<script>&"))
	first := f.turn(alice, "s", "which hotel in Lisbon")
	if len(first.RecordIDs) != 1 || first.RecordIDs[0] != ids[0] {
		t.Fatalf("turn 1 injected %v, want %s", first.RecordIDs, ids[0])
	}
	text := first.InjectedContext[0]
	for _, want := range []string{`excerpt_of="` + ids[0] + `"`, `title="Travel notes"`, "Pestana hotel in Lisbon", excerptGap} {
		if !strings.Contains(text, want) {
			t.Errorf("turn 1 lacks %q:\n%s", want, text)
		}
	}
	if strings.Contains(text, "number 0 ") || first.Bytes > 2<<10 {
		t.Errorf("turn 1 injected the whole body (%d bytes):\n%s", first.Bytes, text)
	}
	second := f.turn(alice, "s", "which hotel in Lisbon")
	if len(second.RecordIDs) != 1 || second.RecordIDs[0] != ids[0] || strings.Contains(second.InjectedContext[0], "excerpt_of") ||
		!strings.Contains(second.InjectedContext[0], "number 0 ") {
		t.Fatalf("turn 2 should inject the whole record: %v\n%s", second.RecordIDs, strings.Join(second.InjectedContext, ""))
	}
	if third := f.turn(alice, "s", "which hotel in Lisbon"); third.SkipReason != SkipNoRecords {
		t.Fatalf("turn 3 injected %v (%s); the whole record was injected already", third.RecordIDs, third.SkipReason)
	}
	// Without a session, every turn shows the excerpt.
	if res := f.turn(alice, "", "which hotel in Lisbon"); !strings.Contains(res.InjectedContext[0], "excerpt_of") {
		t.Errorf("a session-less turn injected no excerpt:\n%s", res.InjectedContext[0])
	}
	// A session that saw only the excerpt remembers it apart.
	f.turn(alice, "x", "which hotel in Lisbon")
	var st SessionState
	if err := f.c.store.Update(t.Context(), SessionKey{Realm: alice.Realm, Identity: alice.ID, Session: "x"}, func(s *SessionState) bool { st = s.Clone(); return false }); err != nil {
		t.Fatal(err)
	}
	if len(st.InjectedIDs) != 0 || len(st.ExcerptIDs) != 1 || st.ExcerptIDs[0] != ids[0] {
		t.Errorf("after an excerpt the session holds injected %v, excerpts %v", st.InjectedIDs, st.ExcerptIDs)
	}
}

// The context around a match grows ring by ring; each ring once scanned
// (and copied) every piece of the body, so a body of many short
// sentences around one match cost time in its length times the
// excerpt's (a 64 KiB body: 16 ms of CPU at the default 1 KiB excerpt,
// 178 ms at 32 KiB). The bytes one excerpt allocates are counted at two
// sizes, the excerpt half the body: they grow with the body, not with
// its square.
func TestExcerptContextGrowsLinearly(t *testing.T) {
	for _, sentence := range []string{"a. ", "a\n", ". "} {
		alloc := func(size int) uint64 {
			half := strings.Repeat(sentence, size/2/len(sentence))
			body := half + " hiking. " + half
			least := uint64(1 << 63)
			for range 3 {
				var before, after runtime.MemStats
				runtime.ReadMemStats(&before)
				if _, ok := excerpt(body, []string{"hike"}, len(body)/2); !ok {
					t.Fatalf("%q: no excerpt", sentence)
				}
				runtime.ReadMemStats(&after)
				least = min(least, after.TotalAlloc-before.TotalAlloc)
			}
			return least
		}
		small, large := alloc(8<<10), alloc(32<<10)
		if ratio := float64(large) / float64(small); ratio > 8 {
			t.Errorf("%q: a body 4 times as long allocated %.1f times the bytes (%d, then %d)", sentence, ratio, small, large)
		}
	}
}
