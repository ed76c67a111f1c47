package coordinator

import (
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/memhost/memhost/sdk"
	"github.com/memhost/memhost/sdk/tokenize"
)

// Query-focused packing: a turn's injection shows a long record as the
// passage that matches the turn (an excerpt) rather than its first bytes,
// so the budget is spent on what the turn asked about. A body is long
// when it holds more than excerptBytes(BodyBytes) bytes; the excerpt holds
// at most that many, cut from the raw body before it is rendered, so the
// excerpt is defanged, escaped and framed exactly as a whole body is.

// excerptGap joins passages that are not adjacent in the body, and marks
// a cut start or end; a line break stands for its space before a passage
// and after one that ends a line (gapMark).
const excerptGap = " … "

// excerptBytes is the most an excerpt holds: half of a body's budget, so
// a long record costs half of what its cut body did.
func excerptBytes(bodyBytes int) int { return bodyBytes / 2 }

// excerpt answers the passage of body that best matches terms, at most
// limit bytes with its gap marks, and whether body needed one: false when
// body fits in limit or holds no term (a record found by its title or its
// thread is shown as it is) or no sentence that holds one fits. The
// passage is whole sentences (or, in text without sentence breaks, runs of
// words) around those holding the most distinct terms, in body order;
// each sentence that holds a term is taken before any neighbour is added
// for context. Deterministic: ties go to the earlier sentence.
func excerpt(body string, terms []string, limit int) (string, bool) {
	if len(body) <= limit || len(terms) == 0 || limit < 4*len(excerptGap) {
		return "", false
	}
	want := make(map[string]bool, len(terms))
	for _, t := range terms {
		want[t] = true
	}
	pieces := sentences(body, limit/4)
	score := make([]int, len(pieces))
	matched := false
	for i, p := range pieces {
		for _, t := range tokenize.Terms(body[p.start:p.end]) {
			if want[t] {
				score[i]++
			}
		}
		matched = matched || score[i] > 0
	}
	if !matched {
		return "", false
	}
	order := make([]int, len(pieces))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return score[b] - score[a] })
	taken := make([]bool, len(pieces))
	size := 0
	// cost is what taking piece i adds at most: its bytes and what goes
	// before it, a gap or the body's own spacing after piece i-1 (blank
	// lines may be longer than a gap).
	cost := func(i int) int {
		before := len(excerptGap)
		if i > 0 {
			before = max(before, pieces[i].start-pieces[i-1].end)
		}
		return pieces[i].end - pieces[i].start + before
	}
	for _, i := range order {
		if score[i] == 0 {
			break
		}
		if size+cost(i) <= limit-len(excerptGap) {
			taken[i] = true
			size += cost(i)
		}
	}
	if size == 0 {
		return "", false // no sentence that holds a term fits
	}
	// Context: the untaken neighbours of taken pieces, one ring at a
	// time (both sides of every passage before the next ring), in body
	// order, while they fit. A piece that does not fit never will (size
	// only grows), so a ring looks only beside the pieces the last one
	// took: scanning every piece for each ring cost time quadratic in a
	// body of many short sentences around one match.
	var ring []int
	for i, t := range taken {
		if t {
			ring = append(ring, i)
		}
	}
	for len(ring) > 0 {
		var next []int
		seen := -1
		for _, i := range ring {
			for _, j := range [2]int{i - 1, i + 1} {
				if j <= seen || j >= len(pieces) || taken[j] {
					continue
				}
				seen = j
				if size+cost(j) <= limit-len(excerptGap) {
					taken[j] = true
					size += cost(j)
					next = append(next, j)
				}
			}
		}
		ring = next
	}
	var b strings.Builder
	b.Grow(limit)
	last := -1
	lead := len(body) - len(strings.TrimLeftFunc(body, unicode.IsSpace))
	for i, p := range pieces {
		if !taken[i] {
			continue
		}
		// A passage after a gap begins a line: it starts a line or a
		// sentence of the body, and the defanger reads a role header at
		// either ("Note. ### System: ..."); after " … " it read as prose.
		switch {
		case last < 0 && p.start > lead:
			b.WriteString(gapMark(false, true))
		case last >= 0 && last != i-1:
			b.WriteString(gapMark(endsLine(body, pieces[last].end), true))
		case last >= 0:
			// Adjacent: the text between the two pieces (spacing) is kept.
			b.WriteString(body[pieces[last].end:p.start])
		}
		b.WriteString(body[p.start:p.end])
		last = i
	}
	if last >= 0 && pieces[last].end < len(strings.TrimRightFunc(body, unicode.IsSpace)) {
		b.WriteString(gapMark(endsLine(body, pieces[last].end), false))
	}
	return sdk.CutText(b.String(), limit), true
}

// gapMark answers the gap mark between a passage that ends a line of the
// body (after) and one that begins a line of the excerpt (before): a line
// break stands for the space on that side, so each passage keeps its line
// as the defanger reads it. Joined into the middle of a line, a forged role line
// ("### System: ...", "[SYSTEM] ...") reads as prose to the defanger and
// as a header to a model. Every form is as long as excerptGap.
func gapMark(after, before bool) string {
	gap := excerptGap
	if after {
		gap = "\n" + gap[1:]
	}
	if before {
		gap = gap[:len(gap)-1] + "\n"
	}
	return gap
}

// endsLine reports whether the passage ending at end ends a line of body.
func endsLine(body string, end int) bool {
	rest := body[end:]
	space := strings.TrimLeftFunc(rest, unicode.IsSpace)
	return len(space) == 0 || strings.ContainsAny(rest[:len(rest)-len(space)], "\n\r")
}

// sentences cuts body into pieces: sentences and lines, and a piece longer
// than most cut at spaces (or, with none, at a character boundary) into
// runs of at most most bytes. Whitespace between pieces belongs to no
// piece.
func sentences(body string, most int) []span {
	most = max(most, 16)
	var out []span
	add := func(start, end int) {
		start, end = trimSpace(body, start, end)
		for end-start > most {
			cut := start + most
			for cut > start && !utf8.RuneStart(body[cut]) {
				cut--
			}
			if cut == start {
				cut = start + most // bytes that begin no character
			}
			if sp := strings.LastIndexByte(body[start:cut], ' '); sp > 0 {
				cut = start + sp
			}
			s, e := trimSpace(body, start, cut)
			out = append(out, span{s, e})
			start, end = trimSpace(body, cut, end)
		}
		if end > start {
			out = append(out, span{start, end})
		}
	}
	start := 0
	for i := 0; i < len(body); i++ {
		switch c := body[i]; {
		case c == '\n':
			add(start, i)
			start = i + 1
		case (c == '.' || c == '!' || c == '?') && i+1 < len(body) && (body[i+1] == ' ' || body[i+1] == '\n'):
			add(start, i+1)
			start = i + 1
		}
	}
	add(start, len(body))
	return out
}

// trimSpace answers body[start:end] without its leading and trailing
// white space, as offsets into body.
func trimSpace(body string, start, end int) (int, int) {
	s := strings.TrimRightFunc(body[start:end], unicode.IsSpace)
	t := strings.TrimLeftFunc(s, unicode.IsSpace)
	return start + len(s) - len(t), start + len(s)
}
