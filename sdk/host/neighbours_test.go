package host

import (
	"errors"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/memhost/memhost/sdk"
)

// threaded is an active record of realm "a" at seq of thread in scope.
func threaded(id string, scope sdk.Scope, thread string, seq int64) sdk.Record {
	return sdk.Record{ID: id, Realm: "a", Scope: scope, Kind: sdk.KindEpisode, Title: "turn " + id, Status: sdk.StatusActive,
		Trust: sdk.TrustAgentObserved, Thread: &sdk.Thread{ID: thread, Seq: seq}}
}

// TestCheckNeighbours: the host refuses a recall answer whose neighbours
// were not asked for, belong to another realm, scope or thread, lie
// further from their hit than asked or at its own place, are not active,
// were excluded, repeat their hit or another neighbour, or are more than
// the places asked can hold; another hit may be a neighbour.
func TestCheckNeighbours(t *testing.T) {
	mine := sdk.IdentityScope("me")
	theirs := sdk.IdentityScope("someone-else")
	at := func(seq int64) sdk.Record { return threaded("n"+string(rune('0'+seq)), mine, "t", seq) }
	with := func(r sdk.Record, edit func(*sdk.Record)) sdk.Record { edit(&r); return r }
	hit5 := threaded("h5", mine, "t", 5)
	plain := with(threaded("plain", mine, "t", 0), func(r *sdk.Record) { r.Thread = nil })
	hitOf := func(r sdk.Record, ns ...sdk.Record) sdk.Hit { return sdk.Hit{Record: r, Score: 1, Neighbours: ns} }
	day := time.Date(2026, 5, 14, 0, 0, 0, 0, time.UTC)
	on := func(r sdk.Record, at time.Time) sdk.Record { r.CreatedAt, r.UpdatedAt = at, at; return r }
	for _, tc := range []struct {
		name string
		q    sdk.RecallQuery // Realm "a" is set
		hits []sdk.Hit
		// problem is a part of the refusal's message; "" when the answer
		// keeps the contract.
		problem string
	}{
		{"span 2 within the contract", sdk.RecallQuery{Neighbours: 2}, []sdk.Hit{hitOf(hit5, at(3), at(4), at(6), at(7))}, ""},
		{"span 1 within the contract", sdk.RecallQuery{Neighbours: 1}, []sdk.Hit{hitOf(hit5, at(4), at(6))}, ""},
		{"fewer than asked", sdk.RecallQuery{Neighbours: 2}, []sdk.Hit{hitOf(hit5, at(6))}, ""},
		{"two hits, each with its own", sdk.RecallQuery{Neighbours: 1},
			[]sdk.Hit{hitOf(hit5, at(4)), hitOf(threaded("x1", theirs, "t", 1), threaded("x2", theirs, "t", 2))}, ""},
		{"a hit in no thread without neighbours", sdk.RecallQuery{Neighbours: 1}, []sdk.Hit{hitOf(plain), hitOf(hit5, at(6))}, ""},
		{"not asked for", sdk.RecallQuery{}, []sdk.Hit{hitOf(hit5, at(4))}, "not asked for"},
		{"the hit is in no thread", sdk.RecallQuery{Neighbours: 1}, []sdk.Hit{hitOf(plain, at(4))}, "no thread"},
		{"an unsafe id", sdk.RecallQuery{Neighbours: 1}, []sdk.Hit{hitOf(hit5, with(at(4), func(r *sdk.Record) { r.ID = "../n4" }))}, "no valid id"},
		{"no id", sdk.RecallQuery{Neighbours: 1}, []sdk.Hit{hitOf(hit5, with(at(4), func(r *sdk.Record) { r.ID = "" }))}, "no valid id"},
		{"another realm", sdk.RecallQuery{Neighbours: 1}, []sdk.Hit{hitOf(hit5, with(at(4), func(r *sdk.Record) { r.Realm = "tenant-b" }))}, "another realm or scope"},
		{"another scope", sdk.RecallQuery{Neighbours: 1}, []sdk.Hit{hitOf(hit5, threaded("x4", theirs, "t", 4))}, "another realm or scope"},
		{"another scope, though the query asked for it", sdk.RecallQuery{Neighbours: 1, Scopes: []sdk.Scope{mine, theirs}},
			[]sdk.Hit{hitOf(hit5, threaded("x4", theirs, "t", 4))}, "another realm or scope"},
		{"another thread", sdk.RecallQuery{Neighbours: 1}, []sdk.Hit{hitOf(hit5, threaded("u4", mine, "u", 4))}, "not beside"},
		{"in no thread", sdk.RecallQuery{Neighbours: 1}, []sdk.Hit{hitOf(hit5, with(at(4), func(r *sdk.Record) { r.Thread = nil }))}, "not beside"},
		{"too far before", sdk.RecallQuery{Neighbours: 1}, []sdk.Hit{hitOf(hit5, at(3))}, "not beside"},
		{"too far after", sdk.RecallQuery{Neighbours: 2}, []sdk.Hit{hitOf(hit5, at(8))}, "not beside"},
		{"at the top of the seq range", sdk.RecallQuery{Neighbours: 2},
			[]sdk.Hit{hitOf(threaded("top", mine, "t", math.MaxInt64), threaded("below", mine, "t", math.MaxInt64-2))}, ""},
		{"at a negative seq, beside a hit at the top of the range", sdk.RecallQuery{Neighbours: 1},
			[]sdk.Hit{hitOf(threaded("top", mine, "t", math.MaxInt64), threaded("neg", mine, "t", -1))}, "not beside"},
		{"at a negative seq", sdk.RecallQuery{Neighbours: 1}, []sdk.Hit{hitOf(threaded("h0", mine, "t", 0), threaded("neg", mine, "t", -1))}, "not beside"},
		{"at the hit's own seq", sdk.RecallQuery{Neighbours: 1}, []sdk.Hit{hitOf(hit5, threaded("n5", mine, "t", 5))}, "not beside"},
		{"superseded", sdk.RecallQuery{Neighbours: 1}, []sdk.Hit{hitOf(hit5, with(at(4), func(r *sdk.Record) { r.Status = sdk.StatusSuperseded }))}, "not active"},
		{"tombstoned", sdk.RecallQuery{Neighbours: 1}, []sdk.Hit{hitOf(hit5, with(at(4), func(r *sdk.Record) { r.Status = sdk.StatusTombstoned }))}, "not active"},
		{"excluded", sdk.RecallQuery{Neighbours: 1, ExcludeIDs: []string{"n4"}}, []sdk.Hit{hitOf(hit5, at(4))}, "excluded"},
		{"repeating its own hit", sdk.RecallQuery{Neighbours: 1}, []sdk.Hit{hitOf(hit5, with(at(4), func(r *sdk.Record) { r.ID = "h5" }))}, "repeats"},
		{"a hit beside another, not as its neighbour", sdk.RecallQuery{Neighbours: 1}, []sdk.Hit{hitOf(hit5, at(4)), hitOf(at(6))}, ""},
		{"being another hit", sdk.RecallQuery{Neighbours: 1}, []sdk.Hit{hitOf(hit5, at(6)), hitOf(at(6))}, ""},
		{"more than its places hold", sdk.RecallQuery{Neighbours: 1}, []sdk.Hit{hitOf(hit5, slices.Repeat([]sdk.Record{at(4)}, 2*sdk.MaxPlaceRecords+1)...)}, "more than"},
		{"being a later hit's neighbour too", sdk.RecallQuery{Neighbours: 1}, []sdk.Hit{hitOf(hit5, at(6)), hitOf(at(7), at(6))}, "repeats"},
		{"inside the time window", sdk.RecallQuery{Neighbours: 1, Since: day, Until: day.Add(24 * time.Hour)},
			[]sdk.Hit{hitOf(on(hit5, day), on(at(4), day.Add(time.Hour)), on(at(6), day))}, ""},
		{"before the time window", sdk.RecallQuery{Neighbours: 1, Since: day},
			[]sdk.Hit{hitOf(on(hit5, day), on(at(4), day.Add(-time.Millisecond)))}, "outside the query's time window"},
		{"at the window's end", sdk.RecallQuery{Neighbours: 1, Until: day},
			[]sdk.Hit{hitOf(on(hit5, day.Add(-time.Hour)), on(at(6), day))}, "outside the query's time window"},
		{"saved inside the window, happened before it", sdk.RecallQuery{Neighbours: 1, Since: day},
			[]sdk.Hit{hitOf(on(hit5, day), with(on(at(4), day), func(r *sdk.Record) { r.OccurredAt = day.AddDate(-20, 0, 0) }))}, "outside the query's time window"},
		{"twice beside one hit", sdk.RecallQuery{Neighbours: 1}, []sdk.Hit{hitOf(hit5, at(4), at(4))}, "repeats"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := tc.q
			q.Realm = "a"
			err := checkHits(q, tc.hits)
			if tc.problem == "" {
				if err != nil {
					t.Fatalf("an answer within the contract was refused: %v", err)
				}
				return
			}
			if !errors.Is(err, ErrBadAnswer) {
				t.Fatalf("err = %v, want the answer refused as breaking the protocol", err)
			}
			if !strings.Contains(err.Error(), "neighbour") || !strings.Contains(err.Error(), tc.problem) {
				t.Errorf("err = %v, want it to name a neighbour that %s", err, tc.problem)
			}
			for _, leak := range []string{"tenant-b", "someone-else"} {
				if strings.Contains(err.Error(), leak) {
					t.Errorf("the error names another tenant's %q: %v", leak, err)
				}
			}
		})
	}
}
