package mcpserver

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/memhost/memhost/coordinator/coordinatortest"
	"github.com/memhost/memhost/sdk"
)

// TestToolsReadTime: memory_remember stores occurred_at; memory_recall
// filters by since/until, reads "last Saturday" against now and shows
// when each record happened; a bad time is a field error.
func TestToolsReadTime(t *testing.T) {
	provider := coordinatortest.NewProvider(coordinatortest.AllCapabilities...)
	tl := tools{aliceOptions(t, provider)}
	ctx := context.Background()
	var ids []string
	// The Saturday's record first: without the time ranking the tie keeps
	// it behind the other.
	for _, in := range []RememberInput{
		{Title: "Hike one", Body: "a hike in the hills", OccurredAt: "2023-05-27T09:00:00Z"},
		{Title: "Hike two", Body: "a hike in the hills", OccurredAt: "2023-05-20T09:00:00+02:00"},
	} {
		_, out, err := tl.remember(ctx, nil, in)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, out.ID)
	}
	recallIDs := func(in RecallInput) ([]string, string) {
		t.Helper()
		_, out, err := tl.recall(ctx, nil, in)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, h := range out.Hits {
			got = append(got, h.ID)
		}
		return got, out.Text
	}
	if got, text := recallIDs(RecallInput{Query: "which hike last Saturday", Now: "2023-05-30T10:00:00Z"}); len(got) != 2 || got[0] != ids[0] || !strings.Contains(text, `occurred="Sat 2023-05-27 09:00 UTC"`) {
		t.Fatalf("last Saturday answered %v, want %s first, with its date shown:\n%s", got, ids[0], text)
	}
	if got, _ := recallIDs(RecallInput{Query: "which hike last Saturday", Now: "2023-05-23T10:00:00Z"}); len(got) != 2 || got[0] != ids[1] {
		t.Fatalf("last Saturday a week earlier answered %v, want %s first", got, ids[1])
	}
	if got, _ := recallIDs(RecallInput{Query: "hike", Since: "2023-05-20T07:00:00Z", Until: "2023-05-21T00:00:00Z"}); !slices.Equal(got, ids[1:]) {
		t.Fatalf("the 20th (07:00 UTC is 09:00 at +02:00) holds %v, want %v", got, ids[1:])
	}
	for _, tc := range []struct {
		in    RecallInput
		field string
	}{
		{RecallInput{Query: "hike", Now: "yesterday"}, "now"},
		{RecallInput{Query: "hike", Since: "2023-05-21"}, "since"},
		{RecallInput{Query: "hike", Since: "2023-05-21T00:00:00Z", Until: "2023-05-20T00:00:00Z"}, "until"},
	} {
		_, _, err := tl.recall(ctx, nil, tc.in)
		var fe *sdk.FieldError
		if !errors.As(err, &fe) || fe.Field != tc.field || !errors.Is(err, sdk.ErrInvalid) {
			t.Errorf("recall %+v: %v; want an invalid %s", tc.in, err, tc.field)
		}
	}
	if _, _, err := tl.remember(ctx, nil, RememberInput{Title: "x", Body: "y", OccurredAt: "May 3"}); !errors.Is(err, sdk.ErrInvalid) {
		t.Errorf("remember with occurred_at %q: %v; want invalid", "May 3", err)
	}
}
