// Package timequery reads the time a recall query speaks of: a window
// ("last Saturday", "two weeks ago", "in May", "on March 3rd") or an
// ordering ("the first time", "most recently", "what is my current …"),
// relative to a reference time, and ranks recall hits by it. The host
// applies it after the provider's text ranking, so every provider ranks
// the same way and the query text still decides among records of the same
// time.
//
// The parser is a small deterministic scanner over the query's words
// rather than a natural-language date library: the expressions a memory
// question uses are few, the answer must be the same on every host for
// the same reference time, and orderings (earliest, latest) are no
// library's business.
package timequery

import (
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/memhost/memhost/sdk"
)

// Order is a preference among records by the time they happened.
type Order int

const (
	// OrderNone prefers no time.
	OrderNone Order = iota
	// OrderEarliest prefers older records ("the first time").
	OrderEarliest
	// OrderLatest prefers newer records ("most recently", "my current").
	OrderLatest
)

func (o Order) String() string {
	switch o {
	case OrderEarliest:
		return "earliest"
	case OrderLatest:
		return "latest"
	}
	return "none"
}

// Intent is what a query says about time. The window is [Since, Until),
// both zero when the query names none.
type Intent struct {
	Since, Until time.Time
	Order        Order
}

// HasWindow reports whether the query names a time window.
func (in Intent) HasWindow() bool { return !in.Since.IsZero() && in.Since.Before(in.Until) }

// IsZero reports whether the query says nothing about time.
func (in Intent) IsZero() bool { return !in.HasWindow() && in.Order == OrderNone }

// maxQueryBytes bounds the text scanned: a time expression sits in a
// question, not in a pasted document.
const maxQueryBytes = 4096

// Parse reads query's time expressions relative to now, whose location
// decides where days begin. The first window expression found wins; an
// ordering word anywhere sets the order.
func Parse(query string, now time.Time) Intent {
	if len(query) > maxQueryBytes {
		query = query[:maxQueryBytes]
	}
	w := words(query)
	p := parser{w: w, now: now, today: day(now)}
	var in Intent
	if s, u, at, ok := isoDate(query, now.Location()); ok {
		in.Since, in.Until = s, u
		if lead := words(query[:at]); len(lead) > 0 && lead[len(lead)-1].s == "since" {
			in.Until = p.upToToday(in.Since, in.Until)
		}
	}
	for i := 0; i < len(w) && !in.HasWindow(); i++ {
		if s, u, ok := p.window(i); ok {
			in.Since, in.Until = s, u
			if p.since(i) {
				in.Until = p.upToToday(in.Since, in.Until)
			}
		}
	}
	if !in.HasWindow() || sdk.ValidateWindow(in.Since, in.Until) != nil {
		// Past the years a store holds ("in 9999" ends in 10000), or
		// starting at the zero time ("0001-01-01" in UTC), which means none.
		in.Since, in.Until = time.Time{}, time.Time{}
	}
	in.Order = p.order()
	return in
}

// since reports whether the window expression found at w[i] follows
// "since" ("since last week", "since the 3rd of May"), over the words
// before w[i] that the expression reads: "since the day before
// yesterday", "since early May".
func (p *parser) since(i int) bool {
	if p.at(i) == "yesterday" && p.at(i-1) == "before" && p.at(i-2) == "day" {
		i -= 2
	}
	switch p.at(i - 1) {
	case "early", "late", "mid":
		i--
	}
	if p.at(i-1) == "the" {
		i--
	}
	return p.at(i-1) == "since"
}

// upToToday widens a window that began in the past to run through today:
// "since last week" is all the time from last week's start, not last
// week alone.
func (p *parser) upToToday(since, until time.Time) time.Time {
	if end := addDays(p.today, 1); since.Before(end) && until.Before(end) {
		return end
	}
	return until
}

// word is one lower-cased run of letters or digits; num is its value when
// it is a number ("3", "3rd", "three"), -1 otherwise.
type word struct {
	s   string
	num int
}

func words(s string) []word {
	out := make([]word, 0, 24)
	for f := range strings.FieldsFuncSeq(strings.ToLower(s), func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r) && r != '\''
	}) {
		f = strings.Trim(f, "'")
		f = strings.TrimSuffix(f, "'s")
		if f == "" {
			continue
		}
		out = append(out, word{s: f, num: number(f)})
	}
	return out
}

var numberWords = map[string]int{
	"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7,
	"eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "couple": 2, "few": 3, "several": 3,
	"first": 1, "second": 2, "third": 3, "fourth": 4, "fifth": 5,
}

// number reads "3", "3rd", "21st" as numbers; words are read by count.
func number(s string) int {
	for _, suf := range []string{"st", "nd", "rd", "th"} {
		if t, ok := strings.CutSuffix(s, suf); ok && t != "" && t[0] >= '0' && t[0] <= '9' {
			s = t
			break
		}
	}
	if len(s) == 0 || len(s) > 4 || s[0] < '0' || s[0] > '9' {
		return -1
	}
	n, err := strconv.Atoi(s)
	if err != nil {
		return -1
	}
	return n
}

// count reads a count at w[i] ("3", "two", "a", "a couple of", "a few")
// and answers it and the index after it.
func (p *parser) count(i int) (int, int, bool) {
	if i >= len(p.w) {
		return 0, i, false
	}
	if n := p.w[i].num; n > 0 && n < 1000 {
		return n, i + 1, true
	}
	s := p.w[i].s
	if s == "a" || s == "an" {
		if i+1 < len(p.w) && (p.w[i+1].s == "couple" || p.w[i+1].s == "few") {
			j := i + 2
			if j < len(p.w) && p.w[j].s == "of" {
				j++
			}
			return numberWords[p.w[i+1].s], j, true
		}
		return 1, i + 1, true
	}
	switch s {
	case "few", "several", "couple", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve":
		j := i + 1
		if j < len(p.w) && p.w[j].s == "of" {
			j++
		}
		return numberWords[s], j, true
	}
	return 0, i, false
}

type unit int

const (
	noUnit unit = iota
	hours
	days
	weeks
	months
	years
	weekends
)

func unitOf(s string) unit {
	switch strings.TrimSuffix(s, "s") {
	case "hour":
		return hours
	case "day", "night":
		return days
	case "week":
		return weeks
	case "month":
		return months
	case "year":
		return years
	case "weekend":
		return weekends
	}
	return noUnit
}

var weekdays = map[string]time.Weekday{
	"sunday": time.Sunday, "monday": time.Monday, "tuesday": time.Tuesday, "wednesday": time.Wednesday,
	"thursday": time.Thursday, "friday": time.Friday, "saturday": time.Saturday,
}

var monthNames = map[string]time.Month{
	"january": time.January, "february": time.February, "march": time.March, "april": time.April,
	"may": time.May, "june": time.June, "july": time.July, "august": time.August, "september": time.September,
	"october": time.October, "november": time.November, "december": time.December,
	"jan": time.January, "feb": time.February, "mar": time.March, "apr": time.April, "jun": time.June,
	"jul": time.July, "aug": time.August, "sep": time.September, "sept": time.September, "oct": time.October,
	"nov": time.November, "dec": time.December,
}

// monthLead are the words that make a month name a month ("in May"), not
// a verb or a name ("you may", "march on").
var monthLead = map[string]bool{
	"in": true, "on": true, "of": true, "during": true, "early": true, "late": true, "mid": true,
	"last": true, "this": true, "since": true, "until": true, "by": true, "from": true, "throughout": true,
}

type parser struct {
	w     []word
	now   time.Time
	today time.Time // midnight of now's day, in now's location
}

func (p *parser) at(i int) string {
	if i < 0 || i >= len(p.w) {
		return ""
	}
	return p.w[i].s
}

// window answers the window an expression starting at w[i] names.
func (p *parser) window(i int) (time.Time, time.Time, bool) {
	s := p.at(i)
	switch s {
	case "today", "tonight":
		return p.today, addDays(p.today, 1), true
	case "yesterday":
		if p.at(i-1) == "before" && p.at(i-2) == "day" {
			return addDays(p.today, -2), addDays(p.today, -1), true
		}
		return addDays(p.today, -1), p.today, true
	case "this":
		switch p.at(i + 1) {
		case "morning", "afternoon", "evening":
			return p.today, addDays(p.today, 1), true
		}
	}
	if s, u, ok := p.ago(i); ok {
		return s, u, true
	}
	if s, u, ok := p.relative(i); ok {
		return s, u, true
	}
	if wd, ok := weekdays[s]; ok && p.at(i-1) != "last" && p.at(i-1) != "this" && p.at(i-1) != "next" {
		// "on Saturday", "what did I do Saturday": the latest one up to today.
		d := addDays(p.today, -((int(p.today.Weekday()) - int(wd) + 7) % 7))
		return d, addDays(d, 1), true
	}
	return p.date(i)
}

// ago reads "<count> <unit> ago": a window around the point, a unit wide.
func (p *parser) ago(i int) (time.Time, time.Time, bool) {
	n, j, ok := p.count(i)
	if !ok || j+1 >= len(p.w) || p.at(j+1) != "ago" {
		return time.Time{}, time.Time{}, false
	}
	switch unitOf(p.at(j)) {
	case hours:
		at := p.now.Add(-time.Duration(n) * time.Hour)
		return at.Add(-time.Hour), at.Add(time.Hour), true
	case days:
		d := addDays(p.today, -n)
		return d, addDays(d, 1), true
	case weeks:
		d := addDays(p.today, -7*n)
		return addDays(d, -3), addDays(d, 4), true
	case months:
		d := addMonths(p.today, -n)
		return addDays(d, -15), addDays(d, 16), true
	case years:
		d := addMonths(p.today, -12*n)
		return addMonths(d, -6), addMonths(d, 6), true
	case weekends:
		// Counted back from the latest weekend that is over, as "last
		// weekend" is.
		sat := p.weekend(addDays(p.today, -2-7*(n-1)))
		return sat, addDays(sat, 2), true
	}
	return time.Time{}, time.Time{}, false
}

// relative reads "last|past|previous|this|next …": a calendar unit, a
// weekday, a month, or "the last <count> <unit>" (up to now).
func (p *parser) relative(i int) (time.Time, time.Time, bool) {
	var step int
	switch p.at(i) {
	case "last", "previous", "past":
		step = -1
	case "this", "current":
		step = 0
	case "next", "coming":
		step = 1
	default:
		return time.Time{}, time.Time{}, false
	}
	next := p.at(i + 1)
	if step < 0 {
		// "the last 3 days", "the past few weeks": up to now.
		if n, j, ok := p.count(i + 1); ok {
			if u := unitOf(p.at(j)); u != noUnit && u != weekends {
				return p.span(n, u), addDays(p.today, 1), true
			}
		}
	}
	if wd, ok := weekdays[next]; ok {
		back := (int(p.today.Weekday()) - int(wd) + 7) % 7
		switch step {
		case -1:
			if back == 0 {
				back = 7
			}
		case 0:
			// The one of this week, weeks starting on Monday.
			back = (int(p.today.Weekday())+6)%7 - (int(wd)+6)%7
		case 1:
			back = -((int(wd) - int(p.today.Weekday()) + 7) % 7)
			if back == 0 {
				back = -7
			}
		}
		d := addDays(p.today, -back)
		return d, addDays(d, 1), true
	}
	if m, ok := monthNames[next]; ok && step <= 0 {
		y := p.today.Year()
		if m > p.today.Month() || step < 0 && m == p.today.Month() {
			y--
		}
		return monthWindow(y, m, p.now.Location())
	}
	switch unitOf(next) {
	case days:
		d := addDays(p.today, step)
		return d, addDays(d, 1), true
	case weeks:
		mon := addDays(p.today, -((int(p.today.Weekday())+6)%7)+7*step)
		return mon, addDays(mon, 7), true
	case weekends:
		// This week's Saturday (weeks start on Monday); last weekend is
		// the latest one that is over.
		sat := addDays(p.today, 5-(int(p.today.Weekday())+6)%7+7*step)
		if step < 0 {
			sat = p.weekend(addDays(p.today, -2))
		}
		return sat, addDays(sat, 2), true
	case months:
		first := midnight(p.today.Year(), p.today.Month()+time.Month(step), 1, p.now.Location())
		return first, addMonths(first, 1), true
	case years:
		first := midnight(p.today.Year()+step, 1, 1, p.now.Location())
		return first, addMonths(first, 12), true
	}
	return time.Time{}, time.Time{}, false
}

// span is the start of "the last n units": n units before today's end.
func (p *parser) span(n int, u unit) time.Time {
	end := addDays(p.today, 1)
	switch u {
	case hours:
		return p.now.Add(-time.Duration(n) * time.Hour)
	case weeks:
		return addDays(end, -7*n)
	case months:
		return addMonths(end, -n)
	case years:
		return addMonths(end, -12*n)
	}
	return addDays(end, -n)
}

// weekend answers the Saturday of the weekend on or before d (d itself
// when it is Saturday, the day before when it is Sunday).
func (p *parser) weekend(d time.Time) time.Time {
	return addDays(d, -((int(d.Weekday()) + 1) % 7))
}

// date reads a calendar date or month at w[i]: "May 3rd", "May 3, 2023",
// "3rd of May", "3 May 2023", "in May", "May 2023", "in 2023". A date
// without a year is the latest one up to today.
func (p *parser) date(i int) (time.Time, time.Time, bool) {
	loc := p.now.Location()
	s := p.at(i)
	if m, ok := monthNames[s]; ok {
		// May 3rd [, 2023]
		if n := p.numAt(i + 1); n >= 1 && n <= 31 {
			y, ok := p.yearAt(i + 2)
			return p.dayWindow(y, ok, m, n)
		}
		// June first, June the twenty-first [2023]; "you may first" is
		// no date.
		j := i + 1
		if p.at(j) == "the" {
			j++
		}
		if n, k := p.ordinalAt(j); n > 0 && (s != "may" || monthLead[p.at(i-1)]) {
			y, ok := p.yearAt(k)
			return p.dayWindow(y, ok, m, n)
		}
		if y, ok := p.yearAt(i + 1); ok {
			return monthWindow(y, m, loc)
		}
		if !monthLead[p.at(i-1)] || len(s) <= 3 && s != "may" {
			return time.Time{}, time.Time{}, false
		}
		y := p.today.Year()
		if m > p.today.Month() {
			y--
		}
		return monthWindow(y, m, loc)
	}
	n, j := p.w[i].num, i+1
	if len(p.w[i].s) > 4 {
		n = -1
	}
	word := false
	if n < 1 {
		n, j = p.ordinalAt(i)
		word = true
		if prev := p.at(i - 1); prev == "twenty" || prev == "thirty" {
			// The units of "thirty-first", read with its tens at i-1: a
			// day no month has ("the thirty-first of April") is not
			// the first.
			n = 0
		}
	}
	if n >= 1 && n <= 31 {
		// 3rd of May [2023], 3 May [2023], the first of May
		of := p.at(j) == "of"
		if of {
			j++
		}
		// A spelled ordinal before a month is a day only with "of": "the
		// first June meeting" and "my first May" are no dates.
		if m, ok := monthNames[p.at(j)]; ok && (!word || of) {
			y, ok := p.yearAt(j + 1)
			return p.dayWindow(y, ok, m, n)
		}
	}
	if y := p.w[i].num; y >= 1000 && y <= 9999 && len(p.w[i].s) == 4 {
		switch p.at(i - 1) {
		case "in", "during", "of", "throughout", "since":
			first := midnight(y, 1, 1, loc)
			return first, addMonths(first, 12), true
		}
	}
	return time.Time{}, time.Time{}, false
}

// ordinals are the days of a month spelled as words; the twenty-first
// is two words, "twenty" and "first".
var ordinals = map[string]int{
	"first": 1, "second": 2, "third": 3, "fourth": 4, "fifth": 5, "sixth": 6, "seventh": 7,
	"eighth": 8, "ninth": 9, "tenth": 10, "eleventh": 11, "twelfth": 12, "thirteenth": 13,
	"fourteenth": 14, "fifteenth": 15, "sixteenth": 16, "seventeenth": 17, "eighteenth": 18,
	"nineteenth": 19, "twentieth": 20, "thirtieth": 30,
}

// ordinalAt reads a day spelled as an ordinal at w[i] ("first",
// "twenty first") and answers it and the index after it; 0 when there is
// none.
func (p *parser) ordinalAt(i int) (int, int) {
	tens := 0
	switch p.at(i) {
	case "twenty":
		tens = 20
	case "thirty":
		tens = 30
	}
	if n := ordinals[p.at(i+1)]; tens > 0 && n >= 1 && n <= 9 {
		return tens + n, i + 2
	}
	if n, ok := ordinals[p.at(i)]; ok {
		return n, i + 1
	}
	return 0, i
}

// dayOrdinal reports whether the ordinal at w[i] is a day of a month
// ("May first", "May the first", "twenty-first") rather than an order.
func (p *parser) dayOrdinal(i int) bool {
	m := i - 1
	if p.at(m) == "the" {
		m--
	}
	_, month := monthNames[p.at(m)]
	if month && p.at(m) == "may" {
		month = monthLead[p.at(m-1)] // as date reads it
	}
	return month || p.at(i-1) == "twenty" || p.at(i-1) == "thirty"
}

func (p *parser) numAt(i int) int {
	if i < 0 || i >= len(p.w) {
		return -1
	}
	return p.w[i].num
}

// yearAt reads a four-digit year at w[i].
func (p *parser) yearAt(i int) (int, bool) {
	if i < 0 || i >= len(p.w) || len(p.w[i].s) != 4 {
		return 0, false
	}
	y := p.w[i].num
	return y, y >= 1000 && y <= 9999
}

// dayWindow is the day m/d of year y, or of the latest year that puts it
// on or before today when the year is not given (February 29th of the
// latest leap year); false for a date that does not exist (February 30th).
func (p *parser) dayWindow(y int, haveYear bool, m time.Month, d int) (time.Time, time.Time, bool) {
	if !haveYear {
		y = p.today.Year()
		if _, tm, td := p.today.Date(); m > tm || m == tm && d > td {
			y--
		}
		for i := 0; i < 8 && !isDate(y, m, d); i++ {
			y-- // leap years are at most eight apart
		}
	}
	if !isDate(y, m, d) {
		return time.Time{}, time.Time{}, false
	}
	t := midnight(y, m, d, p.now.Location())
	return t, addDays(t, 1), true
}

func monthWindow(y int, m time.Month, loc *time.Location) (time.Time, time.Time, bool) {
	first := midnight(y, m, 1, loc)
	return first, addMonths(first, 1), true
}

var isoDateRE = regexp.MustCompile(`\b(\d{4})-(\d{2})-(\d{2})\b`)

// isoDate reads the first 2023-05-14 in s as that day, and answers where
// in s it stands.
func isoDate(s string, loc *time.Location) (since, until time.Time, at int, ok bool) {
	m := isoDateRE.FindStringSubmatchIndex(s)
	if m == nil {
		return time.Time{}, time.Time{}, 0, false
	}
	y, _ := strconv.Atoi(s[m[2]:m[3]])
	mo, _ := strconv.Atoi(s[m[4]:m[5]])
	d, _ := strconv.Atoi(s[m[6]:m[7]])
	if y < 1 || !isDate(y, time.Month(mo), d) {
		return time.Time{}, time.Time{}, 0, false
	}
	t := midnight(y, time.Month(mo), d, loc)
	return t, addDays(t, 1), m[0], true
}

// isDate reports whether y-m-d is a day of the calendar.
func isDate(y int, m time.Month, d int) bool {
	t := time.Date(y, m, d, 0, 0, 0, 0, time.UTC)
	return t.Month() == m && t.Day() == d
}

// midnight answers the first instant of the day y-m-d in loc; d may run
// past the month, as in time.Date. Where a clock change skips midnight
// (America/Asuncion on 2023-10-01 goes from 23:59 to 01:00), time.Date
// answers 23:00 of the day before; the day begins where that zone ends.
// Where a clock set back shows midnight twice (Asia/Amman on 2015-10-30
// goes from 00:59 back to 00:00), time.Date may answer either; the day
// begins at the first, unless the clock went back to the day before in
// between (America/Moncton on 1993-10-31 went from 00:00:59 back to
// 23:01 of October 30th), when it begins once the date turns for good.
func midnight(y int, m time.Month, d int, loc *time.Location) time.Time {
	wall := time.Date(y, m, d, 0, 0, 0, 0, time.UTC) // the day's midnight, normalised
	t := time.Date(y, m, d, 0, 0, 0, 0, loc)
	if t.Day() != wall.Day() {
		if _, end := t.ZoneBounds(); end.After(t) {
			t = end
		}
		return t
	}
	if !sameWall(t, wall) {
		// Skipped midnight, answered as a later time of the day: the day
		// begins where the clock jumped into it.
		if start, _ := t.ZoneBounds(); !start.IsZero() && start.Before(t) && start.In(loc).Day() == wall.Day() {
			t = start
		}
		return t
	}
	// The instants that read the day's midnight: under t's offset, and
	// under those of the zones before and after t's.
	start, end := t.ZoneBounds()
	near := []time.Time{t}
	if !start.IsZero() {
		near = append(near, start.Add(-time.Nanosecond))
	}
	if !end.IsZero() {
		near = append(near, end)
	}
	var reads []time.Time
	for _, at := range near {
		_, off := at.In(loc).Zone()
		c := wall.Add(-time.Duration(off) * time.Second).In(loc)
		if sameWall(c, wall) && !slices.ContainsFunc(reads, c.Equal) {
			reads = append(reads, c)
		}
	}
	slices.SortFunc(reads, time.Time.Compare)
	first := reads[0] // t reads midnight: reads holds it
	for _, later := range reads[1:] {
		// The zone of first ends before later: did its end set the
		// clock back to the day before?
		if _, zend := first.ZoneBounds(); !zend.IsZero() && !zend.After(later) && zend.In(loc).Day() != wall.Day() {
			first = later
		}
	}
	return first
}

// sameWall reports whether t's clock in its location reads the date and
// time of wall's clock in UTC.
func sameWall(t, wall time.Time) bool {
	y, m, d := t.Date()
	h, mi, s := t.Clock()
	wy, wm, wd := wall.Date()
	return y == wy && m == wm && d == wd && h == 0 && mi == 0 && s == 0 && t.Nanosecond() == 0
}

// day answers the first instant of t's day.
func day(t time.Time) time.Time {
	y, m, d := t.Date()
	return midnight(y, m, d, t.Location())
}

// addDays answers the first instant of the day n days after t's. Unlike
// t.AddDate it keeps no time of day: the first instant of a day that
// begins at 01:00 is not 01:00 of the next.
func addDays(t time.Time, n int) time.Time {
	y, m, d := t.Date()
	return midnight(y, m, d+n, t.Location())
}

// addMonths answers the first instant of the day n months after t's, on
// the month's last day when it is shorter: a month before March 31st is
// February 28th, where t.AddDate answers March 3rd.
func addMonths(t time.Time, n int) time.Time {
	y, m, d := t.Date()
	last := time.Date(y, m+time.Month(n)+1, 0, 0, 0, 0, 0, time.UTC).Day()
	return midnight(y, m+time.Month(n), min(d, last), t.Location())
}

// order reads an ordering preference from the words. Latest wins over
// earliest when both appear ("the first time since I most recently …" is
// rare; a current-state question is not).
func (p *parser) order() Order {
	earliest := false
	for i, w := range p.w {
		switch w.s {
		case "latest", "newest", "currently", "current", "nowadays", "anymore", "recently", "lately":
			return OrderLatest
		case "now":
			if p.at(i-1) != "until" && p.at(i-1) != "from" {
				return OrderLatest
			}
		case "days":
			if p.at(i-1) == "these" {
				return OrderLatest
			}
		case "last":
			// "the last time", "the last book I read", "when did I last
			// …"; "last week" and "the last 3 days" are windows.
			n := p.at(i + 1)
			_, weekday := weekdays[n]
			_, month := monthNames[n]
			_, _, counted := p.count(i + 1)
			window := unitOf(n) != noUnit || weekday || month || counted
			switch p.at(i - 1) {
			case "the", "i", "we", "you":
				if !window {
					return OrderLatest
				}
			}
		case "first":
			if n := p.at(i + 1); n != "name" && n != "names" && n != "of" && !p.dayOrdinal(i) {
				earliest = true
			}
		case "earliest", "initially", "originally", "oldest", "beginning":
			earliest = true
		}
	}
	if earliest {
		return OrderEarliest
	}
	return OrderNone
}
