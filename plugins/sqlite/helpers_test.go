package sqlite

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/memhost/memhost/sdk"
)

// clock is a settable time source for tests.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock { return &clock{t: time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)} }

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// newStore answers an unconfigured store with quiet logs and background
// merging held off, so tests see only what they do.
func newStore(mods ...func(*options)) *Store {
	s := New()
	s.log = slog.New(slog.DiscardHandler)
	s.opts.maintainIdle = time.Hour
	for _, m := range mods {
		m(&s.opts)
	}
	return s
}

func configJSON(path string) json.RawMessage {
	b, _ := json.Marshal(Config{Path: path})
	return b
}

// openAt configures a store on path and closes it when the test ends.
func openAt(t testing.TB, path string, mods ...func(*options)) *Store {
	t.Helper()
	s := newStore(mods...)
	if err := s.Configure(context.Background(), configJSON(path)); err != nil {
		t.Fatalf("Configure(%s): %v", path, err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// open configures a store on a fresh database with clock c (nil: a new
// one) and answers both.
func open(t testing.TB, c *clock, mods ...func(*options)) (*Store, *clock) {
	t.Helper()
	if c == nil {
		c = newClock()
	}
	mods = append([]func(*options){func(o *options) { o.now = c.now }}, mods...)
	return openAt(t, filepath.Join(t.TempDir(), "memory.db"), mods...), c
}

func rec(scope sdk.Scope, title, body string, tags ...string) sdk.Record {
	return sdk.Record{Scope: scope, Kind: sdk.KindFact, Title: title, Body: body, Tags: tags}
}

func mustRemember(t testing.TB, s *Store, realm string, recs ...sdk.Record) []string {
	t.Helper()
	ids, err := s.Remember(context.Background(), realm, recs)
	if err != nil {
		t.Fatalf("Remember: %v", err)
	}
	if len(ids) != len(recs) {
		t.Fatalf("Remember answered %d ids for %d records", len(ids), len(recs))
	}
	return ids
}

func mustRecall(t testing.TB, s *Store, q sdk.RecallQuery) []sdk.Hit {
	t.Helper()
	hits, err := s.Recall(context.Background(), q)
	if err != nil {
		t.Fatalf("Recall(%q): %v", q.Query, err)
	}
	return hits
}

func recallIDs(t testing.TB, s *Store, q sdk.RecallQuery) []string {
	t.Helper()
	hits := mustRecall(t, s, q)
	ids := make([]string, len(hits))
	for i, h := range hits {
		ids[i] = h.Record.ID
	}
	return ids
}

func mustGet(t testing.TB, s *Store, realm string, ids ...string) []sdk.Record {
	t.Helper()
	recs, err := s.Get(context.Background(), realm, ids)
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	return recs
}

func sortedCopy(ids []string) []string {
	out := slices.Clone(ids)
	slices.Sort(out)
	return out
}

// wantErr fails unless err wraps sentinel and mentions every word of want.
func wantErr(t testing.TB, what string, err, sentinel error, want ...string) {
	t.Helper()
	t.Logf("%s: %v", what, err)
	if err == nil {
		t.Fatalf("%s: succeeded, want an error wrapping %v", what, sentinel)
	}
	if sentinel != nil && !errors.Is(err, sentinel) {
		t.Fatalf("%s: error %q does not wrap %v", what, err, sentinel)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Fatalf("%s: error %q does not mention %q", what, err, w)
		}
	}
}

// rowCount counts the rows of a table straight from the database.
func rowCount(t testing.TB, s *Store, table string) int {
	t.Helper()
	var n int
	if err := s.db.r.QueryRow("SELECT count(*) FROM " + table).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}
