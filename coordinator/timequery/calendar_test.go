package timequery

import (
	"context"
	"math"
	"slices"
	"strings"
	"testing"
	"time"
	_ "time/tzdata" // the zones below, whatever the machine has

	"github.com/memhost/memhost/sdk"
)

func zone(t testing.TB, name string) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation(name)
	if err != nil {
		t.Fatal(err)
	}
	return loc
}

func utc(y int, m time.Month, day, h int) time.Time {
	return time.Date(y, m, day, h, 0, 0, 0, time.UTC)
}

// TestParseSkippedMidnight: where a clock change skips midnight
// (Paraguay and Chile start summer time at 00:00), a day begins at 01:00.
// time.Date answers 23:00 of the day before for such a midnight, which
// put "today" on the wrong date: its weekday, month and year decided
// every window of that day, and a day counted from it kept its hour.
func TestParseSkippedMidnight(t *testing.T) {
	asuncion, santiago := zone(t, "America/Asuncion"), zone(t, "America/Santiago")
	// 2023-10-01 (a Sunday) begins at 01:00 -03 in Asuncion, 04:00 UTC;
	// the day before at 00:00 -04, also 04:00 UTC.
	oct1 := time.Date(2023, 10, 1, 10, 0, 0, 0, asuncion)
	oct2 := time.Date(2023, 10, 2, 10, 0, 0, 0, asuncion)
	// 2023-09-03 (a Sunday) begins at 01:00 -03 in Santiago.
	sep3 := time.Date(2023, 9, 3, 10, 0, 0, 0, santiago)
	for _, tc := range []struct {
		query        string
		now          time.Time
		since, until time.Time
	}{
		{"what did I do today", oct1, utc(2023, 10, 1, 4), utc(2023, 10, 2, 3)},
		{"yesterday", oct1, utc(2023, 9, 30, 4), utc(2023, 10, 1, 4)},
		{"yesterday", oct2, utc(2023, 10, 1, 4), utc(2023, 10, 2, 3)},
		{"on Sunday", oct1, utc(2023, 10, 1, 4), utc(2023, 10, 2, 3)},
		{"in October", oct1, utc(2023, 10, 1, 4), utc(2023, 11, 1, 3)},
		{"this month", oct1, utc(2023, 10, 1, 4), utc(2023, 11, 1, 3)},
		{"last month", oct1, utc(2023, 9, 1, 4), utc(2023, 10, 1, 4)},
		{"on 2023-10-01", oct2, utc(2023, 10, 1, 4), utc(2023, 10, 2, 3)},
		{"on October 1st", oct2, utc(2023, 10, 1, 4), utc(2023, 10, 2, 3)},
		{"on Sunday", sep3, utc(2023, 9, 3, 4), utc(2023, 9, 4, 3)},
		{"last Saturday", sep3, utc(2023, 9, 2, 4), utc(2023, 9, 3, 4)},
	} {
		got := Parse(tc.query, tc.now)
		if !got.Since.Equal(tc.since) || !got.Until.Equal(tc.until) {
			t.Errorf("Parse(%q) at %v = [%v, %v); want [%v, %v)", tc.query, tc.now, got.Since.UTC(), got.Until.UTC(), tc.since, tc.until)
		}
	}
}

// TestParseCalendar: calendar arithmetic at the ends of months and
// years, and counted weekends.
func TestParseCalendar(t *testing.T) {
	wed, sun := d(2023, 5, 31).Add(10*time.Hour), d(2023, 5, 28).Add(10*time.Hour)
	for _, tc := range []struct {
		query        string
		now          time.Time
		since, until time.Time
	}{
		// A month before May 31st is February's last day, not March 3rd.
		{"3 months ago", wed, d(2023, 2, 13), d(2023, 3, 16)},
		{"over the past 3 months", d(2023, 5, 30), d(2023, 2, 28), d(2023, 5, 31)},
		// A year before a leap day is February 28th, not March 1st.
		{"a year ago", d(2024, 2, 29), d(2022, 8, 28), d(2023, 8, 28)},
		// A leap day without a year is the latest one up to today.
		{"on February 29", now, d(2020, 2, 29), d(2020, 3, 1)},
		{"on Feb 29th", d(2024, 2, 10), d(2020, 2, 29), d(2020, 3, 1)},
		{"on February 29", d(2024, 3, 1), d(2024, 2, 29), d(2024, 3, 1)},
		{"on February 30", d(2024, 3, 1), time.Time{}, time.Time{}},
		// Counted weekends count back from the last one, as "last weekend"
		// does: on a Wednesday one weekend ago is the one just over.
		{"a weekend ago", wed, d(2023, 5, 27), d(2023, 5, 29)},
		{"two weekends ago", wed, d(2023, 5, 20), d(2023, 5, 22)},
		{"two weekends ago", sun, d(2023, 5, 13), d(2023, 5, 15)},
		{"two weekends ago", d(2023, 5, 27), d(2023, 5, 13), d(2023, 5, 15)},
		// A day a store holds only as the zero time is no window: the
		// window would have an until and no since.
		{"on 0001-01-01", now, time.Time{}, time.Time{}},
	} {
		got := Parse(tc.query, tc.now)
		if !got.Since.Equal(tc.since) || !got.Until.Equal(tc.until) {
			t.Errorf("Parse(%q) at %v = [%v, %v); want [%v, %v)", tc.query, tc.now.Format(time.DateOnly), got.Since, got.Until, tc.since, tc.until)
		}
	}
}

// dstZones are the zones FuzzParseZones reads now in: days that
// begin at 01:00 (Asuncion, Santiago, Havana), at 01:00 by the zone
// after (Beirut, Cairo), a half-hour change (Lord Howe), a skipped day
// (Apia, 2011-12-30).
var dstZones = []string{"UTC", "America/Asuncion", "America/Santiago", "America/Havana", "Asia/Beirut",
	"Africa/Cairo", "America/New_York", "Australia/Lord_Howe", "Pacific/Apia", "Asia/Kolkata"}

// FuzzParseZones: in any zone, a window is well-formed, and one of
// whole days (every expression but hours) begins and ends where days
// begin.
func FuzzParseZones(f *testing.F) {
	for _, tc := range parseCases {
		f.Add(tc.query, uint8(1), time.Date(2023, 10, 1, 10, 0, 0, 0, time.UTC).UnixMilli())
	}
	f.Add("yesterday", uint8(1), time.Date(2023, 10, 2, 14, 0, 0, 0, time.UTC).UnixMilli())
	f.Add("on Sunday, last Saturday", uint8(2), time.Date(2023, 9, 3, 14, 0, 0, 0, time.UTC).UnixMilli())
	f.Add("yesterday", uint8(8), time.Date(2011, 12, 31, 12, 0, 0, 0, time.UTC).UnixMilli())
	f.Add("in October", uint8(1), time.Date(2023, 10, 1, 14, 0, 0, 0, time.UTC).UnixMilli())
	f.Add("what did I do yesterday", uint8(3), time.Date(2023, 11, 6, 14, 0, 0, 0, time.UTC).UnixMilli())
	f.Add("today", uint8(3), time.Date(2023, 11, 5, 14, 0, 0, 0, time.UTC).UnixMilli())
	f.Add("yesterday", uint8(4), time.Date(2023, 10, 30, 14, 0, 0, 0, time.UTC).UnixMilli())
	f.Add("last week", uint8(7), time.Date(2023, 10, 3, 14, 0, 0, 0, time.UTC).UnixMilli())
	f.Add("on 0001-01-01", uint8(0), time.Date(2023, 10, 1, 14, 0, 0, 0, time.UTC).UnixMilli())
	locs := make([]*time.Location, len(dstZones))
	for i, name := range dstZones {
		locs[i] = zone(f, name)
	}
	f.Fuzz(func(t *testing.T, query string, z uint8, ms int64) {
		at := time.UnixMilli(ms).In(locs[int(z)%len(locs)])
		if at.Year() < 2 || at.Year() > 9000 {
			return
		}
		got := Parse(query, at)
		if got.Since.IsZero() != got.Until.IsZero() || !got.Since.IsZero() && !got.HasWindow() {
			t.Fatalf("Parse(%q) at %v = [%v, %v): a window needs both ends, in order", query, at, got.Since, got.Until)
		}
		if err := sdk.ValidateWindow(got.Since, got.Until); err != nil {
			t.Fatalf("Parse(%q) at %v = a window a store cannot hold: %v", query, at, err)
		}
		if !got.HasWindow() || strings.Contains(strings.ToLower(query), "hour") {
			return
		}
		for _, end := range []time.Time{got.Since, got.Until} {
			if end.Location() != at.Location() || end.Add(-time.Nanosecond).Day() == end.Day() {
				t.Fatalf("Parse(%q) at %v = [%v, %v): %v is not where a day begins in %v", query, at, got.Since, got.Until, end, at.Location())
			}
		}
	})
}

// TestRankExtremes: a score a plugin gives as infinity, and
// records far apart in time. +Inf times a boost of 0 is NaN, which sorts
// last: the best hit fell to the bottom when it lay outside the window.
// A time.Duration saturates at 292 years: a record of 9023 (a typo for
// 2023) was a negative offset past the window and took a boost of ~29,
// thirty times the score it had, over every record in the window.
func TestRankExtremes(t *testing.T) {
	sat := d(2023, 5, 27).Add(9 * time.Hour)
	for _, tc := range []struct {
		name  string
		query string
		hits  []sdk.Hit
		want  []string
	}{
		{"an infinite score outside the window stays first", "what did I do last Saturday",
			[]sdk.Hit{hit("inf", math.Inf(1), d(2020, 1, 1)), hit("saturday", 2, sat)},
			[]string{"inf", "saturday"}},
		{"a negative infinite score inside the window stays last", "what did I do last Saturday",
			[]sdk.Hit{hit("saturday", 2, sat), hit("-inf", math.Inf(-1), sat), hit("nan", math.NaN(), sat)},
			[]string{"saturday", "-inf", "nan"}},
		{"a record millennia after the window gains nothing", "what did I do in 2021",
			[]sdk.Hit{hit("far", 1, d(9023, 1, 1)), hit("in-2021", 1, d(2021, 6, 1))},
			[]string{"in-2021", "far"}},
		{"the latest of records centuries apart", "what is my current address",
			[]sdk.Hit{hit("1500", 1, d(1500, 1, 1)), hit("1900", 1, d(1900, 1, 1)), hit("2023", 1, d(2023, 1, 1))},
			[]string{"2023", "1900", "1500"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hits := slices.Clone(tc.hits)
			Rank(hits, Parse(tc.query, now))
			if got := ids(hits); !slices.Equal(got, tc.want) {
				t.Fatalf("Rank = %v, want %v", got, tc.want)
			}
			for _, h := range hits {
				if h.Score > 1e6 && !math.IsInf(h.Score, 1) {
					t.Errorf("%s scored %v", h.Record.ID, h.Score)
				}
				if math.IsNaN(h.Score) && h.Record.ID != "nan" {
					t.Errorf("%s scored NaN", h.Record.ID)
				}
			}
			if math.IsInf(tc.hits[0].Score, 1) && !math.IsInf(hits[0].Score, 1) {
				t.Errorf("the infinite score became %v", hits[0].Score)
			}
		})
	}
	far := []sdk.Hit{hit("far", 1, d(9023, 1, 1))}
	Rank(far, Parse("what did I do in 2021", now))
	if far[0].Score != 1 {
		t.Errorf("a record seven thousand years past the window scored %v, want 1 (no boost)", far[0].Score)
	}
}

// TestRecallNegativeLimit: a query that names a time took a
// negative limit for a count to cut the answer to and panicked; it is
// the provider's to refuse, as it is for a query that names none.
func TestRecallNegativeLimit(t *testing.T) {
	recall := func(_ context.Context, q sdk.RecallQuery) ([]sdk.Hit, error) {
		if q.Limit < 0 {
			return nil, sdk.ErrInvalid
		}
		return []sdk.Hit{hit("a", 1, now), hit("b", 1, now)}, nil
	}
	for _, query := range []string{"hiking", "my latest hike", "my hike last Saturday"} {
		hits, err := Recall(context.Background(), recall, sdk.RecallQuery{Realm: "r", Query: query, Limit: -1}, now)
		if err == nil {
			t.Errorf("Recall(%q, limit -1) = %v, want the provider's refusal", query, ids(hits))
		}
	}
}
