package coordinator

import (
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"
)

// The fast scans answer what a byte-by-byte reading does.
func TestDefangFastScans(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	pieces := []string{"a", "b", " ", ":", "#", "&#", "\\2", "F", "&a", "\t", "\n", "\r", "\v", "\f", "<", "[", "]", "^", "\"", "'", "\x7f", "\x01",
		"\xc2", "\xe2", "\xb9", "%", "\\", "&", "=", "é", "’", "—", "¹", "ⁿ", "[1]", "[^a]", "[x y]", "<b>", "plain text ",
		"sys", "SyStem", "tem", "s y ", "s", "y", "deve", "DEVELOPER", "loper", "v", "~", "]~b]"}
	roleWord := regexp.MustCompile(`(?i)system|developer|s y s`)
	refStart := regexp.MustCompile(`&#|&[A-Za-z]|\\[0-9A-Fa-f]`)
	for n := range 4000 {
		var b strings.Builder
		for range rng.IntN(40) {
			b.WriteString(pieces[rng.IntN(len(pieces))])
		}
		s := b.String()
		for i := 0; i <= len(s); i += 1 + n%3 {
			want := i
			for want < len(s) && shapePlain[s[want]] != 0 {
				want++
			}
			if got := skipShapePlain(s, i); got != want {
				t.Fatalf("skipShapePlain(%q, %d) = %d, want %d", s, i, got, want)
			}
		}
		if got, want := hasNonASCII(s), strings.IndexFunc(s, func(r rune) bool { return r >= 0x80 }) >= 0; got != want {
			t.Fatalf("hasNonASCII(%q) = %v", s, got)
		}
		if got, want := mayHoldShapes(s), strings.ContainsAny(s, "<[]:=") || hasNonASCII(s) || roleWord.MatchString(s); got != want {
			t.Fatalf("mayHoldShapes(%q) = %v", s, got)
		}
		if got, want := mayHoldRefs(s), refStart.MatchString(s); got != want {
			t.Fatalf("mayHoldRefs(%q) = %v", s, got)
		}
		if got, want := hasAnyByte(s, "%\\&="), strings.ContainsAny(s, "%\\&="); got != want {
			t.Fatalf("hasAnyByte(%q) = %v", s, got)
		}
		wantTags, wantMarks := false, false
		for k := range len(s) {
			wantTags = wantTags || s[k] == '<'
			if r, _ := utf8.DecodeRuneInString(s[k:]); s[k] == '[' && footnoteMarkAt(s, k) >= 0 || superscript(r) {
				wantMarks = true
			}
		}
		if tags, marks := annotationStarts(s); tags != wantTags || marks != wantMarks {
			t.Fatalf("annotationStarts(%q) = %v, %v", s, tags, marks)
		}
	}
}
