package selection

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/memhost/memhost/sdk"
)

var alice = sdk.Identity{Realm: "default", ID: "alice"}

func request(n int, suppressed ...string) sdk.SelectRequest {
	rows := make([]sdk.ManifestRow, n)
	for i := range rows {
		rows[i] = sdk.ManifestRow{ID: fmt.Sprintf("r%02d", i), Scope: "identity:alice", Kind: sdk.KindFact,
			Title: fmt.Sprintf("title %d", i), UpdatedAt: time.Now().Add(-time.Duration(i) * 24 * time.Hour)}
	}
	return sdk.SelectRequest{Identity: alice, Query: "how do we deploy?", Rows: rows, SuppressedIDs: suppressed, Max: 3}
}

// TestSelectOverAnyCompleter: Select needs only a Completer, so another
// plugin's chat client can serve the selector kind.
func TestSelectOverAnyCompleter(t *testing.T) {
	var calls int
	complete := func(_ context.Context, msgs []Message, _ int) (string, error) {
		calls++
		if calls == 1 {
			return "", fmt.Errorf("no content: %w", ErrEmpty)
		}
		if len(msgs) != 4 || msgs[2].Role != "assistant" || msgs[3].Role != "user" {
			return "", fmt.Errorf("repair round trip has %d messages", len(msgs))
		}
		return `{"selected_ids":["r01","r09"],"coverage":"sufficient"}`, nil
	}
	sel, err := Select(context.Background(), complete, 5, request(10))
	if err != nil {
		t.Fatal(err)
	}
	// r09 is beyond maxRows 5: never offered, so dropped.
	if !slices.Equal(sel.IDs, []string{"r01"}) || calls != 2 {
		t.Errorf("Select = %v after %d calls, want [r01] after 2", sel.IDs, calls)
	}
}

func FuzzParseAnswer(f *testing.F) {
	for _, s := range []string{`{"selected_ids":["a"],"coverage":"sufficient"}`, "```json\n{}\n```", `{"selected_ids":"a"}`, `}{`, ``} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		a, err := parseAnswer(s)
		if err != nil {
			if !errors.Is(err, errUnparseable) && !errors.Is(err, ErrEmpty) {
				t.Fatalf("error %v is neither unparseable nor empty", err)
			}
			return
		}
		if a.Coverage != string(sdk.CoverageSufficient) && a.Coverage != string(sdk.CoverageNeedDeeperSweep) {
			t.Fatalf("accepted coverage %q", a.Coverage)
		}
	})
}
