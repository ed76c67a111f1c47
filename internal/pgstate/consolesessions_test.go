package pgstate

import (
	"context"
	"testing"
	"time"
)

// TestConsoleSessionsAcrossHosts: a sign-in stored through one pool is
// read through the other, a delete there ends it for both, an expired one
// is gone, and the bounds drop the oldest of the token, then of all.
func TestConsoleSessionsAcrossHosts(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dbs := open(t, 2)
	a, b := NewConsoleSessions(dbs[0]), NewConsoleSessions(dbs[1])
	later := time.Now().Add(time.Hour)

	if err := a.Put(ctx, "d1", "app", "c1", later, 10, 100); err != nil {
		t.Fatal(err)
	}
	if err := a.Put(ctx, "gone", "app", "c0", time.Now().Add(-time.Second), 10, 100); err != nil {
		t.Fatal(err)
	}
	token, csrf, _, found, err := b.Get(ctx, "d1")
	if err != nil || !found || token != "app" || csrf != "c1" {
		t.Fatalf("B reads A's sign-in = %q %q %v %v", token, csrf, found, err)
	}
	if _, _, _, found, err := b.Get(ctx, "gone"); err != nil || found {
		t.Fatalf("an expired sign-in read back: %v %v", found, err)
	}
	if err := b.Delete(ctx, "d1"); err != nil {
		t.Fatal(err)
	}
	if _, _, _, found, err := a.Get(ctx, "d1"); err != nil || found {
		t.Fatalf("a sign-in deleted on B still found on A: %v %v", found, err)
	}

	// Bounds: 2 per token, 3 in all; later expiries are newer.
	for i, put := range []struct{ digest, token string }{
		{"t1", "one"}, {"t2", "one"}, {"t3", "one"}, {"u1", "two"}, {"u2", "two"},
	} {
		if err := a.Put(ctx, put.digest, put.token, "c", later.Add(time.Duration(i)*time.Minute), 2, 3); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		digest string
		kept   bool
	}{
		{"t1", false}, // the token's oldest beyond 2
		{"t2", false}, // the oldest of all beyond 3
		{"t3", true}, {"u1", true}, {"u2", true},
	} {
		_, _, _, found, err := b.Get(ctx, tc.digest)
		if err != nil || found != tc.kept {
			t.Errorf("%s: found %v (%v), want %v", tc.digest, found, err, tc.kept)
		}
	}
}
