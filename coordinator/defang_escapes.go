package coordinator

import (
	"html"
	"strings"
	"sync"
	"sync/atomic"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/runenames"
)

// The escapes of the decoded view beyond the common ones (percent,
// backslash and character references, defangview.go). A reader reads an
// escape as what it stands for, whatever language it is written in, so
// each escape a model knows must be peeled, or the hex digits left in the
// text read as letters and break the word they stand in ("mem=2Dtoken",
// "me\6d -token"). Some escapes read otherwise in another language ("\6d"
// is a byte and "d" in C, "m" in CSS; "=2D" is "=2D" to most readers and
// "-" in quoted-printable; "%uD835" alone is U+FFFD, with "%uDC26" after
// it one character): each such reading is a flavour, and the layers are
// peeled once per flavour that reads something of the text otherwise.

// flavour is a reading of escapes: the common one, with the bits below
// added.
type flavour uint16

const (
	flavourCommon flavour = 0
	// flavourQP reads quoted-printable "=XX" (a run of them as the bytes
	// of one character), and an escaped UTF-16 surrogate pair, each half
	// written as its own escape (%uD835%uDC26, &#xD835;&#xDC26;), as the
	// one character the pair stands for (the common reading reads each
	// half alone, as U+FFFD).
	flavourQP flavour = 1 << iota
	// flavourCSS reads a backslash the way CSS does: one to six hex
	// digits and one whitespace after them are a character ("\6d " is
	// m), an escaped line break is nothing, and any other character
	// stands for itself ("\m" is m).
	flavourCSS
	// flavourLetters reads a backslash before a letter or digit the
	// common reading takes for an escape's whole name (a string's \n,
	// \r, \t, \f and \v, a control's \c, an octal \0 to \7) as that
	// character alone, while it decodes every other escape as the common
	// reading does. A reader may decode "\u002d" yet read "\token" as a
	// path or a typo's "token", and "[mem\u002d\token" then reads as
	// mem-token: no reading that decodes all escapes, or none, shows it
	// (the common one reads a tab and "oken").
	flavourLetters
	// flavourCodePoints reads a numeric character reference to U+0080 to
	// U+009F as that code point, a control most readers do not see: HTML
	// reads it as the Windows-1252 character of that byte ("&#x8a;" is
	// Š), a reader who knows no such table as the number it is.
	flavourCodePoints
	// flavourRefHidden, flavourRefASCII and flavourRefLetters read an
	// escape whose end is ambiguous (see shortEscapeAt) at the longest of
	// its shorter lengths that gives a character of their kinds (see
	// reads): one the scan reads as nothing, or such a one or printable
	// ASCII, or such a one or a letter the scan reads (a look-alike, a
	// transliterated letter).
	flavourRefHidden
	flavourRefASCII
	flavourRefLetters
	// flavourRefAny reads an ambiguous escape at the longest of its
	// shorter lengths that gives any character: not a reading of the
	// view, but the one that asks whether an escape may run on into the
	// defanger's replacement (tailOpen), whatever it gives there.
	flavourRefAny
)

// An escape no terminator ends may end before HTML or CSS ends it: HTML
// takes every digit after "&#x" ("&#x200bation" is U+200BA then "tion")
// and a name only when a semicolon ends it or it is one of the legacy
// names ("&zwnjen" is text), CSS takes six hex digits; yet a model may
// stop at the character it knows (a zero-width space then "ation";
// "&#x6demhost" as m then "emhost"; "&zwnjen" as a zero-width non-joiner
// then "en"). A marker may need each escape read at another length
// ("[&#x6dem-tok&#x200ben" is m, then a zero-width space), so a reading
// chooses the length of each escape by what it reads there, not one
// length for the text: the longest giving a character of its kind, since
// a marker needs each escape to be nothing or one of its letters. Three
// kinds, each wider than the one before, so that an escape whose longer
// length gives a letter of a wider kind (U+04D3, a look-alike of a) is
// still read at the ASCII letter a shorter one gives ("&#x4d3m" as M3m)
// by the narrower reading. flavourRefs are the three.
const flavourRefs = flavourRefHidden | flavourRefASCII | flavourRefLetters | flavourRefAny

// maxEntityName bounds the name of a reference shortNameAt reads:
// "&CounterClockwiseContourIntegral;" is the longest.
const maxEntityName = 32

// flavours are the readings the decoded view peels, the common one first.
// flavourLetters is also read with each reading of ambiguous escapes: a
// marker may need a percent escape decoded, a backslash before a letter
// kept and an escape read short ("[&#x6dem%2d\token" is m, "em", "-",
// then "\token"), which no one of them shows.
var flavours = [...]flavour{flavourCommon, flavourQP, flavourQP | flavourCSS, flavourLetters, flavourCodePoints,
	flavourRefHidden, flavourRefASCII, flavourRefLetters,
	flavourLetters | flavourRefHidden, flavourLetters | flavourRefASCII, flavourLetters | flavourRefLetters}

// letterEscapes are the characters after a backslash that flavourLetters
// reads as themselves.
const letterEscapes = "nrtfvcC01234567"

// escapeAt decodes the escape at v[i] as fl reads it, answering what it
// stands for and its end; own reports that fl reads it otherwise than the
// common reading.
func escapeAt(v string, i int, fl flavour) (dec string, end int, ok, own bool) {
	c := v[i]
	if c != '%' && c != '\\' && c != '&' && c != '=' {
		return "", 0, false, false
	}
	// A reading of both kinds reads an ambiguous escape short first:
	// "\6dem" is m then "em" to it, "6dem" to flavourLetters alone.
	if fl&flavourRefs != 0 && (c == '&' || c == '\\') {
		if dec, end, ok := shortEscapeAt(v, i, fl); ok {
			return dec, end, true, true
		}
	}
	if fl&flavourLetters != 0 && c == '\\' && i+1 < len(v) && strings.IndexByte(letterEscapes, v[i+1]) >= 0 {
		return v[i+1 : i+2], i + 2, true, true
	}
	if fl&flavourCSS != 0 && c == '\\' {
		dec, end, ok = cssEscapeAt(v, i)
		return dec, end, ok, ok
	}
	if fl&flavourCodePoints != 0 && c == '&' {
		if r, end, ok := codeUnitAt(v, i); ok && 0x80 <= r && r <= 0x9F {
			return string(r), end, true, true
		}
	}
	if fl&flavourQP != 0 {
		if c == '=' {
			dec, end, ok = byteRun(v, i, '=', "")
			return dec, end, ok, ok
		}
		if hi, next, ok := codeUnitAt(v, i); ok && 0xD800 <= hi && hi <= 0xDBFF {
			if lo, end, ok := codeUnitAt(v, next); ok && 0xDC00 <= lo && lo <= 0xDFFF {
				return string(0x10000 + (hi-0xD800)<<10 + (lo - 0xDC00)), end, true, true
			}
		}
	}
	switch c {
	case '%':
		dec, end, ok = percentAt(v, i)
	case '\\':
		dec, end, ok = backslashAt(v, i)
	case '&':
		dec, end, ok = charRefAt(v, i)
	}
	return dec, end, ok, false
}

// shortEscapeAt reads the escape at v[i] ('&' or '\\') no terminator
// ends at the longest of its shorter lengths fl reads there (reads): a
// numeric reference at fewer of its significant digits, a named one at a
// name its letters start with (which HTML reads only before a semicolon,
// but for its legacy names), a CSS escape at fewer of its hex digits. ok
// is false when no length but the one the common reading takes gives a
// character of fl's kind.
func shortEscapeAt(v string, i int, fl flavour) (string, int, bool) {
	if i+2 >= len(v) {
		return "", 0, false
	}
	if v[i] == '\\' {
		k := i + 1
		for k < len(v) && k-i-1 < 6 && isHex(v[k]) {
			k++
		}
		if k < len(v) && strings.IndexByte(" \t\n\r\f", v[k]) >= 0 {
			return "", 0, false
		}
		for n := k - i - 2; n > 0; n-- {
			if r, _ := hexValue(v, i+1, n); r != 0 && utf8.ValidRune(r) && fl.reads(r) {
				return string(r), i + 1 + n, true
			}
		}
		return "", 0, false
	}
	if v[i+1] != '#' {
		return shortNameAt(v, i, fl)
	}
	prefix, base, j := "&#", 10, i+2
	if v[j] == 'x' || v[j] == 'X' {
		prefix, base, j = "&#x", 16, j+1
	}
	for j < len(v) && v[j] == '0' {
		j++
	}
	k := j
	for k < len(v) && digitIn(v[k], base) {
		k++
	}
	if k < len(v) && v[k] == ';' {
		return "", 0, false
	}
	for n := min(k-j-1, maxRefDigits); n > 0; n-- {
		r, _, _ := paddedNumber(v[j:j+n], 0, base, n)
		if r == 0 || !utf8.ValidRune(r) {
			continue
		}
		if 0x80 <= r && r <= 0x9F {
			// The control it numbers (see flavourCodePoints), else as HTML
			// reads it: the Windows-1252 character of that byte.
			if fl.reads(r) {
				return string(r), j + n, true
			}
			r, _ = utf8.DecodeRuneInString(html.UnescapeString(prefix + v[j:j+n] + ";"))
		}
		if fl.reads(r) {
			return string(r), j + n, true
		}
	}
	return "", 0, false
}

// maxRefDigits bounds the digits of a number shortEscapeAt reads:
// "&#1114111", the largest, decimal.
const maxRefDigits = 7

// shortNameAt reads the named reference at v[i] ('&') no semicolon ends
// at the longest name its letters start with whose character fl reads
// (reads), when the common reading reads it otherwise.
func shortNameAt(v string, i int, fl flavour) (string, int, bool) {
	k := i + 1
	for k < len(v) && k-i-1 < maxEntityName && isAlnum(v[k]) {
		k++
	}
	if k < len(v) && v[k] == ';' || k-i-1 < 2 || !isLetter(v[i+1]) {
		return "", 0, false
	}
	names := entityNames()
	for n := k - i - 1; n >= 2; n-- {
		name := v[i+1 : i+1+n]
		if !names[name] {
			continue
		}
		dec := html.UnescapeString("&" + name + ";")
		if r, _ := utf8.DecodeRuneInString(dec); fl.reads(r) {
			if _, commonEnd, _ := charRefAt(v, i); i+1+n == commonEnd {
				return "", 0, false // the common reading's
			}
			return dec, i + 1 + n, true
		}
	}
	return "", 0, false
}

// reads reports whether r is of the kind fl reads an ambiguous escape
// at (see flavourRefHidden): read as nothing by the scan (a zero-width
// space, a control), else printable ASCII, else a letter the scan reads
// as a marker's (a look-alike, a letter it transliterates, a leet
// symbol).
func (fl flavour) reads(r rune) bool {
	if fl&flavourRefAny != 0 || skippable(r) {
		return true
	}
	if fl&(flavourRefASCII|flavourRefLetters) == 0 {
		return false
	}
	if r < utf8.RuneSelf {
		return true
	}
	return fl&flavourRefLetters != 0 && readsAsLetter(r)
}

// readsAsLetter reports whether the scan reads r as some ASCII letter or
// digit: by its fold, its look (lookLetters) or as a leet symbol. The
// answers for the BMP are kept, two bits a character (known, and the
// answer), in a fixed table: a text may hold many ambiguous escapes,
// each read at up to seven lengths.
func readsAsLetter(r rune) bool {
	if r >= 1<<16 {
		return foldsToLetter(r)
	}
	word, shift := &lettersRead[r>>4], uint(r&15)*2
	if bits := word.Load() >> shift; bits&1 != 0 {
		return bits&2 != 0
	}
	letter := foldsToLetter(r)
	bits := uint32(1)
	if letter {
		bits = 3
	}
	word.Or(bits << shift)
	return letter
}

var lettersRead [1 << 12]atomic.Uint32

func foldsToLetter(r rune) bool {
	if _, ok := lookLetters[r]; ok {
		return true
	}
	if _, ok := lookLetters[unicode.ToLower(r)]; ok {
		return true
	}
	if _, ok := symbolASCII(r); ok {
		return true
	}
	letter := false
	foldRune(string(r), r, func(u rune) {
		letter = letter || u < utf8.RuneSelf && isAlnum(byte(u))
	})
	return letter
}

// codeUnitAt reads the escape of one numbered character at v[i] ("%uXXXX",
// "\uXXXX", "\u{X...}", "&#xX...;", "&#N...;"), answering its number
// unchecked (a surrogate half too) and its end.
func codeUnitAt(v string, i int) (rune, int, bool) {
	if i+2 >= len(v) {
		return 0, 0, false
	}
	switch {
	case (v[i] == '%' || v[i] == '\\') && (v[i+1] == 'u' || v[i+1] == 'U' && v[i] == '%') && v[i+2] != '{':
		if r, ok := hexValue(v, i+2, 4); ok {
			return r, i + 6, true
		}
	case v[i] == '\\' && v[i+1] == 'u':
		if r, end, ok := bracedNumber(v, i+2, 16); ok {
			return r, end, true
		}
	case v[i] == '&' && v[i+1] == '#':
		base, j := 10, i+2
		if v[j] == 'x' || v[j] == 'X' {
			base, j = 16, j+1
		}
		r, end, ok := paddedNumber(v, j, base, 6)
		if !ok {
			return 0, 0, false
		}
		if end < len(v) && v[end] == ';' {
			end++
		}
		return r, end, true
	}
	return 0, 0, false
}

// hexValue reads n hex digits at v[i], unchecked.
func hexValue(v string, i, n int) (rune, bool) {
	if i+n > len(v) {
		return 0, false
	}
	var r rune
	for k := i; k < i+n; k++ {
		if !isHex(v[k]) {
			return 0, false
		}
		r = r<<4 | rune(hexVal(v[k]))
	}
	return r, true
}

// paddedNumber reads a number in base (8, 10 or 16) at v[i]: any run of
// leading zeros, then at most max significant digits (a number longer is
// none). Leading zeros are skipped in one pass, so a reference padded with
// thousands of them costs what it is long: every escape reader takes them
// (html.UnescapeString, JavaScript's \u{…}, Perl's \x{…}).
func paddedNumber(v string, i, base, max int) (rune, int, bool) {
	j := i
	for j < len(v) && v[j] == '0' {
		j++
	}
	var r rune
	k := j
	for k < len(v) && digitIn(v[k], base) {
		if k-j >= max {
			return 0, 0, false
		}
		r = r*rune(base) + rune(hexVal(v[k]))
		k++
	}
	if k == i {
		return 0, 0, false
	}
	return r, k, true
}

func digitIn(c byte, base int) bool {
	switch base {
	case 8:
		return '0' <= c && c <= '7'
	case 10:
		return '0' <= c && c <= '9'
	}
	return isHex(c)
}

// bracedNumber reads "{N}" at v[i], N a padded number in base (see
// paddedNumber) of at most six significant hex digits, or eight octal.
func bracedNumber(v string, i, base int) (rune, int, bool) {
	if i >= len(v) || v[i] != '{' {
		return 0, 0, false
	}
	max := 6
	if base == 8 {
		max = 8
	}
	r, end, ok := paddedNumber(v, i+1, base, max)
	if !ok || end >= len(v) || v[end] != '}' {
		return 0, 0, false
	}
	return r, end + 1, true
}

// character answers r as text, U+FFFD when it is no character.
func character(r rune) string {
	if !utf8.ValidRune(r) {
		return string(utf8.RuneError)
	}
	return string(r)
}

// cssEscapeAt decodes the CSS escape at v[i] ('\'): one to six hex digits
// and one whitespace after them (a CR LF counts as one) are the character
// they number (U+FFFD for none, and for zero); an escaped line break is
// nothing; any other character stands for itself.
func cssEscapeAt(v string, i int) (string, int, bool) {
	if i+1 >= len(v) {
		return "", 0, false
	}
	j := i + 1
	if isHex(v[j]) {
		var r rune
		for j < len(v) && j-i-1 < 6 && isHex(v[j]) {
			r = r<<4 | rune(hexVal(v[j]))
			j++
		}
		if j < len(v) {
			switch v[j] {
			case ' ', '\t', '\n', '\f':
				j++
			case '\r':
				j++
				if j < len(v) && v[j] == '\n' {
					j++
				}
			}
		}
		if r == 0 {
			r = utf8.RuneError
		}
		return character(r), j, true
	}
	switch v[j] {
	case '\n', '\f':
		return "", j + 1, true
	case '\r':
		if j+1 < len(v) && v[j+1] == '\n' {
			return "", j + 2, true
		}
		return "", j + 1, true
	}
	_, size := utf8.DecodeRuneInString(v[j:])
	return v[j : j+size], j + size, true
}

// maxCharName bounds the name in "\N{NAME}": the longest Unicode name is
// 88 characters; a name written with more spaces reads the same.
const maxCharName = 128

// namedEscapeAt decodes Python's and Perl's "\N{NAME}" and Perl's
// "\N{U+X...}" at v[i] ('\'). A name is matched loosely (UAX #44 LM2:
// case, spaces, underscores and medial hyphens do not count), as Perl
// matches it and a reader reads it; the names of controls are their
// aliases (LINE FEED, LF, NEW LINE, CR, TAB, NEL).
func namedEscapeAt(v string, i int) (string, int, bool) {
	if !strings.HasPrefix(v[i:], `\N{`) {
		return "", 0, false
	}
	j := i + 3
	if strings.HasPrefix(v[j:], "U+") || strings.HasPrefix(v[j:], "u+") {
		r, end, ok := paddedNumber(v, j+2, 16, 6)
		if !ok || end >= len(v) || v[end] != '}' {
			return "", 0, false
		}
		return character(r), end + 1, true
	}
	k := strings.IndexByte(v[j:min(len(v), j+maxCharName+1)], '}')
	if k <= 0 {
		return "", 0, false
	}
	r, ok := runeNamed(v[j : j+k])
	if !ok {
		return "", 0, false
	}
	return string(r), j + k + 1, true
}

// runeNamed answers the character a Unicode name (or a control's alias)
// names, matched loosely.
func runeNamed(name string) (rune, bool) {
	key := looseName(name)
	if r, ok := charNames()[key]; ok {
		return r, true
	}
	// The names Unicode derives from the code point or the syllable.
	for _, prefix := range []string{"CJKUNIFIEDIDEOGRAPH", "CJKCOMPATIBILITYIDEOGRAPH", "TANGUTIDEOGRAPH",
		"KHITANSMALLSCRIPTCHARACTER", "NUSHUCHARACTER", "EGYPTIANHIEROGLYPH"} {
		if rest, ok := strings.CutPrefix(key, prefix); ok && len(rest) >= 4 && len(rest) <= 5 {
			if r, ok := hexValue(rest, 0, len(rest)); ok && derivedName(r) {
				return r, true
			}
		}
	}
	if rest, ok := strings.CutPrefix(key, "HANGULSYLLABLE"); ok {
		return hangulSyllable(rest)
	}
	return 0, false
}

// derivedName reports whether r's name is derived from its code point:
// runenames answers a placeholder for it.
func derivedName(r rune) bool {
	n := runenames.Name(r)
	return strings.HasPrefix(n, "<") && n != "<control>"
}

// looseName is a name's key for loose matching (UAX #44 LM2): upper case,
// without spaces, underscores and hyphens between letters or digits.
func looseName(name string) string {
	var b strings.Builder
	b.Grow(len(name))
	for k := 0; k < len(name); k++ {
		c := name[k]
		switch {
		case c == ' ' || c == '_' || c == '\t':
			continue
		case c == '-' && k > 0 && k+1 < len(name) && isAlnum(name[k-1]) && isAlnum(name[k+1]):
			continue
		case 'a' <= c && c <= 'z':
			c -= 'a' - 'A'
		}
		b.WriteByte(c)
	}
	return b.String()
}

// charNames maps the loose key of each character's Unicode name (and of
// the controls' aliases) to it; built on the first "\N{…}" read, in a
// fraction of a second, and a few megabytes.
var charNames = sync.OnceValue(func() map[string]rune {
	m := make(map[string]rune, 40000)
	for r := rune(0); r <= unicode.MaxRune; r++ {
		n := runenames.Name(r)
		if n == "" || n[0] == '<' {
			continue
		}
		if k := looseName(n); m[k] == 0 {
			m[k] = r
		}
	}
	for alias, r := range controlAliases {
		m[looseName(alias)] = r
	}
	return m
})

// controlAliases are the names Unicode's NameAliases.txt gives the
// controls a text may use (a control has no name of its own).
var controlAliases = map[string]rune{
	"NULL": 0, "NUL": 0,
	"CHARACTER TABULATION": '\t', "HORIZONTAL TABULATION": '\t', "TAB": '\t', "HT": '\t',
	"LINE FEED": '\n', "NEW LINE": '\n', "END OF LINE": '\n', "LF": '\n', "NL": '\n', "EOL": '\n',
	"LINE TABULATION": '\v', "VERTICAL TABULATION": '\v', "VT": '\v',
	"FORM FEED": '\f', "FF": '\f',
	"CARRIAGE RETURN": '\r', "CR": '\r',
	"NEXT LINE": 0x85, "NEL": 0x85,
	"ESCAPE": 0x1B, "ESC": 0x1B, "DELETE": 0x7F, "DEL": 0x7F,
	"SPACE": ' ', "SP": ' ', "NO-BREAK SPACE": 0xA0, "NBSP": 0xA0,
	"ZERO WIDTH SPACE": 0x200B, "ZWSP": 0x200B, "ZERO WIDTH JOINER": 0x200D, "ZWJ": 0x200D,
	"ZERO WIDTH NON-JOINER": 0x200C, "ZWNJ": 0x200C, "SOFT HYPHEN": 0xAD, "SHY": 0xAD,
	"BYTE ORDER MARK": 0xFEFF, "BOM": 0xFEFF, "LINE SEPARATOR": 0x2028, "PARAGRAPH SEPARATOR": 0x2029,
}

// The short names of the Hangul jamo that spell a syllable's name (Unicode
// 3.12): "HANGUL SYLLABLE MEM" is U+BA64.
var (
	hangulLeads  = []string{"G", "GG", "N", "D", "DD", "R", "M", "B", "BB", "S", "SS", "", "J", "JJ", "C", "K", "T", "P", "H"}
	hangulVowels = []string{"A", "AE", "YA", "YAE", "EO", "E", "YEO", "YE", "O", "WA", "WAE", "OE", "YO", "U", "WEO", "WE", "WI", "YU", "EU", "YI", "I"}
	hangulTails  = []string{"", "G", "GG", "GS", "N", "NJ", "NH", "D", "L", "LG", "LM", "LB", "LS", "LT", "LP", "LH", "M", "B", "BS", "S", "SS", "NG", "J", "C", "K", "T", "P", "H"}
)

// hangulSyllable answers the syllable a Hangul syllable's short name
// spells (its jamo's names run together, as LM2 keys them): each lead and
// vowel that start it, and the tail that ends it.
func hangulSyllable(name string) (rune, bool) {
	tails := hangulTailIndex()
	for l, lead := range hangulLeads {
		rest, ok := strings.CutPrefix(name, lead)
		if !ok {
			continue
		}
		for v, vowel := range hangulVowels {
			if tail, ok := strings.CutPrefix(rest, vowel); ok {
				if t, ok := tails[tail]; ok {
					return rune(0xAC00 + (l*21+v)*28 + t), true
				}
			}
		}
	}
	return 0, false
}

var hangulTailIndex = sync.OnceValue(func() map[string]int {
	m := make(map[string]int, len(hangulTails))
	for t, tail := range hangulTails {
		m[tail] = t
	}
	return m
})

// controlEscapeAt decodes a control written by its letter at v[i] ('\'):
// Perl's and the regular expressions' "\cJ", Ruby's and Emacs's "\C-j"
// (the letter's code less 64: a line feed).
func controlEscapeAt(v string, i int) (string, int, bool) {
	j := i + 2
	if strings.HasPrefix(v[i:], `\C-`) {
		j = i + 3
	} else if !strings.HasPrefix(v[i:], `\c`) {
		return "", 0, false
	}
	if j >= len(v) {
		return "", 0, false
	}
	c := v[j]
	if 'a' <= c && c <= 'z' {
		c -= 'a' - 'A'
	}
	if c < '?' || c > '_' {
		return "", 0, false
	}
	return string(rune(c ^ 0x40)), j + 1, true
}
