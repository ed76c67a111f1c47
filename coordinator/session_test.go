package coordinator

import (
	"context"
	"fmt"
	"sync"
	"testing"
)

func TestMemoryStoreIsBounded(t *testing.T) {
	for _, size := range []int{1, 3, 100, 5000} {
		m := NewMemoryStore(size)
		for i := range size * 3 {
			_ = m.Update(context.Background(), SessionKey{Realm: "r", Identity: "i", Session: fmt.Sprint(i)}, func(s *SessionState) { s.InjectedBytes = i })
		}
		// Sharded stores round each shard up; the bound holds within that.
		if n := m.Len(); n > size+len(m.shards) || n < size-len(m.shards) {
			t.Fatalf("size %d holds %d sessions", size, n)
		}
	}
	// The store forgets the least recently used session.
	m := NewMemoryStore(2)
	key := func(s string) SessionKey { return SessionKey{Realm: "r", Identity: "i", Session: s} }
	touch := func(s string) int {
		var v int
		_ = m.Update(context.Background(), key(s), func(st *SessionState) { st.InjectedBytes++; v = st.InjectedBytes })
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

func TestMemoryStoreConcurrentUpdates(t *testing.T) {
	m := NewMemoryStore(10000)
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := range 500 {
				k := SessionKey{Realm: "r", Identity: "i", Session: fmt.Sprint(i % 50)}
				_ = m.Update(context.Background(), k, func(s *SessionState) { s.InjectedIDs = append(s.InjectedIDs, fmt.Sprint(w)) })
			}
		})
	}
	wg.Wait()
	total := 0
	for i := range 50 {
		_ = m.Update(context.Background(), SessionKey{Realm: "r", Identity: "i", Session: fmt.Sprint(i)}, func(s *SessionState) { total += len(s.InjectedIDs) })
	}
	if total != 8*500 {
		t.Fatalf("%d updates landed, want %d", total, 8*500)
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
