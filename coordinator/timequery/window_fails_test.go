package timequery

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/memhost/memhost/sdk"
)

// TestRecallSurvivesAFailedWindowRecall: a time question costs two
// provider calls, the wide one and the one inside the window. When the
// second cannot finish (the recall's deadline ran out on it, or the
// provider failed it), the wide answer is in hand and is answered, ranked
// by the window; a plain question in its place would have succeeded. A
// failed wide recall still fails the call.
func TestRecallSurvivesAFailedWindowRecall(t *testing.T) {
	saturday := d(2023, 5, 27).Add(8 * time.Hour)
	wide := []sdk.Hit{hit("monday", 10, d(2023, 5, 22)), hit("saturday", 9.8, saturday), hit("older", 9, d(2023, 1, 1))}
	for _, tc := range []struct {
		name      string
		windowErr error
	}{
		{"deadline on the window recall", context.DeadlineExceeded},
		{"provider error on the window recall", sdk.ErrUnavailable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			calls := 0
			recall := func(_ context.Context, q sdk.RecallQuery) ([]sdk.Hit, error) {
				calls++
				if !q.Since.IsZero() {
					return nil, tc.windowErr
				}
				return append([]sdk.Hit(nil), wide...), nil
			}
			got, err := Recall(context.Background(), recall, sdk.RecallQuery{Realm: "r", Query: "what did I do last Saturday", Limit: 3}, now)
			if err != nil {
				t.Fatalf("Recall failed with %v although the wide recall answered", err)
			}
			if calls != 2 || len(got) != 3 || got[0].Record.ID != "saturday" {
				t.Fatalf("%d calls answered %v; want the wide hits led by saturday", calls, ids(got))
			}
		})
	}
	failing := func(context.Context, sdk.RecallQuery) ([]sdk.Hit, error) { return nil, sdk.ErrUnavailable }
	if _, err := Recall(context.Background(), failing, sdk.RecallQuery{Realm: "r", Query: "what did I do last Saturday", Limit: 3}, now); !errors.Is(err, sdk.ErrUnavailable) {
		t.Fatalf("a failed wide recall answered %v, want its error", err)
	}
}
