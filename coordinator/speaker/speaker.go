// Package speaker ranks a conversation's turns by who said them. A turn
// remembered from a conversation carries its speaker as a tag ("role:user"
// or "role:assistant", as the compaction archive and the benchmark write
// them). A question is far more often about the user's own life than
// about what the assistant said, and what the user said is the evidence
// of that: an assistant's long answer repeats the question's words without
// holding the fact. So a question in the first person ("how long did I
// jog…") ranks the user's turns higher, unless it asks what the assistant
// said ("what did you recommend…"). A question about someone else ("what
// did Caroline paint?") is left as it is.
package speaker

import (
	"cmp"
	"context"
	"regexp"
	"slices"

	"github.com/memhost/memhost/sdk"
)

// Tags a conversation turn carries to name its speaker.
const (
	UserTag      = "role:user"
	AssistantTag = "role:assistant"
)

// userWeight multiplies the score of a turn the user said. Chosen on the
// LongMemEval-S development split (docs/benchmarks.md).
const userWeight = 2.0

// maxQueryBytes bounds the text read to tell whom a question is about;
// a longer query is a turn's text, read by its start.
const maxQueryBytes = 4096

// aboutAssistant matches a question about what the assistant said: "you"
// (or "we") with a verb of saying in the past soon after it, "did you" with
// one in the present ("what did you recommend"), or "your" answer,
// suggestion and the like. A request ("can you recommend…") is not one.
var aboutAssistant = regexp.MustCompile(`(?i)\b(you|we)\b[^.?!]{0,40}\b(told|said|suggested|recommended|mentioned|gave|provided|listed|shared|explained|discussed|talked|wrote|came up)\b` +
	`|\bdid (you|we) (tell|say|suggest|recommend|mention|give|provide|list|share|explain|discuss|talk|write)\b` +
	`|\byour (suggestions?|recommendations?|answers?|responses?|advice|previous|last|list)\b`)

// firstPerson matches the user speaking of themselves.
var firstPerson = regexp.MustCompile(`(?i)\b(i|me|my|mine|myself)\b`)

// AboutUser reports whether question is about the user, where the user's
// own turns are the evidence: it speaks in the first person and does not
// ask what the assistant said.
func AboutUser(question string) bool {
	if len(question) > maxQueryBytes {
		question = question[:maxQueryBytes]
	}
	return firstPerson.MatchString(question) && !aboutAssistant.MatchString(question)
}

// RecallFunc is a provider's recall.
type RecallFunc func(context.Context, sdk.RecallQuery) ([]sdk.Hit, error)

// Wrap answers recall's hits with the user's turns ranked higher (Rank)
// when the query is about the user (AboutUser). When the answer holds a
// turn with a speaker's tag, the query is recalled again at twice the
// limit, so a user's turn just past the limit can rise into it; a realm
// without speakers' turns pays no second recall. A failing second recall
// leaves the first answer, ranked.
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
		if wide := min(2*limit, sdk.MaxBatch); wide > limit && len(hits) >= limit {
			more := q
			more.Limit = wide
			if deeper, err := recall(ctx, more); err == nil {
				hits = deeper
			}
		}
		return Rank(hits, limit), nil
	}
}

// Rank multiplies the positive score of each hit the user said by
// userWeight and answers the best limit hits, ties in the order given.
func Rank(hits []sdk.Hit, limit int) []sdk.Hit {
	for i := range hits {
		if said(hits[i]) && hits[i].Score > 0 {
			hits[i].Score *= userWeight
		}
	}
	slices.SortStableFunc(hits, func(a, b sdk.Hit) int { return cmp.Compare(b.Score, a.Score) })
	return hits[:min(max(limit, 0), len(hits))]
}

// said reports whether h is a turn the user said.
func said(h sdk.Hit) bool { return h.Record.HasTag(UserTag) }

// spoken reports whether h is a turn with a speaker's tag.
func spoken(h sdk.Hit) bool { return said(h) || h.Record.HasTag(AssistantTag) }

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
