package coordinator

import (
	"cmp"
	"errors"
	"fmt"
	"html"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"

	"github.com/mozillazg/go-unidecode"
	"go.mau.fi/util/confusable"
	"golang.org/x/text/cases"
	"golang.org/x/text/unicode/norm"
)

// The reserved markers of the envelope and what defanging makes of them.
// Markers are matched by their words alone (see Defanger), whatever
// bracket, slash or colon stands around them, so no look-alike delimiter
// can keep one live.
const (
	tagName             = "memhost_memory_observation"
	summaryTagName      = "memhost_conversation_summary"
	tokenName           = "mem-token"
	defangedTagName     = "defanged_memory_observation"
	defangedSummaryName = "defanged_conversation_summary"
	defangedTokenName   = "defanged-mem-token"
	defangedPrefix      = "[defanged] "
	headerTail          = " for identity"
)

// Defanger neutralises forged envelope markers in text (DESIGN 5.5).
//
// Matching runs on the view a model reads: the letters of the text, each
// spelled in ASCII, with everything else a separator. Character
// references (&lt; &#60; &#x3c; ...) are decoded the way
// html.UnescapeString decodes them (a number padded with any run of zeros
// too); each character is decomposed (NFKD,
// so full-width and mathematical forms count) and case-folded; then it is
// read as its UTS #39 confusable prototype when that is ASCII (Cyrillic
// а, Greek ο), else as its transliteration from the Unidecode tables
// (Cyrillic т, Greek κ, small capital ᴛ), and the letters and digits of
// that reading are kept while any other character (punctuation, spaces,
// ‗, ˍ, ー, U+1680, dashes, zero-width and bidi characters, combining
// marks) is dropped. Unicode tag characters read as the ASCII they
// encode and, being invisible where text is shown, as nothing. A letter whose sound differs from its shape (Cyrillic Н) is read
// both ways, a letter a faux-Latin alphabet writes a Latin letter with
// (Я for R, ᑎ for N, 𐌌 for M; lookLetters) as that letter too, a leet
// spelling of several characters (|\/| for m; leetSpellings) as its
// letter too, escapes are also read as what they stand for in each
// reading a language gives them (defangview.go, defang_escapes.go), and
// markup (tags, comments, CDATA openings) is also read as nothing, as are
// the annotations a reader skips inside a word (hidden elements, ruby
// annotations, footnote marks). A marker is its words in order with any run of
// separators between them, none included: mem‗token, mem token,
// mem-_-token and memtoken all read as mem-token. Each match is
// neutralised in the original text, from its first letter to its last:
// the tag names become defanged_memory_observation and
// defanged_conversation_summary, the token words defanged-mem-token (a
// token written exactly so is not live), and each line holding the header
// phrase gets a "[defanged] " prefix. The same views are read for
// chat-template special tokens (<|im_start|>, [INST], <<SYS>>, ...), each
// replaced by "[defanged NAME]", and for lines opening a system turn
// ("### System:", a JSON "role": "system"), which get the prefix too (see
// defang_shapes.go). The output holds no live marker, so
// defanging it again changes nothing. A Defanger is immutable and safe
// for concurrent use.
type Defanger struct {
	// all finds markers and header phrases in one pass.
	all *matcher
}

// Patterns of Defanger.all, in order.
const (
	tagPattern     = iota
	summaryPattern // the compaction summary's element
	tokenPattern   // replaced by defangedTokenName, unless it is one (see defangedAt)
	headerPattern  // lines holding it get defangedPrefix
)

var markerReplacements = [...]string{tagPattern: defangedTagName, summaryPattern: defangedSummaryName, tokenPattern: defangedTokenName}

// NewDefanger builds a defanger for an instruction header.
func NewDefanger(header string) (*Defanger, error) {
	if err := ValidateHeader(header); err != nil {
		return nil, fmt.Errorf("instruction header: %w", err)
	}
	phrase := header + headerTail
	all, err := newMatcher([]string{tagName, summaryTagName, tokenName, phrase})
	if err != nil {
		return nil, fmt.Errorf("instruction header: %w", err)
	}
	bmpFolds() // decode the fold table now, not on a first request
	return &Defanger{all: all}, nil
}

// Defang answers s with every live marker neutralised, and the number of
// markers and header lines it neutralised. Text without markers is
// answered as is, without copying.
func (d *Defanger) Defang(s string) (string, int) {
	out := []string{s}
	hits := d.defangTexts(out)
	return out[0], hits
}

// DefangContent defangs every text the content carries. The texts are
// matched as one, so a marker split across consecutive blocks is found;
// each match is neutralised in the block where it starts, and the pieces
// of it in later blocks are removed.
func (d *Defanger) DefangContent(c Content) (Content, int) {
	out, hits, _ := d.defangContentUntil(nil, c)
	return out, hits
}

// defangContentUntil is DefangContent stopping, with errStopped, between
// passes once done is closed.
func (d *Defanger) defangContentUntil(done <-chan struct{}, c Content) (Content, int, error) {
	texts := c.texts()
	hits, err := d.defangTextsUntil(done, texts)
	if err != nil || hits == 0 {
		return c, 0, err
	}
	return c.replaceText(texts), hits, nil
}

// errStopped says defanging stopped before it was done; nothing of it may
// be delivered.
var errStopped = errors.New("defanging stopped before it was done")

// maxPasses bounds the passes of defangTexts. One pass neutralises every
// tag and token; another is needed when a replacement swallowed the
// line break before a header phrase, whose line then starts elsewhere,
// and when a chat-template token held a marker (mergeShapes).
const maxPasses = 6

// defangTexts defangs texts in place, matched as if joined by line
// breaks, and answers the number of hits.
func (d *Defanger) defangTexts(texts []string) int {
	hits, _ := d.defangTextsUntil(nil, texts)
	return hits
}

// defangTextsUntil is defangTexts answering errStopped, texts partly
// defanged, when done closes before a pass.
func (d *Defanger) defangTextsUntil(done <-chan struct{}, texts []string) (int, error) {
	total := 0
	for pass := 0; pass < maxPasses && len(texts) > 0; pass++ {
		select {
		case <-done:
			return total, errStopped
		default:
		}
		joined := texts[0]
		if len(texts) > 1 {
			joined = strings.Join(texts, "\n")
		}
		edits := d.plan(joined)
		if len(edits) == 0 {
			break
		}
		total += len(edits)
		if len(texts) == 1 {
			texts[0] = applyEdits(joined, edits)
			continue
		}
		applySplit(texts, edits)
	}
	return total, nil
}

// edit replaces [start, end) of a text by text; start == end inserts.
type edit struct {
	start, end int
	text       string
}

// plan answers the edits that neutralise s's live markers, in order and
// not overlapping; nil when there are none. The text is matched as
// written, when it holds escapes as decoded (see decodedLayers), and when it
// holds markup or markdown links with the markup (see markupView) or the
// links' destinations (see linkView) read as nothing.
func (d *Defanger) plan(s string) []edit {
	var (
		hits  []match
		lines []int // starts of the lines holding the header phrase
	)
	// Each view is read by the letters' shapes and, letter by letter,
	// by the sounds of those a reader may also read so (Cyrillic Н,
	// Greek ν; see scanner). The text as written is also read with its
	// character references as the characters they are written with: a
	// reference may take a word's first letters for its digits or name
	// ("&#XAgent" is a line feed, then "gent").
	direct := func(p, start, end, line int) {
		hits = append(hits, match{p, start, end, line})
	}
	d.all.scan(s, false, direct)
	// Chat-template tokens and role headers (defang_shapes.go), on the
	// same views.
	var (
		shapes    []edit
		roleLines []int
	)
	scanShapes(s, func(start, end int, text string) {
		shapes = append(shapes, edit{start, end, text})
	}, func(line int) { roleLines = append(roleLines, line) })
	if strings.IndexByte(s, '&') >= 0 {
		d.all.scan(s, true, direct)
	}
	// A role header a decoded view starts with an escaped line break
	// marks its line in s only, never the place after the escape: there
	// the break is often inside a string literal ("boot ok\nSystem: %s\n"
	// in code), which a soft mark (a role header's prefix) must not
	// change. Markup views of s mark after a block's tag, as the header
	// line's rule does.
	decodedViews := true
	// A view's bytes stand for ranges of s; a match maps back to them.
	scanOne := func(view string, from []span, cuts []viewCut) {
		var lines lineCursor
		walked := 0 // the view is walked back to here for line breaks
		mapped := func(p, start, end, viewLine int) {
			m := match{p, viewSpan(start, from, cuts).start, viewSpan(end-1, from, cuts).end, 0}
			if p == headerPattern {
				m.line = lines.lineOf(s, m.start)
				// An escape may also join lines (CSS reads a backslash
				// before a line break as nothing): the line the phrase
				// is on in the view then starts before its line in s,
				// and is marked where it starts, after the break that
				// starts it (or at the start of s).
				joined := 0
				if viewLine > 0 {
					joined = viewSpan(viewLine-1, from, cuts).end
				}
				if joined < m.line {
					hits = append(hits, match{p, m.start, m.end, joined})
				}
				// An escaped line break (%0A, \u000a, \n) or a block's
				// tag starts a line in the view: the line after each one
				// between the phrase and the start of its line in s is
				// marked, after the escape, since a reader may decode
				// some escapes and not others, so the phrase starts no
				// unmarked line for any of them. The walk back stops at
				// the previous phrase's start, so it reads each byte of
				// the view at most once.
				for k := start - 1; k >= walked; k-- {
					sp := viewSpan(k, from, cuts)
					if sp.start < m.line {
						break
					}
					if endsLineBreak(view, k) && sp.end != m.line {
						hits = append(hits, match{p, m.start, m.end, sp.end})
					}
				}
				walked = max(walked, start)
			}
			hits = append(hits, m)
		}
		d.all.scan(view, false, mapped)
		var roles lineCursor
		scanShapes(view, func(start, end int, text string) {
			shapes = append(shapes, edit{viewSpan(start, from, cuts).start, viewSpan(end-1, from, cuts).end, text})
		}, func(line int) {
			// The line in s, and the view's line a block's tag starts
			// (marked after it, as the header's).
			roleLines = append(roleLines, roles.lineOf(s, viewSpan(line, from, cuts).start))
			if line > 0 && !decodedViews {
				if at := viewSpan(line-1, from, cuts).end; at > roleLines[len(roleLines)-1] {
					roleLines = append(roleLines, at)
				}
			}
		})
	}
	// Each view is also read with its tag characters as nothing, as s
	// is below: one an escape or markup view shows (&#xE0078;) hides a
	// role header or template token from the shapes' one reading too.
	scanView := func(view string, from []span, cuts []viewCut) {
		scanOne(view, from, cuts)
		if tagFree, tagCuts, ok := tagFreeView(view); ok {
			scanOne(tagFree, from, composeCuts(cuts, tagCuts))
		}
	}
	var deepest []layer
	for _, l := range decodedLayers(s) {
		scanView(l.view, l.from, nil)
		if l.deepest {
			deepest = append(deepest, l)
		}
	}
	markup := func(v string, from []span) {
		// v, or its link view, whose cuts are base's.
		scanMarkup := func(v string, base []viewCut) {
			if view, cuts, ok := markupView(v, false); ok {
				scanView(view, from, composeCuts(base, cuts))
			}
			// With tags, and without them when they differ: text without
			// a '<' reads alike both ways, and text without a mark or a
			// superscript has no view without tags.
			if tags, marks := annotationStarts(v); tags || marks {
				if view, cuts, ok := annotationView(v, true); ok {
					scanView(view, from, composeCuts(base, cuts))
				}
				if tags && marks {
					if view, cuts, ok := annotationView(v, false); ok {
						scanView(view, from, composeCuts(base, cuts))
					}
				}
			}
			if hasLenientMarkup(v) {
				if view, cuts, ok := markupView(v, true); ok {
					scanView(view, from, composeCuts(base, cuts))
				}
			}
		}
		scanMarkup(v, nil)
		if view, cuts, ok := linkView(v); ok {
			scanView(view, from, cuts)
			scanMarkup(view, cuts)
		}
	}
	// The markup of each reading's deepest layer, and as written: an
	// escape inside a tag ('title="&lt;"') decodes to what no tag holds,
	// hiding the tag from the decoded view.
	for _, l := range deepest {
		markup(l.view, l.from)
	}
	decodedViews = false
	markup(s, nil)
	// Tag characters read as nothing, for the shapes' one reading.
	if view, cuts, ok := tagFreeView(s); ok {
		scanView(view, nil, cuts)
	}
	if len(hits) > 1 {
		slices.SortStableFunc(hits, func(a, b match) int { return cmp.Or(cmp.Compare(a.end, b.end), cmp.Compare(a.start, b.start)) })
	}
	var tags []edit
	last := 0
	for i, h := range hits {
		if h.p == headerPattern {
			lines = append(lines, h.line)
			continue
		}
		// Each view finds a marker again (ten times, for a reference
		// the views decode alike); the first of a span decides for all,
		// so the escape reading before it is paid once.
		if i > 0 && hits[i-1].p == h.p && hits[i-1].start == h.start && hits[i-1].end == h.end {
			continue
		}
		if h.start < last || (h.p == tokenPattern && defangedAt(s, h.start, h.end)) {
			continue
		}
		text := markerReplacements[h.p]
		if escapeOpenBefore(s[:h.start]) {
			// A space keeps the escape from reading the replacement's
			// first letters as its hex digits.
			text = " " + text
		}
		tags = append(tags, edit{h.start, h.end, text})
		last = h.end
	}
	if len(shapes) > 0 {
		tags = mergeShapes(tags, shapes)
	}
	lines = append(lines, roleLines...)
	if len(lines) == 0 {
		return tags
	}
	slices.Sort(lines)
	lines = slices.Compact(lines)
	// Merge the line prefixes in; one inside a replaced span is dropped,
	// and the next pass finds the line it now belongs to.
	out := make([]edit, 0, len(tags)+len(lines))
	k := 0
	for _, line := range lines {
		for k < len(tags) && tags[k].start < line {
			out = append(out, tags[k])
			k++
		}
		if k > 0 && tags[k-1].end > line {
			continue
		}
		if strings.HasPrefix(s[line:], defangedPrefix) {
			continue
		}
		out = append(out, edit{line, line, defangedPrefix})
	}
	return append(out, tags[k:]...)
}

// mergeShapes merges the template tokens' edits (defang_shapes.go) into
// the markers' (sorted, not overlapping). The views may find one token more
// than once; of overlapping ones the first and longest is kept. A token
// overlapping a marker is left to the next pass: the marker's replacement
// comes first, since a token's replacement spells its word again
// ("<|memhost_memory_observation|>" is a tag, then a token).
func mergeShapes(tags, shapes []edit) []edit {
	slices.SortFunc(shapes, func(a, b edit) int { return cmp.Or(cmp.Compare(a.start, b.start), cmp.Compare(b.end, a.end)) })
	out := make([]edit, 0, len(tags)+len(shapes))
	k, last := 0, 0
	for _, e := range shapes {
		if e.start < last {
			continue
		}
		for k < len(tags) && tags[k].end <= e.start {
			out = append(out, tags[k])
			k++
		}
		if k < len(tags) && tags[k].start < e.end {
			continue // overlaps a marker
		}
		out = append(out, e)
		last = e.end
	}
	return append(out, tags[k:]...)
}

// endsLineBreak reports whether v[k] is the last byte of a line break.
func endsLineBreak(v string, k int) bool {
	switch v[k] {
	case '\n', '\r', '\v', '\f':
		return true
	case 0x85, 0xA8, 0xA9:
		r, _ := utf8.DecodeLastRuneInString(v[:k+1])
		return breaksLine(r)
	}
	return false
}

// escapeOpenBefore reports whether s ends inside an escape that the
// defanger's replacement would continue, as written or once its escapes
// are decoded (as the decoded view peels them), in any of its readings
// (flavours): "%", "%A", "\u00", "&#x41", "%252" (which decodes to "%2"),
// "=" (quoted-printable), "\" and "\6" (CSS). A replacement starts with
// "defa", hex digits all, so written there it would read as part of the
// escape ("\uAA" then "defanged-mem-token" reads as U+AADE then
// "fanged-mem-token", whose token nothing exempts).
func escapeOpenBefore(s string) bool { return tailOpen(s, openEscape) }

// tailOpen reports whether open holds for the end of s (escapeTail), as
// written or in one of the layers the decoded view peels from it, in each
// reading of the escapes: the common reading's layers are read by every
// reading, and a reading that decodes some escape otherwise peels its own
// from there.
func tailOpen(s string, open func(string, flavour) bool) bool {
	tail := escapeTail(s)
	if !strings.ContainsAny(tail, "%\\&=") {
		return false
	}
	var layers [decodeLayers + 1]string
	layers[0] = tail
	n := 1
	for ; n <= decodeLayers; n++ {
		next, changed := decodeText(layers[n-1], flavourCommon)
		if !changed {
			break
		}
		layers[n] = next
	}
	for _, t := range layers[:n] {
		for _, fl := range flavours {
			// An escape the readings of ambiguous escapes leave open is
			// open in the common reading or in flavourRefAny, which
			// also leaves open one whose character no reading takes
			// ("&An" before "defanged" is ⩓ then "efanged").
			if fl == flavourRefHidden || fl == flavourRefASCII {
				continue
			}
			if fl == flavourRefLetters {
				fl = flavourRefAny
			}
			if open(t, fl) {
				return true
			}
		}
	}
	for _, fl := range flavours[1:] {
		for k, t := range layers[:n] {
			if !ownEscapeIn(t, fl) {
				continue
			}
			for range decodeLayers - k {
				next, changed := decodeText(t, fl)
				if !changed {
					break
				}
				if t = next; open(t, fl) {
					return true
				}
			}
			break
		}
	}
	return false
}

// escapeTail answers the end of s that escapeOpenBefore and
// endsInOpenReference decode: its last escapeTailBytes, and further back
// while that would cut through a run of the bytes escapes are written
// with, up to maxEscapeTail: an open escape of ten characters, each a
// zero-padded reference (up to 40 bytes), two layers deep, and then some.
// The zeros that pad a number are not counted: a reader takes any number
// of them ("&#x" then a thousand zeros then "de" reads as U+00DE), and the
// run of them before one position is read for it alone. A text of many
// escapes costs each check the run it ends in, not a kilobyte.
func escapeTail(s string) string {
	start := max(0, len(s)-escapeTailBytes)
	counted := len(s) - start
	for start > 0 && counted < maxEscapeTail && escapeByte(s[start-1]) {
		start--
		if s[start] != '0' {
			counted++
		}
	}
	return s[start:]
}

// escapeByte reports the bytes escapes are written with.
func escapeByte(c byte) bool { return isAlnum(c) || strings.IndexByte(`#%&;\{}=+`, c) >= 0 }

const (
	escapeTailBytes = 64
	maxEscapeTail   = 1024
)

// openEscape reports whether s ends inside an escape, as fl reads it, that
// the defanger's replacement would continue: an escape starting in s that
// ends past it once the replacement follows. Such an escape starts in the
// run of the bytes escapes are written with that ends s (a control's
// "\C-" holds a dash), so only that run is read.
func openEscape(s string, fl flavour) bool {
	i := len(s)
	for i > 0 && (escapeByte(s[i-1]) || s[i-1] == '-') {
		i--
	}
	i = max(0, i-1) // and the byte before it: "\" then a space is CSS's space
	if !strings.ContainsAny(s[i:], "%\\&=") {
		return false
	}
	probe := s + defangedTokenName
	for ; i < len(s); i++ {
		if _, end, ok, _ := escapeAt(probe, i, fl); ok && end > len(s) {
			return true
		}
	}
	return false
}

// match is one pattern found: its byte span and the start of its line.
type match struct{ p, start, end, line int }

// defangedAt reports whether the token match s[start:end] is one this
// defanger wrote: the exact text defangedTokenName. Only that spelling
// exempts a token. A looser one, "defanged" anywhere before the token
// words with separators between, would let text shield a live token with
// a word a model reads apart from it ("was defanged. [mem-token: x]") or
// does not see at all (tag characters spelling "defanged"), nor an
// escape left open before it, which takes its "de" for hex digits
// ("\u00defanged-mem-token" reads as "Þfanged-mem-token"): the defanger
// never writes one there (escapeOpenBefore).
func defangedAt(s string, start, end int) bool {
	mark := defangedTokenName[:len(defangedTokenName)-len(tokenName)] // "defanged-"
	return s[start:end] == tokenName && strings.HasSuffix(s[:start], mark) && !escapeOpenBefore(s[:start-len(mark)])
}

// lineCursor answers the line starts of positions given in increasing
// order in one forward sweep, so a text with many matches on one long line
// costs linear time; a position before the last falls back on lineStart.
type lineCursor struct{ pos, line int }

func (c *lineCursor) lineOf(s string, i int) int {
	if i < c.pos {
		return lineStart(s, i)
	}
	for c.pos < i {
		r, size := utf8.DecodeRuneInString(s[c.pos:])
		c.pos += size
		if breaksLine(r) {
			c.line = c.pos
		}
	}
	return c.line
}

func applyEdits(s string, edits []edit) string {
	var b strings.Builder
	b.Grow(len(s) + 32*len(edits))
	last := 0
	for _, e := range edits {
		b.WriteString(s[last:e.start])
		b.WriteString(e.text)
		last = e.end
	}
	b.WriteString(s[last:])
	return b.String()
}

// applySplit applies edits planned on texts joined by one-byte
// separators to the texts themselves: an edit goes to the text where it
// starts, and what it covers of later texts is cut from them.
func applySplit(texts []string, edits []edit) {
	per := make([][]edit, len(texts))
	off, k := 0, 0
	for _, e := range edits {
		for k < len(texts) && e.start > off+len(texts[k]) {
			off += len(texts[k]) + 1
			k++
		}
		end, o, j := e.end, off, k
		per[j] = append(per[j], edit{e.start - o, min(end-o, len(texts[j])), e.text})
		for end > o+len(texts[j])+1 && j+1 < len(texts) {
			o += len(texts[j]) + 1
			j++
			per[j] = append(per[j], edit{0, min(end-o, len(texts[j])), ""})
		}
	}
	for i, es := range per {
		if len(es) > 0 {
			texts[i] = applyEdits(texts[i], es)
		}
	}
}

// maxPatternUnits bounds a folded pattern, so the scan's ring of match
// starts lives on the stack.
const maxPatternUnits = 256

// matcher is an Aho-Corasick automaton over folded runes.
type matcher struct {
	lens  []int            // folded length of each pattern
	depth []int32          // units from the root to each state
	ascii [][128]int32     // full DFA transitions for ASCII input
	edges []map[rune]int32 // trie edges for non-ASCII pattern runes
	fail  []int32
	out   []int32 // pattern ending at the state (directly or by suffix), or -1
	wide  bool    // some pattern holds a non-ASCII rune
	// idle classifies bytes while no match is under way: 0 may start one
	// (or is not ASCII), 1 cannot and is skipped, 2 is also a line break,
	// 3 (a backslash) may when a hex digit follows (a CSS escape).
	// Plain text spends most of its time in this one table lookup.
	idle [256]uint8
}

func newMatcher(patterns []string) (*matcher, error) {
	m := &matcher{}
	trie := []map[rune]int32{{}}
	m.fail, m.out, m.depth = []int32{0}, []int32{-1}, []int32{0}
	for p, pat := range patterns {
		units := foldString(pat)
		if len(units) == 0 {
			return nil, fmt.Errorf("pattern %q folds to nothing", pat)
		}
		if len(units) > maxPatternUnits {
			return nil, fmt.Errorf("pattern %q folds to %d characters, the limit is %d", pat, len(units), maxPatternUnits)
		}
		m.lens = append(m.lens, len(units))
		s := int32(0)
		for _, r := range units {
			m.wide = m.wide || r >= utf8.RuneSelf
			next, ok := trie[s][r]
			if !ok {
				next = int32(len(trie))
				trie = append(trie, map[rune]int32{})
				m.fail = append(m.fail, 0)
				m.out = append(m.out, -1)
				m.depth = append(m.depth, m.depth[s]+1)
				trie[s][r] = next
			}
			s = next
		}
		m.out[s] = int32(p)
	}
	m.edges = trie
	m.ascii = make([][128]int32, len(trie))
	// Breadth-first: a state's fail link and transitions are complete
	// before any deeper state needs them.
	queue := []int32{0}
	for len(queue) > 0 {
		s := queue[0]
		queue = queue[1:]
		if m.out[s] < 0 && s != 0 {
			m.out[s] = m.out[m.fail[s]]
		}
		for c := 0; c < 128; c++ {
			if next, ok := trie[s][rune(c)]; ok {
				m.ascii[s][c] = next
			} else if s != 0 {
				m.ascii[s][c] = m.ascii[m.fail[s]][c]
			}
		}
		for r, next := range trie[s] {
			if s != 0 {
				m.fail[next] = m.step(m.fail[s], r)
			}
			queue = append(queue, next)
		}
	}
	folds := asciiFolds()
	for c := 0; c < utf8.RuneSelf; c++ {
		switch {
		case c == '\n' || c == '\r' || c == '\v' || c == '\f':
			m.idle[c] = 2
		case c == '&': // may open a character reference
		case leadingSound(byte(c)) >= 0 && m.step(0, leadingSound(byte(c))) != 0: // may start one by its sound
		case m.startsBySpelling(byte(c)): // may start one as a leet spelling's letter
		case c <= ' ' || c == 0x7f || folds[c].n == 0 || m.step(0, folds[c].units[0]) == 0:
			m.idle[c] = 1
		}
	}
	if m.idle['\\'] == 1 {
		// Before a hex digit it may open a CSS escape (openCSSEscape).
		m.idle['\\'] = 3
	}
	return m, nil
}

// startsBySpelling reports whether a leet spelling starting with c
// (leetSpellings) may start a match.
func (m *matcher) startsBySpelling(c byte) bool {
	for _, sp := range leetSpellingsFrom()[c] {
		if m.step(0, sp.units[0]) != 0 {
			return true
		}
	}
	return false
}

// step follows one rune from state s.
func (m *matcher) step(s int32, r rune) int32 {
	if r < utf8.RuneSelf {
		return m.ascii[s][r]
	}
	if !m.wide {
		return 0 // no pattern holds it: every partial match ends here
	}
	for {
		if next, ok := m.edges[s][r]; ok {
			return next
		}
		if s == 0 {
			return 0
		}
		s = m.fail[s]
	}
}

// scanner is one scan's state. Its main branch reads every letter by its
// shape: the automaton's state and a ring of the byte offsets and line
// starts of the latest folded units, so a match can be traced back to
// where it began. A letter a reader may also read by its sound (Cyrillic
// р, Greek ν; see bmpFoldTable.sound) forks every branch into one more
// that reads it so: a reader settles each letter on the reading that
// makes a word, so a marker may need one letter read by its shape and
// the next by its sound. Branches at one automaton state read the rest of
// the text alike, so each state holds at most one: the scan follows every
// reading there is with at most as many branches as the automaton has
// states, whatever the text. Scanners are pooled: the ring is large, and
// only entries written in this scan are ever read.
type scanner struct {
	m             *matcher
	main          branch // reads every letter by its shape; its rings are the scanner's own
	starts, lines [maxPatternUnits]int
	alts          []branch // alternative readings, none at state 0 or at the main branch's
	forks, spare  []branch
	forkAlt       []int         // the alternative each fork reads (letter)
	alternatives  []alternative // the readings of the character read
	buf           readingBuf    // holds them
	// leetEnd is the end of the latest leet spelling of several
	// characters (leetSpellings) read: a letter or digit before it is
	// part of one, and is also read as nothing.
	leetEnd int
	// heldReady is whether held marks the branches' states for the
	// character letter reads (holdStates).
	heldReady bool
	// held is, by state, the branch there: heldByMain, an alternative's
	// index plus one, or 0 for none.
	held []int32
	// openUnits holds an open number's shorter reading (openReading).
	openUnits []rune
	// pending holds the branches that read an open escape at one of its
	// lengths while the others read it as written (openEscapes), each to
	// rejoin them where its length ends.
	pending []pendingBranch
}

// pendingBranch is a branch of scanner.pending and where it rejoins.
type pendingBranch struct {
	b   branch
	end int
}

// heldByMain marks the main branch's state in scanner.held.
const heldByMain = -1

// branch is one reading's partial match: its automaton state
// and a ring of the byte offsets and line starts of its latest units (as
// many as the state's depth are read).
type branch struct {
	state  int32
	units  int
	starts *[maxPatternUnits]int
	lines  *[maxPatternUnits]int
}

var scanners = sync.Pool{New: func() any { return new(scanner) }}

// unit advances every branch by one folded unit that began at byte start
// on the line starting at line, within the character ending at end, and
// reports the matches it completes.
func (sc *scanner) unit(f rune, start, end, line int, hit func(p, start, end, line int)) {
	sc.advance(&sc.main, f, start, end, line, hit)
	if len(sc.alts) > 0 {
		for i := range sc.alts {
			sc.advance(&sc.alts[i], f, start, end, line, hit)
		}
		sc.alts = sc.settle(sc.alts)
	}
}

// advance is unit for one branch.
func (sc *scanner) advance(b *branch, f rune, start, end, line int, hit func(p, start, end, line int)) {
	k := b.units % maxPatternUnits
	b.starts[k], b.lines[k] = start, line
	b.units++
	b.state = sc.m.step(b.state, f)
	if p := sc.m.out[b.state]; p >= 0 {
		first := (b.units - sc.m.lens[p]) % maxPatternUnits
		hit(int(p), b.starts[first], end, b.lines[first])
	}
}

// settle drops from bs the branches that hold no partial match, and of
// branches at one state keeps the one whose match starts on the latest
// line (the main branch takes that one's starts), else the first: both
// read the rest alike, and the later line is the one a reader sees the
// match begin on. In "A\n@gent memory for identity", the A's reading
// reaches the state the @'s does, yet the phrase a reader sees starts the
// second line, which the earlier start left unmarked. Only a later line
// counts, so a run of letters read two ways on one line forks no more
// than before. It answers what is left and leaves held marking the states
// held.
func (sc *scanner) settle(bs []branch) []branch {
	clear(sc.held)
	sc.held[sc.main.state] = heldByMain
	out := bs[:0]
	for _, b := range bs {
		if b.state == 0 {
			sc.spare = append(sc.spare, b)
			continue
		}
		switch h := sc.held[b.state]; {
		case h == 0:
			out = append(out, b)
			sc.held[b.state] = int32(len(out))
		case h == heldByMain:
			if sc.lineOf(&b) > sc.lineOf(&sc.main) {
				sc.adopt(&b)
			}
			sc.spare = append(sc.spare, b)
		default:
			if sc.lineOf(&b) > sc.lineOf(&out[h-1]) {
				out[h-1], b = b, out[h-1]
			}
			sc.spare = append(sc.spare, b)
		}
	}
	return out
}

// lineOf answers the start of the line b's partial match starts on.
func (sc *scanner) lineOf(b *branch) int {
	return b.lines[(b.units-int(sc.m.depth[b.state]))%maxPatternUnits]
}

// adopt gives the main branch the starts and lines of b's partial match,
// which is at the main branch's state.
func (sc *scanner) adopt(b *branch) {
	for k := 1; k <= int(sc.m.depth[b.state]); k++ {
		to, from := (sc.main.units-k)%maxPatternUnits, (b.units-k)%maxPatternUnits
		sc.main.starts[to], sc.main.lines[to] = b.starts[from], b.lines[from]
	}
}

// fork answers a branch at state whose units' starts and lines are those
// of ring entries (units-depth, units] of starts and lines: only they can
// begin a match from there. Its rings are a dropped branch's, if any.
func (sc *scanner) fork(state int32, units int, starts, lines *[maxPatternUnits]int) branch {
	var b branch
	if n := len(sc.spare); n > 0 {
		b = sc.spare[n-1]
		sc.spare = sc.spare[:n-1]
	} else {
		b = branch{starts: new([maxPatternUnits]int), lines: new([maxPatternUnits]int)}
	}
	b.state, b.units = state, units
	for k := units - int(sc.m.depth[state]); k < units; k++ {
		b.starts[k%maxPatternUnits], b.lines[k%maxPatternUnits] = starts[k%maxPatternUnits], lines[k%maxPatternUnits]
	}
	return b
}

// worthForking reports whether reading units (of a character on the line
// starting at line) from b's state completes a pattern, or ends in a
// partial match no branch holds yet, or one held by a branch whose match
// starts on an earlier line (see settle): a fork that would do none of
// these adds nothing, which is most of them (in text of another script
// the reading leads nowhere; in a run of marks read as nothing or as
// letters, it leads where a branch already is).
func (sc *scanner) worthForking(b *branch, units []rune, line int) bool {
	state := b.state
	if len(units) == 1 && units[0] < utf8.RuneSelf {
		state = sc.m.ascii[state][units[0]]
		if sc.m.out[state] >= 0 {
			return true
		}
	} else {
		for _, f := range units {
			state = sc.m.step(state, f)
			if sc.m.out[state] >= 0 {
				return true
			}
		}
	}
	if state == 0 {
		return false
	}
	if !sc.heldReady {
		sc.holdStates()
	}
	h := sc.held[state]
	if h == 0 {
		return true
	}
	holder := &sc.main
	if h != heldByMain {
		holder = &sc.alts[h-1]
	}
	// The fork's match starts in b's ring, or at this character.
	forkLine := line
	if first := b.units + len(units) - int(sc.m.depth[state]); first < b.units {
		forkLine = b.lines[first%maxPatternUnits]
	}
	return forkLine > sc.lineOf(holder)
}

// leadsNowhere reports whether the main branch is not worth forking into
// one that reads the ASCII unit u (worthForking): it completes no pattern
// and leaves no partial match.
func (sc *scanner) leadsNowhere(u rune) bool {
	next := sc.m.ascii[sc.main.state][u]
	return next == 0 && sc.m.out[next] < 0
}

// alternative is one reading of a character other than its shape: its
// units (none: read as nothing) and the end of the text it covers, which
// may lie past the character ("()" and the leet spellings of
// leetSpellings cover several).
type alternative struct {
	units []rune
	end   int
}

// letter feeds one character spanning [start, end), read as shape and,
// when it has other readings (its sound, its look, the letter a leet
// spelling starting there spells, or nothing), as each of those too:
// every branch, the main one included, forks into one that reads it so.
func (sc *scanner) letter(shape []rune, alts []alternative, start, end, line int, hit func(p, start, end, line int)) {
	if len(alts) == 0 {
		for _, f := range shape {
			sc.unit(f, start, end, line, hit)
		}
		return
	}
	forks := sc.forks[:0]
	sc.forkAlt = sc.forkAlt[:0]
	sc.heldReady = false // built when a fork asks (holdStates)
	for k, alt := range alts {
		forks = sc.forksFor(forks, alt.units, line, len(shape) > 0)
		for len(sc.forkAlt) < len(forks) {
			sc.forkAlt = append(sc.forkAlt, k)
		}
	}
	for _, f := range shape {
		sc.unit(f, start, end, line, hit)
	}
	if len(forks) == 0 {
		// No branch moved (a mark read as nothing or as a letter that
		// leads nowhere new), or only by the shape, whose units settled
		// the branches as they moved them.
		return
	}
	for i := range forks {
		alt := alts[sc.forkAlt[i]]
		for _, f := range alt.units {
			sc.advance(&forks[i], f, start, alt.end, line, hit)
		}
	}
	sc.alts = sc.settle(append(sc.alts, forks...))
	sc.forks = forks[:0]
}

// holdStates marks in held the states of the main branch and the others,
// for worthForking; letter asks for it only when a reading leads to a
// partial match, which in most text none does.
func (sc *scanner) holdStates() {
	clear(sc.held)
	sc.held[sc.main.state] = heldByMain
	for k, b := range sc.alts {
		sc.held[b.state] = int32(k + 1)
	}
	sc.heldReady = true
}

// forksFor appends to forks a fork of each branch worth forking into one
// that reads units. Reading nothing is worth it for a branch holding a
// partial match when the shape moves it (moves is true): the fork stays
// where the branch was.
func (sc *scanner) forksFor(forks []branch, units []rune, line int, moves bool) []branch {
	if sc.worth(&sc.main, units, line, moves) {
		forks = append(forks, sc.fork(sc.main.state, sc.main.units, sc.main.starts, sc.main.lines))
	}
	for k := range sc.alts {
		if b := &sc.alts[k]; sc.worth(b, units, line, moves) {
			forks = append(forks, sc.fork(b.state, b.units, b.starts, b.lines))
		}
	}
	return forks
}

// worth reports whether b is worth forking into one that reads units
// (see forksFor).
func (sc *scanner) worth(b *branch, units []rune, line int, moves bool) bool {
	if len(units) == 0 {
		return moves && b.state != 0
	}
	return sc.worthForking(b, units, line)
}

// scan reports every match in order of its end: the pattern, the byte
// span [start, end) of s it covers, and the start of the line it starts
// on. Matches of different patterns may overlap, and one pattern may match
// more than once at an end under different readings; callers decide.
// Letters are read by their shapes and, where they have a second reading,
// by their sounds too, letter by letter (see scanner). Character
// references are decoded unless literally.
func (m *matcher) scan(s string, literally bool, hit func(p, start, end, line int)) {
	sc := scanners.Get().(*scanner)
	defer func() {
		sc.spare = append(sc.spare, sc.alts...)
		sc.alts = sc.alts[:0]
		for _, p := range sc.pending {
			sc.spare = append(sc.spare, p.b)
		}
		sc.pending = sc.pending[:0]
		scanners.Put(sc)
	}()
	sc.m, sc.main = m, branch{starts: &sc.starts, lines: &sc.lines}
	if len(sc.held) != len(m.depth) {
		sc.held = make([]int32, len(m.depth))
	} else {
		clear(sc.held)
	}
	folds := asciiFolds()
	sounds := asciiSounds()
	spellingsFrom := leetSpellingsFrom()
	plain := asciiPlain()
	sc.leetEnd = 0
	line := 0
	for i := 0; i < len(s); {
		if len(sc.pending) > 0 {
			sc.rejoin(i)
		}
		if sc.main.state == 0 && len(sc.alts) == 0 && len(sc.pending) == 0 {
			for i < len(s) {
				if k := m.idle[s[i]]; k != 1 {
					if k == 0 || k == 3 && !literally && i+1 < len(s) && isHex(s[i+1]) {
						break
					}
					if k == 2 {
						line = i + 1
					}
				}
				i++
			}
			if i == len(s) {
				return
			}
		}
		c := s[i]
		if c < utf8.RuneSelf {
			i++
			if c <= ' ' || c == 0x7f {
				if c == '\n' || c == '\r' || c == '\v' || c == '\f' {
					line = i
				}
				continue
			}
			if c == '\\' && !literally {
				sc.openCSSEscape(s, i-1, line, hit)
			}
			if c == '&' && !literally {
				ref, end, ok := charRefAt(s, i-1)
				common := i - 1
				if ok {
					common = end
				}
				sc.openName(s, i-1, common, line, hit)
				if ok {
					sc.openNumber(s, i-1, end, line, hit)
					sc.feedDecoded(ref, i-1, end, line, hit)
					i = end
					continue
				}
			}
			f := &folds[c]
			if class := plain[c]; class != 0 && (i-1 >= sc.leetEnd || !isAlnum(c)) &&
				(class == asciiShapeOnly || len(sc.alts) == 0 && sc.leadsNowhere(sounds[c][0])) {
				// Read by its shape alone (asciiPlain), as most are, or
				// with a sound no branch is worth forking for (the main
				// branch alone, which the sound leads nowhere from:
				// worthForking).
				for _, u := range f.units[:f.n] {
					sc.unit(u, i-1, i, line, hit)
				}
				continue
			}
			// Its readings other than its shape: a symbol that stands for
			// a letter is a separator by its shape and that letter by
			// its sound; "(" with its pair is o, the pair read as one
			// character and what it holds as it is (nothing, or a mark's
			// letter); a leet spelling of several characters starting
			// here is its letter; a letter or digit inside one is also
			// nothing.
			alts := sc.alternatives[:0]
			if sound := sounds[c]; sound != nil {
				alts = append(alts, alternative{sound, i})
			}
			if c == '(' {
				if end := parenPairEnd(s, i); end >= 0 {
					alts = append(alts, alternative{parensSound(), end})
				}
			}
			for _, sp := range spellingsFrom[c] {
				if strings.HasPrefix(s[i-1:], sp.seq) {
					alts = append(alts, alternative{sp.units, i - 1 + len(sp.seq)})
					sc.leetEnd = max(sc.leetEnd, i-1+len(sp.seq))
				}
			}
			if i-1 < sc.leetEnd && isAlnum(c) {
				alts = append(alts, alternative{[]rune{}, i})
			}
			sc.alternatives = alts
			sc.letter(f.units[:f.n], alts, i-1, i, line, hit)
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		start := i
		i += size
		shape, sound, look, breaks := sc.buf.readings(s[start:i], r)
		if breaks {
			line = i
			continue
		}
		end := i
		if p := parenOf(sound); p != 0 {
			// A form of a parenthesis (（, ⁽): o with its pair, as '('.
			sound = nil
			if p == '(' {
				if pair := parenPairEnd(s, i); pair >= 0 {
					sound, end = parensSound(), pair
				}
			}
		}
		sc.alternatives = appendAlternatives(sc.alternatives[:0], sound, end, look, i)
		sc.letter(shape, sc.alternatives, start, i, line, hit)
	}
}

// breaksLine reports the runes that end a line for the header rule.
func breaksLine(r rune) bool {
	switch r {
	case '\n', '\r', '\v', '\f', '\u0085', '\u2028', '\u2029':
		return true
	}
	return false
}

// skippable reports runes a reader does not see as part of a word:
// whitespace, controls, format characters (zero-width space and joiners,
// soft hyphen, bidi controls, BOM), variation selectors and other default
// ignorables, and bytes that are not UTF-8; and combining marks (Mn, Me),
// because a reader takes a letter under a mark for the letter: after NFKD
// "ḿ" and "ö" are m and o, and the confusable prototype of ø is o with a
// combining stroke.
func skippable(r rune) bool {
	if r < utf8.RuneSelf {
		return r <= ' ' || r == 0x7f
	}
	if _, ok := symbolASCII(r); ok {
		return false
	}
	return r == utf8.RuneError || unicode.IsSpace(r) || unicode.IsControl(r) ||
		unicode.In(r, unicode.Cf, unicode.Variation_Selector, unicode.Other_Default_Ignorable_Code_Point, unicode.Mn, unicode.Me)
}

// foldRune emits the folded form of one rune (its encoding is enc): its
// NFKD decomposition without the skippable runes some decompositions
// hold, each case-folded and read by readUnit.
func foldRune(enc string, r rune, emit func(rune)) {
	if c, ok := symbolASCII(r); ok {
		emitASCII(string(c), emit)
		return
	}
	d := norm.NFKD.PropertiesString(enc).Decomposition()
	if d == nil {
		foldUnit(r, emit)
		return
	}
	for len(d) > 0 {
		dr, n := utf8.DecodeRune(d)
		d = d[n:]
		if !skippable(dr) {
			foldUnit(dr, emit)
		}
	}
}

// symbolASCII answers the ASCII character a model reads in a symbol that
// neither decomposition nor the tables spell: a Unicode tag character
// (U+E0021..U+E007E) encodes one ("ASCII smuggling": invisible, yet read),
// and a regional indicator (U+1F1E6..U+1F1FF) outside a flag reads as its
// capital letter.
func symbolASCII(r rune) (byte, bool) {
	switch {
	case isTagChar(r):
		return byte(r - 0xE0000), true
	case r >= 0x1F1E6 && r <= 0x1F1FF:
		return byte('a' + r - 0x1F1E6), true
	}
	return 0, false
}

// isTagChar reports a Unicode tag character that encodes ASCII
// (symbolASCII).
func isTagChar(r rune) bool { return r >= 0xE0021 && r <= 0xE007E }

// foldUnit reads r by its confusable prototype when that is ASCII (a
// capital's shape comes first: Greek Ν reads as N, though its lower case ν
// reads as v); otherwise it case-folds r (full folding: ß is "ss") and
// reads each rune of the fold.
func foldUnit(r rune, emit func(rune)) {
	if r >= utf8.RuneSelf {
		if proto := prototypeOf(r); proto != "" && isASCII(proto) {
			emitASCII(proto, emit)
			return
		}
	}
	if full, ok := caseFoldOf(r); ok {
		for _, x := range full {
			readUnit(x, emit)
		}
		return
	}
	readUnit(unicode.ToLower(r), emit)
}

// readUnit emits the letters a reader sees in r: a model reads a word by
// its letters, whatever script or style draws them, and reads any run of
// other characters between words as a separator. The reading of r is its
// UTS #39 confusable prototype when that is ASCII (Cyrillic а, Greek ο,
// ı), else its transliteration (Cyrillic т is t, Greek κ is k, small
// capital ᴛ is t, Hangul 한 is han), else the transliteration of its
// prototype. The reading's ASCII letters and digits are emitted, each as
// its own prototype (m is "rn", 0 is o, 1 and l are i, a leet digit its
// letter: see asciiPrototypes), so every spelling of a word folds alike;
// the rest of the reading is a separator and emits nothing. A letter or
// digit with no ASCII reading at all is read as the letter it is drawn
// from when its name or its other case says so (see letterBases: ꝁ is a k
// with a stroke, ϻ the small form of Ϻ, which reads as M); else it is
// emitted as itself, so it ends a match rather than joining two words (a
// modifier letter such as ー or ˍ reads as punctuation and is a separator).
func readUnit(r rune, emit func(rune)) {
	if r < utf8.RuneSelf {
		emitASCII(string(r), emit)
		return
	}
	if reading, ok := asciiReading(r); ok {
		emitASCII(reading, emit)
		return
	}
	if (unicode.IsLetter(r) && !unicode.Is(unicode.Lm, r)) || unicode.IsNumber(r) {
		if base, ok := letterBases[r]; ok {
			readUnit(base, emit)
			return
		}
		emit(r)
	}
}

// asciiReading answers the tables' ASCII reading of a non-ASCII rune: its
// confusable prototype when that is ASCII, else its transliteration when
// that holds a letter or digit, else its prototype's transliteration.
func asciiReading(r rune) (string, bool) {
	proto := prototypeOf(r)
	switch {
	case proto != "" && isASCII(proto):
		return proto, true
	case hasASCIIAlnum(transliterate(r)):
		return transliterate(r), true
	case proto != "" && hasASCIIAlnum(unidecode.Unidecode(proto)):
		return unidecode.Unidecode(proto), true
	}
	return "", false
}

// transliterate is r's closest ASCII spelling from the Unidecode tables
// (empty when they have none).
func transliterate(r rune) string { return unidecode.Unidecode(string(r)) }

// prototypeOf answers r's UTS #39 confusable prototype in NFD, lower
// case, without marks ("" when r is its own prototype).
func prototypeOf(r rune) string {
	proto := confusable.GetReplacement(r)
	if proto == "" {
		return ""
	}
	var b strings.Builder
	for _, x := range norm.NFD.String(proto) {
		if !skippable(x) {
			b.WriteRune(unicode.ToLower(x))
		}
	}
	return b.String()
}

// asciiPrototypes is the prototype of each ASCII letter and digit, lower
// case: most are themselves, m is "rn", 0 is o; l and 1 read as i, since
// a reader takes l, I, 1 and i for one another; and a digit that stands
// for a letter in leet spelling reads as that letter (m3m-t0k3n is
// mem-token to a model). A digit between letters joined no words before
// this reading either, so it opens no way around a match.
var asciiPrototypes = sync.OnceValue(func() *[utf8.RuneSelf]string {
	var t [utf8.RuneSelf]string
	for c := rune(0); c < utf8.RuneSelf; c++ {
		if !isAlnum(byte(c)) {
			continue
		}
		lower := unicode.ToLower(c)
		p := strings.ToLower(confusable.GetReplacement(lower))
		if p == "" || !isASCII(p) {
			p = string(lower)
		}
		if leet, ok := leetLetters[byte(p[0])]; ok && len(p) == 1 {
			p = string(leet)
		}
		t[c] = p
	}
	return &t
})

// leetLetters reads a digit (or l, whose prototype 1 shares) as the letter
// it stands for.
var leetLetters = map[byte]byte{'l': 'i', '3': 'e', '4': 'a', '5': 's', '7': 't', '8': 'b', '9': 'g'}

// emitASCII emits the prototypes of the ASCII letters and digits of s;
// everything else in s is a separator.
func emitASCII(s string, emit func(rune)) {
	protos := asciiPrototypes()
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < utf8.RuneSelf && isAlnum(c) {
			for _, u := range protos[c] {
				emit(u)
			}
		}
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

func hasASCIIAlnum(s string) bool {
	for i := 0; i < len(s); i++ {
		if isAlnum(s[i]) {
			return true
		}
	}
	return false
}

// caseFoldOf answers r's full case folding when that is not its lower
// case. fullCaseFolds holds BMP runes only, and takes tens of milliseconds
// to build, so other runes do not ask it.
func caseFoldOf(r rune) (string, bool) {
	if r < utf8.RuneSelf || r > 0xFFFF {
		return "", false
	}
	f, ok := fullCaseFolds()[r]
	return f, ok
}

// fullCaseFolds holds the BMP runes whose full case folding (Unicode's
// CaseFolding.txt, through x/text/cases) is not their lower case: ß is
// "ss", ς is σ, ᲂ is о. Other runes fold to their lower case. Outside the
// BMP the two agree for every cased script.
var fullCaseFolds = sync.OnceValue(func() map[rune]string {
	fold := cases.Fold()
	out := map[rune]string{}
	for r := rune(0x80); r < 0x10000; r++ {
		if r >= 0xD800 && r <= 0xDFFF {
			continue
		}
		if f := fold.String(string(r)); f != string(unicode.ToLower(r)) {
			out[r] = f
		}
	}
	return out
})

// lookAlikeOf reports whether r, or a look-alike of it, is one of the
// characters in set: the rune's NFKD form and the confusable prototypes
// of its parts, before any reading drops punctuation. A custom header is
// checked with it, so it cannot hold the envelope's brackets.
func lookAlikeOf(r rune, set string) bool {
	for _, x := range norm.NFKD.String(string(r)) {
		if strings.ContainsRune(set, x) {
			return true
		}
		for _, p := range norm.NFD.String(confusable.GetReplacement(x)) {
			if strings.ContainsRune(set, p) {
				return true
			}
		}
	}
	return false
}

// asciiFold is the folded form of one ASCII byte: most fold to one unit,
// a few to more (the confusable prototype of m is "rn").
type asciiFold struct {
	n     int
	units [4]rune
}

var asciiFolds = sync.OnceValue(func() *[utf8.RuneSelf]asciiFold {
	var t [utf8.RuneSelf]asciiFold
	for c := range utf8.RuneSelf {
		f := &t[c]
		if skippable(rune(c)) {
			continue
		}
		foldRune(string(rune(c)), rune(c), func(u rune) {
			if f.n < len(f.units) {
				f.units[f.n] = u
				f.n++
			}
		})
	}
	return &t
})

// maxCharRef bounds the name or number of a character reference; the
// longest entity name is 31 characters. The zeros that pad a number are
// not counted (see charRefAt).
const maxCharRef = 40

// charRefAt decodes the character reference starting at s[i] ('&') the
// way html.UnescapeString would, answering the decoded text and the end
// of the reference. A named reference without its semicolon may cover
// only a prefix of the letters after '&' ("&ltx" is "<" then "x"). A
// number may be padded with any run of zeros, as html.UnescapeString
// reads it ("&#" then fifty zeros then "109;" is m): they are skipped in
// one pass, so the run is read once for the '&' it follows, and the
// reference is decoded without them.
func charRefAt(s string, i int) (string, int, bool) {
	j := i + 1
	zeros := 0
	if j < len(s) && s[j] == '#' {
		j++
		if j < len(s) && (s[j] == 'x' || s[j] == 'X') {
			j++
		}
		z := j
		for j < len(s) && s[j] == '0' {
			j++
		}
		// One zero is kept: "&#0;" and "&#x0;" are references too.
		if j > z {
			zeros = j - z - 1
		}
	}
	for j < len(s) && j-i-zeros <= maxCharRef && isAlnum(s[j]) {
		j++
	}
	if j < len(s) && s[j] == ';' {
		j++
	}
	tok := s[i:j]
	if zeros > 0 {
		// The number without its padding (but one zero).
		at := strings.IndexByte(tok, '#') + 1
		if tok[at] == 'x' || tok[at] == 'X' {
			at++
		}
		tok = tok[:at] + tok[at+zeros:]
	}
	if len(tok) < 3 {
		return "", 0, false
	}
	if tok[1] == '#' && digitIn(tok[2], 10) && (len(tok) == 3 || !digitIn(tok[3], 10)) {
		// One decimal digit no semicolon ends is text to html ("&#9x"),
		// yet a character to HTML's own parser and a browser ("\tx"):
		// read with a zero before it, as both read that.
		tok = "&#0" + tok[2:]
	}
	dec := html.UnescapeString(tok)
	if dec == tok {
		return "", 0, false
	}
	// The letters html left undecoded are a common suffix of both.
	k := 0
	for k < len(dec) && k < len(tok)-2 && dec[len(dec)-1-k] == tok[len(tok)-1-k] {
		k++
	}
	for ; k > 0; k-- {
		if html.UnescapeString(tok[:len(tok)-k]) == dec[:len(dec)-k] {
			return dec[:len(dec)-k], j - k, true
		}
	}
	return dec, j, true
}

func isAlnum(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
}

// feedDecoded feeds the characters a character reference spanning
// [start, end) stands for, each as the whole reference.
func (sc *scanner) feedDecoded(ref string, start, end, line int, hit func(p, start, end, line int)) {
	for k, r := range ref {
		if skippable(r) {
			continue
		}
		shape, sound, look, _ := sc.buf.readings(ref[k:k+utf8.RuneLen(r)], r)
		if parenOf(sound) != 0 {
			sound = nil // its pair is read in the decoded view
		}
		sc.alternatives = appendAlternatives(sc.alternatives[:0], sound, end, look, end)
		sc.letter(shape, sc.alternatives, start, end, line, hit)
	}
}

// openNumber forks the branches at the numeric reference at [start, end)
// when no semicolon ends it, besides HTML's reading of every digit (the
// scan's): at each shorter length that gives a character, the digits
// after it then read as themselves, since a reader may stop where it
// knows the character ("&#x1dentity" is U+0001 then "dentity", "&#x6dem"
// m then "em"); and, for a number of U+0080 to U+009F, the invisible
// control it numbers. Each escape is read at every length at once, so a
// marker needing each of its escapes at another length
// ("[&#x6dem&#x2dtoken": m at two digits, "-" at all of them) is read as
// one; the decoded views read a text at one length per kind of character
// (defang_escapes.go). The forks rejoin at end (rejoin), as the scan
// jumps the reference whole.
func (sc *scanner) openNumber(s string, start, end, line int, hit func(p, start, end, line int)) {
	j := start + 2
	if j >= end || s[start+1] != '#' || !isAlnum(s[end-1]) {
		return
	}
	base := 10
	if s[j] == 'x' || s[j] == 'X' {
		base, j = 16, j+1
	}
	for j < end && s[j] == '0' {
		j++
	}
	if end-j < 2 {
		return
	}
	sc.heldReady = false
	if r, _, ok := codeUnitAt(s[start:end], 0); ok && 0x80 <= r && r <= 0x9F {
		sc.openFork(nil, start, end, line, hit) // the control it numbers
	}
	for n := 1; n < end-j && n <= maxRefDigits; n++ {
		r, _, _ := paddedNumber(s[j:j+n], 0, base, n)
		if r == 0 || !utf8.ValidRune(r) {
			continue
		}
		tail := s[j+n : end]
		if 0x80 <= r && r <= 0x9F {
			// The control it numbers, and the Windows-1252 character
			// HTML makes of it.
			sc.openReading(nil, tail, start, end, line, hit)
			r, _ = utf8.DecodeRuneInString(html.UnescapeString("&#" + strconv.Itoa(int(r)) + ";"))
		}
		if skippable(r) {
			sc.openReading(nil, tail, start, end, line, hit)
			continue
		}
		shape, sound, look, _ := sc.buf.readings(string(r), r)
		for _, head := range [3][]rune{shape, sound, look} {
			if head != nil {
				sc.openReading(head, tail, start, end, line, hit)
			}
		}
	}
}

// The escapes below read at each of their lengths at once, as the open
// numbers are (openNumber), while the text is also read as written: a
// CSS escape no whitespace ends ("\6dem" is U+06DE then "m" to CSS, m then
// "em" to a reader who stops at the character it knows) and a named
// reference no semicolon ends, whose name a reader may take at any of the
// names its letters start with ("&hyphentoken" is "‐token", though HTML
// reads only a legacy name without a semicolon). The decoded views read
// each such escape at one length per kind of character; a marker needing
// one escape whole and the next short ("[\6dem\2dtoken": m, then "-") is
// read only by the scan taking every length of each. Each length forks
// the branches into ones that read the character it gives and rejoin the
// others where it ends (rejoin), so the letters after it are read as the
// scan reads any letters.

// openCSSEscape forks the branches at the CSS escape of hex digits at
// s[start] ('\\'): at all its digits (and the whitespace ending it) and,
// when no whitespace ends it, at each fewer.
func (sc *scanner) openCSSEscape(s string, start, line int, hit func(p, start, end, line int)) {
	j := start + 1
	k := j
	for k < len(s) && k-j < 6 && isHex(s[k]) {
		k++
	}
	if k == j {
		return
	}
	sc.heldReady = false
	end, open := k, true
	if k < len(s) {
		switch s[k] {
		case ' ', '\t', '\n', '\f':
			end, open = k+1, false
		case '\r':
			end, open = k+1, false
			if end < len(s) && s[end] == '\n' {
				end++
			}
		}
	}
	r, _ := hexValue(s, j, k-j)
	sc.openChar(r, start, end, line, hit)
	for n := 1; open && n < k-j; n++ {
		r, _ := hexValue(s, j, n)
		sc.openChar(r, start, j+n, line, hit)
	}
}

// openName forks the branches at the named reference at s[start] ('&')
// no semicolon ends at each name its letters start with, but those
// ending by common, where the one HTML reads there ends (the scan reads
// that one; start if none).
func (sc *scanner) openName(s string, start, common, line int, hit func(p, start, end, line int)) {
	if start+1 >= len(s) || !isLetter(s[start+1]) {
		return
	}
	k := start + 1
	for k < len(s) && k-start-1 < maxEntityName && isAlnum(s[k]) {
		k++
	}
	if k < len(s) && s[k] == ';' || k-start-1 < 2 {
		return
	}
	names := entityRunes()
	sc.heldReady = false
	for end := max(start+3, common+1); end <= k; end++ {
		if r, ok := names[s[start+1:end]]; ok {
			sc.openChar(r, start, end, line, hit)
		}
	}
}

// openChar forks every branch worth it into ones that read r, by each of
// its readings, for the escape [start, end), to rejoin the others at end;
// r read as nothing when the scan does not see it. It forks none for a
// number that is no character.
func (sc *scanner) openChar(r rune, start, end, line int, hit func(p, start, end, line int)) {
	if r == 0 || !utf8.ValidRune(r) {
		return
	}
	if skippable(r) {
		sc.openFork(nil, start, end, line, hit)
		return
	}
	shape, sound, look, _ := sc.buf.readings(string(r), r)
	for _, units := range [3][]rune{shape, sound, look} {
		if units != nil {
			sc.openFork(units, start, end, line, hit)
		}
	}
}

// openFork forks every branch worth it (forksFor) into one that reads
// units for [start, end), held in pending until the scan reaches end.
func (sc *scanner) openFork(units []rune, start, end, line int, hit func(p, start, end, line int)) {
	forks := sc.forksFor(sc.forks[:0], units, line, true)
	for i := range forks {
		for _, f := range units {
			sc.advance(&forks[i], f, start, end, line, hit)
		}
		if forks[i].state == 0 {
			sc.spare = append(sc.spare, forks[i])
			continue
		}
		sc.pending = append(sc.pending, pendingBranch{forks[i], end})
	}
	sc.forks = forks[:0]
}

// rejoin moves the pending branches whose escape ends at or before i to
// the others.
func (sc *scanner) rejoin(i int) {
	kept := sc.pending[:0]
	joined := false
	for _, p := range sc.pending {
		if p.end > i {
			kept = append(kept, p)
			continue
		}
		sc.alts = append(sc.alts, p.b)
		joined = true
	}
	sc.pending = kept
	if joined {
		sc.alts = sc.settle(sc.alts)
	}
}

// openReading forks the branches (openFork) into ones that read head
// then tail, the digits after a short reading of an open number, by the
// letters' shapes and, where a digit has a sound (a leet letter), by the
// sounds too.
func (sc *scanner) openReading(head []rune, tail string, start, end, line int, hit func(p, start, end, line int)) {
	sounds, folds := asciiSounds(), asciiFolds()
	for _, bySound := range [2]bool{false, true} {
		units := append(sc.openUnits[:0], head...)
		sounded := false
		for k := 0; k < len(tail); k++ {
			c := tail[k]
			if sound := sounds[c]; bySound && sound != nil {
				units = append(units, sound...)
				sounded = true
				continue
			}
			f := &folds[c]
			units = append(units, f.units[:f.n]...)
		}
		sc.openUnits = units
		if bySound && !sounded {
			return
		}
		sc.openFork(units, start, end, line, hit)
	}
}

// appendAlternatives appends a character's sound and look, those it has,
// each with the end of the text it covers.
func appendAlternatives(alts []alternative, sound []rune, soundEnd int, look []rune, lookEnd int) []alternative {
	if sound != nil {
		alts = append(alts, alternative{sound, soundEnd})
	}
	if look != nil {
		alts = append(alts, alternative{look, lookEnd})
	}
	return alts
}

// foldString folds s the way scan folds its input.
func foldString(s string) []rune {
	var out []rune
	for i, r := range s {
		if skippable(r) {
			continue
		}
		foldOne(s[i:i+utf8.RuneLen(r)], r, func(f rune) { out = append(out, f) })
	}
	return out
}
