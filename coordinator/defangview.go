package coordinator

import (
	"strings"
	"unicode/utf8"
)

// The decoded view: a model reads escapes as what they stand for, so
// "mem%2Dtoken", "mem\u002dtoken" and "mem&amp;#45;token" read as
// mem-token. The defanger matches the text as written (character
// references decoded in the scan) and, when the text holds an escape, also
// this view: percent escapes (%2D, %E2%80%8B, %u002D), backslash escapes
// (\x2d, \u002d, \u{2d}, \U0000002D) and character references, peeled up to
// decodeLayers deep (%252D is %2D is -). Both are matched because a
// decoding may also swallow letters the text as written shows a model
// ("%0bservation" decodes to a vertical tab and "servation", yet reads as
// observation with a zero for its o).

// decodeLayers bounds the layers of escaping the view peels.
const decodeLayers = 3

// span is a byte range [start, end) of a text: the original bytes a byte
// of a decoded view stands for, or a piece of a body an excerpt keeps.
type span struct{ start, end int }

// decodedView answers s with its escapes decoded and, for each byte of
// the view, the range of s it came from; ok is false when s holds no
// escape (the view would be s).
func decodedView(s string) (view string, from []span, ok bool) {
	if !strings.ContainsAny(s, "%\\&") {
		return "", nil, false
	}
	view = s
	for range decodeLayers {
		next, nextFrom, changed := decodeOnce(view, from)
		if !changed {
			break
		}
		view, from, ok = next, nextFrom, true
	}
	return view, from, ok
}

// decodeOnce decodes one layer of escapes in v, whose bytes stand for the
// ranges from (nil: v is the original text).
func decodeOnce(v string, from []span) (string, []span, bool) {
	orig := func(i int) span {
		if from == nil {
			return span{i, i + 1}
		}
		return from[i]
	}
	var b strings.Builder
	var out []span
	changed := false
	last := 0
	for i := 0; i < len(v); {
		var dec string
		end := 0
		ok := false
		switch v[i] {
		case '%':
			dec, end, ok = percentAt(v, i)
		case '\\':
			dec, end, ok = backslashAt(v, i)
		case '&':
			dec, end, ok = charRefAt(v, i)
		}
		if !ok {
			i++
			continue
		}
		if !changed {
			b.Grow(len(v))
			out = make([]span, 0, len(v))
			changed = true
		}
		for k := last; k < i; k++ {
			out = append(out, orig(k))
		}
		b.WriteString(v[last:i])
		whole := span{orig(i).start, orig(end - 1).end}
		for range len(dec) {
			out = append(out, whole)
		}
		b.WriteString(dec)
		i, last = end, end
	}
	if !changed {
		return v, from, false
	}
	for k := last; k < len(v); k++ {
		out = append(out, orig(k))
	}
	b.WriteString(v[last:])
	return b.String(), out, true
}

// maxEscapeRun bounds the escapes decoded as one run (a character's
// UTF-8 bytes are at most four).
const maxEscapeRun = 4

// percentAt decodes the run of percent escapes at v[i] ('%'): %XX bytes
// (a character's UTF-8 bytes escaped one by one) or one %uXXXX.
func percentAt(v string, i int) (string, int, bool) {
	if r, ok := hexRune(v, i+2, 4); ok && i+1 < len(v) && (v[i+1] == 'u' || v[i+1] == 'U') {
		return string(r), i + 6, true
	}
	return byteRun(v, i, '%', "")
}

// backslashAt decodes the backslash escape at v[i] ('\'): \xXX bytes (a
// run, as UTF-8), \uXXXX (a surrogate pair as one character), \u{X...}
// and \UXXXXXXXX.
func backslashAt(v string, i int) (string, int, bool) {
	if i+1 >= len(v) {
		return "", 0, false
	}
	switch v[i+1] {
	case 'x':
		return byteRun(v, i, '\\', "x")
	case 'u':
		if i+2 < len(v) && v[i+2] == '{' {
			j := i + 3
			for j < len(v) && j-i-3 < 6 && isHex(v[j]) {
				j++
			}
			if j > i+3 && j < len(v) && v[j] == '}' {
				if r, ok := hexRune(v, i+3, j-i-3); ok {
					return string(r), j + 1, true
				}
			}
			return "", 0, false
		}
		r, ok := hexRune(v, i+2, 4)
		if !ok {
			return "", 0, false
		}
		if r >= 0xD800 && r <= 0xDBFF && i+12 <= len(v) && v[i+6] == '\\' && v[i+7] == 'u' {
			if lo, ok := hexRune(v, i+8, 4); ok && lo >= 0xDC00 && lo <= 0xDFFF {
				return string(0x10000 + (r-0xD800)<<10 + (lo - 0xDC00)), i + 12, true
			}
		}
		return string(r), i + 6, true
	case 'U':
		if r, ok := hexRune(v, i+2, 8); ok {
			return string(r), i + 10, true
		}
	}
	return "", 0, false
}

// byteRun decodes up to maxEscapeRun escaped bytes at v[i], each the
// introducer, then prefix, then two hex digits.
func byteRun(v string, i int, intro byte, prefix string) (string, int, bool) {
	var buf [maxEscapeRun]byte
	n, j := 0, i
	for n < maxEscapeRun && j < len(v) && v[j] == intro && strings.HasPrefix(v[j+1:], prefix) {
		k := j + 1 + len(prefix)
		if k+2 > len(v) || !isHex(v[k]) || !isHex(v[k+1]) {
			break
		}
		buf[n] = hexVal(v[k])<<4 | hexVal(v[k+1])
		n++
		j = k + 2
	}
	if n == 0 {
		return "", 0, false
	}
	return string(buf[:n]), j, true
}

// hexRune reads n hex digits at v[i] as a character; a value that is no
// character reads as U+FFFD.
func hexRune(v string, i, n int) (rune, bool) {
	if i < 0 || i+n > len(v) {
		return 0, false
	}
	var r rune
	for k := i; k < i+n; k++ {
		if !isHex(v[k]) {
			return 0, false
		}
		r = r<<4 | rune(hexVal(v[k]))
	}
	if !utf8.ValidRune(r) {
		r = utf8.RuneError
	}
	return r, true
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func hexVal(c byte) byte {
	switch {
	case c <= '9':
		return c - '0'
	case c >= 'a':
		return c - 'a' + 10
	}
	return c - 'A' + 10
}

// lineStart answers where the line holding s[i] starts.
func lineStart(s string, i int) int {
	for j := i; j > 0; {
		r, size := utf8.DecodeLastRuneInString(s[:j])
		if breaksLine(r) {
			return j
		}
		j -= size
	}
	return 0
}
