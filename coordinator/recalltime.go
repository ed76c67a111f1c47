package coordinator

import (
	"context"
	"time"

	"github.com/memhost/memhost/coordinator/alternatives"
	"github.com/memhost/memhost/coordinator/speaker"
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

// CheckSentTime refuses a time a client sent (over HTTP or MCP) that would
// not be taken as sent: one outside the years 1-9999 that every store and
// the JSON form of a time hold (a stored expiry in year 10000 could no
// longer be answered), and the zero time, 0001-01-01T00:00:00Z (or the same
// instant at another offset), which every layer reads as "no time": an
// occurred_at dropped, an expiry of year 1 kept as none, a now of year 1
// read as the host's clock. A time inside the zero time's first
// millisecond is refused too: kept in whole milliseconds, as the wire and
// every store keep a time, it is the zero time.
func CheckSentTime(field string, t time.Time) error {
	if t.Truncate(time.Millisecond).IsZero() {
		return &sdk.FieldError{Field: field, Problem: "is 0001-01-01T00:00:00Z, the zero time, in whole milliseconds (as every time is kept), which stands for no time; leave the field out instead", Err: sdk.ErrInvalid}
	}
	return sdk.CheckTime(field, t)
}

// RecordTimes are the times a record as sent (an import line) may carry,
// as pointers: decoded into a record, the zero time sent would be read as
// absent, and kept as none.
type RecordTimes struct {
	CreatedAt  *time.Time `json:"created_at"`
	UpdatedAt  *time.Time `json:"updated_at"`
	ExpiresAt  *time.Time `json:"expires_at"`
	LastUsedAt *time.Time `json:"last_used_at"`
	OccurredAt *time.Time `json:"occurred_at"`
}

// Check refuses a time given as the zero instant (CheckSentTime).
func (t RecordTimes) Check() error {
	for _, f := range []struct {
		name string
		t    *time.Time
	}{{"created_at", t.CreatedAt}, {"updated_at", t.UpdatedAt}, {"expires_at", t.ExpiresAt}, {"last_used_at", t.LastUsedAt}, {"occurred_at", t.OccurredAt}} {
		if f.t != nil {
			if err := CheckSentTime(f.name, *f.t); err != nil {
				return err
			}
		}
	}
	return nil
}

type recallTimeKey struct{}

// WithRecallTime makes the recalls made for ctx read time as rt. It rides
// the context so every surface (a turn, a build, the guide) passes it the
// same way without widening their signatures.
func WithRecallTime(ctx context.Context, rt RecallTime) context.Context {
	return context.WithValue(ctx, recallTimeKey{}, rt)
}

// windowOf answers the request's since/until (WithRecallTime) as a query
// whose InWindow holds a record to them.
func windowOf(ctx context.Context) *sdk.RecallQuery {
	rt, _ := ctx.Value(recallTimeKey{}).(RecallTime)
	return &sdk.RecallQuery{Since: rt.Since, Until: rt.Until}
}

// zoneOf answers the zone of the request's now (WithRecallTime), in which
// its day words are read and occurred times shown; nil when it gave none.
func zoneOf(ctx context.Context) *time.Location {
	rt, _ := ctx.Value(recallTimeKey{}).(RecallTime)
	if rt.Now.IsZero() {
		return nil
	}
	return atItsOffset(rt.Now).Location()
}

// atItsOffset answers t in a fixed zone of its own UTC offset. A time
// parsed from RFC 3339 carries the host's local zone when that zone has
// the same offset at that instant (time.Parse), and the local zone's
// offset moves with summer time: days would begin, and occurred times
// show, by the host's zone rather than by the offset the client sent.
func atItsOffset(t time.Time) time.Time {
	_, offset := t.Zone()
	if offset == 0 {
		return t.UTC()
	}
	return t.In(time.FixedZone("", offset))
}

// timedRecall is the provider's recall of q, its hits ranked by the time
// q's text speaks of (timequery.Recall), with the request's window and
// reference time from ctx (ReadQuery).
func (c *Coordinator) timedRecall(ctx context.Context, p provider, q sdk.RecallQuery) ([]sdk.Hit, error) {
	rt, _ := ctx.Value(recallTimeKey{}).(RecallTime)
	q.Since, q.Until = rt.Since, rt.Until
	now := rt.Now
	if now.IsZero() {
		// UTC, not the host's zone: every host reads day words alike.
		now = c.now().UTC()
	}
	return ReadQuery(ctx, p.Recall, q, now)
}

// ReadQuery recalls q through recall as every surface does (a turn, a
// build, the guide, POST /v1/recall, MCP's memory_recall): its hits
// ranked by the time its text speaks of relative to now
// (timequery.Recall), a question ending in choices recalled per choice as
// well (alternatives.Wrap), and the user's own conversation turns ranked
// higher unless it asks what the assistant said (speaker.Wrap).
func ReadQuery(ctx context.Context, recall func(context.Context, sdk.RecallQuery) ([]sdk.Hit, error), q sdk.RecallQuery, now time.Time) ([]sdk.Hit, error) {
	now = atItsOffset(now)
	return speaker.Wrap(func(ctx context.Context, q sdk.RecallQuery) ([]sdk.Hit, error) {
		return timequery.Recall(ctx, alternatives.Wrap(recall), q, now)
	})(ctx, q)
}
