package markdown

import (
	"testing"
	"unicode"

	"github.com/memhost/memhost/sdk/tokenize"
)

func TestTextRuneFastPaths(t *testing.T) {
	for r := rune(0); r < firstCJK; r++ {
		if tokenize.IsCJK(r) {
			t.Fatalf("IsCJK(%U) below firstCJK", r)
		}
	}
	for r := rune(0); r < 0x80; r++ {
		want := unicode.IsLetter(r) || unicode.IsNumber(r)
		if isTextRune(r) != want {
			t.Fatalf("ASCII %q", r)
		}
	}
}
