package timequery

import (
	"cmp"
	"context"
	"math"
	"slices"
	"time"

	"github.com/memhost/memhost/coordinator/internal/score"
	"github.com/memhost/memhost/sdk"
)

// Boosts: a hit's score grows by this share of itself. They only reorder
// hits of close text relevance: a record the query's words barely match
// does not overtake a strong match for being of the right week. Tuned on
// the LongMemEval-S dev split (docs/benchmarks.md): at 0.5 and 0.3 the
// window pulled multi-session questions' evidence out of the top ten
// (turn recall@10 0.805 against 0.816 without time ranking); at 0.1 and
// 0.05 they break near-ties and cost 0.006.
const (
	// WindowBoost is for a record that happened inside the query's window;
	// one outside it gets a share falling linearly to nothing at a
	// window's width away, so "two weeks ago" still favours the day next
	// to the window.
	WindowBoost = 0.1
	// OrderBoost is for the newest (OrderLatest) or oldest (OrderEarliest)
	// of the candidates, falling linearly to nothing for the other end.
	OrderBoost = 0.05
)

// Rank rescores hits by in and sorts them best first; equal scores keep
// their order. A record's time is its sdk.Record.When.
func Rank(hits []sdk.Hit, in Intent) {
	if in.IsZero() || len(hits) == 0 {
		return
	}
	boost := make([]float64, len(hits))
	if in.HasWindow() {
		width := seconds(in.Since, in.Until)
		for i := range hits {
			t := when(hits[i].Record, in.Since.Location())
			var off float64
			switch {
			case t.Before(in.Since):
				off = seconds(t, in.Since)
			case !t.Before(in.Until):
				off = seconds(in.Until, t) + 1e-3
			}
			if off < width {
				boost[i] += WindowBoost * (1 - off/width)
			}
		}
	}
	if in.Order != OrderNone {
		// The position of each hit's time between the oldest and the
		// newest candidate, 0 to 1.
		lo, hi := hits[0].Record.When(), hits[0].Record.When()
		for i := range hits {
			t := hits[i].Record.When()
			if t.Before(lo) {
				lo = t
			}
			if t.After(hi) {
				hi = t
			}
		}
		if span := seconds(lo, hi); span > 0 {
			for i := range hits {
				pos := seconds(lo, hits[i].Record.When()) / span
				if in.Order == OrderEarliest {
					pos = 1 - pos
				}
				boost[i] += OrderBoost * pos
			}
		}
	}
	type scored struct {
		hit sdk.Hit
		at  int
	}
	all := make([]scored, len(hits))
	for i, h := range hits {
		// |score|, so a provider scoring below zero is boosted upward too;
		// an infinite score stays as it is (infinity times 0 is NaN).
		if boost[i] != 0 && !math.IsInf(h.Score, 0) {
			h.Score = score.Bound(h.Score + max(h.Score, -h.Score)*boost[i])
		}
		all[i] = scored{h, i}
	}
	slices.SortFunc(all, func(a, b scored) int {
		return cmp.Or(cmp.Compare(b.hit.Score, a.hit.Score), cmp.Compare(a.at, b.at))
	})
	for i := range all {
		hits[i] = all[i].hit
	}
}

// IsDate reports whether an occurred_at is a date given without a time:
// midnight UTC.
func IsDate(t time.Time) bool {
	t = t.UTC()
	return t.Hour() == 0 && t.Minute() == 0 && t.Second() == 0
}

// when answers the time r happened for a window read in loc: an
// occurred_at that is a date (IsDate) is that day wherever it is read, as
// the envelope shows it, so it begins at the day's first instant in loc,
// not at midnight UTC, which is the day before west of Greenwich.
func when(r sdk.Record, loc *time.Location) time.Time {
	if r.OccurredAt.IsZero() || !IsDate(r.OccurredAt) {
		return r.When()
	}
	y, m, d := r.OccurredAt.UTC().Date()
	return midnight(y, m, d, loc)
}

// dateSpan answers [since, until) widened to hold the occurred_at of every
// date the window's days are (when), so a recall filtering on instants
// finds the records of those dates too.
func dateSpan(since, until time.Time) (time.Time, time.Time) {
	y, m, d := since.Date()
	if t := time.Date(y, m, d, 0, 0, 0, 0, time.UTC); t.Before(since) {
		since = t
	}
	y, m, d = until.Date()
	if t := time.Date(y, m, d, 0, 0, 0, 0, time.UTC); t.After(until) {
		until = t
	}
	return since, until
}

// seconds answers b-a in seconds. time.Time.Sub saturates at 292 years,
// and a record may carry any year from 1 to 9999.
func seconds(a, b time.Time) float64 {
	return float64(b.Unix()-a.Unix()) + float64(b.Nanosecond()-a.Nanosecond())/1e9
}

// Candidates is how many hits a time-aware recall of limit asks the
// provider for: the time ranking can lift a record from below the cut.
func Candidates(limit int) int {
	return min(sdk.MaxBatch, max(3*limit, limit+20))
}

// RecallFunc is a provider's recall.
type RecallFunc func(context.Context, sdk.RecallQuery) ([]sdk.Hit, error)

// Recall answers q through recall, ranked by the time q's text speaks of
// relative to now. A query that names no time is passed through as it is.
// One that does is asked for Candidates(limit) hits; when it names a
// window, the best limit hits inside the window (and inside q's own
// since/until) are asked for too, so a record of the right week competes
// even when the text ranks it far down. The answers merge by id; a hit
// only the window answered is scored below the wide answer's last (see
// belowWide). The merged hits are ranked by Rank and cut to the limit.
// Only the wide recall's failure fails the call: the windowed one refines
// its answer, so a time question costs no more than a plain one when the
// second round trip cannot finish in time.
func Recall(ctx context.Context, recall RecallFunc, q sdk.RecallQuery, now time.Time) ([]sdk.Hit, error) {
	in := Parse(q.Query, now)
	if in.IsZero() || q.Limit < 0 {
		// A negative limit is the provider's to refuse.
		return recall(ctx, q)
	}
	limit := cmp.Or(q.Limit, sdk.DefaultRecallLimit)
	wide := q
	wide.Limit = Candidates(limit)
	hits, err := recall(ctx, wide)
	if err != nil {
		return nil, err
	}
	if in.HasWindow() {
		win := q
		win.Limit = limit
		since, until := dateSpan(in.Since, in.Until)
		if q.Since.IsZero() || since.After(q.Since) {
			win.Since = since
		}
		if q.Until.IsZero() || until.Before(q.Until) {
			win.Until = until
		}
		if win.Since.Before(win.Until) {
			if more, err := recall(ctx, win); err == nil {
				var only []sdk.Hit
				for _, h := range more {
					if !slices.ContainsFunc(hits, func(o sdk.Hit) bool { return o.Record.ID == h.Record.ID }) {
						only = append(only, h)
					}
				}
				hits = append(hits, belowWide(hits, only)...)
			}
		}
	}
	Rank(hits, in)
	return hits[:min(limit, len(hits))], nil
}

// belowWide answers the hits only the window answered, rescored so none
// outscores the wide answer's last hit, their order kept. A hit the wide
// answer left out scores no higher than its last over all records; the
// window's own score says so only where a score does not depend on the
// query's filters. BM25 does not, so lexical hits mostly come back
// unchanged (a question ending in choices merges its answers by share of
// each answer's top, which does). A hybrid score does: it is min-max normalised over the candidates the
// filters let through, and the best of the window's few would otherwise
// come back near the top score of all.
func belowWide(wide, only []sdk.Hit) []sdk.Hit {
	if len(wide) == 0 || len(only) == 0 {
		return only
	}
	floor := wide[0].Score
	for _, h := range wide {
		floor = min(floor, h.Score)
	}
	top := only[0].Score
	for _, h := range only {
		top = max(top, h.Score)
	}
	if !(top > floor) || math.IsInf(top, 0) || math.IsInf(floor, 0) {
		return only // already below, or scores no arithmetic can place
	}
	out := slices.Clone(only)
	for i := range out {
		// Bounded: top-floor of two finite scores of opposite signs can
		// overflow.
		if floor > 0 && out[i].Score > 0 {
			out[i].Score = score.Bound(out[i].Score * (floor / top))
		} else {
			out[i].Score = score.Bound(out[i].Score - (top - floor))
		}
	}
	return out
}
