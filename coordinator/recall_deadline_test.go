package coordinator

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/memhost/memhost/coordinator/coordinatortest"
	"github.com/memhost/memhost/sdk"
)

// TestTimeQuestionOnASlowProvider: a turn whose text names a time asks the
// provider twice, the second time inside the window. When the recall's
// deadline runs out on that second call, the turn injects what the first
// answered, as a turn without time words would have; when the first call
// cannot finish either, the turn says recall_failed.
func TestTimeQuestionOnASlowProvider(t *testing.T) {
	for _, tc := range []struct {
		name  string
		stuck func(sdk.RecallQuery) bool
		want  SkipReason
	}{
		{"the window recall runs out of time", func(q sdk.RecallQuery) bool { return !q.Since.IsZero() }, SkipNone},
		{"every recall runs out of time", func(sdk.RecallQuery) bool { return true }, SkipRecallFailed},
	} {
		// In a bubble (testing/synctest) time passes only while every
		// goroutine waits: the recall's second runs out while the stuck
		// call waits, never while a loaded machine makes the first call.
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := newFixture(t, func(c *Config, _ *Options) { c.RecallTimeout = time.Second })
				r := rec("Coffee beans", "bought Ethiopian coffee beans")
				r.OccurredAt = testNow.Add(-24 * time.Hour)
				ids := f.add(r)
				f.p.SetHook(coordinatortest.MethodRecall, func(ctx context.Context, req any) error {
					if tc.stuck(req.(sdk.RecallQuery)) {
						<-ctx.Done()
						return ctx.Err()
					}
					return nil
				})
				res := f.turn(alice, "s", "which coffee did I buy yesterday?")
				if res.SkipReason != tc.want {
					t.Fatalf("the turn answered %q %v, want %q", res.SkipReason, res.RecordIDs, tc.want)
				}
				if tc.want == SkipNone && (len(res.RecordIDs) != 1 || res.RecordIDs[0] != ids[0]) {
					t.Fatalf("the turn injected %v, want %s", res.RecordIDs, ids[0])
				}
			})
		})
	}
}
