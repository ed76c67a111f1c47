package coordinator

import (
	"context"
	"errors"
	"fmt"
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
	for _, ok := range []string{"s1", "user:42/thread:7", "会话-1", "550e8400-e29b-41d4-a716-446655440000"} {
		if err := ValidateSessionKey(ok); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
	for _, bad := range []string{"", " ", "a b", "a\tb", "a\x00", "\xff", string(make([]byte, 257))} {
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
