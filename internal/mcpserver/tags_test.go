package mcpserver

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/memhost/memhost/coordinator/coordinatortest"
	"github.com/memhost/memhost/sdk"
)

// TestRememberMayNotMarkProposals: memory_remember refuses a record that
// carries the proposal tag in any case, as POST /v1/records does, and
// stores nothing.
func TestRememberMayNotMarkProposals(t *testing.T) {
	provider := coordinatortest.NewProvider(coordinatortest.AllCapabilities...)
	tl := tools{aliceOptions(t, provider)}
	for _, tag := range []string{"memhost:proposal", "MEMHOST:Proposal"} {
		_, _, err := tl.remember(context.Background(), nil, RememberInput{Title: "Kiwi", Body: "Kiwis on Fridays.", Tags: []string{tag}})
		var fe *sdk.FieldError
		if !errors.As(err, &fe) || fe.Field != "tags[0]" || !errors.Is(err, sdk.ErrInvalid) {
			t.Errorf("memory_remember tagged %q answered %v, want invalid tags[0]", tag, err)
		}
	}
	if n := provider.Calls(coordinatortest.MethodRemember) + provider.Calls(coordinatortest.MethodImport); n != 0 {
		t.Fatalf("refused writes reached the provider %d times", n)
	}
}

// TestRememberSaysWhatAHeldRecordKept: memory_remember of content the
// scope holds answers the holder's id, and says which tags it did not add
// and that its occurred_at was kept, as POST /v1/records does; it
// answered the id alone, and an agent never learned its tags were dropped.
func TestRememberSaysWhatAHeldRecordKept(t *testing.T) {
	provider := coordinatortest.NewProvider(coordinatortest.AllCapabilities...)
	tl := tools{aliceOptions(t, provider)}
	ctx := context.Background()
	_, first, err := tl.remember(ctx, nil, RememberInput{Title: "Kiwi", Body: "Kiwis on Fridays.", Tags: []string{"fruit"}})
	if err != nil {
		t.Fatal(err)
	}
	if first.TagsNotAdded != nil || first.OccurredAtNotChanged {
		t.Fatalf("a new record's answer %+v says something was kept", first)
	}
	_, again, err := tl.remember(ctx, nil, RememberInput{Title: "Kiwi", Body: "Kiwis on Fridays.", Tags: []string{"fruit", "friday"}, OccurredAt: "2026-05-01T10:00:00Z"})
	if err != nil {
		t.Fatal(err)
	}
	if again.ID != first.ID || !slices.Equal(again.TagsNotAdded, []string{"friday"}) || !again.OccurredAtNotChanged {
		t.Fatalf("the held content's answer %+v (first %s), want its id, tags_not_added [friday] and occurred_at_not_changed", again, first.ID)
	}
}
