package coordinatortest

import (
	"html"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/mozillazg/go-unidecode"
	"go.mau.fi/util/confusable"
	"golang.org/x/text/cases"
	"golang.org/x/text/unicode/norm"
	"golang.org/x/text/unicode/runenames"
)

// The envelope's reserved markers as a model reads them (DESIGN 5.4, 5.5),
// spelled here independently of the coordinator.
var (
	liveTags      = []string{"memhost_memory_observation", "memhost_conversation_summary"}
	liveToken     = "mem-token"
	defangedToken = "defanged-mem-token"
)

// DefangedPrefix starts a line whose header phrase was neutralised.
const DefangedPrefix = "[defanged] "

// LiveMarker answers the first live envelope marker in s, if any: a
// reserved tag name or a token marker not marked defanged, anywhere in the
// reader's view of s, or the header phrase (header + " for identity") on a
// line that does not start with DefangedPrefix. It is the property every
// text memhost hands a model must hold, checked by a reference built from
// whole-string library calls rather than the coordinator's automaton. A
// symbol that stands for a letter in leet spelling (symbolLetters), or a
// compatibility form of one (fullwidth ＄), is read either way, as the
// separator it is or as that letter, each on its own: a marker may need
// one read one way and the next the other. "()", of any forms and with
// only ignorable characters between, reads as o.
func LiveMarker(header, s string) (string, bool) {
	for _, v := range decodedLayers(s)[1:] {
		if m, ok := liveIn(header, v); ok {
			return m, true
		}
	}
	// The header phrase in a decoded line, unless the line is marked.
	for _, line := range strings.FieldsFunc(s, lineBreak) {
		if strings.HasPrefix(line, DefangedPrefix) {
			continue
		}
		phrase := []rune(ReaderView(header + " for identity"))
		for _, v := range decodedLayers(line)[1:] {
			found := false
			findReadings(readings(unescapeHTML(v)), phrase, func([]int) { found = true })
			if found {
				return header + " for identity", true
			}
		}
	}
	return liveIn(header, s)
}

// escapeRE finds the escapes a model reads as what they stand for:
// percent escapes, backslash escapes (zero-padded braces, Python's and
// Perl's \N{NAME} and \N{U+X}, a control by its letter, \cJ or \C-j,
// too) and character references.
var escapeRE = regexp.MustCompile(`%[uU][0-9A-Fa-f]{4}|(?:%[0-9A-Fa-f]{2})+|\\[ux]\{0*[0-9A-Fa-f]{1,6}\}|\\o\{0*[0-7]{1,8}\}|\\N\{[^{}]{1,128}\}|\\c[?-_a-z]|\\C-[?-_a-z]|(?:\\u[0-9A-Fa-f]{4})+|\\U[0-9A-Fa-f]{8}|(?:\\x[0-9A-Fa-f]{2})+|&(?:#[xX][0-9A-Fa-f]+|#[0-9]+|[A-Za-z][A-Za-z0-9]*);?`)

// qpRE reads the same escapes, and quoted-printable bytes (=2D) and a
// surrogate pair escaped half by half (%uD835%uDC26, &#xD835;&#xDC26;).
var qpRE = regexp.MustCompile(`%[uU][dD][89abAB][0-9A-Fa-f]{2}%[uU][dD][c-fC-F][0-9A-Fa-f]{2}|&#[xX]0*[dD][89abAB][0-9A-Fa-f]{2};?&#[xX]0*[dD][c-fC-F][0-9A-Fa-f]{2};?|(?:=[0-9A-Fa-f]{2})+|` + escapeRE.String())

// cssRE reads a backslash as CSS does (\6d and one space after it is m,
// \_ is _, an escaped line break is nothing), and the other escapes as
// qpRE does.
var cssRE = regexp.MustCompile(`\\[0-9A-Fa-f]{1,6}(?:\r\n|[ \t\n\r\f])?|\\\r\n|\\(?s:.)|%[uU][0-9A-Fa-f]{4}|(?:%[0-9A-Fa-f]{2})+|(?:=[0-9A-Fa-f]{2})+|&(?:#[xX][0-9A-Fa-f]+|#[0-9]+|[A-Za-z][A-Za-z0-9]*);?`)

// surrogatePairRE is one of qpRE's escaped surrogate pairs.
var surrogatePairRE = regexp.MustCompile(`^(?:%[uU]|&#[xX]0*)([0-9A-Fa-f]{4});?(?:%[uU]|&#[xX]0*)([0-9A-Fa-f]{4});?$`)

// escapeReaders are the readings of escapes a model may take: each
// regexp's escapes, each decoded by decodeEscape.
var escapeReaders = []*regexp.Regexp{escapeRE, qpRE, cssRE}

// decodedLayers answers s and, for each reading of escapes, up to three
// layers of its escapes decoded (%252D is %2D is -), each layer decoding
// every escape of the one before. An escape no terminator ends is also
// read at a shorter length (shortReference), once for each kind of
// character a model may stop at (shortKinds), each escape at its own
// length.
func decodedLayers(s string) []string {
	out := []string{s}
	seen := map[string]bool{s: true}
	layers := func(decode func(string) string) {
		v := s
		for range 3 {
			next := decode(v)
			if next == v {
				break
			}
			if !seen[next] {
				seen[next] = true
				out = append(out, next)
			}
			v = next
		}
	}
	for _, re := range escapeReaders {
		layers(func(v string) string {
			return re.ReplaceAllStringFunc(v, func(m string) string { return decodeEscape(re, m) })
		})
	}
	layers(func(v string) string {
		return escapeRE.ReplaceAllStringFunc(v, controlReference)
	})
	for _, kind := range shortKinds {
		layers(func(v string) string {
			return shortRE.ReplaceAllStringFunc(v, func(m string) string { return shortReference(m, kind) })
		})
	}
	for _, v := range mixedLengths(s) {
		if !seen[v] {
			seen[v] = true
			out = append(out, v)
		}
	}
	// The same under one layer of percent escapes.
	if p := percentRE.ReplaceAllStringFunc(s, escapedBytes); p != s {
		for _, v := range mixedLengths(p) {
			if !seen[v] {
				seen[v] = true
				out = append(out, v)
			}
		}
	}
	return out
}

// percentRE is a run of percent escapes.
var percentRE = regexp.MustCompile(`(?:%[0-9A-Fa-f]{2})+`)

// openEscapeRE is an escape a reader may end at another length than the
// one its language reads: a numeric or named reference, its semicolon
// included if any, and a CSS escape of hex digits, the whitespace ending
// it included if any.
var openEscapeRE = regexp.MustCompile(`&#[xX]0*[0-9A-Fa-f]+;?|&#0*[0-9]+;?|&[A-Za-z][A-Za-z0-9]*;?|\\[0-9A-Fa-f]{1,6}(?:\r\n|[ \t\n\r\f])?`)

// maxMixedViews bounds the views mixedLengths answers for one text.
const maxMixedViews = 512

// mixedLengths answers s with its escapes no terminator ends read each
// at a length of its own, every length of each against every length of
// the others near it (within a marker's reach, up to four at a time): a
// marker may need one read at all its digits and the next at fewer
// ("[&#x6dem&#x2dtoken" is m then "em", then "-token"; "[\6dem\2dtoken"
// too), which no one kind of character read for every escape shows. A
// numeric reference is read at every length (HTML reads it whole); a CSS
// escape as written too, and a name as written (where HTML reads it only
// if it is a legacy one) or at any name its letters start with.
func mixedLengths(s string) []string {
	type open struct {
		start, end int
		readings   []string
	}
	var opens []open
	for _, loc := range openEscapeRE.FindAllStringIndex(s, -1) {
		m := s[loc[0]:loc[1]]
		var readings []string
		switch {
		case m[0] == '\\':
			readings = cssLengths(m)
		case m[1] != '#':
			readings = nameLengths(m)
		default:
			readings = numberLengths(m)
		}
		if len(readings) > 0 {
			opens = append(opens, open{loc[0], loc[1], readings})
		}
	}
	var out []string
	for a := range opens {
		b := a + 1
		for b < len(opens) && b-a < 4 && opens[b].start-opens[a].start <= 100 {
			b++
		}
		group := opens[a:b]
		choice := make([]int, len(group))
		for len(out) < maxMixedViews {
			var v strings.Builder
			at := 0
			for k, o := range group {
				v.WriteString(s[at:o.start])
				v.WriteString(o.readings[choice[k]])
				at = o.end
			}
			v.WriteString(s[at:])
			out = append(out, v.String())
			k := 0
			for k < len(group) {
				choice[k]++
				if choice[k] < len(group[k].readings) {
					break
				}
				choice[k] = 0
				k++
			}
			if k == len(group) {
				break
			}
		}
	}
	return out
}

// numberLengths answers the readings of a numeric reference (see
// mixedLengths): whole, as HTML reads it, and at each fewer digits that
// give a character, the rest as text; a reference to a C1 control as
// the control too. None for one of fewer than two digits.
func numberLengths(m string) []string {
	sm := unterminatedRefRE.FindStringSubmatch(m)
	if sm == nil || len(sm[2]) < 2 {
		return nil
	}
	base := 10
	if sm[1] != "" {
		base = 16
	}
	readings := []string{unescapeHTML(m)}
	if n, err := strconv.ParseUint(sm[2], base, 32); err == nil && 0x80 <= n && n <= 0x9F {
		readings = append(readings, string(rune(n)))
	}
	for n := 1; n < len(sm[2]) && n <= 7; n++ {
		r, err := strconv.ParseUint(sm[2][:n], base, 32)
		if err != nil || r == 0 || !utf8.ValidRune(rune(r)) {
			continue
		}
		tail := sm[2][n:]
		if 0x80 <= r && r <= 0x9F {
			readings = append(readings, string(rune(r))+tail)
		}
		readings = append(readings, html.UnescapeString("&#"+sm[1]+sm[2][:n]+";")+tail)
	}
	return readings
}

// cssLengths answers the readings of a CSS escape of hex digits (see
// mixedLengths): as written, whole, as CSS reads it, and, when no
// whitespace ends it, at each fewer digits that give a character, the
// rest as text.
func cssLengths(m string) []string {
	body := strings.TrimRight(m[1:], " \t\n\r\f")
	readings := []string{m, decodeEscape(cssRE, m)}
	if len(body) == len(m)-1 {
		for n := 1; n < len(body); n++ {
			if r, _ := strconv.ParseUint(body[:n], 16, 32); r != 0 && utf8.ValidRune(rune(r)) {
				readings = append(readings, string(rune(r))+body[n:])
			}
		}
	}
	return readings
}

// nameLengths answers the readings of a named reference no semicolon
// ends (see mixedLengths): as written, and at each name its letters
// start with, the rest as text. None when it starts with no name.
func nameLengths(m string) []string {
	if strings.HasSuffix(m, ";") {
		return nil
	}
	readings := []string{m}
	for n := 2; n <= len(m)-1 && n <= 31; n++ {
		name := m[1 : 1+n]
		dec := html.UnescapeString("&" + name + ";")
		if dec == "&"+name+";" || strings.HasSuffix(dec, ";") && name != "semi" {
			continue // no name, or a legacy one with letters after it
		}
		readings = append(readings, dec+m[1+n:])
	}
	if len(readings) == 1 {
		return nil
	}
	return readings
}

// loneDigitRE is a decimal reference's digits (unescapeHTML).
var loneDigitRE = regexp.MustCompile(`&#[0-9]+`)

// unescapeHTML decodes s's character references as HTML does.
// html.UnescapeString reads a decimal reference of one digit no
// semicolon ends as text ("&#9x"); HTML reads the character ("\tx").
func unescapeHTML(s string) string {
	s = loneDigitRE.ReplaceAllStringFunc(s, func(m string) string {
		if len(m) == 3 {
			return "&#0" + m[2:]
		}
		return m
	})
	return html.UnescapeString(s)
}

// c1RefRE is a numeric reference to U+0080 to U+009F: its base marker
// and its digits.
var c1RefRE = regexp.MustCompile(`^&#([xX]?)0*([0-9A-Fa-f]+);?$`)

// controlReference decodes one match of escapeRE, reading a numeric
// reference to U+0080 to U+009F as that code point (a control): HTML
// reads it as the Windows-1252 character of that byte ("&#x8a;" is Š),
// a reader who knows no such table as the number it is.
func controlReference(m string) string {
	if sm := c1RefRE.FindStringSubmatch(m); sm != nil {
		base := 10
		if sm[1] != "" {
			base = 16
		}
		if n, err := strconv.ParseUint(sm[2], base, 32); err == nil && 0x80 <= n && n <= 0x9F {
			return string(rune(n))
		}
	}
	return decodeEscape(escapeRE, m)
}

// shortRE reads escapeRE's escapes and a CSS escape of hex digits.
var shortRE = regexp.MustCompile(`\\[0-9A-Fa-f]{1,6}[ \t\n\r\f]?|` + escapeRE.String())

// isHexDigits reports whether s is all hex digits.
func isHexDigits(s string) bool {
	return strings.Trim(s, "0123456789abcdefABCDEF") == ""
}

// unterminatedRefRE is a numeric reference no semicolon ends: its base
// marker and its significant digits; unterminatedNameRE a named one.
var (
	unterminatedRefRE  = regexp.MustCompile(`^&#([xX]?)0*([0-9A-Fa-f]*)$`)
	unterminatedNameRE = regexp.MustCompile(`^&([A-Za-z][A-Za-z0-9]*)$`)
)

// shortKinds are the kinds of character a reader may stop an escape no
// terminator ends at, each wider than the one before: one it does not
// see, or ASCII too, or a letter it reads (a look-alike, a leet symbol)
// too.
var shortKinds = []func(rune) bool{
	ignorable,
	func(r rune) bool { return ignorable(r) || r < utf8.RuneSelf },
	func(r rune) bool {
		return ignorable(r) || r < utf8.RuneSelf || symbolOf(r) != 0 || alnum(string(readRune(string(r), r))) != ""
	},
}

// shortReference decodes one match of shortRE, reading an escape no
// terminator ends at the longest of its shorter lengths that gives a
// character of kind, the rest of it as text: HTML takes every digit
// ("&#x200bation" is U+200BA then "tion") and a name only before a
// semicolon but for its legacy names ("&zwnjen" is text), CSS six hex
// digits; a model may stop at the character it knows (a zero-width
// space then "ation", a zero-width non-joiner then "en"). An escape
// with no such length is read as the other readings read it.
func shortReference(m string, kind func(rune) bool) string {
	if m[0] == '\\' {
		// A CSS escape no whitespace ends.
		if isHexDigits(m[1:]) {
			for n := len(m) - 2; n > 0; n-- {
				if r, _ := strconv.ParseUint(m[1:1+n], 16, 32); r != 0 && utf8.ValidRune(rune(r)) && kind(rune(r)) {
					return string(rune(r)) + m[1+n:]
				}
			}
		}
		return m // the other readings read it whole
	}
	if sm := unterminatedNameRE.FindStringSubmatch(m); sm != nil {
		// HTML's longest name, "CounterClockwiseContourIntegral", has 31
		// letters.
		for n := min(len(sm[1]), 31); n >= 2; n-- {
			name := sm[1][:n]
			dec := html.UnescapeString("&" + name + ";")
			if dec == "&"+name+";" || strings.HasSuffix(dec, ";") && name != "semi" {
				continue // no name, or a legacy one with letters after it
			}
			if r, _ := utf8.DecodeRuneInString(dec); kind(r) {
				return dec + sm[1][n:]
			}
		}
		return decodeEscape(escapeRE, m)
	}
	sm := unterminatedRefRE.FindStringSubmatch(m)
	if sm == nil {
		return decodeEscape(escapeRE, m)
	}
	base := 10
	if sm[1] != "" {
		base = 16
	}
	for n := min(len(sm[2])-1, 7); n > 0; n-- {
		r, err := strconv.ParseUint(sm[2][:n], base, 32)
		if err != nil || r == 0 || !utf8.ValidRune(rune(r)) {
			continue
		}
		if 0x80 <= r && r <= 0x9F && kind(rune(r)) {
			return string(rune(r)) + sm[2][n:] // the control it numbers
		}
		dec := html.UnescapeString("&#" + sm[1] + sm[2][:n] + ";")
		if r, _ := utf8.DecodeRuneInString(dec); kind(r) {
			return dec + sm[2][n:]
		}
	}
	return decodeEscape(escapeRE, m)
}

// escapedBytes decodes a run of three-character byte escapes, "%E2%80"
// or quoted-printable's "=E2=80".
func escapedBytes(m string) string {
	b := make([]byte, 0, len(m)/3)
	for i := 0; i+2 < len(m); i += 3 {
		n, _ := strconv.ParseUint(m[i+1:i+3], 16, 8)
		b = append(b, byte(n))
	}
	return string(b)
}

// decodeEscape decodes one match of re.
func decodeEscape(re *regexp.Regexp, m string) string {
	switch {
	case re == cssRE && m[0] == '\\':
		body := strings.TrimRight(m[1:], " \t\n\r\f")
		if body == "" {
			return "" // an escaped line break
		}
		if n, err := strconv.ParseUint(body, 16, 32); err == nil && len(body) <= 6 {
			if n == 0 || !utf8.ValidRune(rune(n)) {
				return "\uFFFD"
			}
			return string(rune(n))
		}
		return m[1:]
	case m[0] == '=':
		return escapedBytes(m)
	case re == qpRE && surrogatePairRE.MatchString(m):
		sm := surrogatePairRE.FindStringSubmatch(m)
		hi, _ := strconv.ParseUint(sm[1], 16, 32)
		lo, _ := strconv.ParseUint(sm[2], 16, 32)
		return string(utf16.DecodeRune(rune(hi), rune(lo)))
	case m[0] == '&':
		return unescapeHTML(m)
	case len(m) == 6 && m[0] == '%' && (m[1] == 'u' || m[1] == 'U'):
		n, _ := strconv.ParseUint(m[2:], 16, 32)
		return string(rune(n))
	case m[0] == '%':
		return escapedBytes(m)
	case strings.HasPrefix(m, `\u{`), strings.HasPrefix(m, `\x{`):
		n, _ := strconv.ParseUint(strings.TrimLeft(m[3:len(m)-1], "0")+"0", 16, 32)
		return string(rune(n >> 4))
	case strings.HasPrefix(m, `\o{`):
		n, _ := strconv.ParseUint(strings.TrimLeft(m[3:len(m)-1], "0")+"0", 8, 32)
		return string(rune(n >> 3))
	case strings.HasPrefix(m, `\N{`):
		return namedCharacter(m[3:len(m)-1], m)
	case strings.HasPrefix(m, `\c`), strings.HasPrefix(m, `\C-`):
		c := unicode.ToUpper(rune(m[len(m)-1]))
		return string(c ^ 0x40)
	case strings.HasPrefix(m, `\u`):
		var units []uint16
		for i := 0; i+6 <= len(m); i += 6 {
			n, _ := strconv.ParseUint(m[i+2:i+6], 16, 16)
			units = append(units, uint16(n))
		}
		return string(utf16.Decode(units))
	case strings.HasPrefix(m, `\U`):
		n, _ := strconv.ParseUint(m[2:], 16, 32)
		return string(rune(n))
	}
	b := make([]byte, 0, len(m)/4) // \xXX runs
	for i := 0; i+4 <= len(m); i += 4 {
		n, _ := strconv.ParseUint(m[i+2:i+4], 16, 8)
		b = append(b, byte(n))
	}
	return string(b)
}

// namedCharacter answers the character name names (matched without
// regard to case, spaces, underscores and hyphens), or a control's
// common alias; m as written when it names none.
func namedCharacter(name, m string) string {
	key := nameKey(name)
	if hex, ok := strings.CutPrefix(key, "U+"); ok {
		if n, err := strconv.ParseUint(hex, 16, 32); err == nil && utf8.ValidRune(rune(n)) {
			return string(rune(n))
		}
		return m
	}
	if r, ok := characterNames()[key]; ok {
		return string(r)
	}
	return m
}

// nameKey drops what loose matching of names ignores.
func nameKey(name string) string {
	return strings.ToUpper(strings.NewReplacer(" ", "", "_", "", "-", "").Replace(name))
}

// characterNames maps each name's key to its character, and the aliases
// of the line breaks and tabs.
var characterNames = sync.OnceValue(func() map[string]rune {
	m := map[string]rune{}
	for r := rune(0); r <= unicode.MaxRune; r++ {
		if n := runenames.Name(r); n != "" && n[0] != '<' {
			if _, dup := m[nameKey(n)]; !dup {
				m[nameKey(n)] = r
			}
		}
	}
	for alias, r := range map[string]rune{"LINE FEED": '\n', "LF": '\n', "NEW LINE": '\n', "NL": '\n', "EOL": '\n', "END OF LINE": '\n',
		"CARRIAGE RETURN": '\r', "CR": '\r', "FORM FEED": '\f', "FF": '\f', "LINE TABULATION": '\v', "VT": '\v',
		"NEXT LINE": 0x85, "NEL": 0x85, "CHARACTER TABULATION": '\t', "TAB": '\t'} {
		m[nameKey(alias)] = r
	}
	return m
})

// liveIn is LiveMarker on one view of a text.
func liveIn(header, s string) (string, bool) {
	view := readings(unescapeHTML(s))
	for _, tag := range liveTags {
		found := false
		findReadings(view, []rune(ReaderView(tag)), func([]int) { found = true })
		if found {
			return tag, true
		}
	}
	// A token word is defanged only where the text reads exactly
	// defangedToken, as the defanger writes it: each such place gives the
	// view one token, and any other token in the view is live (a
	// "defanged" the model reads apart from the token, across a line or
	// in invisible characters, protects nothing).
	tokens := 0
	findReadings(view, []rune(ReaderView(liveToken)), func([]int) { tokens++ })
	if tokens > strings.Count(s, defangedToken) {
		return liveToken, true
	}
	// The header phrase, by the lines its first letter may come from.
	live := false
	findReadings(readings(s), []rune(ReaderView(header+" for identity")), func(starts []int) {
		for _, start := range starts {
			if !strings.HasPrefix(s[start:], DefangedPrefix) {
				live = true
			}
		}
	})
	if live {
		return header + " for identity", true
	}
	return "", false
}

// symbolLetters is the letter each symbol stands for in leet spelling,
// spelled here independently of the coordinator; "()" stands for o.
var symbolLetters = map[rune]rune{
	'$': 's', '@': 'a', '^': 'a', '!': 'i', '|': 'i', '+': 't', '#': 'h',
	'€': 'e', '£': 'e', '∈': 'e', '∊': 'e', '∃': 'e', '∑': 'e', '⋲': 'e', '⋳': 'e',
	'○': 'o', '●': 'o', '◎': 'o', '◉': 'o', '◌': 'o', '◍': 'o', '◦': 'o', '⚪': 'o', '⚫': 'o',
	'⭕': 'o', '⭘': 'o', '❍': 'o', '⊙': 'o', '⊚': 'o', '⊛': 'o', '⊕': 'o', '⊗': 'o', '⊘': 'o', '⦿': 'o',
	'⨀': 'o', '∅': 'o', '⌀': 'o', '°': 'o', 'ʘ': 'o', '∘': 'o',
	'†': 't', '‡': 't', '✝': 't', '✞': 't', '✟': 't', '✠': 't', '☦': 't',
	'∧': 'a', 'Δ': 'a', '∆': 'a',
	'¡': 'i', '¦': 'i',
	'§': 's',
}

// reading is one character of a text as a reader sees it: its letters
// (readRune), the letters of its second reading when it is a symbol that
// stands for one or nothing when it is a tag character (nil otherwise),
// and the start of its line.
type reading struct {
	shape, sound []rune
	line         int
}

// readings reads s character by character.
func readings(s string) []reading {
	var out []reading
	line := 0
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if lineBreak(r) {
			i += size
			line = i
			continue
		}
		c := reading{shape: readRune(s[i:i+size], r), line: line}
		if sym := symbolOf(r); sym == '(' {
			if end, ok := closingParen(s, i+size); ok {
				c.sound, size = []rune("o"), end-i
			}
		} else if l, ok := symbolLetters[sym]; ok {
			c.sound = []rune(ReaderView(string(l)))
		} else if r >= 0xE0021 && r <= 0xE007E {
			// A tag character is invisible where text is shown: read as
			// nothing too.
			c.sound = []rune{}
		}
		out = append(out, c)
		i += size
	}
	return out
}

// symbolOf answers the symbol r is a form of: the one character its NFKC
// form is (fullwidth ＄ and small ﹩ are $), else r.
func symbolOf(r rune) rune {
	if k := []rune(norm.NFKC.String(string(r))); len(k) == 1 {
		return k[0]
	}
	return r
}

// closingParen answers the end of a form of ')' that the text from s[j]
// starts with after ignorable characters other than line breaks: "()"
// with nothing visible between reads as o.
func closingParen(s string, j int) (int, bool) {
	for j < len(s) {
		r, size := utf8.DecodeRuneInString(s[j:])
		if symbolOf(r) == ')' {
			return j + size, true
		}
		if lineBreak(r) || !ignorable(r) {
			return 0, false
		}
		j += size
	}
	return 0, false
}

// findReadings reports each match of pat (a ReaderView) in text, each
// character read by its shape or, when it has one, by its sound, with any
// run of characters with no letters between: the lines it may start on,
// once for each character a match ends in.
func findReadings(text []reading, pat []rune, hit func(starts []int)) {
	if len(pat) == 0 {
		return
	}
	// partial[j] holds the lines a partial match of pat[:j] may start on.
	partial := make([][]int, len(pat))
	next := make([][]int, len(pat))
	for _, c := range text {
		for j := range next {
			next[j] = next[j][:0]
		}
		var ends []int
		alternatives := [][]rune{c.shape}
		if c.sound != nil {
			alternatives = append(alternatives, c.sound)
		}
		for _, units := range alternatives {
			if len(units) == 0 {
				// Read as nothing: every partial match goes on.
				for j := 1; j < len(pat); j++ {
					next[j] = addLines(next[j], partial[j]...)
				}
				continue
			}
			cur := make([][]int, len(pat))
			for j := 1; j < len(pat); j++ {
				cur[j] = append([]int(nil), partial[j]...)
			}
			for _, u := range units {
				cur[0] = []int{c.line} // a match may start at any letter
				step := make([][]int, len(pat))
				for j, lines := range cur {
					if len(lines) == 0 || pat[j] != u {
						continue
					}
					if j+1 == len(pat) {
						ends = addLines(ends, lines...)
					} else {
						step[j+1] = addLines(step[j+1], lines...)
					}
				}
				cur = step
			}
			for j := 1; j < len(pat); j++ {
				next[j] = addLines(next[j], cur[j]...)
			}
		}
		if len(ends) > 0 {
			hit(ends)
		}
		partial, next = next, partial
	}
}

// addLines adds lines to the set set.
func addLines(set []int, lines ...int) []int {
	for _, l := range lines {
		if !slices.Contains(set, l) {
			set = append(set, l)
		}
	}
	return set
}

// CheckModelText fails t when s holds a live marker (see LiveMarker) or a
// control other than line feed and tab.
func CheckModelText(t testing.TB, header, s string) {
	t.Helper()
	if m, ok := LiveMarker(header, s); ok {
		t.Fatalf("live marker %q in the reader's view of %q (%q)", m, s, ReaderView(s))
	}
	for _, r := range s {
		if r != '\n' && r != '\t' && (unicode.IsControl(r) || r == 0xFFFE || r == 0xFFFF) {
			t.Fatalf("control %U left in %q", r, s)
		}
	}
}

// ReaderView is the text a model reads in s, reduced to its letters:
// character references decoded, NFKD, full case folding, each character
// read as its confusable skeleton when that is ASCII, else as its
// Unidecode transliteration, else as the transliteration of its skeleton;
// only the ASCII letters and digits of the readings are kept, themselves
// as skeletons (m is rn). A letter with no ASCII reading is kept as itself,
// so that it breaks a word.
func ReaderView(s string) string {
	s = unescapeHTML(s)
	var b strings.Builder
	for i, r := range s {
		size := utf8.RuneLen(r)
		if r == utf8.RuneError {
			size = 1
		}
		b.WriteString(string(readRune(s[i:i+size], r)))
	}
	return b.String()
}

// readRune answers the letters a reader sees in one character.
func readRune(enc string, r rune) []rune {
	switch {
	case r >= 0xE0021 && r <= 0xE007E:
		// A tag character reads as the ASCII it encodes.
		enc = string(r - 0xE0000)
	case r >= 0x1F1E6 && r <= 0x1F1FF:
		// A regional indicator reads as its letter.
		enc = string('A' + r - 0x1F1E6)
	}
	var out strings.Builder
	for _, c := range norm.NFKD.String(enc) {
		if ignorable(c) {
			continue
		}
		// A character's own shape first: Greek capital Ν reads as N.
		if sk := skeleton(c); c >= utf8.RuneSelf && sk != "" && isASCII(sk) {
			out.WriteString(alnum(sk))
			continue
		}
		readFolded(&out, cases.Fold().String(string(c)))
	}
	// ASCII letters read as their own skeletons: m reads as rn.
	return []rune(strings.ToLower(confusable.Skeleton(out.String())))
}

// skeleton is the confusable skeleton of one character, lower case,
// without marks.
func skeleton(r rune) string {
	return strings.ToLower(dropIgnorable(norm.NFD.String(confusable.Skeleton(string(r)))))
}

// readFolded writes the letters a reader sees in case-folded text.
func readFolded(out *strings.Builder, folded string) {
	for _, x := range folded {
		if ignorable(x) {
			continue
		}
		sk := skeleton(x)
		switch {
		case isASCII(sk):
			out.WriteString(alnum(sk))
		case alnum(unidecode.Unidecode(string(x))) != "":
			out.WriteString(alnum(unidecode.Unidecode(string(x))))
		case alnum(unidecode.Unidecode(sk)) != "":
			out.WriteString(alnum(unidecode.Unidecode(sk)))
		case (unicode.IsLetter(x) && !unicode.Is(unicode.Lm, x)) || unicode.IsNumber(x):
			out.WriteRune(x)
		}
	}
}

func alnum(s string) string {
	return strings.Map(func(r rune) rune {
		if r < utf8.RuneSelf && (unicode.IsLetter(r) || unicode.IsDigit(r)) {
			return unicode.ToLower(r)
		}
		return -1
	}, s)
}

func isASCII(s string) bool {
	return strings.IndexFunc(s, func(r rune) bool { return r >= utf8.RuneSelf }) < 0
}

func dropIgnorable(s string) string {
	return strings.Map(func(r rune) rune {
		if ignorable(r) {
			return -1
		}
		return r
	}, s)
}

// ignorable reports what a reader does not see as part of a word: spaces,
// controls, format characters, variation selectors, other default
// ignorables, combining marks, bytes that are not UTF-8.
func ignorable(r rune) bool {
	return r == utf8.RuneError || unicode.IsSpace(r) || unicode.IsControl(r) ||
		unicode.In(r, unicode.Cf, unicode.Variation_Selector, unicode.Other_Default_Ignorable_Code_Point, unicode.Mn, unicode.Me)
}

func lineBreak(r rune) bool {
	switch r {
	case '\n', '\r', '\v', '\f', '\u0085', '\u2028', '\u2029':
		return true
	}
	return false
}

// UnframeSummary splits a delivered compaction summary into the preamble
// before its element and the text inside it, unescaped as a reader would;
// it fails t unless the summary sits in exactly one
// <memhost_conversation_summary> element holding no raw markup.
func UnframeSummary(t testing.TB, artifact string) (preamble, inner string) {
	t.Helper()
	const open, end = "<memhost_conversation_summary>\n", "\n</memhost_conversation_summary>"
	i := strings.Index(artifact, open)
	if i < 0 || !strings.HasSuffix(artifact, end) || strings.Count(artifact, "memhost_conversation_summary") != 2 {
		t.Fatalf("the summary is not framed in its own element:\n%s", artifact)
	}
	inner = artifact[i+len(open) : len(artifact)-len(end)]
	if strings.ContainsAny(inner, "<>") {
		t.Fatalf("raw markup inside the summary's element:\n%s", inner)
	}
	return artifact[:i], html.UnescapeString(inner)
}
