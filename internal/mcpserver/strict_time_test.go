package mcpserver

import (
	"context"
	"errors"
	"testing"

	"github.com/memhost/memhost/coordinator/coordinatortest"
	"github.com/memhost/memhost/sdk"
)

// TestToolTimesAreReadAsV1ReadsThem: the tools refuse the times /v1
// refuses (an hour offset past 23, minutes past 59, a one-digit hour, a
// decimal comma) and the zero time, which stands for no time: nothing is
// stored and no recall runs. Before, time.Parse took them, +01:60 as
// +02:00, and 0001-01-01T00:00:00Z stored a record without its time.
func TestToolTimesAreReadAsV1ReadsThem(t *testing.T) {
	provider := coordinatortest.NewProvider(coordinatortest.AllCapabilities...)
	tl := tools{aliceOptions(t, provider)}
	ctx := context.Background()
	for _, s := range []string{
		"2023-05-27T09:00:00+24:00", "2023-05-27T09:00:00+01:60", "2023-05-27T9:00:00Z",
		"2023-05-27T09:00:00,5Z", "0001-01-01T00:00:00Z", "0000-12-31T23:00:00-01:00",
	} {
		_, _, err := tl.remember(ctx, nil, RememberInput{Title: "t", Body: s, OccurredAt: s})
		var fe *sdk.FieldError
		if !errors.As(err, &fe) || fe.Field != "occurred_at" || !errors.Is(err, sdk.ErrInvalid) {
			t.Errorf("remember occurred_at %q: %v; want an invalid occurred_at", s, err)
		}
		for _, in := range []RecallInput{{Query: "t", Now: s}, {Query: "t", Since: s}, {Query: "t", Until: s}} {
			if _, _, err := tl.recall(ctx, nil, in); !errors.As(err, &fe) || !errors.Is(err, sdk.ErrInvalid) {
				t.Errorf("recall %+v: %v; want a field error", in, err)
			}
		}
	}
	if n := provider.Calls(coordinatortest.MethodRemember) + provider.Calls(coordinatortest.MethodRecall); n != 0 {
		t.Fatalf("refused times reached the provider %d times", n)
	}
	// A well-formed time at an odd offset is kept as the instant it names.
	_, out, err := tl.remember(ctx, nil, RememberInput{Title: "t", Body: "b", OccurredAt: "2023-05-27T09:00:00+23:59"})
	if err != nil {
		t.Fatal(err)
	}
	recs, err := provider.Get(ctx, "default", []string{out.ID})
	if err != nil || len(recs) != 1 || recs[0].OccurredAt.Format("2006-01-02T15:04:05Z07:00") != "2023-05-26T09:01:00Z" {
		t.Fatalf("stored %+v, %v; want occurred_at 2023-05-26T09:01:00Z", recs, err)
	}
}
