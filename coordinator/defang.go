package coordinator

import (
	"fmt"
	"html"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"

	"go.mau.fi/util/confusable"
	"golang.org/x/text/cases"
	"golang.org/x/text/unicode/norm"
)

// The reserved markers of the envelope and what defanging makes of them.
// Tags are matched by their reserved name alone, whatever bracket or slash
// stands before it, so no look-alike delimiter can keep a tag live.
const (
	tagName           = "memhost_memory_observation"
	tokenName         = "mem-token:"
	defangedTagName   = "defanged_memory_observation"
	defangedTokenName = "defanged-mem-token:"
	defangedPrefix    = "[defanged] "
	headerTail        = " for identity"
)

// Defanger neutralises forged envelope markers in text (DESIGN 5.5).
//
// Matching runs on a normalised view, because a model reads loosely: each
// character is decomposed (NFKD, so full-width and mathematical forms
// count), case-folded, mapped to its UTS #39 confusable prototype from the
// Unicode data (Cyrillic а, Greek ο, ‹, ˂, ᐸ, ∕, ⁄, ∶, ꞉, U+2010...), and
// every dash (Unicode Dash property) counts as a hyphen-minus. Character
// references (&lt; &#60; &#x3c; ...) are decoded the way
// html.UnescapeString decodes them, and whitespace, controls, default
// ignorable code points (zero-width characters, joiners, soft hyphens,
// bidi controls) and combining marks are skipped, so a marker split
// across lines or salted with invisible characters or accents is still
// found. Tag names are matched without their bracket. Each match is
// neutralised in
// the original text: the tag name becomes defanged_memory_observation, the
// token marker defanged-mem-token: (a token already so marked is not
// live), and each line holding the header phrase gets a "[defanged] "
// prefix. The output holds no live marker, so defanging it again changes
// nothing. A Defanger is immutable and safe for concurrent use.
type Defanger struct {
	// all finds markers and header phrases in one pass.
	all *matcher
}

// Patterns of Defanger.all, in order.
const (
	tagPattern    = iota
	tokenPattern  // replaced by defangedTokenName
	guardPattern  // an already defanged token: ends where tokenPattern does, so it shadows it
	headerPattern // lines holding it get defangedPrefix
)

var markerReplacements = [...]string{tagPattern: defangedTagName, tokenPattern: defangedTokenName}

// NewDefanger builds a defanger for an instruction header.
func NewDefanger(header string) (*Defanger, error) {
	if err := ValidateHeader(header); err != nil {
		return nil, fmt.Errorf("instruction header: %w", err)
	}
	phrase := header + headerTail
	all, err := newMatcher([]string{tagName, tokenName, defangedTokenName, phrase})
	if err != nil {
		return nil, fmt.Errorf("instruction header: %w", err)
	}
	bmpFolds() // build the fold table now, not on a first request
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
	texts := c.texts()
	hits := d.defangTexts(texts)
	if hits == 0 {
		return c, 0
	}
	return c.replaceText(texts), hits
}

// maxPasses bounds the passes of defangTexts. One pass neutralises every
// tag and token; a second is needed only when a replacement swallowed the
// line break before a header phrase, whose line then starts elsewhere.
const maxPasses = 4

// defangTexts defangs texts in place, matched as if joined by line
// breaks, and answers the number of hits.
func (d *Defanger) defangTexts(texts []string) int {
	total := 0
	for pass := 0; pass < maxPasses && len(texts) > 0; pass++ {
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
	return total
}

// edit replaces [start, end) of a text by text; start == end inserts.
type edit struct {
	start, end int
	text       string
}

// plan answers the edits that neutralise s's live markers, in order and
// not overlapping; nil when there are none.
func (d *Defanger) plan(s string) []edit {
	var (
		tags  []edit
		lines []int // starts of the lines holding the header phrase
		last  int
	)
	d.all.scan(s, func(p, start, end, line int) {
		if p == headerPattern {
			lines = appendLine(lines, line)
			return
		}
		if p == guardPattern || start < last {
			return
		}
		tags = append(tags, edit{start, end, markerReplacements[p]})
		last = end
	})
	if len(lines) == 0 {
		return tags
	}
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

// appendLine adds a line start unless it repeats the last one (matches
// arrive in order, so repeats are adjacent).
func appendLine(lines []int, line int) []int {
	if n := len(lines); n > 0 && lines[n-1] == line {
		return lines
	}
	return append(lines, line)
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
	ascii [][128]int32     // full DFA transitions for ASCII input
	edges []map[rune]int32 // trie edges for non-ASCII pattern runes
	fail  []int32
	out   []int32 // pattern ending at the state (directly or by suffix), or -1
	wide  bool    // some pattern holds a non-ASCII rune
	// idle classifies bytes while no match is under way: 0 may start one
	// (or is not ASCII), 1 cannot and is skipped, 2 is also a line break.
	// Plain text spends most of its time in this one table lookup.
	idle [256]uint8
}

func newMatcher(patterns []string) (*matcher, error) {
	m := &matcher{}
	trie := []map[rune]int32{{}}
	m.fail, m.out = []int32{0}, []int32{-1}
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
		case c <= ' ' || c == 0x7f || m.step(0, folds[c].units[0]) == 0:
			m.idle[c] = 1
		}
	}
	return m, nil
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

// scanner is one scan's state: the automaton's state and a ring of the
// byte offsets and line starts of the latest folded units, so a match can
// be traced back to where it began. Scanners are pooled: the ring is
// large, and only entries written in this scan are ever read.
type scanner struct {
	m             *matcher
	state         int32
	units         int
	starts, lines [maxPatternUnits]int
}

var scanners = sync.Pool{New: func() any { return new(scanner) }}

// feed advances by one folded unit that began at byte start on the line
// starting at line; it answers the pattern completed, or -1, and the ring
// slot of the completed match's first unit.
func (sc *scanner) feed(f rune, start, line int) (p int32, first int) {
	k := sc.units % maxPatternUnits
	sc.starts[k], sc.lines[k] = start, line
	sc.units++
	sc.state = sc.m.step(sc.state, f)
	p = sc.m.out[sc.state]
	if p < 0 {
		return -1, 0
	}
	return p, (sc.units - sc.m.lens[p]) % maxPatternUnits
}

// scan reports every match in order of its end: the pattern, the byte
// span [start, end) of s it covers, and the start of the line it starts
// on. Matches of different patterns may overlap; callers decide.
func (m *matcher) scan(s string, hit func(p, start, end, line int)) {
	sc := scanners.Get().(*scanner)
	defer scanners.Put(sc)
	sc.m, sc.state, sc.units = m, 0, 0
	table := bmpFolds()
	folds := asciiFolds()
	line := 0
	for i := 0; i < len(s); {
		if sc.state == 0 {
			for i < len(s) {
				k := m.idle[s[i]]
				if k == 0 {
					break
				}
				i++
				if k == 2 {
					line = i
				}
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
			if c == '&' {
				if ref, end, ok := charRefAt(s, i-1); ok {
					sc.feedDecoded(ref, i-1, end, line, hit)
					i = end
					continue
				}
			}
			f := &folds[c]
			for k := 0; k < f.n; k++ {
				if p, first := sc.feed(f.units[k], i-1, line); p >= 0 {
					hit(int(p), sc.starts[first], i, sc.lines[first])
				}
			}
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		start := i
		i += size
		var fold uint32 = foldSlow
		if r < 0x10000 {
			fold = table[r]
		}
		switch fold {
		case foldSkip:
			continue
		case foldBreak:
			line = i
			continue
		case foldSlow:
			if skippable(r) {
				continue
			}
			foldRune(s[start:i], r, func(f rune) {
				if p, first := sc.feed(f, start, line); p >= 0 {
					hit(int(p), sc.starts[first], i, sc.lines[first])
				}
			})
		default:
			if p, first := sc.feed(rune(fold), start, line); p >= 0 {
				hit(int(p), sc.starts[first], i, sc.lines[first])
			}
		}
	}
}

// Markers in the BMP fold table; real entries are the folded rune.
const (
	foldSkip  = 0xFFFFFFFF // skippable
	foldBreak = 0xFFFFFFFE // skippable line break
	foldSlow  = 0xFFFFFFFD // folds to several runes: ask norm
)

// bmpFolds is the fold of every BMP rune, built on first use (a few tens
// of milliseconds, 256 KiB) so that folding costs one lookup per rune.
var bmpFolds = sync.OnceValue(func() *[0x10000]uint32 {
	var t [0x10000]uint32
	var buf [utf8.UTFMax]byte
	for r := rune(0); r < 0x10000; r++ {
		switch {
		case r == '\u0085' || r == '\u2028' || r == '\u2029' || r == '\n' || r == '\r' || r == '\v' || r == '\f':
			t[r] = foldBreak
		case r >= 0xD800 && r <= 0xDFFF, skippable(r):
			t[r] = foldSkip
		default:
			n := utf8.EncodeRune(buf[:], r)
			count, first := 0, rune(0)
			foldRune(string(buf[:n]), r, func(f rune) {
				if count == 0 {
					first = f
				}
				count++
			})
			switch count {
			case 0:
				t[r] = foldSkip
			case 1:
				t[r] = uint32(first)
			default:
				t[r] = foldSlow
			}
		}
	}
	return &t
})

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
	return r == utf8.RuneError || unicode.IsSpace(r) || unicode.IsControl(r) ||
		unicode.In(r, unicode.Cf, unicode.Variation_Selector, unicode.Other_Default_Ignorable_Code_Point, unicode.Mn, unicode.Me)
}

// foldRune emits the folded form of one rune (its encoding is enc): its
// NFKD decomposition without the skippable runes some decompositions
// hold, each lower-cased and mapped by foldUnit.
func foldRune(enc string, r rune, emit func(rune)) {
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

// foldUnit case-folds r and replaces each rune of the fold by its UTS #39
// confusable prototype (in NFD, lower-cased again: prototypes may be
// capitals), with every dash folded to a hyphen-minus, before and after
// the mapping. Unicode's confusable data does not join all dashes (it maps
// U+2014 to the katakana prolonged sound mark), but to a reader of a token
// marker any dash is the hyphen; the Dash property is Unicode's own list
// of them.
func foldUnit(r rune, emit func(rune)) {
	if full, ok := fullCaseFolds()[r]; ok {
		for _, x := range full {
			prototype(x, emit)
		}
		return
	}
	prototype(unicode.ToLower(r), emit)
}

func prototype(r rune, emit func(rune)) {
	r = dashFold(r)
	proto := confusable.GetReplacement(r)
	if proto == "" {
		emit(r)
		return
	}
	for _, x := range norm.NFD.String(proto) {
		if !skippable(x) {
			emit(dashFold(unicode.ToLower(x)))
		}
	}
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

func dashFold(r rune) rune {
	if r != '-' && r >= 0x80 && unicode.Is(unicode.Dash, r) {
		return '-'
	}
	return r
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
// longest entity name is 31 characters.
const maxCharRef = 40

// charRefAt decodes the character reference starting at s[i] ('&') the
// way html.UnescapeString would, answering the decoded text and the end
// of the reference. A named reference without its semicolon may cover
// only a prefix of the letters after '&' ("&ltx" is "<" then "x").
func charRefAt(s string, i int) (string, int, bool) {
	j := i + 1
	for j < len(s) && j-i <= maxCharRef && (isAlnum(s[j]) || (j == i+1 && s[j] == '#')) {
		j++
	}
	if j < len(s) && s[j] == ';' {
		j++
	}
	tok := s[i:j]
	if len(tok) < 3 {
		return "", 0, false
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

// feedDecoded feeds the folded form of a decoded character reference
// s[start:end]; every unit maps back to the whole reference. A line break
// written as a reference is no line break to a reader, so it is skipped.
func (sc *scanner) feedDecoded(ref string, start, end, line int, hit func(p, start, end, line int)) {
	for k, r := range ref {
		if skippable(r) {
			continue
		}
		foldRune(ref[k:k+utf8.RuneLen(r)], r, func(f rune) {
			if p, first := sc.feed(f, start, line); p >= 0 {
				hit(int(p), sc.starts[first], end, sc.lines[first])
			}
		})
	}
}

// foldString folds s the way scan folds its input.
func foldString(s string) []rune {
	var out []rune
	for i, r := range s {
		if skippable(r) {
			continue
		}
		foldRune(s[i:i+utf8.RuneLen(r)], r, func(f rune) { out = append(out, f) })
	}
	return out
}
