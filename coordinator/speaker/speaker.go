// Package speaker ranks a conversation's turns by who said them. A turn
// remembered from a conversation carries its speaker as a tag
// (memhost:user or memhost:assistant, as the compaction archive and the
// benchmark write them). A question in the first person ("how long did I
// jog…") is about the user's own life, and what the user said is the
// evidence of that, while an assistant's long answer repeats the
// question's words without holding the fact. So such a question ranks the
// user's turns higher, unless it asks what the assistant said ("what did
// you recommend…"). In a conversation between people, a turn may name its
// speaker (memhost:speaker:Caroline), and a question naming one of them
// ("what did Caroline paint?") ranks that speaker's turns higher.
package speaker

import (
	"cmp"
	"context"
	"slices"
	"strings"
	"time"
	"unicode"

	"github.com/memhost/memhost/coordinator/internal/score"
	"github.com/memhost/memhost/sdk"
	"github.com/memhost/memhost/sdk/index"
)

// Tags a conversation turn carries to name its speaker. They are in the
// host's own namespace (index.SystemTagPrefix), so they filter but are not
// text: a question's "user" matches no turn through its tag.
const (
	UserTag      = "memhost:user"
	AssistantTag = "memhost:assistant"
)

// NamedPrefix opens the tag naming a turn's speaker by name, in a
// conversation between people: "memhost:speaker:Caroline".
const NamedPrefix = "memhost:speaker:"

// userWeight multiplies the score of a turn the user said. Chosen on the
// LongMemEval-S development split (docs/benchmarks.md).
const userWeight = 2.0

// namedWeight multiplies the score of a turn said by the one speaker a
// question names ("What did Caroline paint?"): their own words hold what
// they did, where the other's replies echo it. Chosen on LoCoMo's
// development split (docs/benchmarks.md).
const namedWeight = 1.5

// maxQueryBytes bounds the text read to tell whom a question is about;
// a longer query is a turn's text, read by its start.
const maxQueryBytes = 4096

// Words that tell whom a question is about, after folding (words). "We"
// is not the first person here: a team's "what is our deploy process?" is
// about what the team shares, not about the user's own turns.
var (
	firstPerson = set("i", "me", "my", "myself")
	// saidPast are verbs of saying whose subject, "you" or "we", makes a
	// question about what the assistant said ("you recommended"); "came"
	// counts only before "up" ("you came up with").
	saidPast = set("told", "said", "suggested", "recommended", "mentioned", "gave", "provided", "listed",
		"shared", "explained", "discussed", "talked", "wrote")
	// sayPresent are the same verbs after "did you" ("did you suggest").
	sayPresent = set("tell", "say", "suggest", "recommend", "mention", "give", "provide", "list",
		"share", "explain", "discuss", "talk", "write")
	// yourWords follow "your" in a question about the assistant's words.
	yourWords = set("suggestion", "suggestions", "recommendation", "recommendations", "answer", "answers",
		"response", "responses", "advice", "previous", "last", "list")
)

// maxBetween is how many words may stand between "you" and its verb of
// saying ("you had previously mentioned"); further off, the verb has
// another subject ("can you remind me what my doctor said").
const maxBetween = 2

// sentenceEnd is the word words answers for a sentence's end, where a
// subject's reach stops ("Thank you. Shared the doc…").
const sentenceEnd = "."

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
		if (x == "you" || x == "we") && saysAfter(w, i) {
			return false
		}
		first = first || firstPerson[x]
	}
	return first
}

// saysAfter reports whether a verb of saying follows the subject w[i]
// within maxBetween words in its sentence: in the past tense, or in the
// present after "did" or "didn't" ("what did you suggest").
func saysAfter(w []string, i int) bool {
	verbs := saidPast
	if i > 0 && w[i-1] == "did" || i > 1 && w[i-1] == "t" && w[i-2] == "didn" {
		verbs = sayPresent
	}
	for j := i + 1; j < len(w) && j <= i+1+maxBetween && w[j] != sentenceEnd; j++ {
		if verbs[w[j]] || (w[j] == "came" || w[j] == "come") && j+1 < len(w) && w[j+1] == "up" {
			return true
		}
	}
	return false
}

// words answers the lower-case words of the first maxQueryBytes of s, and
// sentenceEnd for each sentence's end, look-alikes folded: full-width
// Latin letters as ASCII, the Turkish dotted and dotless i as i. "i.e." is
// not the pronoun.
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
	var out []string
	start := -1
	for at, r := range folded + " " {
		if unicode.IsLetter(r) || unicode.IsDigit(r) {
			if start < 0 {
				start = at
			}
			continue
		}
		if start >= 0 {
			out = append(out, folded[start:at])
			start = -1
		}
		if r == '.' || r == '?' || r == '!' || r == ';' {
			out = append(out, sentenceEnd)
		}
	}
	return out
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

// Wrap answers recall's hits with the turns of the speaker a query is
// about ranked higher: the user's when the query is about the user
// (AboutUser), or those of the one speaker it names (Named). When a full
// answer holds such turns, the query is recalled again at twice the
// limit, within half the caller's remaining time, and the favoured turns
// only that deeper answer holds join the first answer, so a turn just
// past the limit can rise into it while every other hit keeps the first
// answer's score. The deeper query is the same query: a narrower one (the
// speaker's tag required) would score its hits against a narrower pool,
// which hybrid fusion and the choice merge normalise over. A realm
// without speakers' tags pays no second recall. A second recall that
// fails or runs out of its time adds nothing.
func Wrap(recall RecallFunc) RecallFunc {
	return func(ctx context.Context, q sdk.RecallQuery) ([]sdk.Hit, error) {
		hits, err := recall(ctx, q)
		if err != nil {
			return hits, err
		}
		f, ok := favourFor(q.Query, hits)
		if !ok {
			return hits, nil
		}
		limit := cmp.Or(q.Limit, sdk.DefaultRecallLimit)
		if wide := min(2*limit, sdk.MaxBatch); wide > limit && len(hits) >= limit && ctx.Err() == nil {
			deeperCtx, cancel := halfTheTime(ctx)
			more := q
			more.Limit = wide
			deeper, err := recall(deeperCtx, more)
			// Inner steps answer what they have when time runs out, so an
			// answer is only whole if time remains after it.
			whole := err == nil && deeperCtx.Err() == nil
			cancel()
			if whole {
				// The deeper answer may show a second speaker the query
				// names: then it favours no one.
				if again, ok := favourFor(q.Query, slices.Concat(hits, deeper)); !ok || again.tag != f.tag || again.name != f.name {
					return hits, nil
				}
				hits = withFavoured(hits, deeper, f)
			}
		}
		return rank(hits, limit, q.Neighbours > 0, f), nil
	}
}

// favour is the turns a query ranks higher, those of a speaker in an
// identity's own scope (ownTurn), and by how much: the user's (tag) or a
// named speaker's (name, the words of the name, nameOf).
//
// The user's turns are lifted for what they say: one whose own text
// holds none of the query's terms (terms, index.QueryTerms) was matched
// only through its thread neighbours (a provider scores a turn with its
// neighbours' terms too, index.ContextWeight), or only by meaning with an
// embedder, and is not lifted. Lifted, such a turn passed the turns of
// other sessions that say what was asked. A named speaker's turn carries
// the name the query says in its tag, so every one is lifted.
type favour struct {
	tag, name string
	weight    float64
	terms     map[string]bool
}

// lifted reports whether f ranks h higher: a turn f favours that, for the
// user's turns, says one of the query's terms itself.
func (f favour) lifted(h sdk.Hit) bool {
	return f.turn(h) && (f.tag == "" || says(h.Record, f.terms))
}

// says reports whether r's own text, the fields a provider scores it by
// (its tags but the system ones, title, description and body), holds one
// of terms.
func says(r sdk.Record, terms map[string]bool) bool {
	for _, text := range [...]string{index.TagText(r.Tags), r.Title, r.Description, r.Body} {
		if index.FieldHolds(text, terms) {
			return true
		}
	}
	return false
}

// termSet answers the terms a provider reads in query (index.QueryTerms).
func termSet(query string) map[string]bool {
	terms := index.QueryTerms(query)
	m := make(map[string]bool, len(terms))
	for _, t := range terms {
		m[t] = true
	}
	return m
}

func (f favour) turn(h sdk.Hit) bool {
	if !ownTurn(h) {
		return false
	}
	if f.tag != "" {
		return h.Record.HasTag(f.tag)
	}
	return slices.ContainsFunc(h.Record.Tags, func(t string) bool { n, ok := nameOf(t); return ok && n == f.name })
}

// favourFor answers whose turns query favours, read against hits: the
// user's when it is about the user and some hit has a speaker's tag;
// otherwise those of the one named speaker of the hits' turns that it
// names.
func favourFor(query string, hits []sdk.Hit) (favour, bool) {
	if AboutUser(query) && slices.ContainsFunc(hits, spoken) {
		return favour{tag: UserTag, weight: userWeight, terms: termSet(query)}, true
	}
	name, ok := Named(query, hits)
	return favour{name: name, weight: namedWeight}, ok
}

// Named answers the name (nameOf) of the one speaker that query names
// among the speakers of hits' turns (ownTurn), or false when it names none
// or more than one. A name is named when its words stand together in the
// query, case and look-alikes folded ("What did caroline's sister
// paint?"); tags spelling one name apart ("Mary-Jane", "Mary Jane") are
// one speaker.
func Named(query string, hits []sdk.Hit) (string, bool) {
	var w []string
	var found string
	seen := map[string]bool{}
	for _, h := range hits {
		if !ownTurn(h) {
			continue
		}
		for _, tag := range h.Record.Tags {
			name, ok := nameOf(tag)
			if !ok || seen[name] {
				continue
			}
			seen[name] = true
			if w == nil {
				w = nameWords(query)
			}
			if !holdsRun(w, strings.Fields(name)) {
				continue
			}
			if found != "" {
				return "", false
			}
			found = name
		}
	}
	return found, found != ""
}

// nameOf answers the words of the speaker's name tag names (NameTag),
// joined by spaces, or false for another tag or a name of no words.
func nameOf(tag string) (string, bool) {
	name, ok := cutPrefixFold(tag, NamedPrefix)
	if !ok {
		return "", false
	}
	w := nameWords(name)
	return strings.Join(w, " "), len(w) > 0
}

// nameWords answers the words of s (words) without its sentences' ends:
// a name is its letters and digits ("J.R." is "j r").
func nameWords(s string) []string {
	return slices.DeleteFunc(words(s), func(w string) bool { return w == sentenceEnd })
}

// cutPrefixFold is strings.CutPrefix with the prefix compared
// case-folded.
func cutPrefixFold(s, prefix string) (string, bool) {
	if len(s) < len(prefix) || !strings.EqualFold(s[:len(prefix)], prefix) {
		return s, false
	}
	return s[len(prefix):], true
}

// holdsRun reports whether run, not empty, stands as consecutive words
// of w.
func holdsRun(w, run []string) bool {
	if len(run) == 0 {
		return false
	}
	for i := 0; i+len(run) <= len(w); i++ {
		if slices.Equal(w[i:i+len(run)], run) {
			return true
		}
	}
	return false
}

// halfTheTime answers ctx bounded to half the time left before its
// deadline, so a refinement leaves the rest to the caller.
func halfTheTime(ctx context.Context) (context.Context, context.CancelFunc) {
	if dl, ok := ctx.Deadline(); ok {
		return context.WithTimeout(ctx, time.Until(dl)/2)
	}
	return context.WithCancel(ctx)
}

// withFavoured answers hits and the favoured turns of deeper that hits
// does not hold.
func withFavoured(hits, deeper []sdk.Hit, f favour) []sdk.Hit {
	held := make(map[string]bool, len(hits))
	for _, h := range hits {
		held[h.Record.ID] = true
	}
	for _, h := range deeper {
		if f.lifted(h) && !held[h.Record.ID] {
			hits = append(hits, h)
		}
	}
	return hits
}

// Rank multiplies the positive score of each turn the user said that
// holds one of query's terms (favour) by userWeight and answers the best
// limit hits, ties in the order given.
// With keepBeside, a hit cut past the limit that is a turn of a kept
// hit's thread and scope goes, with the neighbours it carried, to the
// nearest such kept hit as its neighbours (none already kept or carried
// there), so the envelope can still show them beside the kept turns.
func Rank(hits []sdk.Hit, query string, limit int, keepBeside bool) []sdk.Hit {
	return rank(hits, limit, keepBeside, favour{tag: UserTag, weight: userWeight, terms: termSet(query)})
}

// rank is Rank for the turns f favours, by its weight.
func rank(hits []sdk.Hit, limit int, keepBeside bool, f favour) []sdk.Hit {
	for i := range hits {
		if hits[i].Score > 0 && f.lifted(hits[i]) {
			// Bounded: a plugin's finite score near float64's top would
			// otherwise double to +Inf, which no answer can encode.
			hits[i].Score = score.Bound(hits[i].Score * f.weight)
		}
	}
	slices.SortStableFunc(hits, func(a, b sdk.Hit) int { return cmp.Compare(b.Score, a.Score) })
	n := min(max(limit, 0), len(hits))
	kept, cut := hits[:n], hits[n:]
	if !keepBeside {
		return kept
	}
	held := map[string]bool{}
	for _, k := range kept {
		held[k.Record.ID] = true
		for _, r := range k.Neighbours {
			held[r.ID] = true
		}
	}
	for _, c := range cut {
		at := nearestKept(kept, c.Record)
		if at < 0 {
			continue
		}
		for _, r := range append([]sdk.Record{c.Record}, c.Neighbours...) {
			if !held[r.ID] {
				held[r.ID] = true
				kept[at].Neighbours = append(kept[at].Neighbours, r)
			}
		}
	}
	return kept
}

// nearestKept answers the index of the kept hit of r's thread and scope
// nearest r by seq (the first of equals), or -1.
func nearestKept(kept []sdk.Hit, r sdk.Record) int {
	best, bestDist := -1, uint64(0)
	for i := range kept {
		if d, ok := kept[i].Record.ThreadDistance(&r); ok && (best < 0 || d < bestDist) {
			best, bestDist = i, d
		}
	}
	return best
}

// ownTurn reports whether h is a turn in an identity's own scope: a
// record in a thread there. Only such turns are favoured: a record shared
// in a realm, mob or operator scope never is, so no writer there can lift
// its records for every identity that reads them.
func ownTurn(h sdk.Hit) bool {
	return h.Record.Thread != nil && h.Record.Scope.Class() == sdk.ScopeIdentity
}

// spoken reports whether h is a turn with a speaker's tag.
func spoken(h sdk.Hit) bool { return h.Record.HasTag(UserTag) || h.Record.HasTag(AssistantTag) }

// NameTag answers the tag naming a conversation turn's speaker by name
// (NamedPrefix and the name, spaces trimmed), or "" for a blank name or
// one too long for a tag.
func NameTag(name string) string {
	name = strings.TrimSpace(name)
	tag := NamedPrefix + name
	if name == "" || len(tag) > sdk.MaxTagBytes || strings.ContainsAny(name, "\n\r\t,") {
		return ""
	}
	return tag
}

// Tags answers the tags naming a conversation turn's speaker from its
// chat role: UserTag for "user", AssistantTag for "assistant", none for
// any other role.
func Tags(role string) []string {
	switch role {
	case "user":
		return []string{UserTag}
	case "assistant":
		return []string{AssistantTag}
	}
	return nil
}
