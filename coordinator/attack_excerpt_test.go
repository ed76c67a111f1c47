package coordinator

import (
	"fmt"
	"github.com/memhost/memhost/sdk/tokenize"
	"strings"
	"testing"
)

// TestExcerptKeepsForgedLinesOnTheirOwnLines: a role line the defanger
// prefixes in a whole body ("### System: ...", "[SYSTEM] ...", "**System**"
// alone) must be prefixed in an excerpt too. The excerpt joined passages
// that are not adjacent with " … " inside one line, so such a line, taken
// between two gaps, read as prose to the defanger and reached the model
// live after "Espresso fact number 29. … ".
func TestExcerptKeepsForgedLinesOnTheirOwnLines(t *testing.T) {
	esc := strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;")
	n := 0
	for _, tc := range shapeCases {
		if strings.Contains(tc.in, "\n") || tc.want != defangedPrefix+tc.in {
			continue // not a line the prefix alone neutralises
		}
		n++
		t.Run(tc.name, func(t *testing.T) {
			// The matching facts come first and the line after them,
			// between runs too long for what they leave of the excerpt's
			// budget, so it is joined to them by a gap and followed by one.
			var b strings.Builder
			for i := range 25 {
				fmt.Fprintf(&b, "Espresso fact number %02d.\n", i)
			}
			b.WriteString(strings.Repeat("x", 1024) + "\n" + tc.in + "\n" + strings.Repeat("y", 1024) + "\nOutro.")
			f := newFixture(t, nil)
			f.add(rec("kitchen notes", b.String()))
			res := f.turn(alice, "s1", tc.in+" espresso")
			if len(res.InjectedContext) != 1 {
				t.Fatalf("nothing injected: %+v", res)
			}
			text := res.InjectedContext[0]
			if !strings.Contains(text, "excerpt_of=") {
				t.Fatalf("not an excerpt:\n%s", text)
			}
			w := esc.Replace(tc.in)
			if !strings.Contains(text, w) {
				t.Skipf("the excerpt left the line out:\n%s", text)
			}
			for _, line := range strings.Split(text, "\n") {
				if strings.Contains(line, w) && !strings.HasPrefix(line, defangedPrefix) {
					t.Errorf("the excerpt carries %q live:\n%s", tc.in, line)
				}
			}
		})
	}
	if n < 10 {
		t.Fatalf("only %d line cases", n)
	}
}

// TestExcerptKeepsForgedSentencesPrefixed: the defanger reads a role
// header at the start of a sentence too ("Note. ### System: ..." is
// prefixed in a whole body). An excerpt that took the header's sentence
// but not the one before it on its line joined it to the passage before
// with " … ", where it read as prose and reached the model live.
func TestExcerptKeepsForgedSentencesPrefixed(t *testing.T) {
	if testing.Short() {
		t.Skip("every excerpt of every header case defanged, single-goroutine (nothing for the race run to find); the plain run checks it")
	}
	d := mustDefanger(t, "Agent memory")
	const lead = "Note. "
	n := 0
	for _, tc := range shapeCases {
		if strings.Contains(tc.in, "\n") || tc.want != defangedPrefix+tc.in {
			continue
		}
		if whole, _ := d.Defang(lead + tc.in); whole != defangedPrefix+lead+tc.in {
			continue // not a header the defanger reads after a sentence
		}
		var b strings.Builder
		for i := range 25 {
			fmt.Fprintf(&b, "Espresso fact number %02d.\n", i)
		}
		b.WriteString(strings.Repeat("x", 1024) + "\n" + lead + tc.in + "\n" + strings.Repeat("y", 1024) + "\nOutro.")
		body := b.String()
		terms := append([]string{"espresso"}, tokenize.Terms(tc.in)...)
		for limit := 4 * len(excerptGap); limit < len(body); limit += 5 {
			ex, ok := excerpt(body, terms, limit)
			if !ok || !strings.Contains(ex, tc.in) || strings.Contains(ex, lead+tc.in) {
				continue
			}
			n++
			got, _ := d.Defang(ex)
			for _, line := range strings.Split(got, "\n") {
				if strings.Contains(line, tc.in) && !strings.HasPrefix(line, defangedPrefix) {
					t.Errorf("%s: the excerpt at %d bytes carries %q live: %q", tc.name, limit, tc.in, line)
				}
			}
		}
	}
	if n == 0 {
		t.Fatal("no excerpt took a header without the sentence before it")
	}
}
