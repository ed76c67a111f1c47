package compaction

import (
	"context"
	"testing"
	"time"

	"github.com/memhost/memhost/sdk"
)

// An application's DELETE (no identity) listed the identities before it
// held any key. An application's compaction for bob that was adopting the
// legacy (identity-less) state meanwhile moved it under bob; the DELETE
// then found the legacy key empty and answered success, and the adopted
// history lived on under bob (from a review). It lists them again until
// none is left.
func TestAnApplicationsDeleteOutlastsAnAdoption(t *testing.T) {
	ctx := context.Background()
	for name, store := range bothStores(t) {
		t.Run(name, func(t *testing.T) {
			f := &fakeCompactor{gate: make(chan struct{}), entered: make(chan struct{}, 1)}
			s := New(Options{Compactor: f, Store: store})
			legacyKey := Key{Realm: "default", Conversation: "c9"}
			legacy := State{Watermark: 1, PrefixHash: hashChain("", msgs("a")), Artifact: sdk.Message{Role: ArtifactRole, Content: "SECRET-old"}}
			if err := store.Save(ctx, legacyKey, 0, legacy); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() {
				_, err := s.Compact(ctx, Request{Identity: sdk.Identity{Realm: "default", ID: "bob"}, Conversation: "c9", Evicted: msgs("a", "b"), Application: true})
				done <- err
			}()
			<-f.entered // bob's compaction holds bob's key and the legacy key
			fdone := make(chan error, 1)
			go func() { fdone <- s.Forget(ctx, "default", "c9", Access{Application: true}) }()
			time.Sleep(200 * time.Millisecond) // the DELETE has listed [""] and waits on the legacy key
			close(f.gate)
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			if err := <-fdone; err != nil {
				t.Fatalf("forget: %v", err)
			}
			ids, _ := store.Identities(ctx, "default", "c9")
			st, found, _ := store.Load(ctx, Key{"default", "bob", "c9"})
			if len(ids) != 0 {
				t.Errorf("DELETE answered success but identities %q still hold c9 (bob's: found=%v watermark=%d summary=%q)", ids, found, st.Watermark, st.Artifact.Content)
			}
		})
	}
}
