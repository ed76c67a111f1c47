package coordinator

import (
	"slices"
	"sort"
	"strings"
	"unicode/utf8"
)

// The decoded view: a model reads escapes as what they stand for, so
// "mem%2Dtoken", "mem\u002dtoken" and "mem&amp;#45;token" read as
// mem-token. The defanger matches the text as written (character
// references decoded in the scan, and left as written) and, when the text
// holds an escape, each layer of this view: percent escapes (%2D,
// %E2%80%8B, %u002D), backslash escapes (\x2d, \u002d, \u{2d},
// \U0000002D, \N{HYPHEN-MINUS}, \cJ) and character references, peeled up
// to decodeLayers deep (%252D is %2D is -), once in the common reading and
// once more in each reading of escapes a language gives otherwise
// (quoted-printable, CSS, an escape no terminator ends read at the
// character it gives at a shorter length; see flavour). All are matched because a decoding may also
// swallow letters the text as written shows a model ("%0bservation"
// decodes to a vertical tab and "servation", yet reads as observation
// with a zero for its o). A reader of HTML or XML also reads markup as
// nothing, so "mem<wbr>-token", "mem<!-- x -->-token" and
// "mem<![CDATA[-token]]>" read as mem-token in the markup view
// (markupView).

// decodeLayers bounds the layers of escaping the view peels.
const decodeLayers = 3

// span is a byte range [start, end) of a text: the original bytes a byte
// of a decoded view stands for, or a piece of a body an excerpt keeps.
type span struct{ start, end int }

// layer is one layer of a decoded view: its text, for each byte the
// range of the original text it came from, and whether it is the deepest
// layer its reading peeled (the one the markup views are built on).
type layer struct {
	view    string
	from    []span
	deepest bool
}

// decodedLayers answers each layer of s's decoded view, peeled one layer
// of escapes at a time, up to decodeLayers; none when s holds no escape.
// A reader may stop at any layer, and a layer may show what the next one
// hides ("%25AAgent" is "%AAgent", then a byte and "gent"), so every layer
// is matched. The common reading of the escapes peels its layers first;
// each other reading (flavour) peels its own from the first layer it
// reads otherwise, and before that its layers are the common ones, which
// are neither built nor answered twice.
func decodedLayers(s string) []layer {
	if !hasAnyByte(s, "%\\&=") {
		return nil
	}
	common := peel(s, nil, flavourCommon, 0)
	out := common
	var refChains [][]layer
	// The views flavourLetters reads: a reading of both it and ambiguous
	// escapes is flavourLetters's alone when none of them holds an
	// ambiguous escape, and is not peeled (code holds "\n" and "&amp;").
	lettersRead := []string{s}
	for _, l := range common {
		lettersRead = append(lettersRead, l.view)
	}
	for _, fl := range flavours[1:] {
		if refs := fl &^ flavourLetters; fl&flavourLetters != 0 && refs != 0 &&
			!slices.ContainsFunc(lettersRead, func(v string) bool { return ownEscapeIn(v, refs) }) {
			continue
		}
		view, from := s, []span(nil)
		for k := range decodeLayers {
			if ownEscapeIn(view, fl) {
				chain := peel(view, from, fl, k)
				if fl&(flavourRefs|flavourLetters) != 0 {
					// The readings of ambiguous escapes often choose
					// alike ("&zwnj" is nothing to all three), and with
					// flavourLetters's as it alone does when they read
					// none: a chain one of them peeled already is not
					// matched again.
					if slices.ContainsFunc(refChains, func(c []layer) bool { return sameChain(c, chain) }) {
						break
					}
					refChains = append(refChains, chain)
				}
				if fl == flavourLetters {
					for _, l := range chain {
						lettersRead = append(lettersRead, l.view)
					}
				}
				out = append(out, chain...)
				break
			}
			if k >= len(common) {
				break
			}
			view, from = common[k].view, common[k].from
		}
	}
	return out
}

// sameChain reports whether two chains of layers read alike.
func sameChain(a, b []layer) bool {
	return slices.EqualFunc(a, b, func(x, y layer) bool { return x.view == y.view && slices.Equal(x.from, y.from) })
}

// peel answers the layers of v (whose bytes stand for the ranges from)
// that fl peels, when done layers were peeled before it; the deepest is
// marked so.
func peel(v string, from []span, fl flavour, done int) []layer {
	var chain []layer
	for range decodeLayers - done {
		next, nextFrom, changed, _ := decodeOnce(v, from, fl)
		if !changed {
			break
		}
		v, from = next, nextFrom
		chain = append(chain, layer{view: v, from: from})
	}
	if len(chain) > 0 {
		chain[len(chain)-1].deepest = true
	}
	return chain
}

// escapeStart marks the bytes an escape starts with (escapeAt): the walks
// over a view skip the others without a call.
var escapeStart = [256]bool{'%': true, '\\': true, '&': true, '=': true}

// ownEscapeIn reports whether fl reads some escape of v otherwise than the
// common reading, walking v as decodeOnce does, without building a layer.
func ownEscapeIn(v string, fl flavour) bool {
	if fl&(flavourRefs|flavourCodePoints) != 0 && !mayHoldRefs(v) {
		return false
	}
	for i := 0; i < len(v); {
		if !escapeStart[v[i]] {
			i++
			continue
		}
		_, end, ok, own := escapeAt(v, i, fl)
		switch {
		case own:
			return true
		case ok:
			i = end
		default:
			i++
		}
	}
	return false
}

// mayHoldRefs reports whether v holds an escape the reference readings
// and flavourCodePoints may read otherwise than the common one: "&#", an
// "&" before a letter (a name), or a backslash before a hex digit. Prose
// holds "&" and "\\" often, those seldom.
func mayHoldRefs(v string) bool {
	for i := 0; i+1 < len(v); i++ {
		switch c := v[i+1]; v[i] {
		case '&':
			if c == '#' || isLetter(c) {
				return true
			}
		case '\\':
			if isHex(c) {
				return true
			}
		}
	}
	return false
}

// markupView answers v (a text, or a decoded view of one) with its markup
// read as nothing (see markupAt), a block's tag as a line break
// (breaksBlock), and where it cut: ok is false when v holds none. The
// lenient view reads as HTML does what XML reads as text (a comment
// closed by "--!>", a processing instruction or declaration ended by its
// first '>', a template's "<% ... %>"); either reading may hide what the
// other shows, so both are matched (hasLenientMarkup). It is a view of
// its own, not a layer of the decoded one: a
// tag read as nothing would hide the letters an escape decodes to
// ("%3Cmemhost%5Fmemory%5Fobservation%3E" is a tag once decoded), and the
// tag's own letters are read where the text is. The cuts, not a span per
// byte, map it back: markup is common, and the view is built on every
// defanging of a text that holds it.
func markupView(v string, lenient bool) (view string, cuts []viewCut, ok bool) {
	var b strings.Builder
	last := 0
	noCommentEnd := false
	for i := strings.IndexByte(v, '<'); i >= 0; {
		end, found := markupAt(v, i, lenient, &noCommentEnd)
		if !found {
			end = i + 1
		} else {
			if cuts == nil {
				b.Grow(len(v))
			}
			b.WriteString(v[last:i])
			// A block's tag reads as a line break, standing for the
			// tag's last byte: a line it starts begins after the tag.
			newline := breaksBlock(v, i, end)
			removed := end - i
			if newline {
				removed--
			}
			if len(cuts) > 0 {
				removed += cuts[len(cuts)-1].removed
			}
			cuts = append(cuts, viewCut{at: b.Len(), removed: removed})
			if newline {
				b.WriteByte('\n')
			}
			last = end
		}
		j := strings.IndexByte(v[end:], '<')
		if j < 0 {
			break
		}
		i = end + j
	}
	if cuts == nil {
		return "", nil, false
	}
	b.WriteString(v[last:])
	return b.String(), cuts, true
}

// tagFreeView answers v without its Unicode tag characters (U+E0000 to
// U+E007F), and where it cut; ok is false when v holds none. The scan
// reads a tag character as the ASCII it encodes and as nothing, but a
// role header or template token is read one way only: on this view, as
// a reader who is shown the text and does not see them reads it.
func tagFreeView(v string) (view string, cuts []viewCut, ok bool) {
	var b strings.Builder
	last, removed := 0, 0
	for i := strings.IndexByte(v, 0xF3); i >= 0; {
		r, size := utf8.DecodeRuneInString(v[i:])
		if r >= 0xE0000 && r <= 0xE007F {
			if cuts == nil {
				b.Grow(len(v))
			}
			b.WriteString(v[last:i])
			removed += size
			if n := len(cuts); n > 0 && cuts[n-1].at == b.Len() {
				cuts[n-1].removed = removed
			} else {
				cuts = append(cuts, viewCut{at: b.Len(), removed: removed})
			}
			last = i + size
		}
		j := strings.IndexByte(v[i+1:], 0xF3)
		if j < 0 {
			break
		}
		i += 1 + j
	}
	if cuts == nil {
		return "", nil, false
	}
	b.WriteString(v[last:])
	return b.String(), cuts, true
}

// linkView answers v with its markdown link syntax read as nothing: each
// link's destination and title, or its reference label (linkTailAt), and
// where it cut; ok is false when v holds none. It is a view of its own,
// as the markup view is: what it cuts ("](-token)") may be text to a
// reader who does not read markdown. A tag may hold a link
// ("</memhost_memory_[obs](https://x)ervation>" is one tag to the markup
// view), so the markup view is also built on this one (composeCuts).
func linkView(v string) (view string, cuts []viewCut, ok bool) {
	if !strings.Contains(v, "](") && !strings.Contains(v, "][") {
		return "", nil, false
	}
	var b strings.Builder
	last, removed := 0, 0
	for i := strings.IndexByte(v, ']'); i >= 0; {
		end, found := linkTailAt(v, i)
		if !found {
			end = i + 1
		} else {
			if cuts == nil {
				b.Grow(len(v))
			}
			b.WriteString(v[last:i])
			removed += end - i
			cuts = append(cuts, viewCut{at: b.Len(), removed: removed})
			last = end
		}
		j := strings.IndexByte(v[end:], ']')
		if j < 0 {
			break
		}
		i = end + j
	}
	if cuts == nil {
		return "", nil, false
	}
	b.WriteString(v[last:])
	return b.String(), cuts, true
}

// composeCuts answers the cuts of a view cut by inner from a view that
// outer cut from a text: where the view's bytes lie in the text.
func composeCuts(outer, inner []viewCut) []viewCut {
	if len(outer) == 0 {
		return inner
	}
	if len(inner) == 0 {
		return outer
	}
	out := make([]viewCut, 0, len(outer)+len(inner))
	emit := func(at, removed int) {
		// Cuts at one offset: the last holds.
		if n := len(out); n > 0 && out[n-1].at == at {
			out[n-1].removed = removed
			return
		}
		out = append(out, viewCut{at: at, removed: removed})
	}
	// r1 and r2 are the bytes outer and inner removed before the current
	// offset; floor is the offset of the last inner cut, where an outer
	// cut inside the bytes inner removed takes effect.
	r1, r2, floor := 0, 0, 0
	i, j := 0, 0
	for i < len(inner) || j < len(outer) {
		atOuter := -1
		if j < len(outer) {
			atOuter = max(outer[j].at-r2, floor)
		}
		if i < len(inner) && (atOuter < 0 || inner[i].at <= atOuter) {
			r2, floor = inner[i].removed, inner[i].at
			emit(floor, r1+r2)
			i++
			continue
		}
		r1 = outer[j].removed
		emit(atOuter, r1+r2)
		j++
	}
	return out
}

// hasLenientMarkup reports whether v holds markup the lenient markup view
// reads otherwise than the strict one.
func hasLenientMarkup(v string) bool {
	for _, m := range []string{"--!>", "<?", "<!", "<%"} {
		if strings.Contains(v, m) {
			return true
		}
	}
	return false
}

// viewCut is where a markup view left markup out: from view offset at on,
// the view's bytes lie removed bytes (in all, so far) further on in the
// text it was cut from.
type viewCut struct{ at, removed int }

// viewSpan answers the range of the original text that byte k of a view
// stands for: a markup view's byte (cuts) of a decoded view (from), either
// of which may be absent.
func viewSpan(k int, from []span, cuts []viewCut) span {
	if n := sort.Search(len(cuts), func(i int) bool { return cuts[i].at > k }); n > 0 {
		k += cuts[n-1].removed
	}
	if from == nil {
		return span{k, k + 1}
	}
	return from[k]
}

// decodeOnce decodes one layer of escapes in v, whose bytes stand for the
// ranges from (nil: v is the original text), as the reading fl reads
// them; used reports whether fl read some escape otherwise than the
// common reading.
func decodeOnce(v string, from []span, fl flavour) (dec string, decFrom []span, changed, used bool) {
	orig := func(i int) span {
		if from == nil {
			return span{i, i + 1}
		}
		return from[i]
	}
	var b strings.Builder
	var out []span
	last := 0
	for i := 0; i < len(v); {
		if !escapeStart[v[i]] {
			i++
			continue
		}
		dec, end, ok, own := escapeAt(v, i, fl)
		if !ok {
			i++
			continue
		}
		used = used || own
		if !changed {
			b.Grow(len(v))
			out = make([]span, 0, len(v))
			changed = true
		}
		for k := last; k < i; k++ {
			out = append(out, orig(k))
		}
		b.WriteString(v[last:i])
		if w := byteEscapeWidth(v, i, end, len(dec)); w > 0 {
			// A run of escaped bytes: each byte stands for its own
			// escape, so a line the run breaks starts after the one that
			// breaks it.
			for k := range len(dec) {
				out = append(out, span{orig(i + k*w).start, orig(i + (k+1)*w - 1).end})
			}
		} else {
			whole := span{orig(i).start, orig(end - 1).end}
			for range len(dec) {
				out = append(out, whole)
			}
		}
		b.WriteString(dec)
		i, last = end, end
	}
	if !changed {
		return v, from, false, false
	}
	for k := last; k < len(v); k++ {
		out = append(out, orig(k))
	}
	b.WriteString(v[last:])
	return b.String(), out, true, used
}

// decodeText is decodeOnce without the spans, for a caller that reads
// the decoded text alone (tailOpen): no span a byte is built.
func decodeText(v string, fl flavour) (string, bool) {
	var b strings.Builder
	changed, last := false, 0
	for i := 0; i < len(v); {
		if !escapeStart[v[i]] {
			i++
			continue
		}
		dec, end, ok, _ := escapeAt(v, i, fl)
		if !ok {
			i++
			continue
		}
		if !changed {
			b.Grow(len(v))
			changed = true
		}
		b.WriteString(v[last:i])
		b.WriteString(dec)
		i, last = end, end
	}
	if !changed {
		return v, false
	}
	b.WriteString(v[last:])
	return b.String(), true
}

// byteEscapeWidth answers the width of each escape when v[i:end], decoded
// to n bytes, is a run of escaped bytes (%XX or \xXX), else 0.
func byteEscapeWidth(v string, i, end, n int) int {
	switch {
	case v[i] == '%' && v[i+1] != 'u' && v[i+1] != 'U' && end-i == 3*n:
		return 3
	case v[i] == '\\' && v[i+1] == 'x' && end-i == 4*n:
		return 4
	case v[i] == '=' && end-i == 3*n:
		return 3
	}
	return 0
}

// maxTagBytes bounds an element tag the view reads as nothing. A scan
// from one '<' ends at the next '<' outside quotes, so the views stay
// linear in the text.
const maxTagBytes = 4096

// markupAt answers the end of the markup at v[i] ('<') that a reader of
// HTML or XML does not read as text: an element's start or end tag, its
// attributes included, a comment, or the opening of a CDATA section (the
// section's text is text, and its closing "]]>" reads as punctuation
// already). A text whose comment never closes is not searched again:
// noCommentEnd keeps the view linear in the text.
func markupAt(v string, i int, lenient bool, noCommentEnd *bool) (int, bool) {
	rest := v[i+1:]
	switch {
	case strings.HasPrefix(rest, "!--"):
		if *noCommentEnd {
			return 0, false
		}
		j, n := strings.Index(rest[3:], "-->"), 3
		if lenient {
			// HTML also ends a comment at "--!>": looked for only as far
			// as "-->", so each comment is read once.
			within := rest[3:]
			if j >= 0 {
				within = within[:j]
			}
			if k := strings.Index(within, "--!>"); k >= 0 {
				j, n = k, 4
			}
		}
		if j < 0 {
			*noCommentEnd = true
			return 0, false
		}
		return i + 1 + 3 + j + n, true
	case strings.HasPrefix(rest, "![CDATA["):
		return i + 1 + len("![CDATA["), true
	case !lenient:
	case strings.HasPrefix(rest, "?"), len(rest) > 1 && rest[0] == '!' && isLetter(rest[1]):
		// A processing instruction (<?xml ...?>) or a declaration
		// (<!DOCTYPE ...>): HTML ends either at its first '>'.
		return closeWithin(v, i, ">")
	case strings.HasPrefix(rest, "%"):
		// A server template's tag (<% ... %>).
		return closeWithin(v, i, "%>")
	}
	j := 0
	if j < len(rest) && rest[j] == '/' {
		j++
	}
	if j >= len(rest) || !isLetter(rest[j]) {
		return 0, false
	}
	// A value quoted right after its '=' may hold anything, '<', '>' and
	// line breaks included; elsewhere a quote is a character of the tag
	// (an unquoted value, an apostrophe) and the first '>' ends it. A tag
	// may break lines between its attributes. A quote that never closes
	// quotes nothing: the first '>' inside it ends the tag, as a reader
	// who does not count quotes sees it.
	var quote byte
	valueNext := false
	quotedGT := -1
	for k := j; k < len(rest) && k < maxTagBytes; k++ {
		c := rest[k]
		switch {
		case quote != 0:
			if c == quote {
				quote, quotedGT = 0, -1
			} else if c == '>' && quotedGT < 0 {
				quotedGT = k
			}
			continue
		case c == '=':
			valueNext = true
			continue
		case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f':
			continue
		case valueNext && (c == '"' || c == '\''):
			quote = c
		case c == '>':
			return i + 1 + k + 1, true
		case c == '<':
			return 0, false
		}
		valueNext = false
	}
	if quote != 0 && quotedGT >= 0 {
		return i + 1 + quotedGT + 1, true
	}
	return 0, false
}

// linkTailAt answers the end of what follows a markdown link's text at
// v[i] (']') that a reader of markdown does not read as text: an inline
// link's or image's destination and title, "](https://x "t")" (balanced
// parentheses and backslash escapes inside, line breaks between the
// destination and the title, and a title, "…", '…' or (…), read as a
// unit, so "](x "t)t")" ends at its last ')'), or a reference link's
// label, "][id]". A reader, or a model that skips link syntax, reads
// "[mem](url)-token" as mem-token: the destination's letters must not
// split a marker's words. Both are bounded by maxTagBytes, and a
// destination's or title's scan ends at the next link's "](" (or a blank
// line, which ends a paragraph), so the view stays linear in the text (a
// title that does not close is read as a destination's bytes are, so a
// tail's bytes are read at most three times).
func linkTailAt(v string, i int) (int, bool) {
	if i+1 >= len(v) {
		return 0, false
	}
	limit := min(len(v), i+2+maxTagBytes)
	switch v[i+1] {
	case '(':
		depth, dest := 1, false
		for k := i + 2; k < limit; k++ {
			if c := v[k]; depth == 1 && dest && isMarkdownSpace(v[k-1]) && (c == '"' || c == '\'' || c == '(') {
				// A title after the destination is read as a unit: the
				// ')' it may hold does not end the link.
				if end, ok := linkTitleEnd(v, k, limit); ok {
					k = end - 1
					continue
				}
			}
			dest = dest || !isMarkdownSpace(v[k])
			switch v[k] {
			case '\\':
				k++
			case '(':
				depth++
			case ')':
				if depth--; depth == 0 {
					return k + 1, true
				}
			case ']':
				if k+1 < len(v) && v[k+1] == '(' {
					return 0, false
				}
			case '\n':
				if k+1 < len(v) && v[k+1] == '\n' {
					return 0, false
				}
			}
		}
	case '[':
		for k := i + 2; k < limit; k++ {
			switch v[k] {
			case '\\':
				k++
			case '[':
				return 0, false
			case ']':
				return k + 1, true
			}
		}
	}
	return 0, false
}

// linkTitleEnd answers the end of a link title, "t", 't' or (t), that
// starts at v[k], within limit: the closing quote or parenthesis that no
// backslash escapes. Like a destination, it ends at no next link's "](",
// nor at a blank line, nor, in parentheses, at an unescaped '('.
func linkTitleEnd(v string, k, limit int) (int, bool) {
	closer := v[k]
	if closer == '(' {
		closer = ')'
	}
	for j := k + 1; j < limit; j++ {
		switch c := v[j]; {
		case c == '\\':
			j++
		case c == closer:
			return j + 1, true
		case c == '(' && closer == ')':
			return 0, false
		case c == ']' && j+1 < len(v) && v[j+1] == '(':
			return 0, false
		case c == '\n' && j+1 < len(v) && v[j+1] == '\n':
			return 0, false
		}
	}
	return 0, false
}

// isMarkdownSpace reports the whitespace that separates a link's
// destination from its title.
func isMarkdownSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// closeWithin answers the end of the markup at v[i] that close ends,
// within maxTagBytes.
func closeWithin(v string, i int, close string) (int, bool) {
	rest := v[i+1 : min(len(v), i+1+maxTagBytes)]
	if j := strings.Index(rest, close); j >= 0 {
		return i + 1 + j + len(close), true
	}
	return 0, false
}

func isLetter(c byte) bool { return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' }

// breaksBlock reports a start or end tag at v[i:end] of an element a
// browser lays out on lines of its own (<br>, <p>, </div>, <li>): a reader
// of the page sees a line break there.
func breaksBlock(v string, i, end int) bool {
	tag := v[i+1 : end]
	tag = strings.TrimPrefix(tag, "/")
	n := 0
	for n < len(tag) && (isLetter(tag[n]) || '0' <= tag[n] && tag[n] <= '9') {
		n++
	}
	_, ok := blockElements[strings.ToLower(tag[:n])]
	return ok
}

// blockElements are the elements the HTML standard's rendering section
// (15.3) lays out as blocks, list items, table rows, captions or row
// groups by default, and <br>; and the form controls whose content a
// browser shows in a box of its own (<textarea>, a listbox's <option>).
// A missing one let a header phrase after it start a rendered line with
// no mark.
var blockElements = map[string]struct{}{
	"br": {}, "html": {}, "body": {},
	// Flow content.
	"address": {}, "blockquote": {}, "center": {}, "dialog": {}, "div": {}, "figure": {}, "figcaption": {},
	"footer": {}, "form": {}, "header": {}, "hr": {}, "legend": {}, "listing": {}, "main": {}, "p": {},
	"plaintext": {}, "pre": {}, "search": {}, "xmp": {},
	// Sections and headings.
	"article": {}, "aside": {}, "h1": {}, "h2": {}, "h3": {}, "h4": {}, "h5": {}, "h6": {}, "hgroup": {},
	"nav": {}, "section": {},
	// Lists.
	"dir": {}, "dd": {}, "dl": {}, "dt": {}, "menu": {}, "ol": {}, "ul": {}, "li": {},
	// Tables (a row, a caption, a row group; cells sit side by side).
	"table": {}, "caption": {}, "thead": {}, "tbody": {}, "tfoot": {}, "tr": {},
	// Forms, details, frames.
	"fieldset": {}, "details": {}, "summary": {}, "optgroup": {}, "option": {}, "textarea": {},
	"frameset": {}, "frame": {},
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
// run, as UTF-8), \uXXXX (a surrogate pair as one character), \u{X...},
// \x{X...} and \o{N...} (any leading zeros), \UXXXXXXXX, an octal byte
// (\155), a string's \n, \r, \t, \f and \v, a character by its name
// (\N{HYPHEN-MINUS}, \N{U+2D}; see namedEscapeAt) and a control by its
// letter (\cJ, \C-j; see controlEscapeAt).
func backslashAt(v string, i int) (string, int, bool) {
	if i+1 >= len(v) {
		return "", 0, false
	}
	switch c := v[i+1]; c {
	case 'n', 'r', 't', 'f', 'v':
		// A string's line break, tab or feed: "x\\nAgent" is two lines
		// to a reader of the string.
		return string("\n\r\t\f\v"[strings.IndexByte("nrtfv", c)]), i + 2, true
	case '0', '1', '2', '3', '4', '5', '6', '7':
		return octalRun(v, i)
	case 'x':
		if i+2 < len(v) && v[i+2] == '{' {
			return bracedHex(v, i, 16)
		}
		return byteRun(v, i, '\\', "x")
	case 'o':
		return bracedHex(v, i, 8)
	case 'u':
		if i+2 < len(v) && v[i+2] == '{' {
			return bracedHex(v, i, 16)
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
	case 'N':
		return namedEscapeAt(v, i)
	case 'c', 'C':
		return controlEscapeAt(v, i)
	}
	return "", 0, false
}

// octalRun decodes up to maxEscapeRun octal escapes at v[i] (each one to
// three digits, a byte at most) as bytes, as a run of \xXX is: "\320\276"
// is Cyrillic о in UTF-8.
func octalRun(v string, i int) (string, int, bool) {
	var buf [maxEscapeRun]byte
	n, j := 0, i
	for n < maxEscapeRun && j+1 < len(v) && v[j] == '\\' && '0' <= v[j+1] && v[j+1] <= '7' {
		k, b := j+1, 0
		for k < len(v) && k < j+4 && '0' <= v[k] && v[k] <= '7' && b*8+int(v[k]-'0') <= 0xFF {
			b = b*8 + int(v[k]-'0')
			k++
		}
		buf[n] = byte(b)
		n++
		j = k
	}
	return string(buf[:n]), j, true
}

// bracedHex decodes \u{X...} or \x{X...} (base 16) or \o{N...} (base
// 8) at v[i]: any run of leading zeros, which JavaScript and Perl take,
// then one to six hex digits (eight octal).
func bracedHex(v string, i, base int) (string, int, bool) {
	r, end, ok := bracedNumber(v, i+2, base)
	if !ok {
		return "", 0, false
	}
	return character(r), end, true
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
	if i < 0 {
		return 0, false
	}
	r, ok := hexValue(v, i, n)
	if !ok {
		return 0, false
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

// annotationView answers v with what a reader skips inside a word read as
// nothing, on top of the markup the markup view reads so: the content of
// elements a page does not show in the line (a ruby annotation's <rt> and
// <rp>, a footnote's <sup>, <script>, <style>, <template>, and any
// element hidden by its hidden attribute or its style: display:none,
// visibility:hidden, font-size:0, opacity:0), footnote marks ("[^1]",
// "[^note]", "[1]", "[a]") and superscript digits and letters ("¹", "ⁿ"). A
// reader of "mem-to<ruby>k<rt>x</rt></ruby>en" or "mem[^1]-token" reads
// mem-token. It is a reading of its own, added to the others: what it
// drops may be text to another reader, who sees it in the other views.
// Without markup, it reads only the footnote marks and superscripts as
// nothing, and the tags as text: a tag's own name may hold a mark
// ("</memhost[1]_memory_observation>"). ok is false when it would read v
// as the markup view (or the text as written) does. One pass over
// v: each tag is read once (markupAt), a hidden element's end is found by
// counting the tags of its name as they come, and one left open hides the
// rest of v.
func annotationView(v string, markup bool) (view string, cuts []viewCut, ok bool) {
	var b strings.Builder
	last, removed := 0, 0
	own := false
	cut := func(i, end int, newline bool) {
		if cuts == nil {
			b.Grow(len(v))
		}
		b.WriteString(v[last:i])
		n := end - i
		if newline {
			n--
		}
		removed += n
		cuts = append(cuts, viewCut{at: b.Len(), removed: removed})
		if newline {
			b.WriteByte('\n')
		}
		last = end
	}
	var (
		hiding   string // the hidden element's name, "" when none
		depth    int    // its tags of that name still open
		hideFrom int    // where the hidden run starts
	)
	noCommentEnd := false
	for i := 0; i < len(v); {
		c := v[i]
		switch {
		case c == '<' && markup:
			end, found := markupAt(v, i, false, &noCommentEnd)
			if !found {
				i++
				continue
			}
			name, closing, selfClosing := elementName(v[i:end])
			if hiding != "" {
				switch {
				case name == hiding && closing:
					depth--
				case name == hiding && !selfClosing:
					depth++
				case (hiding == "rt" || hiding == "rp") && (!closing && (name == "rt" || name == "rp") || closing && name == "ruby"):
					// The ruby's next annotation or its end closes it,
					// and is read next as any tag is.
					own = true
					cut(hideFrom, i, false)
					hiding = ""
					continue
				}
				if depth == 0 {
					own = true
					cut(hideFrom, end, false)
					hiding = ""
				}
				i = end
				continue
			}
			if !closing && !selfClosing && (hiddenElements[name] || hidesContent(v[i:end])) {
				hiding, depth, hideFrom = name, 1, i
				i = end
				continue
			}
			cut(i, end, breaksBlock(v, i, end))
			i = end
		case hiding != "":
			i++
		case c == '[':
			end := footnoteMarkAt(v, i)
			if end < 0 {
				i++
				continue
			}
			own = true
			cut(i, end, false)
			i = end
		case c == 0xC2 || c == 0xE2:
			r, size := utf8.DecodeRuneInString(v[i:])
			if !superscript(r) {
				i += size
				continue
			}
			own = true
			cut(i, i+size, false)
			i += size
		default:
			i++
		}
	}
	if hiding != "" {
		own = true
		cut(hideFrom, len(v), false)
	}
	if !own {
		return "", nil, false
	}
	b.WriteString(v[last:])
	return b.String(), cuts, true
}

// annotationStarts reports whether v holds what may start what
// annotationView reads: tags, a '<' (read only with markup); marks, a
// footnote mark (footnoteMarkAt) or a superscript. Text holding neither
// has no annotation view; text without tags reads alike with markup and
// without, so one view is read. Each '[' and each superscript's lead byte
// is found by a vectorised search: curly quotes and dashes share the
// superscripts' lead byte, and are common.
func annotationStarts(v string) (tags, marks bool) {
	return strings.IndexByte(v, '<') >= 0, hasFootnoteMark(v) || hasSuperscript(v)
}

// hasFootnoteMark reports whether a footnote mark starts at some '[' of v.
func hasFootnoteMark(v string) bool {
	for i := 0; ; i++ {
		k := strings.IndexByte(v[i:], '[')
		if k < 0 {
			return false
		}
		if i += k; footnoteMarkAt(v, i) >= 0 {
			return true
		}
	}
}

// hasSuperscript reports whether v holds a superscript (superscript).
func hasSuperscript(v string) bool {
	for _, lead := range [...]byte{0xC2, 0xE2} {
		for i := 0; ; i++ {
			k := strings.IndexByte(v[i:], lead)
			if k < 0 {
				break
			}
			i += k
			if r, _ := utf8.DecodeRuneInString(v[i:]); superscript(r) {
				return true
			}
		}
	}
	return false
}

// hasAnyByte reports whether s holds any of the ASCII bytes of set: one
// vectorised IndexByte per byte, where strings.ContainsAny tests each
// byte of s against the set.
func hasAnyByte(s, set string) bool {
	for k := 0; k < len(set); k++ {
		if strings.IndexByte(s, set[k]) >= 0 {
			return true
		}
	}
	return false
}

// hasNonASCII reports whether s holds a byte outside ASCII, eight bytes
// at a time.
func hasNonASCII(s string) bool {
	i := 0
	for ; i+8 <= len(s); i += 8 {
		w := uint64(s[i]) | uint64(s[i+1])<<8 | uint64(s[i+2])<<16 | uint64(s[i+3])<<24 |
			uint64(s[i+4])<<32 | uint64(s[i+5])<<40 | uint64(s[i+6])<<48 | uint64(s[i+7])<<56
		if w&0x8080808080808080 != 0 {
			return true
		}
	}
	for ; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return true
		}
	}
	return false
}

// hiddenElements are the elements whose content a page does not show in
// the line: ruby annotations and their fallback parentheses, footnote
// superscripts, and elements that hold no text a page shows.
var hiddenElements = map[string]bool{"rt": true, "rp": true, "sup": true, "script": true, "style": true, "template": true, "noscript": true}

// elementName answers the lower-case name of the tag t ("<b ...>", "</b>",
// "<br/>"), and whether it is an end tag or closes itself; a comment or a
// CDATA opening has no name.
func elementName(t string) (name string, closing, selfClosing bool) {
	j := 1
	if j < len(t) && t[j] == '/' {
		closing = true
		j++
	}
	k := j
	for k < len(t) && (isAlnum(t[k]) || t[k] == '-') {
		k++
	}
	return strings.ToLower(t[j:k]), closing, strings.HasSuffix(t, "/>")
}

// hidesContent reports whether a start tag hides its element: a hidden
// attribute, or a style that lays the content out as nothing.
func hidesContent(tag string) bool {
	if !strings.ContainsAny(tag, "dDvVfFoOhH") {
		return false
	}
	var b strings.Builder
	b.Grow(len(tag))
	for k := 0; k < len(tag); k++ {
		c := tag[k]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f':
			if b.Len() > 0 && b.String()[b.Len()-1] != ' ' {
				b.WriteByte(' ')
			}
			continue
		case 'A' <= c && c <= 'Z':
			c += 'a' - 'A'
		}
		b.WriteByte(c)
	}
	t := b.String()
	// The hidden attribute: a name of its own.
	for k := strings.Index(t, " hidden"); k >= 0; {
		after := k + len(" hidden")
		if after >= len(t) || strings.IndexByte(" =/>", t[after]) >= 0 {
			return true
		}
		next := strings.Index(t[after:], " hidden")
		if next < 0 {
			break
		}
		k = after + next
	}
	t = strings.ReplaceAll(t, " ", "")
	for _, decl := range []string{"display:none", "visibility:hidden", "visibility:collapse"} {
		if strings.Contains(t, decl) {
			return true
		}
	}
	// A size or an opacity of zero: "0", "0px", "0.0em", ".0", not "0.9em".
	for _, prop := range []string{"font-size:", "opacity:", "max-width:", "max-height:"} {
		for k := strings.Index(t, prop); k >= 0; {
			if zeroValue(strings.TrimLeft(t[k+len(prop):], "+")) {
				return true
			}
			next := strings.Index(t[k+len(prop):], prop)
			if next < 0 {
				break
			}
			k += len(prop) + next
		}
	}
	return false
}

// zeroValue reports whether a CSS value starts with a number that is
// zero: zeros, then optionally a point and more zeros, then no digit.
func zeroValue(v string) bool {
	n := len(v) - len(strings.TrimLeft(v, "0"))
	rest := v[n:]
	if strings.HasPrefix(rest, ".") {
		frac := strings.TrimLeft(rest[1:], "0")
		n += len(rest) - 1 - len(frac)
		rest = frac
	}
	return n > 0 && (rest == "" || rest[0] < '0' || rest[0] > '9')
}

// maxFootnoteLabel bounds a footnote mark's label.
const maxFootnoteLabel = 32

// footnoteMarkAt answers the end of the footnote mark at v[i] ('['), or
// -1: markdown's "[^label]" (no spaces in the label), or a bracketed
// number or short label "[1]", "[12, 13]", "[a]", "[note 1]" of letters,
// digits, spaces, commas and dashes.
func footnoteMarkAt(v string, i int) int {
	j := i + 1
	caret := j < len(v) && v[j] == '^'
	if caret {
		j++
	}
	start := j
	for j < len(v) && j-start < maxFootnoteLabel {
		c := v[j]
		switch {
		case c == ']':
			if j == start {
				return -1
			}
			return j + 1
		case isAlnum(c) || c == '-' || c == '_' || c == '.':
		case (c == ' ' || c == ',') && !caret:
		default:
			if caret && c >= utf8.RuneSelf {
				break
			}
			return -1
		}
		j++
	}
	return -1
}

// superscript reports the superscript digits and letters a reader takes
// for a footnote's mark (¹, ², ³, ⁴ … ⁹, ⁰, ⁱ, ⁿ) and the subscripts beside
// them.
func superscript(r rune) bool {
	return r == 0xB2 || r == 0xB3 || r == 0xB9 || 0x2070 <= r && r <= 0x209F
}
