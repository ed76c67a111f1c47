package speaker_test

import (
	"context"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/memhost/memhost/coordinator"
	"github.com/memhost/memhost/coordinator/speaker"
	"github.com/memhost/memhost/sdk"
)

// TestChoiceQuestionKeepsOneScale, through coordinator.ReadQuery: the
// choice merge scales each answer by its own top score, so a deeper recall
// narrowed to the user's turns would bring them back on their own scale.
// The deeper recall is the same question, and a user's turn a tenth of the
// best in every answer stays out of the top 2 even doubled.
func TestChoiceQuestionKeepsOneScale(t *testing.T) {
	hit := func(id string, user bool, score float64) sdk.Hit {
		tag := speaker.AssistantTag
		if user {
			tag = speaker.UserTag
		}
		return sdk.Hit{Record: sdk.Record{ID: id, Scope: sdk.IdentityScope("alice"), Tags: []string{tag}, Thread: &sdk.Thread{ID: "c1"}}, Score: score}
	}
	// Each text's hits over the whole store, best first.
	answers := map[string][]sdk.Hit{
		"Did I run, in the park or the gym?": {hit("a1", false, 10), hit("a2", false, 9), hit("u1", true, 8), hit("u2", true, 1)},
		"Did I run in the park":              {hit("a3", false, 10), hit("u2", true, 1)},
		"Did I run the gym":                  {hit("a4", false, 10)},
	}
	recall := func(_ context.Context, q sdk.RecallQuery) ([]sdk.Hit, error) {
		var out []sdk.Hit
		for _, h := range answers[q.Query] {
			if len(out) == q.Limit {
				break
			}
			if !slices.ContainsFunc(q.Tags, func(tag string) bool { return !h.Record.HasTag(tag) }) {
				out = append(out, h)
			}
		}
		return out, nil
	}
	got, err := coordinator.ReadQuery(context.Background(), recall, sdk.RecallQuery{Realm: "r", Query: "Did I run, in the park or the gym?", Limit: 2}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if slices.ContainsFunc(got, func(h sdk.Hit) bool { return h.Record.ID == "u2" }) {
		t.Fatalf("u2, a tenth of the best in every answer, is in the top 2: %v", got)
	}
}

// TestFirstPersonQuestionKeepsHugeScoreFinite, through
// coordinator.ReadQuery: a provider's finite score near float64's top,
// which the plugin client accepts, is doubled for the user's own turn and
// must saturate, not leave as +Inf, which no recall answer can encode.
func TestFirstPersonQuestionKeepsHugeScoreFinite(t *testing.T) {
	now := time.Now()
	hit := sdk.Hit{Score: 1.7e308, Record: sdk.Record{
		ID: "r1", Realm: "default", Scope: sdk.IdentityScope("alice"), Kind: sdk.KindFact, Status: sdk.StatusActive,
		Title: "turn", Body: "I said I like tea", Tags: []string{speaker.UserTag},
		Thread: &sdk.Thread{ID: "s1", Seq: 1}, CreatedAt: now, UpdatedAt: now,
	}}
	recall := func(context.Context, sdk.RecallQuery) ([]sdk.Hit, error) { return []sdk.Hit{hit}, nil }
	hits, err := coordinator.ReadQuery(context.Background(), recall, sdk.RecallQuery{Realm: "default", Query: "what did I say about tea"}, now)
	if err != nil {
		t.Fatal(err)
	}
	if len(hits) != 1 || math.IsInf(hits[0].Score, 0) || hits[0].Score < hit.Score {
		t.Fatalf("ReadQuery answered %v, want the hit at a finite score no lower than the provider's", hits)
	}
}
