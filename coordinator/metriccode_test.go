package coordinator

import (
	"context"
	"fmt"
	"testing"

	"github.com/memhost/memhost/coordinator/coordinatortest"
	"github.com/memhost/memhost/sdk"
)

// TestRecallOfAGoneCallerIsCanceled: a guide's recall (Recall) whose
// caller went away is observed with code canceled, as a turn's recall
// is, not as the provider's unavailable.
func TestRecallOfAGoneCallerIsCanceled(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want sdk.Code
	}{
		{"caller went away", context.Canceled, CodeCanceled},
		{"provider down", sdk.ErrUnavailable, sdk.CodeUnavailable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, nil)
			f.p.SetHook(coordinatortest.MethodRecall, func(context.Context, any) error { return tc.err })
			if _, err := f.c.Recall(context.Background(), alice, "hiking boots", 5); err == nil {
				t.Fatal("Recall answered no error")
			}
			want := fmt.Sprintf("recalled %s %s %s", SurfaceGuide, alice.Realm, tc.want)
			if f.metrics.count(want) != 1 {
				t.Fatalf("metrics:\n%s\nwant one %q", f.metrics.all(), want)
			}
		})
	}
}
