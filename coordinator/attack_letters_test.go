package coordinator

import (
	"bytes"
	"fmt"
	"go/format"
	"os"
	"slices"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/runenames"
)

// wantLetterBases derives letterBases from this Go's Unicode names: every
// letter without an ASCII reading that is a decorated or small-capital
// form of a readable letter, or whose other case is readable.
func wantLetterBases() map[rune]rune {
	byName := map[string]rune{}
	for r := rune(0); r <= unicode.MaxRune; r++ {
		if unicode.IsLetter(r) {
			byName[runenames.Name(r)] = r
		}
	}
	readable := func(c rune) bool {
		if c < utf8.RuneSelf {
			return isAlnum(byte(c))
		}
		_, ok := asciiReading(c)
		return ok
	}
	out := map[rune]rune{}
	for r := rune(utf8.RuneSelf); r <= unicode.MaxRune; r++ {
		if !unicode.IsLetter(r) || unicode.Is(unicode.Lm, r) || skippable(r) || readable(r) {
			continue
		}
		name := runenames.Name(r)
		var candidates []rune
		if i := strings.Index(name, " WITH "); i > 0 {
			if c, ok := byName[name[:i]]; ok {
				candidates = append(candidates, c)
			}
		}
		if strings.Contains(name, " LETTER SMALL CAPITAL ") {
			if c, ok := byName[strings.Replace(name, " LETTER SMALL CAPITAL ", " CAPITAL LETTER ", 1)]; ok {
				candidates = append(candidates, c)
			}
		}
		if c, ok := namedLatinLetter(name); ok {
			candidates = append(candidates, c)
		}
		candidates = append(candidates, unicode.ToUpper(r), unicode.ToTitle(r), unicode.ToLower(r))
		for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
			candidates = append(candidates, f)
		}
		for _, c := range candidates {
			if c != r && readable(c) {
				out[r] = c
				break
			}
		}
	}
	return out
}

// namedLatinLetter answers the ASCII letter a Latin letter's name spells
// as its one single-letter word (LATIN SMALL LETTER R ROTUNDA is r, LATIN
// SMALL LETTER SCRIPT R is r, LATIN EPIGRAPHIC LETTER I LONGA is I).
func namedLatinLetter(name string) (rune, bool) {
	_, rest, ok := strings.Cut(name, " LETTER ")
	if !ok || !strings.HasPrefix(name, "LATIN ") {
		return 0, false
	}
	var letter rune
	for _, w := range strings.Fields(rest) {
		if len(w) == 1 && 'A' <= w[0] && w[0] <= 'Z' {
			if letter != 0 {
				return 0, false // two: a ligature (LATIN SMALL LETTER A A)
			}
			letter = rune(w[0])
		}
	}
	if letter == 0 {
		return 0, false
	}
	if strings.Contains(name, " SMALL ") {
		letter = unicode.ToLower(letter)
	}
	return letter, true
}

func letterBasesSource(t map[rune]rune) []byte {
	src, err := os.ReadFile("defang_letters.go")
	if err != nil {
		panic(err)
	}
	head, _, _ := bytes.Cut(src, []byte("var letterBases = map[rune]rune{"))
	var b bytes.Buffer
	b.Write(head)
	b.WriteString("var letterBases = map[rune]rune{\n")
	keys := make([]rune, 0, len(t))
	for r := range t {
		keys = append(keys, r)
	}
	slices.Sort(keys)
	for _, r := range keys {
		fmt.Fprintf(&b, "\t0x%04X: 0x%04X, // %s: %s\n", r, t[r], strings.ToLower(runenames.Name(r)), strings.ToLower(runenames.Name(t[r])))
	}
	b.WriteString("}\n")
	out, err := format.Source(b.Bytes())
	if err != nil {
		panic(err)
	}
	return out
}

// TestLetterBases checks letterBases against the Unicode names; -update
// rewrites defang_letters.go.
func TestLetterBases(t *testing.T) {
	want := wantLetterBases()
	if *update {
		if err := os.WriteFile("defang_letters.go", letterBasesSource(want), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	for r, base := range want {
		if got, ok := letterBases[r]; !ok || got != base {
			t.Errorf("%U %s reads as no letter it is drawn from (want %U); rewrite the table: go test ./coordinator -run TestLetterBases -update", r, runenames.Name(r), base)
		}
	}
	for r := range letterBases {
		if _, ok := want[r]; !ok {
			t.Errorf("%U %s is in the table but its name gives no base", r, runenames.Name(r))
		}
	}
}
