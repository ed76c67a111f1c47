package mcpserver

import (
	"context"
	"errors"
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
