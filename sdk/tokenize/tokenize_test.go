package tokenize

import (
	"fmt"
	"hash/maphash"
	"slices"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/blevesearch/snowballstem"
	"github.com/blevesearch/snowballstem/english"
)

func TestTokens(t *testing.T) {
	cases := []struct {
		name, in string
		want     []string
	}{
		{"english with stopwords", "The quick brown Fox jumps over the lazy dog", []string{"quick", "brown", "fox", "jump", "lazi", "dog"}},
		{"english stems meet", "hiking hikes hiked Hike", []string{"hike", "hike", "hike", "hike"}},
		{"digits and other scripts unstemmed", "v2ing running Läufer", []string{"v2ing", "run", "läufer"}},
		{"punctuation splits", "user's e-mail: alice@example.com", []string{"user", "mail", "alic", "exampl", "com"}},
		{"digits kept", "port 7077 and v2", []string{"port", "7077", "v2"}},
		{"one-letter latin dropped", "x y z 9", []string{"9"}},
		{"accents and other scripts", "Café Ærø Привет мир", []string{"café", "ærø", "привет", "мир"}},
		{"chinese bigrams", "我喜欢咖啡", []string{"我喜", "喜欢", "欢咖", "咖啡"}},
		{"lone han", "猫 cat", []string{"猫", "cat"}},
		{"mixed scripts", "deploy到生产", []string{"deploy", "到生", "生产"}},
		{"japanese kana", "すし", []string{"すし"}},
		{"korean", "안녕하세요", []string{"안녕", "녕하", "하세", "세요"}},
		{"invalid utf8 separates", "ab\xffcd", []string{"ab", "cd"}},
		{"final sigma meets sigma", "ΟΔΟΣ οδος Οδός", []string{"οδοσ", "οδοσ", "οδόσ"}},
		{"long s and micro sign", "ſun µ μ", []string{"sun", "μ", "μ"}},
		{"NFD meets NFC", "cafe\u0301 café", []string{"café", "café"}},
		{"soft hyphens join", "Donau\u00addampf\u00adschiff Donaudampfschiff", []string{"donaudampfschiff", "donaudampfschiff"}},
		{"zero-width joiners and bidi marks join", "zero\u200dwidth non\u200cjoiner \u200fשל\u200eום", []string{"zerowidth", "nonjoin", "שלום"}},
		{"persian non-joiner", "می\u200cخواهم میخواهم", []string{"میخواهم", "میخواهم"}},
		{"variation selector inside han", "葛\U000E0100飾 葛飾", []string{"葛飾", "葛飾"}},
		{"zero-width space still cuts", "zero\u200bwidth", []string{"zero", "width"}},
		{"format characters alone", "\u00ad \ufeff\u2060", nil},
		{"kana length mark in its run", "サーバー", []string{"サー", "ーバ", "バー"}},
		{"kana length mark mid-word", "データベース", []string{"デー", "ータ", "タベ", "ベー", "ース"}},
		{"length mark after hiragana", "すごーい", []string{"すご", "ごー", "ーい"}},
		{"halfwidth katakana meets its usual form", "ｻｰﾊﾞｰ サーバー", []string{"サー", "ーバ", "バー", "サー", "ーバ", "バー"}},
		{"halfwidth semi-voiced marks compose", "ﾎﾟｹｯﾄ ポケット", []string{"ポケ", "ケッ", "ット", "ポケ", "ケッ", "ット"}},
		{"fullwidth latin and digits meet ascii", "ｉＰｈｏｎｅ１５ iPhone15 ＲＵＮＮＩＮＧ", []string{"iphone15", "iphone15", "run"}},
		{"fullwidth punctuation separates", "ａｂ，ｃｄ（ｅｆ）", []string{"ab", "cd", "ef"}},
		{"halfwidth hangul", "ﾡﾤ ㄱㄴ", []string{"ㄱㄴ", "ㄱㄴ"}},
		{"latin ligatures spelled out", "ﬁnance ﬂow oﬀer eﬃcient baﬄe", []string{"financ", "flow", "offer", "effici", "baffl"}},
		{"other compatibility forms stay", "①② ㌔ x²", []string{"①②", "㌔", "x²"}},
		{"lone length mark", "ー", []string{"ー"}},
		{"length mark leaves a latin word", "abcー", []string{"abc", "ー"}},
		{"middle dot separates", "ベッド・タウン", []string{"ベッ", "ッド", "タウ", "ウン"}},
		{"thai bigrams keep marks on their letter", "ช่องว่าง", []string{"ช่อ", "อง", "งว่", "ว่า", "าง"}},
		{"thai sentence", "ภาษาไทยไม่มีช่องว่าง", []string{"ภา", "าษ", "ษา", "าไ", "ไท", "ทย", "ยไ", "ไม่", "ม่มี", "มีช่", "ช่อ", "อง", "งว่", "ว่า", "าง"}},
		{"thai digits stay a word", "ปี ๒๕๖๗", []string{"ปี", "๒๕๖๗"}},
		{"lao", "ພາສາ", []string{"ພາ", "າສ", "ສາ"}},
		{"khmer coeng stacks", "ភាសាខ្មែរ", []string{"ភាសា", "សាខ្មែ", "ខ្មែរ"}},
		{"myanmar virama stacks, marks join", "မန္တလေး မြန်", []string{"မန္တ", "န္တလေး", "မြန်"}},
		{"zero-width space cuts a thai run", "ไทย\u200bไทย", []string{"ไท", "ทย", "ไท", "ทย"}},
		{"scripts make separate runs", "ไทย日本", []string{"ไท", "ทย", "日本"}},
		{"empty", "   ", nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := Tokens(c.in); !slices.Equal(got, c.want) {
				t.Fatalf("Tokens(%q) = %q, want %q", c.in, got, c.want)
			}
		})
	}
}

func TestTermsDistinctInOrder(t *testing.T) {
	got := Terms("coffee tea Coffee TEA milk")
	want := []string{"coffe", "tea", "milk"}
	if !slices.Equal(got, want) {
		t.Fatalf("Terms = %q, want %q", got, want)
	}
}

func TestHasTerms(t *testing.T) {
	for in, want := range map[string]bool{
		"": false, "   ": false, "the and of": false, "x y": false, "?!": false,
		"coffee": true, "the coffee": true, "咖": true, "9": true, "a 7077": true,
	} {
		if got := HasTerms(in); got != want {
			t.Errorf("HasTerms(%q) = %v, want %v", in, got, want)
		}
		if got := len(Tokens(in)) > 0; got != want {
			t.Errorf("HasTerms and Tokens disagree on %q", in)
		}
	}
}

func FuzzTokens(f *testing.F) {
	for _, s := range []string{"hello world", "我喜欢咖啡", "Ｆｕｌｌ－ｗｉｄｔｈ", "a\x00b", "\xff\xfe", "don't stop"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		toks := Tokens(s)
		for _, tok := range toks {
			if tok == "" || !utf8.ValidString(tok) {
				t.Fatalf("bad token %q from %q", tok, s)
			}
			if strings.ContainsFunc(tok, func(r rune) bool { return !isWordRune(r) && runOf(r) == noRun && !isMark(r) }) {
				t.Fatalf("token %q holds a separator", tok)
			}
		}
		if HasTerms(s) != (len(toks) > 0) {
			t.Fatalf("HasTerms(%q) disagrees with Tokens %q", s, toks)
		}
		// Tokenizing the joined tokens again is stable: tokens are fixed
		// points, but for a stem that is a stopword ("ATs" stems to "at"),
		// which is dropped the second time.
		kept := slices.DeleteFunc(slices.Clone(toks), func(tok string) bool { _, stop := stopwords[tok]; return stop })
		again := Tokens(strings.Join(toks, " "))
		if len(again) < len(kept) {
			t.Fatalf("re-tokenizing lost terms: %q -> %q", toks, again)
		}
	})
}

// The stem cache answers what the stemmer does, on first sight and after,
// and also once far more distinct words than it has slots went through.
func TestStemCache(t *testing.T) {
	direct := func(w string) string {
		env := snowballstem.NewEnv(w)
		english.Stem(env)
		return env.Current()
	}
	words := []string{"hiking", "hikes", "running", "generously", "connection", "caresses", "ponies"}
	for pass := range 2 {
		for _, w := range words {
			if got, want := stem(w), direct(w); got != want {
				t.Fatalf("pass %d: stem(%q) = %q, want the stemmer's %q", pass, w, got, want)
			}
		}
	}
	word := func(i int) string {
		b := []byte("qq")
		for ; i > 0; i /= 26 {
			b = append(b, byte('a'+i%26))
		}
		return string(b) + "ing"
	}
	for i := range 4 * len(stems) {
		if w := word(i); stem(w) != direct(w) {
			t.Fatalf("stem(%q) differs from the stemmer", w)
		}
	}
	for _, w := range words {
		if got, want := stem(w), direct(w); got != want {
			t.Fatalf("after the flood: stem(%q) = %q, want %q", w, got, want)
		}
	}
}

// TestFoldRuneFollowsOrbits: tags match by case-fold orbit (index.FoldTag),
// so every word rune of an orbit must cut to the same term rune, and
// foldRune must lower-case every other rune as unicode.ToLower does. The
// check walks the whole of this Go's Unicode tables, so a new Unicode
// version that adds an orbit lower-casing leaves apart fails it.
func TestFoldRuneFollowsOrbits(t *testing.T) {
	for r := rune(0); r <= unicode.MaxRune; r++ {
		want := unicode.ToLower(r)
		orbit := false
		for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
			orbit = true
			if got, other := foldRune(r), foldRune(f); got != other {
				t.Errorf("foldRune(%q) = %q but foldRune(%q) = %q: one case-fold orbit, two terms", r, got, f, other)
			}
		}
		if got := foldRune(r); !orbit && got != want {
			t.Errorf("foldRune(%q) = %q, want its lower case %q", r, got, want)
		}
	}
}

// TestBaseForms: listed comparatives, superlatives and the title "dr" meet
// the word they are forms of, as the stemmer's own forms do; unlisted
// words, and forms that are common words of their own, are left alone.
func TestBaseForms(t *testing.T) {
	cases := []struct{ text, same string }{
		{"older", "old"},
		{"the oldest of us", "old us"},
		{"my elder sister", "old sister"},
		{"Dr. Patel", "doctor patel"},
		{"DR Patel", "doctor patel"},
		{"busier weeks", "busy weeks"},
		{"the biggest hikes", "big hiking"},
	}
	for _, c := range cases {
		if got, want := Tokens(c.text), Tokens(c.same); !slices.Equal(got, want) {
			t.Errorf("Tokens(%q) = %q, want %q as Tokens(%q)", c.text, got, want, c.same)
		}
	}
	for _, w := range []string{"water", "later", "earlier", "better", "best", "drive", "order"} {
		if got := Tokens(w); len(got) != 1 || got[0] != stem(w) || baseForms[w] != "" {
			t.Errorf("Tokens(%q) = %q, want the stemmer's %q alone", w, got, stem(w))
		}
	}
}

// TestStemCacheKeepsNoLongWords: a word past maxCachedWord bytes is
// stemmed as any other (up to maxStemmedWord) but never kept, so queries of long letter runs
// cannot fill the cache's slots with megabytes (it held 300 MB in a
// provider after a thousand recalls of one 64 KiB word each).
func TestStemCacheKeepsNoLongWords(t *testing.T) {
	long := func(n int) string { return strings.Repeat("abcdefghijklmnopqrstuvwxy", n/25+1)[:n] + "ing" }
	for _, tc := range []struct {
		word   string
		cached bool
	}{
		{"walking", true},
		{long(maxCachedWord - 3), true},
		{long(maxCachedWord - 2), false},
		{long(4 << 10), false},
		{long(64 << 10), false},
	} {
		t.Run(fmt.Sprint(len(tc.word), " bytes"), func(t *testing.T) {
			want := tc.word // past maxStemmedWord: as it is
			if len(tc.word) <= maxStemmedWord {
				want = stemOf(tc.word)
			}
			for range 2 { // a miss, then what a second call finds
				if got := stem(tc.word); got != want {
					t.Fatalf("stem of a %d-byte word = %d bytes %.20q…, want %.20q…", len(tc.word), len(got), got, want)
				}
			}
			e := stems[maphash.String(stemSeed, tc.word)&uint64(len(stems)-1)].Load()
			if held := e != nil && e.word == tc.word; held != tc.cached {
				t.Fatalf("a %d-byte word is cached: %v, want %v", len(tc.word), held, tc.cached)
			}
		})
	}
}

// TestAllStopsWhereItsReaderStops: All yields Tokens' terms, in order,
// and a reader may stop after any of them, inside a word run or a bigram
// run alike (yielding after the reader stopped would panic).
func TestAllStopsWhereItsReaderStops(t *testing.T) {
	for _, s := range []string{"alpha beta gamma delta", "我喜欢咖啡很多", "ไทยไทย word 猫", "hiking 山登り ｉＰｈｏｎｅ"} {
		want := Tokens(s)
		for n := 0; n <= len(want); n++ {
			var got []string
			for term := range All(s) {
				if len(got) == n {
					break
				}
				got = append(got, term)
			}
			if !slices.Equal(got, want[:n]) {
				t.Errorf("the first %d terms of All(%q) = %q, want %q", n, s, got, want[:n])
			}
		}
	}
}

// TestLongWordsAreNotStemmed: a run of letters past maxStemmedWord bytes
// is no English word and stays as it is (the stemmer's time is quadratic
// in a word's length, so a query of such runs cost seconds); a word up to
// the limit is stemmed.
func TestLongWordsAreNotStemmed(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{strings.Repeat("ay", 40) + "ing", strings.Repeat("ay", 40) + "ing"},
		{strings.Repeat("ab", (maxStemmedWord-3)/2) + "ing", strings.Repeat("ab", (maxStemmedWord-3)/2)},
	} {
		if got := Tokens(tc.in); len(got) != 1 || got[0] != tc.want {
			t.Errorf("Tokens(%d-byte word) = %q, want [%q]", len(tc.in), got, tc.want)
		}
	}
}
