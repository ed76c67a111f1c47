// Package alternatives recalls a question that ends in a choice ("Which
// did I buy first, the dog bed or the training pads?") once per choice as
// well as whole. The whole question's best hits tend to be about one of
// the choices, the one its words favour, while answering it needs
// evidence of each: so every choice is recalled with the question's head,
// and the answers merge so each choice's best hits compete with the whole
// question's.
package alternatives

import (
	"cmp"
	"context"
	"math"
	"slices"
	"strings"
	"unicode"

	"github.com/memhost/memhost/coordinator/internal/score"
	"github.com/memhost/memhost/sdk"
)

// Bounds of what is read as a choice: a question names a few, each a
// phrase. Longer tails are prose that happens to contain "or".
const (
	maxChoices     = 4
	maxChoiceWords = 12
	maxQueryBytes  = 4096
)

// questionWords open a question whose tail may list choices: the
// question words, and "did" ("Did I see the dentist first, …"). Requests
// ("Can you …", "Do not …") are left out: a turn's text is read too.
var questionWords = map[string]bool{
	"which": true, "what": true, "who": true, "whom": true, "whose": true, "where": true, "when": true,
	"how": true, "did": true,
}

// Choices reads a question of the form "<head>, <choice> or <choice>?"
// (a colon may stand for the comma; up to four choices, all joined by
// "or"): it answers the head and the choices, or ok false when the query
// is not such a question. The choices are the text after the last comma
// or colon outside double quotes (a colon between digits, as in 10:30, is
// part of a time), and the query must be one question: it ends in a
// question mark and holds no other sentence end.
func Choices(query string) (head string, choices []string, ok bool) {
	if len(query) > maxQueryBytes {
		return "", nil, false
	}
	q := strings.TrimSpace(query)
	if q, ok = strings.CutSuffix(q, "?"); !ok {
		if q, ok = strings.CutSuffix(q, "？"); !ok {
			return "", nil, false
		}
	}
	at := lastSeparator(q)
	if at <= 0 {
		return "", nil, false
	}
	head, tail := strings.TrimSpace(q[:at]), q[at+1:]
	first, _, _ := strings.Cut(head, " ")
	first = strings.TrimRight(first, ",:")
	if !questionWords[strings.ToLower(first)] || holdsSentenceEnd(q) {
		return "", nil, false
	}
	seen := map[string]bool{}
	for _, c := range splitOr(tail) {
		words := strings.Fields(c)
		if len(words) == 0 || len(words) > maxChoiceWords || !strings.ContainsFunc(c, isWordRune) {
			return "", nil, false // an empty choice, a clause, or only punctuation
		}
		if key := strings.ToLower(c); !seen[key] {
			seen[key] = true
			choices = append(choices, c)
		}
	}
	if len(choices) < 2 || len(choices) > maxChoices {
		return "", nil, false
	}
	return head, choices, true
}

// lastSeparator answers the byte offset of q's last comma or colon
// outside double quotes, a colon between two digits not counting, or -1.
func lastSeparator(q string) int {
	last, quoted := -1, false
	for i, r := range q {
		switch {
		case r == '"' || r == '\u201c' || r == '\u201d':
			quoted = !quoted
		case quoted:
		case r == ',':
			last = i
		case r == ':' && !(i > 0 && isDigit(q[i-1]) && i+1 < len(q) && isDigit(q[i+1])):
			last = i
		}
	}
	return last
}

func isDigit(b byte) bool { return '0' <= b && b <= '9' }

// holdsSentenceEnd reports whether q holds a rune that ends a sentence
// or a line (endsSentence), a period between two digits (a price, a
// weight: 12.50) not counting.
func holdsSentenceEnd(q string) bool {
	for i, r := range q {
		if r == '.' && i > 0 && isDigit(q[i-1]) && i+1 < len(q) && isDigit(q[i+1]) {
			continue
		}
		if endsSentence(r) {
			return true
		}
	}
	return false
}

// endsSentence reports a rune that ends a sentence or a line: terminal
// punctuation other than the comma and colon (., !, ?, ;, 。, ？, …) or a
// line break, so a question with a second sentence after it is not read.
func endsSentence(r rune) bool {
	return r != ',' && r != ':' && unicode.Is(unicode.Terminal_Punctuation, r) || r == '\n' || r == '\r' || r == '\u2028' || r == '\u2029'
}

func isWordRune(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) }

// splitOr splits s at each word "or" (any case), each part's words joined
// by single spaces.
func splitOr(s string) []string {
	var out []string
	var cur []string
	for _, w := range strings.Fields(s) {
		if strings.EqualFold(w, "or") {
			out = append(out, strings.Join(cur, " "))
			cur = nil
			continue
		}
		cur = append(cur, w)
	}
	return append(out, strings.Join(cur, " "))
}

// RecallFunc is a provider's recall.
type RecallFunc func(context.Context, sdk.RecallQuery) ([]sdk.Hit, error)

// Wrap answers a recall that, for a question ending in choices, also
// recalls "<head> <choice>" for each choice and merges the answers
// (Merge). Any other query is recall's alone. Only the whole question's
// recall failing fails the call: a choice's recall refines it.
func Wrap(recall RecallFunc) func(context.Context, sdk.RecallQuery) ([]sdk.Hit, error) {
	return func(ctx context.Context, q sdk.RecallQuery) ([]sdk.Hit, error) {
		head, choices, ok := Choices(q.Query)
		if !ok {
			return recall(ctx, q)
		}
		whole, err := recall(ctx, q)
		if err != nil {
			return nil, err
		}
		answers := [][]sdk.Hit{whole}
		for _, c := range choices {
			sub := q
			sub.Query = head + " " + c
			hits, err := recall(ctx, sub)
			if err != nil {
				if ctx.Err() != nil {
					break // out of time: what is in hand is the answer
				}
				continue
			}
			answers = append(answers, hits)
		}
		limit := cmp.Or(q.Limit, sdk.DefaultRecallLimit)
		return Merge(answers, limit), nil
	}
}

// Merge ranks the hits of answers (the whole question's first) by their
// best share of their answer's top score: a choice's best hit ranks with
// the whole question's best. Each merged hit's score is that share times
// the whole answer's top, so the scale stays the whole answer's; ties
// keep the whole answer's order, then the choices' in turn. An answer
// whose top score is not positive and finite cannot be scaled and is left
// out; when it is the whole answer, it is returned as it is.
func Merge(answers [][]sdk.Hit, limit int) []sdk.Hit {
	limit = max(limit, 0)
	whole := answers[0]
	top := func(hits []sdk.Hit) (float64, bool) {
		if len(hits) == 0 {
			return 0, false
		}
		t := hits[0].Score
		for _, h := range hits {
			t = max(t, h.Score)
		}
		return t, t > 0 && !math.IsInf(t, 0) && !math.IsNaN(t)
	}
	scale, ok := top(whole)
	if !ok {
		return whole[:min(limit, len(whole))]
	}
	type merged struct {
		hit   sdk.Hit
		share float64
		at    int // first place seen, over the answers in turn
	}
	byID := map[string]int{}
	var all []merged
	for _, hits := range answers {
		t, ok := top(hits)
		if !ok {
			continue
		}
		for _, h := range hits {
			// Bounded: a large negative score over a tiny top overflows.
			share := score.Bound(h.Score / t)
			if i, dup := byID[h.Record.ID]; dup {
				all[i].share = max(all[i].share, share)
				continue
			}
			byID[h.Record.ID] = len(all)
			all = append(all, merged{hit: h, share: share, at: len(all)})
		}
	}
	slices.SortStableFunc(all, func(a, b merged) int {
		return cmp.Or(cmp.Compare(b.share, a.share), cmp.Compare(a.at, b.at))
	})
	out := make([]sdk.Hit, 0, min(limit, len(all)))
	for _, m := range all[:min(limit, len(all))] {
		m.hit.Score = score.Bound(m.share * scale)
		out = append(out, m.hit)
	}
	return out
}
