package coordinator

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"
	_ "time/tzdata" // the zone database, on a machine without one

	"github.com/memhost/memhost/sdk"
)

// windowedSelectorTurn runs a turn asking "coffee" with a selector that
// picks what pick answers for the ids of a record of 2020 and one of 2023
// (ids[0], ids[1]), under the window [2023, 2024).
func windowedSelectorTurn(t *testing.T, pick func(req sdk.SelectRequest, ids []string) []string) (res TurnInjection, ids []string) {
	t.Helper()
	sel := &recordingSelector{pick: func(req sdk.SelectRequest) (sdk.Selection, error) {
		return sdk.Selection{IDs: pick(req, ids), Coverage: sdk.CoverageSufficient}, nil
	}}
	f := newFixture(t, func(_ *Config, o *Options) { o.Selector = sel })
	old := rec("Coffee in 2020", "coffee beans")
	old.OccurredAt = time.Date(2020, 5, 1, 0, 0, 0, 0, time.UTC)
	fresh := rec("Coffee in 2023", "coffee beans again")
	fresh.OccurredAt = time.Date(2023, 5, 1, 0, 0, 0, 0, time.UTC)
	ids = f.add(old, fresh)
	ctx := WithRecallTime(context.Background(), RecallTime{
		Since: time.Date(2023, 1, 1, 0, 0, 0, 0, time.UTC), Until: time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)})
	res, err := f.c.InjectForTurn(ctx, alice, "", TextContent("coffee"))
	if err != nil {
		t.Fatal(err)
	}
	return res, ids
}

// TestSelectorTurnKeepsTheWindow: since/until are a hard filter on a turn
// with a selector too. The working set (rows without times) and the
// fetched picks went unfiltered, and a record outside the window was
// injected.
func TestSelectorTurnKeepsTheWindow(t *testing.T) {
	res, ids := windowedSelectorTurn(t, func(req sdk.SelectRequest, _ []string) []string {
		var rows []string
		for _, r := range req.Rows {
			rows = append(rows, r.ID)
		}
		return rows
	})
	if slices.Contains(res.RecordIDs, ids[0]) || !slices.Contains(res.RecordIDs, ids[1]) {
		t.Errorf("injected %v; want %s (2023) and not %s (2020, outside since/until [2023, 2024))", res.RecordIDs, ids[1], ids[0])
	}
}

// TestOccurredShownInTheRequestsZone: the host reads "last Saturday" in
// the offset of the request's now, and the envelope names the day of a
// record it found there in that offset too. It named it in UTC, "Sun",
// so the model was told the Saturday evening concert was on Sunday.
func TestOccurredShownInTheRequestsZone(t *testing.T) {
	f := newFixture(t, nil)
	pacific := time.FixedZone("", -7*3600)
	r := rec("Concert", "I went to the Zedd concert")
	r.OccurredAt = time.Date(2023, 5, 27, 22, 0, 0, 0, pacific).UTC()
	f.add(r)
	ctx := WithRecallTime(context.Background(), RecallTime{Now: time.Date(2023, 5, 30, 10, 0, 0, 0, pacific)})
	res, err := f.c.InjectForTurn(ctx, alice, "", TextContent("Which concert did I go to last Saturday?"))
	if err != nil || len(res.InjectedContext) != 1 {
		t.Fatalf("%v %+v", err, res)
	}
	if text := res.InjectedContext[0]; !strings.Contains(text, `occurred="Sat 2023-05-27 22:00 -07:00"`) {
		t.Errorf("the record of last Saturday (in now's offset) is labelled:\n%s", text)
	}
}

// TestDefaultNowIsUTC: a request without now reads its day words in UTC,
// whatever the host's zone (here its clock's), so every host of a
// deployment answers alike. "today" is 31 May in UTC at the clock's
// 30 May 20:00 -07:00: the record of 31 May 08:00 UTC is today's, the one
// of 30 May 10:00 UTC (that day's morning in -07:00) is not.
func TestDefaultNowIsUTC(t *testing.T) {
	pacific := time.FixedZone("", -7*3600)
	clock := time.Date(2023, 5, 30, 20, 0, 0, 0, pacific)
	f := newFixture(t, func(_ *Config, o *Options) { o.Now = func() time.Time { return clock } })
	utcToday := rec("Walk", "a walk by the lake")
	utcToday.OccurredAt = time.Date(2023, 5, 31, 8, 0, 0, 0, time.UTC)
	localToday := rec("Walk", "a walk by the pond")
	localToday.OccurredAt = time.Date(2023, 5, 30, 10, 0, 0, 0, time.UTC)
	ids := f.add(utcToday, localToday)
	p, err := f.c.provider("default")
	if err != nil {
		t.Fatal(err)
	}
	hits, err := f.c.timedRecall(context.Background(), p, sdk.RecallQuery{Realm: "default", Query: "which walk did I take today", Limit: 2})
	if err != nil {
		t.Fatal(err)
	}
	if len(hits) != 2 || hits[0].Record.ID != ids[0] {
		var got []string
		for _, h := range hits {
			got = append(got, h.Record.ID)
		}
		t.Errorf("hits %v; want %s (today in UTC) first", got, ids[0])
	}
}

// TestZoneIsTheOffsetSent: a now sent as "+00:00" names an offset, not a
// zone. Parsed on a host whose zone has that offset at that instant
// (Europe/London in January), it carries the host's zone (time.Parse),
// and an occurred time in summer was shown in that zone's summer offset,
// +01:00. Here the parsed time is built directly, so the test leaves the
// process's time.Local alone.
func TestZoneIsTheOffsetSent(t *testing.T) {
	london, err := time.LoadLocation("Europe/London")
	if err != nil {
		t.Fatalf("the zone database: %v", err)
	}
	occurred := time.Date(2023, 7, 1, 23, 30, 0, 0, time.UTC) // Sat 23:30 UTC
	for _, now := range []time.Time{
		time.Date(2023, 1, 10, 10, 0, 0, 0, time.UTC),
		time.Date(2023, 1, 10, 10, 0, 0, 0, london), // how "+00:00" parses there
	} {
		zone := zoneOf(WithRecallTime(context.Background(), RecallTime{Now: now}))
		if got, want := occurredLabel(occurred, zone), "Sat 2023-07-01 23:30 UTC"; got != want {
			t.Errorf("now %v: occurred labelled %q, want %q", now, got, want)
		}
	}
}

// TestSelectionEmptiedByTheWindowFallsBack: a selector whose only pick
// lies outside the request's window (an id from beyond the rows, or an
// earlier turn's sweep) has chosen nothing in it, and the turn falls back
// to the recall hits as for an empty selection; it injected nothing.
func TestSelectionEmptiedByTheWindowFallsBack(t *testing.T) {
	res, ids := windowedSelectorTurn(t, func(_ sdk.SelectRequest, ids []string) []string { return ids[:1] })
	if !slices.Equal(res.RecordIDs, []string{ids[1]}) {
		t.Errorf("injected %v (skip %q); want only the in-window hit %s, by the empty selection's fallback", res.RecordIDs, res.SkipReason, ids[1])
	}
}
