// Package speaker ranks a conversation's turns by who said them. A turn
// remembered from a conversation carries its speaker as a tag
// (memhost:user or memhost:assistant, as the compaction archive and the
// benchmark write them). A question in the first person ("how long did I
// jog…") is about the user's own life, and what the user said is the
// evidence of that, while an assistant's long answer repeats the
// question's words without holding the fact. So such a question ranks the
// user's turns higher, unless it asks what the assistant said ("what did
// you recommend…"). A question about someone else ("what did Caroline
// paint?") is left as it is.
package speaker

import (
	"cmp"
	"context"
	"slices"
	"strings"
	"unicode"

	"github.com/memhost/memhost/sdk"
)

// Tags a conversation turn carries to name its speaker. They are in the
// host's own namespace and their words ("memhost", "user", "assistant")
// are indexed like any tag's, so they were chosen to add no word a
// question asks for beyond the speaker's role, which a turn's title holds
// already.
const (
	UserTag      = "memhost:user"
	AssistantTag = "memhost:assistant"
)

// userWeight multiplies the score of a turn the user said. Chosen on the
// LongMemEval-S development split (docs/benchmarks.md).
const userWeight = 2.0

// maxQueryBytes bounds the text read to tell whom a question is about;
// a longer query is a turn's text, read by its start.
const maxQueryBytes = 4096

// Words that tell whom a question is about, after folding (words).
var (
	firstPerson = set("i", "me", "my", "myself", "we", "our", "ours", "ourselves")
	// saidPast are verbs of saying whose subject, "you" or "we", makes a
	// question about what the assistant said ("you recommended").
	saidPast = set("told", "said", "suggested", "recommended", "mentioned", "gave", "provided", "listed",
		"shared", "explained", "discussed", "talked", "wrote", "came")
	// sayPresent are the same verbs after "did you" ("did you suggest").
	sayPresent = set("tell", "say", "suggest", "recommend", "mention", "give", "provide", "list",
		"share", "explain", "discuss", "talk", "write", "come")
	// yourWords follow "your" in a question about the assistant's words.
	yourWords = set("suggestion", "suggestions", "recommendation", "recommendations", "answer", "answers",
		"response", "responses", "advice", "previous", "last", "list")
)

// maxBetween is how many words may stand between "you" and its verb of
// saying ("you had previously mentioned"); further off, the verb has
// another subject ("can you remind me what my doctor said").
const maxBetween = 2

// AboutUser reports whether question is about the user, where the user's
// own turns are the evidence: it speaks in the first person and does not
// ask what the assistant said.
func AboutUser(question string) bool {
	w := words(question)
	first := false
	for i, x := range w {
		if x == "your" && i+1 < len(w) && yourWords[w[i+1]] {
			return false
		}
		if x == "you" || x == "we" {
			verbs := saidPast
			if i > 0 && w[i-1] == "did" {
				verbs = sayPresent
			}
			if slices.ContainsFunc(after(w, i), func(v string) bool { return verbs[v] }) {
				return false
			}
		}
		first = first || firstPerson[x]
	}
	return first
}

// after answers the words within maxBetween+1 places after w[i].
func after(w []string, i int) []string { return w[i+1 : min(len(w), i+2+maxBetween)] }

// words answers the lower-case words of the first maxQueryBytes of s,
// look-alikes folded: full-width Latin letters as ASCII, the Turkish dotted
// and dotless i as i. "i.e." is not the pronoun.
func words(s string) []string {
	if len(s) > maxQueryBytes {
		s = s[:maxQueryBytes]
	}
	folded := strings.Map(func(r rune) rune {
		switch {
		case r >= 0xFF01 && r <= 0xFF5E: // full-width ASCII
			r -= 0xFEE0
		case r == 'İ' || r == 'ı':
			r = 'i'
		}
		return unicode.ToLower(r)
	}, s)
	folded = strings.ReplaceAll(folded, "i.e.", " ")
	return strings.FieldsFunc(folded, func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) })
}

func set(words ...string) map[string]bool {
	m := make(map[string]bool, len(words))
	for _, w := range words {
		m[w] = true
	}
	return m
}

// RecallFunc is a provider's recall.
type RecallFunc func(context.Context, sdk.RecallQuery) ([]sdk.Hit, error)

// Wrap answers recall's hits with the user's turns ranked higher (Rank)
// when the query is about the user (AboutUser). When a full answer holds a
// turn with a speaker's tag, the query is recalled again for the user's
// turns alone (the speaker's tag required, the identities' scopes only, the
// same limit), and those the first answer lacks join it: a user's turn
// past the limit can then rise into it, as any that can is among the
// user's best, while every other hit keeps the first answer's score. A
// realm without speakers' tags pays no second recall. A second recall that
// fails or runs out of the caller's time adds nothing.
func Wrap(recall RecallFunc) RecallFunc {
	return func(ctx context.Context, q sdk.RecallQuery) ([]sdk.Hit, error) {
		if !AboutUser(q.Query) {
			return recall(ctx, q)
		}
		hits, err := recall(ctx, q)
		if err != nil || !slices.ContainsFunc(hits, spoken) {
			return hits, err
		}
		limit := cmp.Or(q.Limit, sdk.DefaultRecallLimit)
		if users, ok := userQuery(q); ok && len(hits) >= limit {
			// Inner steps answer what they have when time runs out, so an
			// answer is only whole if time remains after it.
			if more, err := recall(ctx, users); err == nil && ctx.Err() == nil {
				hits = withUserTurns(hits, more)
			}
		}
		return Rank(hits, limit, q.Neighbours > 0), nil
	}
}

// userQuery narrows q to the turns Rank boosts: tagged as the user's, in
// an identity's scope. It answers false when q reads no identity's scope.
func userQuery(q sdk.RecallQuery) (sdk.RecallQuery, bool) {
	q.Tags = append(slices.Clip(q.Tags), UserTag)
	if len(q.Scopes) == 0 {
		return q, true // every scope the caller reads, identities' among them
	}
	q.Scopes = slices.DeleteFunc(slices.Clone(q.Scopes), func(s sdk.Scope) bool { return s.Class() != sdk.ScopeIdentity })
	return q, len(q.Scopes) > 0
}

// withUserTurns answers hits and the user's turns of deeper that hits
// does not hold.
func withUserTurns(hits, deeper []sdk.Hit) []sdk.Hit {
	held := make(map[string]bool, len(hits))
	for _, h := range hits {
		held[h.Record.ID] = true
	}
	for _, h := range deeper {
		if said(h) && !held[h.Record.ID] {
			hits = append(hits, h)
		}
	}
	return hits
}

// Rank multiplies the positive score of each turn the user said by
// userWeight and answers the best limit hits, ties in the order given.
// With keepBeside, a hit cut past the limit that is a turn of a kept
// hit's thread goes with it as a neighbour, its own neighbours too, so
// the envelope can still show what stood beside the kept turns.
func Rank(hits []sdk.Hit, limit int, keepBeside bool) []sdk.Hit {
	for i := range hits {
		if said(hits[i]) && hits[i].Score > 0 {
			hits[i].Score *= userWeight
		}
	}
	slices.SortStableFunc(hits, func(a, b sdk.Hit) int { return cmp.Compare(b.Score, a.Score) })
	kept, cut := hits[:min(max(limit, 0), len(hits))], hits[min(max(limit, 0), len(hits)):]
	if keepBeside {
		for _, c := range cut {
			t := c.Record.Thread
			if t == nil {
				continue
			}
			at := slices.IndexFunc(kept, func(k sdk.Hit) bool {
				return k.Record.Thread != nil && k.Record.Thread.ID == t.ID && k.Record.Scope == c.Record.Scope
			})
			if at >= 0 {
				kept[at].Neighbours = append(kept[at].Neighbours, c.Neighbours...)
				kept[at].Neighbours = append(kept[at].Neighbours, c.Record)
			}
		}
	}
	return kept
}

// said reports whether h is a turn the user said in their own scope: a
// record in a thread, of an identity's scope, tagged as the user's. A
// record shared in a realm, mob or operator scope is never boosted, so no
// writer there can lift its records for every identity that reads them.
func said(h sdk.Hit) bool {
	return h.Record.Thread != nil && h.Record.Scope.Class() == sdk.ScopeIdentity && h.Record.HasTag(UserTag)
}

// spoken reports whether h is a turn with a speaker's tag.
func spoken(h sdk.Hit) bool { return h.Record.HasTag(UserTag) || h.Record.HasTag(AssistantTag) }

// Tag answers the tag naming a conversation turn's speaker from its chat
// role ("user" or "assistant"), or "" for any other role.
func Tag(role string) string {
	switch role {
	case "user":
		return UserTag
	case "assistant":
		return AssistantTag
	}
	return ""
}
