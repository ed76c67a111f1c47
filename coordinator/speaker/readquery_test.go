package speaker_test

import (
	"context"
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
