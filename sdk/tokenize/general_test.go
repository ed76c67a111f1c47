package tokenize

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// generalTokens is the tokenizer's plain definition, rune by rune through
// the Unicode tables, as it was before the ASCII fast path. The fast path
// must answer exactly what it answers.
func generalTokens(s string) []string {
	var out []string
	var word strings.Builder
	var units []string // the run, unit by unit
	kind := noRun
	flushWord := func() {
		if word.Len() == 0 {
			return
		}
		w := word.String()
		word.Reset()
		if _, stop := stopwords[w]; stop {
			return
		}
		if r, size := utf8.DecodeRuneInString(w); size == len(w) && r < utf8.RuneSelf && unicode.IsLetter(r) {
			return
		}
		out = append(out, stem(w))
	}
	flushCJK := func() {
		switch len(units) {
		case 0:
			return
		case 1:
			out = append(out, units[0])
		default:
			for i := 0; i+1 < len(units); i++ {
				out = append(out, units[i]+units[i+1])
			}
		}
		units, kind = nil, noRun
	}
	for _, r := range norm.NFC.String(foldForms(s)) {
		switch {
		case r == utf8.RuneError:
			flushWord()
			flushCJK()
		case isIgnorable(r):
		case kind != noRun && isMark(r):
			units[len(units)-1] += string(r)
		case runOf(r) != noRun:
			flushWord()
			if runOf(r) != kind {
				flushCJK()
				kind = runOf(r)
			}
			if n := len(units); n > 0 && isStacker(lastRune(units[n-1])) {
				units[n-1] += string(r)
			} else {
				units = append(units, string(r))
			}
		case isWordRune(r):
			flushCJK()
			word.WriteRune(foldRune(r))
		default:
			flushWord()
			flushCJK()
		}
	}
	flushWord()
	flushCJK()
	return out
}

func lastRune(s string) rune {
	r, _ := utf8.DecodeLastRuneInString(s)
	return r
}

// pieces mixes every class the fast path distinguishes, and the runes
// where ASCII and Unicode meet.
var pieces = []string{
	"a", "Z", "q", "7", " ", "-", "_", "'", "\x00", "\x7f", "\xff", "\xc3", "é", "É", "ß", "İ", "ǅ", "Σ",
	"\u0301", "\u0903", "ς", "ſ", "µ", "e\u0301", "٣", "Ⅻ", "我", "喜", "す", "안", "\ufffd", "\u00a0", "\u00ad", "\u200b", "\u200d", "\u200f", "\ufeff", "\ufe0f", "ー", "ｰ", "ﾞ", "・", "ก", "\u0e48", "\u0e34", "ເ", "ក", "\u17d2", "မ", "\u1039", "\u103a", "๑", "THE", "the", "Don't", "e-mail", "x",
}

func TestFastPathMatchesGeneral(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 20000 {
		var b strings.Builder
		for range r.IntN(12) {
			b.WriteString(pieces[r.IntN(len(pieces))])
		}
		s := b.String()
		if got, want := Tokens(s), generalTokens(s); !slices.Equal(got, want) {
			t.Fatalf("case %d: Tokens(%q) = %q, general path %q", i, s, got, want)
		}
	}
}

func FuzzFastPathMatchesGeneral(f *testing.F) {
	for _, s := range append(slices.Clone(pieces), "Hello World", "Café au LAIT", "deploy到生产", "ab\xffcd", "İstanbul") {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := Tokens(s), generalTokens(s); !slices.Equal(got, want) {
			t.Fatalf("Tokens(%q) = %q, general path %q", s, got, want)
		}
	})
}

// BenchmarkRecords tokenizes record-sized texts (tags, title, description
// and a 10-60 word body; one in 33 non-Latin) on one core, with the fast
// path and with the general path it replaced.
func BenchmarkRecords(b *testing.B) {
	r := rand.New(rand.NewPCG(3, 4))
	words := strings.Fields("deploy service Postgres migration rollback cache latency Kafka consumer retry budget alert on-call runbook staging prod user's e-mail 2024 v2")
	texts := make([]string, 1000)
	for i := range texts {
		var b strings.Builder
		n := 20 + r.IntN(70)
		for j := range n {
			if j > 0 {
				b.WriteByte(' ')
			}
			b.WriteString(words[r.IntN(len(words))])
		}
		if i%33 == 0 {
			b.WriteString(" 我喜欢咖啡 Привет мир café")
		}
		texts[i] = b.String()
	}
	for _, tc := range []struct {
		name string
		fn   func(string) []string
	}{{"fast", Tokens}, {"general", generalTokens}} {
		b.Run(tc.name, func(b *testing.B) {
			n := 0
			for b.Loop() {
				_ = tc.fn(texts[n%len(texts)])
				n++
			}
			b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "records/s")
		})
	}
}

func Example() {
	fmt.Println(Tokens("The Café's e-mail: 我喜欢"))
	// Output: [café mail 我喜 喜欢]
}
