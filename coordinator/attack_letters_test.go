package coordinator

import (
	"bytes"
	"fmt"
	"go/format"
	"maps"
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
	byName := lettersByName()
	readable := hasReading
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

// lettersByName maps the Unicode name of every letter to the letter.
func lettersByName() map[string]rune {
	byName := map[string]rune{}
	for r := rune(0); r <= unicode.MaxRune; r++ {
		if unicode.IsLetter(r) {
			byName[runenames.Name(r)] = r
		}
	}
	return byName
}

// hasReading reports whether c reads in ASCII: an ASCII letter or digit,
// or a rune the tables read (asciiReading).
func hasReading(c rune) bool {
	if c < utf8.RuneSelf {
		return isAlnum(byte(c))
	}
	_, ok := asciiReading(c)
	return ok
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

// runeTableSource answers file with its map variable name rewritten to
// hold t, each entry commented with both runes' names; what precedes
// the variable is kept.
func runeTableSource(file, name string, t map[rune]rune) []byte {
	src, err := os.ReadFile(file)
	if err != nil {
		panic(err)
	}
	decl := "var " + name + " = map[rune]rune{"
	head, _, _ := bytes.Cut(src, []byte(decl))
	var b bytes.Buffer
	b.Write(head)
	b.WriteString(decl + "\n")
	for _, r := range slices.Sorted(maps.Keys(t)) {
		fmt.Fprintf(&b, "\t0x%04X: 0x%04X, // %s: %s\n", r, t[r], strings.ToLower(runenames.Name(r)), strings.ToLower(runenames.Name(t[r])))
	}
	b.WriteString("}\n")
	out, err := format.Source(b.Bytes())
	if err != nil {
		panic(err)
	}
	return out
}

// checkRuneTable holds table, the map variable name of file, to want,
// what the Unicode names give; -update rewrites file instead.
func checkRuneTable(t *testing.T, file, name, test string, table, want map[rune]rune) {
	t.Helper()
	if *update {
		if err := os.WriteFile(file, runeTableSource(file, name, want), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	for r, base := range want {
		if got, ok := table[r]; !ok || got != base {
			t.Errorf("%U %s: %s gives %U, want %U; rewrite the table: go test ./coordinator -run %s -update", r, runenames.Name(r), name, got, base, test)
		}
	}
	for r := range table {
		if _, ok := want[r]; !ok {
			t.Errorf("%U %s is in %s but its name gives no letter", r, runenames.Name(r), name)
		}
	}
}

// TestLetterBases checks letterBases against the Unicode names; -update
// rewrites defang_letters.go.
func TestLetterBases(t *testing.T) {
	checkRuneTable(t, "defang_letters.go", "letterBases", "TestLetterBases", letterBases, wantLetterBases())
}
