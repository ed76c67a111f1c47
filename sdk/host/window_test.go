package host_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/memhost/memhost/sdk"
	"github.com/memhost/memhost/sdk/host"
)

// windowProvider answers nothing and keeps the window it was asked for.
type windowProvider struct {
	echoProvider
	calls             int
	since, until      time.Time
	tags, excludeTags []string
}

func (p *windowProvider) Recall(_ context.Context, q sdk.RecallQuery) ([]sdk.Hit, error) {
	p.calls++
	p.since, p.until = q.Since, q.Until
	p.tags, p.excludeTags = q.Tags, q.ExcludeTags
	return nil, nil
}

// serveProvider serves impl in process, configured, for the test's life.
func serveProvider(t *testing.T, impl sdk.Plugin) *host.Provider {
	t.Helper()
	conn, err := host.ServeInProcess(context.Background(), impl, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	if err := conn.Configure(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	p, err := conn.Provider()
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestWindowOfMilliseconds: from an outside review. The wire keeps
// milliseconds, and cut a window's ends down to them, so a valid window
// inside one millisecond reached the plugin as since equal to until and
// was refused, quoting times the client never sent. Each end now rounds
// up (a record's time, a whole millisecond, is in the window exactly when
// it is in the rounded one), and a window that holds no millisecond
// answers no hits without a call.
func TestWindowOfMilliseconds(t *testing.T) {
	base := time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		name                 string
		since, until         time.Duration
		wantCall             bool
		wantSince, wantUntil time.Duration
	}{
		{"inside one millisecond", 1, 2, false, 0, 0},
		{"since at until: refused, as before", 2, 2, false, 0, 0},
		{"since after until, within a millisecond: refused", 2, 1, false, 0, 0},
		{"up to the next millisecond's start", 1, time.Millisecond, false, 0, 0},
		{"across a millisecond", 1, time.Millisecond + 1, true, time.Millisecond, 2 * time.Millisecond},
		{"whole milliseconds", time.Millisecond, 3 * time.Millisecond, true, time.Millisecond, 3 * time.Millisecond},
		{"half milliseconds", 500 * time.Microsecond, 2500 * time.Microsecond, true, time.Millisecond, 3 * time.Millisecond},
	} {
		t.Run(c.name, func(t *testing.T) {
			impl := &windowProvider{echoProvider: echoProvider{records: map[string]sdk.Record{}}}
			p := serveProvider(t, impl)
			hits, err := p.Recall(context.Background(), sdk.RecallQuery{Realm: "default", Query: "q", Limit: 10, Since: base.Add(c.since), Until: base.Add(c.until)})
			if c.since >= c.until {
				if !errors.Is(err, sdk.ErrInvalid) || impl.calls != 0 {
					t.Fatalf("recall of an empty window = %v, %v (%d calls); want it refused", hits, err, impl.calls)
				}
				return
			}
			if err != nil || hits == nil || len(hits) != 0 {
				t.Fatalf("recall = %v, %v; want no hits and no error", hits, err)
			}
			if (impl.calls == 1) != c.wantCall {
				t.Fatalf("%d calls to the plugin, want a call: %v", impl.calls, c.wantCall)
			}
			if c.wantCall && (!impl.since.Equal(base.Add(c.wantSince)) || !impl.until.Equal(base.Add(c.wantUntil))) {
				t.Fatalf("the plugin was asked for [%v, %v), want [%v, %v)", impl.since, impl.until, base.Add(c.wantSince), base.Add(c.wantUntil))
			}
		})
	}
}

// TestWindowEndAtTheEndOfYear9999: from an outside review. An end in the
// last millisecond of year 9999 (an "open end" a client may write) rounds
// up into year 10000, and the plugin refused the window, naming a year
// the client never sent. Such an until is sent open; such a since holds
// no record and answers none without a call.
func TestWindowEndAtTheEndOfYear9999(t *testing.T) {
	end := time.Date(9999, 12, 31, 23, 59, 59, 999_999_999, time.UTC)
	for _, c := range []struct {
		name         string
		since, until time.Time
		wantCall     bool
	}{
		{"until the end of 9999", time.Time{}, end, true},
		{"since 2020 until the end of 9999", time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC), end, true},
		{"since the end of 9999", end, time.Time{}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			impl := &windowProvider{echoProvider: echoProvider{records: map[string]sdk.Record{}}}
			p := serveProvider(t, impl)
			hits, err := p.Recall(context.Background(), sdk.RecallQuery{Realm: "default", Query: "q", Limit: 10, Since: c.since, Until: c.until})
			if err != nil || hits == nil || len(hits) != 0 || (impl.calls == 1) != c.wantCall {
				t.Fatalf("recall = %v, %v (%d calls); want no hits, no error, a call: %v", hits, err, impl.calls, c.wantCall)
			}
			if c.wantCall && (!impl.until.IsZero() || !impl.since.Equal(c.since)) {
				t.Fatalf("the plugin was asked for [%v, %v), want [%v, open)", impl.since, impl.until, c.since)
			}
		})
	}
}

// TestWindowEndAtTheEpoch: from an outside review. The wire keeps 0 for
// an open end, so an end at the epoch (or less than a millisecond before
// it, which rounds up to it) reached the plugin as open: until the epoch
// answered every record. Such an end is sent as the millisecond before
// the epoch, and reaches the plugin as a real end.
func TestWindowEndAtTheEpoch(t *testing.T) {
	epoch := time.Unix(0, 0).UTC()
	for _, c := range []struct {
		name         string
		since, until time.Time
	}{
		{"until the epoch", time.Time{}, epoch},
		{"since the epoch", epoch, time.Time{}},
		{"since half a millisecond before the epoch", epoch.Add(-500 * time.Microsecond), time.Time{}},
		{"since the epoch until 2020", epoch, time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)},
	} {
		t.Run(c.name, func(t *testing.T) {
			impl := &windowProvider{echoProvider: echoProvider{records: map[string]sdk.Record{}}}
			p := serveProvider(t, impl)
			q := sdk.RecallQuery{Realm: "default", Query: "q", Limit: 10, Since: c.since, Until: c.until}
			if _, err := p.Recall(context.Background(), q); err != nil || impl.calls != 1 {
				t.Fatalf("recall: %v (%d calls)", err, impl.calls)
			}
			if impl.since.IsZero() != c.since.IsZero() || impl.until.IsZero() != c.until.IsZero() {
				t.Fatalf("the plugin was asked for [%v, %v), want ends set as in [%v, %v)", impl.since, impl.until, c.since, c.until)
			}
			got := sdk.RecallQuery{Since: impl.since, Until: impl.until}
			gotSince, gotUntil := got.WindowMillis()
			wantSince, wantUntil := q.WindowMillis()
			if gotSince != wantSince || gotUntil != wantUntil {
				t.Fatalf("the plugin reads the window as [%d, %d) ms, the caller's is [%d, %d)", gotSince, gotUntil, wantSince, wantUntil)
			}
			if (wantSince == 0) != c.since.IsZero() || (wantUntil == 0) != c.until.IsZero() {
				t.Fatalf("the window reads as [%d, %d) ms: a set end is open", wantSince, wantUntil)
			}
		})
	}
}

// TestRecordTimesAtTheEpoch: the wire's 0 means "no time", so a record
// that happened (or expires) at the epoch must not reach the plugin, or come
// back from it, as one without that time.
func TestRecordTimesAtTheEpoch(t *testing.T) {
	epoch := time.Unix(0, 0).UTC()
	impl := &echoProvider{records: map[string]sdk.Record{}}
	p := serveProvider(t, impl)
	w, ok := p.Writer()
	if !ok {
		t.Fatal("no writer")
	}
	ids, err := w.Remember(context.Background(), "default", []sdk.Record{{Scope: "realm", Kind: sdk.KindFact, Title: "moon", Body: "b", OccurredAt: epoch, ExpiresAt: epoch}})
	if err != nil {
		t.Fatal(err)
	}
	got := impl.records[ids[0]]
	if !got.OccurredAt.Equal(epoch) || !got.ExpiresAt.Equal(epoch) {
		t.Errorf("the plugin got occurred_at %v, expires_at %v; want both at the epoch", got.OccurredAt, got.ExpiresAt)
	}
	hits, err := p.Recall(context.Background(), sdk.RecallQuery{Realm: "default", Query: "moon", Limit: 10})
	if err != nil || len(hits) == 0 {
		t.Fatalf("recall: %v, %v", hits, err)
	}
	if back := hits[0].Record; !back.OccurredAt.Equal(epoch) {
		t.Errorf("the host read back occurred_at %v; want the epoch", back.OccurredAt)
	}
}

// TestTagsTravelInNFC: a tag typed decomposed (e and a combining accent,
// as macOS input gives) and one typed composed are one tag to every store,
// as they are one term in text: both reach the plugin in NFC, stored and
// filtered on.
func TestTagsTravelInNFC(t *testing.T) {
	impl := &windowProvider{echoProvider: echoProvider{records: map[string]sdk.Record{}}}
	p := serveProvider(t, impl)
	w, _ := p.Writer()
	const composed, decomposed = "caf\u00e9", "cafe\u0301"
	ids, err := w.Remember(context.Background(), "default", []sdk.Record{{Scope: "realm", Kind: sdk.KindFact, Title: "menu", Body: "b", Tags: []string{decomposed, "plain"}}})
	if err != nil {
		t.Fatal(err)
	}
	if got := impl.records[ids[0]].Tags; len(got) != 2 || got[0] != composed || got[1] != "plain" {
		t.Errorf("the plugin stored tags %q; want %q", got, []string{composed, "plain"})
	}
	q := sdk.RecallQuery{Realm: "default", Query: "menu", Limit: 10, Tags: []string{decomposed}, ExcludeTags: []string{"x" + decomposed}}
	if _, err := p.Recall(context.Background(), q); err != nil {
		t.Fatal(err)
	}
	if impl.tags[0] != composed || impl.excludeTags[0] != "x"+composed {
		t.Errorf("the plugin was asked for tags %q, excluding %q; want them in NFC", impl.tags, impl.excludeTags)
	}
	if q.Tags[0] != decomposed {
		t.Error("the caller's query was changed")
	}
}
