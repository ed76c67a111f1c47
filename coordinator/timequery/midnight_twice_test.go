package timequery

import (
	"testing"
	"time"
)

// TestParseRepeatedMidnight: where a clock set back shows midnight twice,
// a day begins at the first (time.Date answers the second east of UTC,
// which left the day's first hour out of "today" and in "yesterday");
// where the clock went back to the day before in between, the day begins
// once its date turns for good, so the hour read twice stays in the day
// its clock shows.
func TestParseRepeatedMidnight(t *testing.T) {
	amman, vostok, moncton := zone(t, "Asia/Amman"), zone(t, "Antarctica/Vostok"), zone(t, "America/Moncton")
	// Amman, 2015-10-30: 01:00 +03 went back to 00:00 +02.
	amman30 := time.Date(2015, 10, 29, 21, 30, 0, 0, time.UTC).In(amman) // 00:30 +03, the first pass
	amman31 := time.Date(2015, 10, 31, 10, 0, 0, 0, amman)
	// Vostok, 2023-12-18: 02:00 +07 went back to 00:00 +05.
	vostok18 := time.Date(2023, 12, 17, 17, 30, 0, 0, time.UTC).In(vostok) // 00:30 +07
	// Moncton, 1993-10-31: 00:01 -03 went back to 23:01 -04 of October 30th.
	moncton30 := time.Date(1993, 10, 31, 3, 30, 0, 0, time.UTC).In(moncton) // 23:30 -04 on the 30th, read twice
	moncton31 := time.Date(1993, 10, 31, 10, 0, 0, 0, moncton)
	for _, tc := range []struct {
		query        string
		now          time.Time
		since, until time.Time
	}{
		{"what did I do today", amman30, time.Date(2015, 10, 29, 21, 0, 0, 0, time.UTC), time.Date(2015, 10, 30, 22, 0, 0, 0, time.UTC)},
		{"yesterday", amman31, time.Date(2015, 10, 29, 21, 0, 0, 0, time.UTC), time.Date(2015, 10, 30, 22, 0, 0, 0, time.UTC)},
		{"on 2015-10-30", amman31, time.Date(2015, 10, 29, 21, 0, 0, 0, time.UTC), time.Date(2015, 10, 30, 22, 0, 0, 0, time.UTC)},
		{"on Friday", amman31, time.Date(2015, 10, 29, 21, 0, 0, 0, time.UTC), time.Date(2015, 10, 30, 22, 0, 0, 0, time.UTC)},
		{"today", vostok18, time.Date(2023, 12, 17, 17, 0, 0, 0, time.UTC), time.Date(2023, 12, 18, 19, 0, 0, 0, time.UTC)},
		{"today", moncton30, time.Date(1993, 10, 30, 3, 0, 0, 0, time.UTC), time.Date(1993, 10, 31, 4, 0, 0, 0, time.UTC)},
		{"yesterday", moncton31, time.Date(1993, 10, 30, 3, 0, 0, 0, time.UTC), time.Date(1993, 10, 31, 4, 0, 0, 0, time.UTC)},
	} {
		got := Parse(tc.query, tc.now)
		if !got.Since.Equal(tc.since) || !got.Until.Equal(tc.until) {
			t.Errorf("Parse(%q) at %v = [%v, %v); want [%v, %v)", tc.query, tc.now, got.Since.UTC(), got.Until.UTC(), tc.since, tc.until)
		}
		if tc.query == "today" || tc.query == "what did I do today" {
			if tc.now.Before(got.Since) || !tc.now.Before(got.Until) {
				t.Errorf("Parse(%q) at %v: now is outside its own day [%v, %v)", tc.query, tc.now, got.Since, got.Until)
			}
		}
	}
}

// TestEveryInstantIsInItsDay walks the clock changes of zones that set
// their clocks around midnight, forwards or back, and checks that each
// instant near one lies in the day its clock reads: day(now) <= now <
// the next day. The exception is an instant whose clock is later set back
// to the day before (Casey on 2010-03-05 went from 02:00 back to 23:00):
// that day begins once its date turns for good, and the instants read
// before belong to the day before.
func TestEveryInstantIsInItsDay(t *testing.T) {
	for _, name := range []string{
		"Asia/Amman", "Asia/Gaza", "Asia/Hebron", "Asia/Jerusalem", "Asia/Beirut", "Asia/Damascus", "Asia/Tehran",
		"Antarctica/Vostok", "Antarctica/Casey", "Antarctica/Davis", "Asia/Chita", "Asia/Magadan", "Asia/Colombo",
		"America/Asuncion", "America/Santiago", "America/Havana", "America/Sao_Paulo", "America/St_Johns",
		"America/Moncton", "America/Goose_Bay", "Africa/Cairo", "Africa/Casablanca", "Africa/Tunis",
		"Europe/Athens", "Europe/Lisbon", "Europe/Paris", "Atlantic/Azores", "Pacific/Apia", "Australia/Lord_Howe",
	} {
		loc := zone(t, name)
		for at := time.Date(1970, 1, 1, 0, 0, 0, 0, time.UTC); at.Year() < 2040; {
			_, end := at.In(loc).ZoneBounds()
			if end.IsZero() {
				break
			}
			for step := -6; step <= 6; step++ {
				now := end.Add(time.Duration(step) * 30 * time.Minute).In(loc)
				if _, next := now.ZoneBounds(); !next.IsZero() && next.Sub(now) < 3*time.Hour && readsEarlierDay(next.In(loc), now) {
					continue
				}
				today := day(now)
				if tomorrow := addDays(today, 1); now.Before(today) || !now.Before(tomorrow) {
					t.Errorf("%s: %v is outside its day [%v, %v)", name, now, today, tomorrow)
				}
			}
			at = end
		}
	}
}

// readsEarlierDay reports whether a's clock reads a date before b's.
func readsEarlierDay(a, b time.Time) bool {
	ay, am, ad := a.Date()
	by, bm, bd := b.Date()
	return time.Date(ay, am, ad, 0, 0, 0, 0, time.UTC).Before(time.Date(by, bm, bd, 0, 0, 0, 0, time.UTC))
}
