package coordinator

import (
	"context"
	"time"

	"github.com/memhost/memhost/coordinator/timequery"
	"github.com/memhost/memhost/sdk"
)

// RecallTime is a request's view of time for its recalls: Now is the
// reference the query's time expressions ("last Saturday") are read
// against, zero meaning the host's clock; Since and Until, when set,
// keep records whose sdk.Record.When lies in [Since, Until).
type RecallTime struct {
	Now, Since, Until time.Time
}

type recallTimeKey struct{}

// WithRecallTime makes the recalls made for ctx read time as rt. It rides
// the context so every surface (a turn, a build, the guide) passes it the
// same way without widening their signatures.
func WithRecallTime(ctx context.Context, rt RecallTime) context.Context {
	return context.WithValue(ctx, recallTimeKey{}, rt)
}

// timedRecall is the provider's recall of q, its hits ranked by the time
// q's text speaks of (timequery.Recall), with the request's window and
// reference time from ctx.
func (c *Coordinator) timedRecall(ctx context.Context, p provider, q sdk.RecallQuery) ([]sdk.Hit, error) {
	rt, _ := ctx.Value(recallTimeKey{}).(RecallTime)
	q.Since, q.Until = rt.Since, rt.Until
	now := rt.Now
	if now.IsZero() {
		now = c.now()
	}
	return timequery.Recall(ctx, p.Recall, q, now)
}
