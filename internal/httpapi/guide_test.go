package httpapi

import (
	"context"
	"errors"
	"testing"

	"github.com/memhost/memhost/sdk"
)

// TestGuideIterationSaysARecallFailed: a before-iteration call whose recall
// fails keeps the previous block, as documented, and says so
// (recall_failed), where it answered the old block as if nothing had
// happened (from an outside review); the next call that recalls clears
// it.
func TestGuideIterationSaysARecallFailed(t *testing.T) {
	srv, p := newTestServer(t, Options{})
	p.MustAdd("default", sdk.Record{Scope: sdk.IdentityScope("alice"), Kind: sdk.KindFact, Title: "Espresso", Body: "alice orders a double espresso"})
	const body = `{"identity":{"id":"alice"},"session":"g1","last_user_message":"espresso order"}`
	type answer struct {
		Block        *string `json:"block"`
		Changed      bool    `json:"changed"`
		RecallFailed bool    `json:"recall_failed"`
	}
	var first, kept, again answer
	if code := doJSON(t, srv, "POST", "/v1/guide/before-iteration", "", body, &first); code != 200 || first.Block == nil || first.RecallFailed {
		t.Fatalf("first call = %d %+v", code, first)
	}
	p.SetHook("Recall", func(context.Context, any) error { return errors.New("provider down") })
	if code := doJSON(t, srv, "POST", "/v1/guide/before-iteration", "", body, &kept); code != 200 || kept.Block == nil || *kept.Block != *first.Block || kept.Changed || !kept.RecallFailed {
		t.Fatalf("with the recall failing = %d %+v; want the previous block, unchanged, recall_failed", code, kept)
	}
	p.SetHook("Recall", nil)
	if code := doJSON(t, srv, "POST", "/v1/guide/before-iteration", "", body, &again); code != 200 || again.RecallFailed {
		t.Fatalf("once the recall works = %d %+v", code, again)
	}
}
