package coordinator

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/memhost/memhost/sdk/tokenize"
)

// checkExcerpt holds an excerpt of body to its promises: within limit,
// valid UTF-8 when body is, not empty, and a cut of body: each passage
// between gap marks is text of body, in body order, and an end without a
// gap mark is body's end (spacing aside).
func checkExcerpt(t *testing.T, body, got string, limit int) {
	t.Helper()
	if len(got) > limit {
		t.Fatalf("%d bytes over the limit %d: %q", len(got), limit, got)
	}
	if utf8.ValidString(body) && !utf8.ValidString(got) {
		t.Fatalf("invalid UTF-8 from a valid body: %q", got)
	}
	parts := gapMarks.Split(got, -1)
	if strings.TrimSpace(strings.Join(parts, "")) == "" {
		t.Fatalf("an excerpt of nothing: %q", got)
	}
	if strings.Contains(body, strings.TrimSpace(excerptGap)) {
		return // the body's own marks would read as cuts
	}
	pos := 0
	for _, p := range parts {
		if p == "" {
			continue
		}
		i := strings.Index(body[pos:], p)
		if i < 0 {
			t.Fatalf("passage %q is not text of the body after byte %d:\nexcerpt %q", p, pos, got)
		}
		pos += i + len(p)
	}
	if first := parts[0]; first != "" && !strings.HasPrefix(strings.TrimLeftFunc(body, unicode.IsSpace), first) {
		t.Fatalf("the excerpt starts without a gap mark, but %q is not the body's start:\nexcerpt %q", first, got)
	}
	if last := parts[len(parts)-1]; last != "" && !strings.HasSuffix(strings.TrimRightFunc(body, unicode.IsSpace), last) {
		t.Fatalf("the excerpt ends without a gap mark, but %q is not the body's end:\nexcerpt %q", last, got)
	}
}

// gapMarks matches an excerpt's gap marks in each of their forms.
var gapMarks = regexp.MustCompile("[ \n]" + strings.TrimSpace(excerptGap) + "[ \n]")

// excerptCutCases are bodies the packing got wrong; they seed
// FuzzExcerptIsACut too.
var excerptCutCases = []struct {
	name, body, query string
	limit             int
	start             string // what the excerpt starts with, when it matters
}{
	// Blank lines between two sentences were not budgeted: the passage
	// ran past the limit and the final cut took its end and its gap mark.
	{"blank CRLF lines between passages", "Filler one. Filler two.\r\n\r\n\r\n\r\n\r\nThe Pestana hotel in Lisbon.\r\n\r\n\r\n\r\n\r\n\r\n\r\nAnother filler sentence. " +
		strings.Repeat("More filler words here. ", 20), "lisbon", 64, ""},
	{"a run of spaces between sentences", "Filler. The hotel in Lisbon." + strings.Repeat(" ", 300) + "Next sentence here. " + strings.Repeat("Filler words. ", 30), "lisbon", 80, ""},
	// The one matching sentence does not fit: an excerpt of nothing was
	// answered, marked as an excerpt.
	{"no matching passage fits", strings.Repeat("x. ", 20) + "Lisbon is nice. " + strings.Repeat("y. ", 20), "lisbon", 20, ""},
	// A space other than ASCII at a passage's edge was trimmed from the
	// passage but not from the spacing that joins it to its neighbour.
	{"a no-break space at a passage's start", "Filler one.\n\u00a0The Pestana hotel in Lisbon.\n" + strings.Repeat("More filler words here. ", 20), "lisbon", 120, ""},
	{"an ideographic space indenting a line", strings.Repeat("前の文です。\n", 10) + "\u3000リスボンのホテル。\n" + strings.Repeat("後の文です。\n", 10), "リスボン", 90, ""},
	// A run cut at a space of a double space kept one space of two.
	{"double spaces in text without sentence breaks", strings.Repeat("word  ", 100) + "lisbon  " + strings.Repeat("word  ", 100), "lisbon", 200, ""},
	// Spacing before the first sentence is no cut start.
	{"spacing before the body", " \u00a0 The hotel in Lisbon. " + strings.Repeat("Filler words here. ", 20), "lisbon", 100, "The hotel in Lisbon."},
}

func TestExcerptIsACutOfTheBody(t *testing.T) {
	for _, tc := range excerptCutCases {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := excerpt(tc.body, tokenize.Terms(tc.query), tc.limit)
			if !ok {
				if tc.name == "no matching passage fits" {
					return // shown whole, cut by the renderer
				}
				t.Fatalf("no excerpt of a long body holding %q", tc.query)
			}
			checkExcerpt(t, tc.body, got, tc.limit)
			if !strings.HasPrefix(got, tc.start) {
				t.Errorf("the excerpt starts %q, want %q", got, tc.start)
			}
			if !strings.Contains(strings.ToLower(got), tc.query) {
				t.Errorf("the excerpt lacks %q: %q", tc.query, got)
			}
		})
	}
}

// TestExcerptOfInvalidUTF8 terminates: a run of bytes that begins no
// character, longer than a run of words may be, left no place to cut a
// long sentence, and sentences appended empty pieces forever. A plugin's
// record can carry such bytes; the renderer shows them as U+FFFD.
func TestExcerptOfInvalidUTF8(t *testing.T) {
	body := "The hotel in Lisbon. " + strings.Repeat("\x80", 200) + " more text here. " + strings.Repeat("Filler. ", 30)
	done := make(chan string, 1)
	go func() {
		got, _ := excerpt(body, tokenize.Terms("lisbon"), 64)
		done <- got
	}()
	select {
	case got := <-done:
		checkExcerpt(t, body, got, 64)
	case <-time.After(5 * time.Second):
		t.Fatal("excerpt of a body with a long run of continuation bytes did not return")
	}
}

// BenchmarkExcerptManyTerms: a turn's query is up to 4 KiB, over a
// thousand distinct terms in CJK text, and a body up to 64 KiB. Each of
// the body's terms was looked up in the query's list (111 ms for one
// record that did not even match); the cost must not grow with the
// query's terms: compare terms=1 with terms=many.
func BenchmarkExcerptManyTerms(b *testing.B) {
	var body, query strings.Builder
	for i := 0; body.Len() < 60<<10; i++ {
		body.WriteRune(rune(0x4e00 + (i*7919)%20000))
		if i%40 == 39 {
			body.WriteString("。\n")
		}
	}
	for i := 0; query.Len() < 4<<10; i++ {
		query.WriteRune(rune(0x4e00 + (i*104729)%20000))
	}
	many := tokenize.Terms(query.String())
	for _, terms := range [][]string{many[:1], many} {
		name := "terms=many"
		if len(terms) == 1 {
			name = "terms=1"
		}
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				excerpt(body.String(), terms, 1024)
			}
		})
	}
}

// FuzzExcerptIsACut holds every excerpt to checkExcerpt.
func FuzzExcerptIsACut(f *testing.F) {
	for _, tc := range excerptCutCases {
		f.Add(tc.body, tc.query, tc.limit)
	}
	f.Add(longBody(), "hotel Lisbon", 300)
	f.Add(longBody(), "hotel Lisbon", 20)
	f.Add("The hotel in Lisbon. "+strings.Repeat("\x80", 200)+" more. "+strings.Repeat("Filler. ", 30), "lisbon", 64)
	f.Add(strings.Repeat("Cafe\u0301 in Lisbon\u200b. ", 40), "café lisbon", 100)
	f.Add(strings.Repeat("x", 5000)+" lisbon", "lisbon x", 100)
	f.Add(strings.Repeat("\r\n", 100)+"lisbon"+strings.Repeat("\r\n", 100)+"tail", "lisbon", 40)
	for i := range 4 {
		f.Add(fmt.Sprintf("%s lisbon %s", strings.Repeat("é", 30+i), strings.Repeat("ü", 30)), "lisbon é", 24+i)
	}
	f.Fuzz(func(t *testing.T, body, query string, limit int) {
		limit = max(0, limit%4096)
		got, ok := excerpt(body, tokenize.Terms(query), limit)
		if ok {
			checkExcerpt(t, body, got, limit)
		}
	})
}
