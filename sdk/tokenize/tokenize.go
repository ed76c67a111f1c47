// Package tokenize is memhost's one tokenizer, shared by the host and by
// plugins so that a query and a record are cut into terms the same way.
//
// It is Unicode-aware: text is put in NFC first, so a letter typed as a
// base and a combining accent meets its precomposed form, after its
// fullwidth and halfwidth forms are folded to the usual ones (ｉＰｈｏｎｅ
// is iPhone, ｻｰﾊﾞｰ is サーバー) and the Latin ligatures spelled out (ﬁ is
// fi); other compatibility forms (①, ㌔, ²) stay themselves. A term is a run
// of letters, digits and combining marks of any script, lower-cased, with
// the letters a case-fold orbit holds beside the lower case (final ς, long
// ſ, the symbol ϑ) taken to it, as tags compare. Han, Hiragana, Katakana
// and Hangul, and Thai, Lao, Khmer and Myanmar, have no spaces between
// words, so their runs are cut into overlapping bigrams of units (a lone
// unit stands as itself). A unit is a character with the combining marks
// that follow it (a Thai consonant with its vowel and tone marks), so a
// bigram never parts a letter from its marks; the kana length mark "ー"
// belongs to the kana run (サーバー is サー ーバ バー). Invisible format characters (a soft
// hyphen, a zero-width joiner or non-joiner, a bidi mark, a byte-order
// mark) and variation selectors never cut a word: they are dropped, so
// "Donau\u00addampf\u00adschiff" is the one term "donaudampfschiff".
// Common English stopwords and
// one-letter Latin words are dropped, and a word of ASCII letters is cut to
// its English (Snowball, Porter2) stem, so "hiking" and "hikes" meet at
// "hike"; words of other scripts, and words with digits, stay as they are.
package tokenize

import (
	"hash/maphash"
	"iter"
	"strings"
	"sync/atomic"
	"unicode"
	"unicode/utf8"

	"github.com/blevesearch/snowballstem"
	"github.com/blevesearch/snowballstem/english"
	"golang.org/x/text/unicode/norm"
	"golang.org/x/text/width"
)

// Version names the terms this package cuts. A store that persists terms
// (an index snapshot, a full-text table) records it and rebuilds from the
// record text when it differs, since old terms would answer wrong results.
// It goes up whenever a change alters any term.
//
// Version 1 was the unstemmed tokenizer; 2 stems English words; 3 puts
// text in NFC and folds every letter of a case-fold orbit to one; 4 drops
// format characters and variation selectors instead of cutting words at
// them, keeps the kana length mark in its kana run and cuts Thai, Lao,
// Khmer and Myanmar runs into bigrams of units, and folds the listed
// comparatives, superlatives and "dr" (baseForms); 5 folds fullwidth and
// halfwidth forms and spells out the Latin ligatures (foldForms), and
// leaves words over maxStemmedWord bytes unstemmed.
const Version = 5

// Tokens returns every term of s in order, repeats included. A term may
// share memory with s.
func Tokens(s string) []string {
	var out []string
	each(s, func(t string) bool { out = append(out, t); return true })
	return out
}

// All yields every term of s in order, repeats included, cutting no
// further than its consumer reads: a caller that needs the first few
// terms of a long text pays for those.
func All(s string) iter.Seq[string] {
	return func(yield func(string) bool) { each(s, yield) }
}

// Terms returns the distinct terms of s in first-seen order.
func Terms(s string) []string {
	var out []string
	seen := map[string]struct{}{}
	each(s, func(t string) bool {
		if _, ok := seen[t]; !ok {
			seen[t] = struct{}{}
			out = append(out, t)
		}
		return true
	})
	return out
}

// HasTerms reports whether s holds at least one term. It stops at the
// first one, so it is cheap on long text.
func HasTerms(s string) bool {
	found := false
	each(s, func(string) bool { found = true; return false })
	return found
}

// IsCJK reports whether r is of the Han, Hiragana, Katakana or Hangul
// script. The tokenizer cuts more than these into bigrams (runOf).
func IsCJK(r rune) bool {
	return unicode.In(r, unicode.Han, unicode.Hiragana, unicode.Katakana, unicode.Hangul)
}

// Kinds of run: the scripts written without spaces between words, whose
// runs are cut into bigrams. A run holds one kind; Han, kana and Hangul
// are one kind, since Japanese mixes Han and kana in a word.
const (
	noRun = iota
	cjkRun
	thaiRun
	laoRun
	khmerRun
	myanmarRun
)

// runOf answers the kind of run r belongs to, or noRun. Beside the Han,
// kana and Hangul scripts, the CJK kind holds the characters Unicode word
// segmentation (UAX #29) counts as Katakana though they are of no script:
// the length mark ー and its halfwidth form, the spacing voiced sound
// marks, the vertical kana repeat marks and the double hyphen. The middle
// dot ・ is not one: it separates the words of a foreign name. Of Thai,
// Lao, Khmer and Myanmar only letters and marks run; their digits and
// punctuation stay what they are elsewhere.
func runOf(r rune) int {
	switch {
	case r < 0x0e00:
		return noRun
	case IsCJK(r):
		return cjkRun
	case r >= 0x3031 && r <= 0x3035, r == 0x309b, r == 0x309c, r == 0x30a0, r == 0x30fc, r == 0xff70:
		return cjkRun
	case !unicode.IsLetter(r) && !isMark(r):
		return noRun
	case unicode.Is(unicode.Thai, r):
		return thaiRun
	case unicode.Is(unicode.Lao, r):
		return laoRun
	case unicode.Is(unicode.Khmer, r):
		return khmerRun
	case unicode.Is(unicode.Myanmar, r):
		return myanmarRun
	}
	return noRun
}

// isMark reports whether r is a combining mark (Unicode M), which joins the
// unit before it in a run, as do the halfwidth voiced sound marks ﾞ and ﾟ
// that UAX #29 counts as Extend.
func isMark(r rune) bool {
	return unicode.In(r, unicode.Mn, unicode.Mc, unicode.Me) || r == 0xff9e || r == 0xff9f
}

// isStacker reports whether r stacks the letter after it under its own
// (the Myanmar virama, the Khmer coeng), so that letter is no unit of its
// own.
func isStacker(r rune) bool {
	return r == 0x1039 || r == 0x17d2
}

// ligatures spells out the Latin ligatures of the Alphabetic
// Presentation Forms block, which text copied from a typeset PDF carries.
var ligatures = strings.NewReplacer("ﬀ", "ff", "ﬁ", "fi", "ﬂ", "fl", "ﬃ", "ffi", "ﬄ", "ffl", "ﬅ", "st", "ﬆ", "st")

// foldForms folds the fullwidth and halfwidth forms of s (what East Asian
// input methods and legacy encodings write: ｉＰｈｏｎｅ１５, ｻｰﾊﾞｰ) to the
// usual ones and spells out the Latin ligatures, so each meets the word
// typed plainly. Both blocks encode with a leading 0xEF byte, which most
// text holds none of.
func foldForms(s string) string {
	if strings.IndexByte(s, 0xEF) < 0 {
		return s
	}
	return ligatures.Replace(width.Fold.String(s))
}

// isIgnorable reports whether r is invisible inside a word and dropped
// there: a format character (Unicode Cf: soft hyphen, zero-width joiner
// and non-joiner, word joiner, bidi marks and isolates, byte-order mark,
// tag characters) or a variation selector, as Unicode word segmentation
// (UAX #29, rule WB4) lets them neither start nor end a word. The
// zero-width space is the exception: it marks a word break.
func isIgnorable(r rune) bool {
	return r != '\u200b' && (unicode.Is(unicode.Cf, r) || unicode.Is(unicode.Variation_Selector, r))
}

func isWordRune(r rune) bool {
	return unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.IsNumber(r) || unicode.Is(unicode.Mn, r) || unicode.Is(unicode.Mc, r)
}

// each calls emit with each term of s until emit answers false.
//
// ASCII, most of what is stored, takes a table lookup per byte instead of
// the Unicode tables, and a word that needs no lower-casing is emitted as
// a slice of s rather than copied. Other runes take the general path; the
// tests hold both to the plain rune-by-rune definition.
func each(s string, emit func(string) bool) {
	if !isASCII(s) {
		// NFD text (macOS input, some pastes) and NFC text must cut to the
		// same terms. String answers s itself when it is NFC already.
		s = norm.NFC.String(foldForms(s))
	}
	var buf []byte   // the word, once it cannot be a slice of s
	slow := false    // the word is in buf
	ws, we := -1, -1 // the word is s[ws:we] while !slow
	var cjk []rune   // the run's runes
	var units []int  // where each of the run's units starts in cjk
	kind := noRun    // the run's kind
	live := true
	flushWord := func() {
		var w string
		switch {
		case slow:
			w = string(buf)
			buf, slow = buf[:0], false
		case ws >= 0:
			w = s[ws:we]
		default:
			return
		}
		ws, we = -1, -1
		if _, stop := stopwords[w]; stop {
			return
		}
		if len(w) == 1 && asciiKind[w[0]] >= kindLower {
			return // a one-letter Latin word
		}
		live = live && emit(stem(w))
	}
	// appendRune adds the word rune s[i:i+size], lower-cased to lower.
	appendRune := func(i, size int, lower rune, same bool) {
		if !slow {
			if same {
				if ws < 0 {
					ws = i
				}
				we = i + size
				return
			}
			slow = true
			if ws >= 0 {
				buf = append(buf[:0], s[ws:we]...)
			} else {
				buf = buf[:0]
			}
		}
		buf = utf8.AppendRune(buf, lower)
	}
	flushCJK := func() {
		switch len(units) {
		case 0:
			return
		case 1:
			live = live && emit(string(cjk))
		default:
			units = append(units, len(cjk))
			for i := 0; live && i+2 < len(units); i++ {
				live = emit(string(cjk[units[i]:units[i+2]]))
			}
		}
		cjk, units, kind = cjk[:0], units[:0], noRun
	}
	for i := 0; i < len(s) && live; {
		if c := s[i]; c < utf8.RuneSelf {
			switch asciiKind[c] {
			case kindSep:
				flushWord()
				flushCJK()
			case kindUpper:
				flushCJK()
				appendRune(i, 1, rune(c+'a'-'A'), false)
			default:
				flushCJK()
				appendRune(i, 1, rune(c), true)
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError:
			flushWord()
			flushCJK()
		case isIgnorable(r):
			// Dropped: the word (or CJK run) goes on after it, so it
			// can no longer be a slice of s.
			if !slow && ws >= 0 {
				slow = true
				buf = append(buf[:0], s[ws:we]...)
			}
		case kind != noRun && isMark(r):
			cjk = append(cjk, r) // joins the run's last unit
		case runOf(r) != noRun:
			flushWord()
			k := runOf(r)
			if k != kind {
				flushCJK()
				kind = k
			}
			if len(cjk) == 0 || !isStacker(cjk[len(cjk)-1]) {
				units = append(units, len(cjk))
			}
			cjk = append(cjk, r)
		case isWordRune(r):
			flushCJK()
			lower := foldRune(r)
			appendRune(i, size, lower, lower == r)
		default:
			flushWord()
			flushCJK()
		}
		i += size
	}
	if live {
		flushWord()
	}
	if live {
		flushCJK()
	}
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// foldRune lower-cases r and takes the letters that lower-casing leaves
// apart from the rest of their case-fold orbit (unicode.SimpleFold) to the
// orbit's lower case: index.FoldTag matches a tag by its orbit, so "ΟΔΟΣ"
// must meet "οδος" as text too. TestFoldRuneFollowsOrbits derives this
// list from the Unicode tables and holds it to them.
func foldRune(r rune) rune {
	l := unicode.ToLower(r)
	if l < 0xb5 || l > 0x1fbe {
		return l
	}
	switch l {
	case 0xb5: // µ micro sign
		return 0x3bc // μ
	case 0x17f: // ſ long s
		return 's'
	case 0x345, 0x1fbe: // combining ypogegrammeni, prosgegrammeni
		return 0x3b9 // ι
	case 0x3c2: // ς final sigma
		return 0x3c3 // σ
	case 0x3d0: // ϐ
		return 0x3b2 // β
	case 0x3d1: // ϑ
		return 0x3b8 // θ
	case 0x3d5: // ϕ
		return 0x3c6 // φ
	case 0x3d6: // ϖ
		return 0x3c0 // π
	case 0x3f0: // ϰ
		return 0x3ba // κ
	case 0x3f1: // ϱ
		return 0x3c1 // ρ
	case 0x3f5: // ϵ
		return 0x3b5 // ε
	case 0x1c80: // old Cyrillic forms
		return 0x432 // в
	case 0x1c81:
		return 0x434 // д
	case 0x1c82:
		return 0x43e // о
	case 0x1c83:
		return 0x441 // с
	case 0x1c84, 0x1c85:
		return 0x442 // т
	case 0x1c86:
		return 0x44a // ъ
	case 0x1c87:
		return 0x463 // ѣ
	case 0x1c88:
		return 0xa64b // ꙋ
	case 0x1e9b: // ẛ
		return 0x1e61 // ṡ
	}
	return l
}

// stem answers the English stem of a lower-case word made of ASCII letters
// only, and any other word unchanged. Stopwords are matched before
// stemming, so the list stays in plain words.
func stem(w string) string {
	if len(w) < 3 {
		if b, ok := baseForms[w]; ok {
			return stem(b) // "dr"
		}
		return w // the stemmer leaves such words alone
	}
	for i := 0; i < len(w); i++ {
		if c := w[i]; c >= utf8.RuneSelf || asciiKind[c] != kindLower {
			return w
		}
	}
	if len(w) > maxStemmedWord {
		// No English word: the stemmer, which rewrites the string at each
		// step, takes time quadratic in such a run's length.
		return w
	}
	if len(w) > maxCachedWord {
		// No common word: caching it would let long words (a query of
		// long letter runs) hold megabytes in a cache meant for a MiB.
		return stemOf(w)
	}
	slot := &stems[maphash.String(stemSeed, w)&uint64(len(stems)-1)]
	if e := slot.Load(); e != nil && e.word == w {
		return e.stem
	}
	// A clone: w may be a slice of a large text the cache must not pin.
	e := &stemmed{word: strings.Clone(w), stem: stemOf(w)}
	slot.Store(e)
	return e.stem
}

// stemOf is stem's answer for a lower-case ASCII word of three letters or
// more, uncached. A listed form is read as its base here, on a cache miss,
// so the cache answers it after and other words never look it up.
func stemOf(w string) string {
	base := w
	if b, ok := baseForms[w]; ok {
		base = b
	}
	env := snowballstem.NewEnv(base)
	english.Stem(env)
	return env.Current()
}

// stems caches stem's answers, which were a sixth of a write's CPU
// (plugins/sqlite BenchmarkWrite): a word hashes to one slot, and a new
// word takes the slot over. Words follow a Zipf law, so the common ones
// are nearly always there; the cache is bounded by construction (under
// 2 MiB: words over maxCachedWord bytes are stemmed but never cached) and a
// hit costs one hash and one compare, with no lock.
var (
	stems    [1 << 14]atomic.Pointer[stemmed]
	stemSeed = maphash.MakeSeed()
)

type stemmed struct{ word, stem string }

// maxStemmedWord is the longest word stemmed, in bytes: longer than any
// English word, and as long as the index keeps of a term
// (index.MaxTermBytes), which a stem's suffix is past in a longer word.
const maxStemmedWord = 64

// maxCachedWord is the longest word the stem cache keeps, in bytes: longer
// than any common English word, short enough that the cache's 16384 slots
// hold at most 1 MiB of words and stems.
const maxCachedWord = 32

// Kinds of ASCII bytes. Lower and upper are letters, ordered after digit
// so that ">= kindLower" means "a letter".
const (
	kindSep = iota
	kindDigit
	kindLower
	kindUpper
)

var asciiKind = func() (t [utf8.RuneSelf]uint8) {
	for c := range t {
		switch {
		case c >= 'a' && c <= 'z':
			t[c] = kindLower
		case c >= 'A' && c <= 'Z':
			t[c] = kindUpper
		case c >= '0' && c <= '9':
			t[c] = kindDigit
		}
	}
	return t
}()

// stopwords are dropped from every term list: words so common that they
// carry no topic.
var stopwords = func() map[string]struct{} {
	m := map[string]struct{}{}
	for _, w := range strings.Fields(`a about above after again against all am an and any are as at be because
been before being below between both but by can could did do does doing don down during each few for from
further had has have having he her here hers herself him himself his how i if in into is it its itself just
me more most my myself no nor not now of off on once only or other our ours ourselves out over own same she
should so some such than that the their theirs them themselves then there these they this those through to
too under until up very was we were what when where which while who whom why will with would you your yours
yourself yourselves s t ll re ve d m`) {
		m[w] = struct{}{}
	}
	return m
}()

// baseForms folds listed words to the word they are a form of, before
// stemming: the comparative and superlative of common adjectives, which
// the stemmer leaves alone (its "-er" is as often a noun's: "water"), so
// "who is older" meets "the oldest of us"; and the abbreviated title
// "dr", so "which doctor" meets "Dr. Patel". Only listed words: no rule
// guesses at a word it does not know. Adjectives whose forms are common
// words of their own ("later", "earlier", "better", "best") are left out.
var baseForms = func() map[string]string {
	m := map[string]string{"dr": "doctor", "elder": "old", "eldest": "old"}
	for _, forms := range strings.Split(`old older oldest|young younger youngest|big bigger biggest|small smaller smallest|large larger largest|tall taller tallest|short shorter shortest|long longer longest|high higher highest|low lower lowest|near nearer nearest|fast faster fastest|slow slower slowest|quick quicker quickest|new newer newest|cheap cheaper cheapest|rich richer richest|poor poorer poorest|strong stronger strongest|weak weaker weakest|warm warmer warmest|cold colder coldest|hot hotter hottest|busy busier busiest|easy easier easiest|hard harder hardest|heavy heavier heaviest|deep deeper deepest|wide wider widest|narrow narrower narrowest|bright brighter brightest|dark darker darkest|clean cleaner cleanest|dirty dirtier dirtiest|happy happier happiest|sad sadder saddest|safe safer safest|nice nicer nicest|huge huger hugest|tiny tinier tiniest|thin thinner thinnest|thick thicker thickest|sweet sweeter sweetest|loud louder loudest|quiet quieter quietest|smart smarter smartest|healthy healthier healthiest|fresh fresher freshest|close closer closest|spicy spicier spiciest|funny funnier funniest|pretty prettier prettiest|ugly uglier ugliest|angry angrier angriest|hungry hungrier hungriest`, "|") {
		f := strings.Fields(forms)
		for _, w := range f[1:] {
			m[w] = f[0]
		}
	}
	return m
}()
