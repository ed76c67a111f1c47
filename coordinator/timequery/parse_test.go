package timequery

import (
	"testing"
	"time"

	"github.com/memhost/memhost/sdk"
)

// now is a Tuesday.
var now = time.Date(2023, 5, 30, 10, 0, 0, 0, time.UTC)

func d(y int, m time.Month, day int) time.Time { return time.Date(y, m, day, 0, 0, 0, 0, time.UTC) }

// parseCases pin Parse at now; they seed the fuzz target too.
var parseCases = []struct {
	query        string
	since, until time.Time // zero: no window
	order        Order
}{
	{"what did I do last Saturday", d(2023, 5, 27), d(2023, 5, 28), OrderNone},
	{"What did I do on Saturday?", d(2023, 5, 27), d(2023, 5, 28), OrderNone},
	{"last Tuesday", d(2023, 5, 23), d(2023, 5, 24), OrderNone},
	{"what did I do on Tuesday", d(2023, 5, 30), d(2023, 5, 31), OrderNone},
	{"this Friday", d(2023, 6, 2), d(2023, 6, 3), OrderNone},
	{"next Friday", d(2023, 6, 2), d(2023, 6, 3), OrderNone},
	{"yesterday", d(2023, 5, 29), d(2023, 5, 30), OrderNone},
	{"the day before yesterday", d(2023, 5, 28), d(2023, 5, 29), OrderNone},
	{"what did I eat today", d(2023, 5, 30), d(2023, 5, 31), OrderNone},
	{"two weeks ago", d(2023, 5, 13), d(2023, 5, 20), OrderNone},
	{"a couple of weeks ago", d(2023, 5, 13), d(2023, 5, 20), OrderNone},
	{"3 days ago", d(2023, 5, 27), d(2023, 5, 28), OrderNone},
	{"a month ago", d(2023, 4, 15), d(2023, 5, 16), OrderNone},
	{"two years ago", d(2020, 11, 30), d(2021, 11, 30), OrderNone},
	{"in May", d(2023, 5, 1), d(2023, 6, 1), OrderNone},
	{"in June", d(2022, 6, 1), d(2022, 7, 1), OrderNone},
	{"last May", d(2022, 5, 1), d(2022, 6, 1), OrderNone},
	{"in May 2021", d(2021, 5, 1), d(2021, 6, 1), OrderNone},
	{"on March 3rd", d(2023, 3, 3), d(2023, 3, 4), OrderNone},
	{"on December 25", d(2022, 12, 25), d(2022, 12, 26), OrderNone},
	{"on March 3, 2021", d(2021, 3, 3), d(2021, 3, 4), OrderNone},
	{"the 3rd of March", d(2023, 3, 3), d(2023, 3, 4), OrderNone},
	{"what did I do on the first of May", d(2023, 5, 1), d(2023, 5, 2), OrderNone},
	{"the twenty-first of March", d(2023, 3, 21), d(2023, 3, 22), OrderNone},
	{"on the thirtieth of April 2021", d(2021, 4, 30), d(2021, 5, 1), OrderNone},
	{"on June first", d(2022, 6, 1), d(2022, 6, 2), OrderNone},
	{"on March the second", d(2023, 3, 2), d(2023, 3, 3), OrderNone},
	{"on May first", d(2023, 5, 1), d(2023, 5, 2), OrderNone},
	{"you may first want to check", time.Time{}, time.Time{}, OrderEarliest},
	{"the first of many trips", time.Time{}, time.Time{}, OrderNone},
	{"the thirty-first of April", d(2023, 4, 1), d(2023, 5, 1), OrderNone},
	{"what happened at the first June meeting", time.Time{}, time.Time{}, OrderEarliest},
	{"my first July in Paris", time.Time{}, time.Time{}, OrderEarliest},
	{"on 14 Feb 2022", d(2022, 2, 14), d(2022, 2, 15), OrderNone},
	{"in 2021", d(2021, 1, 1), d(2022, 1, 1), OrderNone},
	{"last week", d(2023, 5, 22), d(2023, 5, 29), OrderNone},
	{"this week", d(2023, 5, 29), d(2023, 6, 5), OrderNone},
	{"last month", d(2023, 4, 1), d(2023, 5, 1), OrderNone},
	{"last year", d(2022, 1, 1), d(2023, 1, 1), OrderNone},
	{"in the last 3 days", d(2023, 5, 28), d(2023, 5, 31), OrderNone},
	{"over the past two weeks", d(2023, 5, 17), d(2023, 5, 31), OrderNone},
	{"last weekend", d(2023, 5, 27), d(2023, 5, 29), OrderNone},
	{"on 2023-04-01", d(2023, 4, 1), d(2023, 4, 2), OrderNone},
	// A window after "since" runs through today.
	{"what have I cooked since last week", d(2023, 5, 22), d(2023, 5, 31), OrderNone},
	{"since two weeks ago", d(2023, 5, 13), d(2023, 5, 31), OrderNone},
	{"ever since the 3rd of March", d(2023, 3, 3), d(2023, 5, 31), OrderNone},
	{"since March 3rd", d(2023, 3, 3), d(2023, 5, 31), OrderNone},
	{"since 2023-04-01", d(2023, 4, 1), d(2023, 5, 31), OrderNone},
	{"since 2021", d(2021, 1, 1), d(2023, 5, 31), OrderNone},
	{"since yesterday", d(2023, 5, 29), d(2023, 5, 31), OrderNone},
	{"since May", d(2023, 5, 1), d(2023, 6, 1), OrderNone},
	{"since next Friday", d(2023, 6, 2), d(2023, 6, 3), OrderNone},
	{"2023-04-01 since", d(2023, 4, 1), d(2023, 4, 2), OrderNone},
	{"since the day before yesterday", d(2023, 5, 28), d(2023, 5, 31), OrderNone},
	{"since early March", d(2023, 3, 1), d(2023, 5, 31), OrderNone},
	{"ever since late April", d(2023, 4, 1), d(2023, 5, 31), OrderNone},
	{"since mid-March 2022", d(2022, 3, 1), d(2023, 5, 31), OrderNone},
	{"early May since", d(2023, 5, 1), d(2023, 6, 1), OrderNone},
	{"the first time I went hiking", time.Time{}, time.Time{}, OrderEarliest},
	{"when did I first meet Anna", time.Time{}, time.Time{}, OrderEarliest},
	{"what is my current job", time.Time{}, time.Time{}, OrderLatest},
	{"where do I live now", time.Time{}, time.Time{}, OrderLatest},
	{"the last time I saw Tom", time.Time{}, time.Time{}, OrderLatest},
	{"which book did I read most recently", time.Time{}, time.Time{}, OrderLatest},
	{"the first time I hiked last Saturday", d(2023, 5, 27), d(2023, 5, 28), OrderEarliest},
	// Nothing about time.
	{"you may want to march on", time.Time{}, time.Time{}, OrderNone},
	{"how many days before my trip did I buy boots", time.Time{}, time.Time{}, OrderNone},
	{"what is my first name", time.Time{}, time.Time{}, OrderNone},
	{"on February 30", time.Time{}, time.Time{}, OrderNone},
	{"on 2023-02-30", time.Time{}, time.Time{}, OrderNone},
	{"in 9999", time.Time{}, time.Time{}, OrderNone},
	{"", time.Time{}, time.Time{}, OrderNone},
}

func TestParse(t *testing.T) {
	for _, tc := range parseCases {
		t.Run(tc.query, func(t *testing.T) {
			got := Parse(tc.query, now)
			if !got.Since.Equal(tc.since) || !got.Until.Equal(tc.until) || got.Order != tc.order {
				t.Errorf("Parse(%q) = [%v, %v) %v; want [%v, %v) %v", tc.query, got.Since, got.Until, got.Order, tc.since, tc.until, tc.order)
			}
		})
	}
}

// Days begin at midnight where now is: one in the morning in New York is
// still the evening before in UTC terms of the day.
func TestParseUsesNowsLocation(t *testing.T) {
	ny, err := time.LoadLocation("America/New_York")
	if err != nil {
		t.Skip("no time zone database:", err)
	}
	at := time.Date(2023, 5, 30, 1, 0, 0, 0, ny)
	got := Parse("yesterday", at)
	if want := time.Date(2023, 5, 29, 0, 0, 0, 0, ny); !got.Since.Equal(want) || !got.Until.Equal(want.AddDate(0, 0, 1)) {
		t.Fatalf("yesterday at %v = [%v, %v); want the 29th in New York", at, got.Since, got.Until)
	}
}

func FuzzParse(f *testing.F) {
	for _, tc := range parseCases {
		f.Add(tc.query, now.UnixMilli())
	}
	f.Add("3 May 0001 in 0001 last 999 years ago", int64(-62135596800000))
	f.Fuzz(func(t *testing.T, query string, ms int64) {
		at := time.UnixMilli(ms).UTC()
		if at.Year() < 2 || at.Year() > 9000 {
			return
		}
		got := Parse(query, at)
		if got != Parse(query, at) {
			t.Fatalf("Parse(%q) is not deterministic", query)
		}
		if got.Since.IsZero() != got.Until.IsZero() || !got.Since.IsZero() && !got.HasWindow() {
			t.Fatalf("Parse(%q) = [%v, %v): a window needs both ends, in order", query, got.Since, got.Until)
		}
		if err := sdk.ValidateWindow(got.Since, got.Until); err != nil {
			t.Fatalf("Parse(%q) = a window a store cannot hold: %v", query, err)
		}
		if got.Order < OrderNone || got.Order > OrderLatest {
			t.Fatalf("Parse(%q) order %d", query, got.Order)
		}
	})
}
