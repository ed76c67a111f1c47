package sessionstore

import (
	"slices"
	"testing"
	"time"

	"github.com/memhost/memhost/coordinator"
)

// TestReadsCountAsVisitsForTheBound: a visit that only reads (a turn of a
// session whose budget is spent, or whose records were all shown) is a
// visit, so the realm bound must not drop that session as the least
// recently visited while an older one sits idle: its budget and dedup set
// would start over, and its next turns would inject again what it holds.
func TestReadsCountAsVisitsForTheBound(t *testing.T) {
	read := func(*coordinator.SessionState) bool { return false }
	tests := []struct {
		name   string
		bound  int
		visits []string // identity/session; a "?" prefix is a read-only visit
		gone   []string
		kept   []string
	}{
		{name: "a read session outlives an idle older one", bound: 3,
			visits: []string{"a/1", "a/2", "a/3", "?a/1", "a/4"}, gone: []string{"a/2"}, kept: []string{"a/1", "a/3", "a/4"}},
		{name: "reads of every session order them", bound: 3,
			visits: []string{"a/1", "a/2", "a/3", "?a/2", "?a/1", "?a/3", "a/4"}, gone: []string{"a/2"}, kept: []string{"a/1", "a/3", "a/4"}},
		{name: "a read session outlives another identity's tie", bound: 4,
			visits: []string{"a/1", "a/2", "b/1", "b/2", "?a/1", "c/1"}, gone: []string{"a/2"}, kept: []string{"a/1", "b/1", "b/2", "c/1"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			clk := newClock()
			s, _ := openStore(t, t.TempDir(), Options{PerRealm: tc.bound, Now: clk.now})
			for _, v := range tc.visits {
				clk.advance(time.Second)
				fn := inject(1, v)
				if v[0] == '?' {
					v, fn = v[1:], read
				}
				if err := s.Update(ctx, idKey(v), fn); err != nil {
					t.Fatal(err)
				}
			}
			var gone, kept []string
			for _, v := range append(append([]string{}, tc.gone...), tc.kept...) {
				if st := get(t, s, idKey(v)); st.IsZero() {
					gone = append(gone, v)
				} else {
					kept = append(kept, v)
				}
			}
			if len(gone) != len(tc.gone) || len(kept) != len(tc.kept) || !slices.Equal(gone, tc.gone) {
				t.Fatalf("gone %v, kept %v; want gone %v, kept %v", gone, kept, tc.gone, tc.kept)
			}
		})
	}
}

// TestReadsCountAsVisitsForTheTTL: a session read since its last write is
// idle from that read, as Expire and the table count it, whether the
// visit after finds it in the cache or in the file: the cache kept the
// write's time, so a session read an hour after its write and visited a
// day after the write (23 hours idle) started over with a fresh budget,
// while a session out of the cache kept its state.
func TestReadsCountAsVisitsForTheTTL(t *testing.T) {
	const ttl = 24 * time.Hour // refresh: 90 minutes
	tests := []struct {
		name       string
		cacheSize  int
		readAfter  time.Duration // the read, after the write
		visitAfter time.Duration // the visit, after the write
		kept       bool
	}{
		{name: "cached, idle less than the TTL since the read", cacheSize: 8, readAfter: time.Hour, visitAfter: ttl + time.Minute, kept: true},
		{name: "from the file, idle less than the TTL since the read", cacheSize: 1, readAfter: time.Hour, visitAfter: ttl + time.Minute, kept: true},
		{name: "cached, idle the TTL since the read", cacheSize: 8, readAfter: time.Hour, visitAfter: time.Hour + ttl, kept: false},
		{name: "from the file, idle the TTL since the read", cacheSize: 1, readAfter: time.Hour, visitAfter: time.Hour + ttl, kept: false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			clk := newClock()
			s, _ := openStore(t, t.TempDir(), Options{TTL: ttl, CacheSize: tc.cacheSize, Now: clk.now})
			if err := s.Update(ctx, idKey("a/1"), inject(10, "x")); err != nil {
				t.Fatal(err)
			}
			clk.advance(tc.readAfter)
			if st := get(t, s, idKey("a/1")); st.InjectedBytes != 10 {
				t.Fatalf("the read found %d bytes, want 10", st.InjectedBytes)
			}
			if tc.cacheSize == 1 {
				// Another session takes the cache's one place; the
				// merge puts the read in the file first.
				if err := s.Update(ctx, idKey("b/1"), inject(1, "y")); err != nil {
					t.Fatal(err)
				}
			}
			clk.advance(tc.visitAfter - tc.readAfter)
			if kept := get(t, s, idKey("a/1")).InjectedBytes == 10; kept != tc.kept {
				t.Fatalf("state kept = %v, want %v", kept, tc.kept)
			}
		})
	}
}
