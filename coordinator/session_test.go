package coordinator

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/memhost/memhost/sdk"
)

func add(s *SessionState) bool { s.InjectedBytes++; return true }

func TestMemoryStoreIsBoundedPerRealm(t *testing.T) {
	ctx := context.Background()
	for _, size := range []int{1, 3, 100, 5000} {
		m := NewMemoryStore(size)
		victim := SessionKey{Realm: "a", Identity: "i", Session: "victim"}
		_ = m.Update(ctx, victim, add)
		for i := range size * 3 {
			_ = m.Update(ctx, SessionKey{Realm: "b", Identity: "i", Session: fmt.Sprint(i)}, add)
		}
		// Sharded stores round each shard up; the bound holds within that.
		if n := m.Len("b"); n > size+len(m.shards) || n < size-len(m.shards) {
			t.Fatalf("size %d holds %d sessions of realm b", size, n)
		}
		var got int
		_ = m.Update(ctx, victim, func(s *SessionState) bool { got = s.InjectedBytes; return false })
		if got != 1 {
			t.Fatalf("size %d: a flood of realm b evicted realm a's session", size)
		}
	}
	// The store forgets the least recently used session.
	m := NewMemoryStore(2)
	key := func(s string) SessionKey { return SessionKey{Realm: "r", Identity: "i", Session: s} }
	touch := func(s string) int {
		var v int
		_ = m.Update(ctx, key(s), func(st *SessionState) bool { st.InjectedBytes++; v = st.InjectedBytes; return true })
		return v
	}
	touch("a")
	touch("b")
	touch("a")
	touch("c") // evicts b
	if touch("a") != 3 || touch("b") != 1 {
		t.Fatal("LRU evicted the wrong session")
	}
}

// TestMemoryStoreFloodEvictsTheFloodersOwn: one identity opening many
// sessions in a realm loses its own oldest, never another identity's
// session (whose budget and dedup set would start over); a lone identity
// still gets the whole bound, and ties go to the least recently used.
func TestMemoryStoreFloodEvictsTheFloodersOwn(t *testing.T) {
	ctx := context.Background()
	for _, size := range []int{2, 60, 5000} {
		m := NewMemoryStore(size)
		alice := SessionKey{Realm: "r", Identity: "alice", Session: "s"}
		_ = m.Update(ctx, alice, add)
		for i := range size * 3 {
			_ = m.Update(ctx, SessionKey{Realm: "r", Identity: "mallory", Session: fmt.Sprint(i)}, add)
		}
		var got int
		_ = m.Update(ctx, alice, func(s *SessionState) bool { got = s.InjectedBytes; return false })
		if got != 1 {
			t.Errorf("size %d: mallory's flood evicted alice's session", size)
		}
		var newest int
		_ = m.Update(ctx, SessionKey{Realm: "r", Identity: "mallory", Session: fmt.Sprint(size*3 - 1)}, func(s *SessionState) bool { newest = s.InjectedBytes; return false })
		if newest != 1 {
			t.Errorf("size %d: mallory's newest session was evicted", size)
		}
	}
	tests := []struct {
		name   string
		bound  int
		visits []string // identity/session, in order
		gone   []string
		kept   []string
	}{
		{"a lone identity gets the whole bound", 3,
			[]string{"a/1", "a/2", "a/3", "a/4"}, []string{"a/1"}, []string{"a/2", "a/3", "a/4"}},
		{"the identity with the most sessions loses its oldest", 3,
			[]string{"a/1", "b/1", "b/2", "a/1", "c/1"}, []string{"b/1"}, []string{"a/1", "b/2", "c/1"}},
		{"a tie goes to the least recently used", 4,
			[]string{"a/1", "a/2", "b/1", "b/2", "a/1", "c/1"}, []string{"a/2"}, []string{"a/1", "b/1", "b/2", "c/1"}},
		{"the newcomer may be the flooder", 3,
			[]string{"a/1", "b/1", "b/2", "b/3"}, []string{"b/1"}, []string{"a/1", "b/2", "b/3"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := NewMemoryStore(tc.bound)
			key := func(v string) SessionKey {
				id, s, _ := strings.Cut(v, "/")
				return SessionKey{Realm: "r", Identity: id, Session: s}
			}
			for _, v := range tc.visits {
				_ = m.Update(ctx, key(v), add)
			}
			for _, v := range tc.gone {
				_ = m.Update(ctx, key(v), func(s *SessionState) bool {
					if !s.IsZero() {
						t.Errorf("%s was kept", v)
					}
					return false
				})
			}
			for _, v := range tc.kept {
				_ = m.Update(ctx, key(v), func(s *SessionState) bool {
					if s.IsZero() {
						t.Errorf("%s was evicted", v)
					}
					return false
				})
			}
			if n := m.Len("r"); n != tc.bound {
				t.Errorf("the realm holds %d sessions, bound %d", n, tc.bound)
			}
		})
	}
}

func TestMemoryStoreVisitWithoutChangeCreatesNothing(t *testing.T) {
	m := NewMemoryStore(10)
	for i := range 20 {
		_ = m.Update(context.Background(), SessionKey{Realm: "r", Identity: "i", Session: fmt.Sprint(i)}, func(*SessionState) bool { return false })
	}
	if n := m.Len("r"); n != 0 {
		t.Fatalf("visits that changed nothing left %d sessions", n)
	}
}

func TestMemoryStoreConcurrentUpdates(t *testing.T) {
	m := NewMemoryStore(10000)
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := range 500 {
				k := SessionKey{Realm: "r", Identity: "i", Session: fmt.Sprint(i % 50)}
				_ = m.Update(context.Background(), k, func(s *SessionState) bool {
					s.InjectedIDs = append(s.InjectedIDs, fmt.Sprint(w))
					return true
				})
			}
		})
	}
	wg.Wait()
	total := 0
	for i := range 50 {
		_ = m.Update(context.Background(), SessionKey{Realm: "r", Identity: "i", Session: fmt.Sprint(i)}, func(s *SessionState) bool { total += len(s.InjectedIDs); return false })
	}
	if total != 8*500 {
		t.Fatalf("%d updates landed, want %d", total, 8*500)
	}
}

func TestDeriveNonce(t *testing.T) {
	k1, k2 := NewHostKey(), NewHostKey()
	base := SessionKey{Realm: "default", Identity: "alice", Session: "s1"}
	n := DeriveNonce(k1, base)
	if len(n) != 32 || DeriveNonce(k1, base) != n {
		t.Fatalf("nonce %q is not a stable 32-digit value", n)
	}
	differ := []struct {
		name string
		key  []byte
		sk   SessionKey
	}{
		{"another host key", k2, base},
		{"another realm", k1, SessionKey{Realm: "other", Identity: "alice", Session: "s1"}},
		{"another identity", k1, SessionKey{Realm: "default", Identity: "bob", Session: "s1"}},
		{"another session", k1, SessionKey{Realm: "default", Identity: "alice", Session: "s2"}},
		{"no session", k1, SessionKey{Realm: "default", Identity: "alice"}},
		// Without length prefixes these two would hash the same bytes.
		{"shifted field boundary", k1, SessionKey{Realm: "default", Identity: "alices", Session: "1"}},
	}
	for _, tt := range differ {
		if DeriveNonce(tt.key, tt.sk) == n {
			t.Errorf("%s: same nonce", tt.name)
		}
	}
}

func TestNewRefusesShortHostKey(t *testing.T) {
	_, err := New(DefaultConfig(), Options{Providers: RealmProviders{}, HostKey: make([]byte, MinHostKeyBytes-1)})
	if !errors.Is(err, sdk.ErrInvalid) {
		t.Fatalf("a %d-byte host key: %v", MinHostKeyBytes-1, err)
	}
}

func TestValidateSessionKey(t *testing.T) {
	for _, ok := range []string{"s1", "user:42/thread:7", "会话-1", "550e8400-e29b-41d4-a716-446655440000", "...", ".a"} {
		if err := ValidateSessionKey(ok); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
	for _, bad := range []string{"", " ", "a b", "a\tb", "a\x00", "\xff", string(make([]byte, 257)), ".", ".."} {
		if err := ValidateSessionKey(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// TestTurnsThatInjectNothingKeepNoState: only an injection creates session
// state, so a flood of empty turns fills no store.
func TestTurnsThatInjectNothingKeepNoState(t *testing.T) {
	store := NewMemoryStore(100)
	f := newFixture(t, func(_ *Config, o *Options) { o.Sessions = store })
	f.add(rec("Coffee", "flat white"))
	for i := range 10 {
		if res := f.turn(alice, fmt.Sprint("empty-", i), "unrelated words"); res.SkipReason == SkipNone {
			t.Fatalf("turn %d injected %v", i, res.RecordIDs)
		}
	}
	if err := f.c.OnSessionCompacted(context.Background(), alice, "never-seen"); err != nil {
		t.Fatal(err)
	}
	if n := store.Len("default"); n != 0 {
		t.Fatalf("turns that injected nothing left %d sessions", n)
	}
	if res := f.turn(alice, "s", "coffee"); res.SkipReason != SkipNone {
		t.Fatalf("coffee turn skipped: %s", res.SkipReason)
	}
	if n := store.Len("default"); n != 1 {
		t.Fatalf("an injecting turn left %d sessions, want 1", n)
	}
}
