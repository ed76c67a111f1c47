package lru

import "testing"

func TestLRU(t *testing.T) {
	l := New[string, int](2)
	l.Add("a", 1)
	l.Add("b", 2)
	l.Get("a") // b is now the oldest
	l.Add("c", 3)
	if _, ok := l.Get("b"); ok {
		t.Fatal("b should have been evicted")
	}
	for k, want := range map[string]int{"a": 1, "c": 3} {
		if v, ok := l.Get(k); !ok || v != want {
			t.Fatalf("get(%s) = %v %v", k, v, ok)
		}
	}
	l.Add("a", 10) // replace, no eviction
	if v, _ := l.Get("a"); v != 10 || l.Len() != 2 {
		t.Fatalf("replace: %v, len %d", v, l.Len())
	}
	l.Remove("a")
	l.Remove("missing")
	if _, ok := l.Get("a"); ok || l.Len() != 1 {
		t.Fatalf("after Remove: len %d", l.Len())
	}
	l.Add("d", 4) // room again: c stays
	if _, ok := l.Get("c"); !ok {
		t.Fatal("Remove left the cache full")
	}
	// d is the oldest now; Oldest answers it and leaves it the oldest.
	for range 2 {
		if k, v, ok := l.Oldest(); k != "d" || v != 4 || !ok {
			t.Fatalf("Oldest = %s %d %v, want d 4", k, v, ok)
		}
	}
	l.RemoveOldest()
	l.RemoveOldest()
	if _, _, ok := l.Oldest(); ok {
		t.Fatal("Oldest of an empty cache answered an entry")
	}
}
