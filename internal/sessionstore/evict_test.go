package sessionstore

import (
	"cmp"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/memhost/memhost/coordinator"
)

// errRollBack ends a transaction a test only looks through.
var errRollBack = errors.New("roll back")

// TestEvictionPicksAsTheRanking: on random realms (one identity up to
// many, ties in time and names, odd bytes in names, key anywhere in its
// identity's order or absent),
// evictFrom drops exactly the sessions the realm-wide ranking would,
// whether it read the largest identities alone or fell back to the
// ranking; and the targeted read is the one taken when few identities are
// in play.
func TestEvictionPicksAsTheRanking(t *testing.T) {
	_, db := openStore(t, t.TempDir(), Options{})
	targeted, ranked := 0, 0
	for seed := range uint64(300) {
		rng := rand.New(rand.NewPCG(seed, 7))
		realm := fmt.Sprint("r", seed)
		var keys []coordinator.SessionKey
		identities, perIdentity := 1+rng.IntN(24), 30
		switch seed % 4 {
		case 0:
			identities = 1 + rng.IntN(4) // a realm a few identities flood
		case 2:
			identities, perIdentity = 1+rng.IntN(40), 1 // one session each
		}
		err := db.Tx(ctx, "fill", func(tx *sql.Tx) error {
			for i := range identities {
				for j := range 1 + rng.IntN(perIdentity) {
					k := coordinator.SessionKey{Realm: realm, Identity: fmt.Sprint("id", i), Session: fmt.Sprint("s", rng.IntN(4), "-", j)}
					if seed%5 == 1 {
						// Names SQLite and Go must order alike, byte by byte.
						odd := []string{"", "\x00", "\xff", "é", "'", "%_"}
						k.Identity = odd[i%len(odd)] + k.Identity
						k.Session = odd[j%len(odd)] + k.Session
					}
					// Few distinct times: ties in time are common.
					if _, err := tx.ExecContext(ctx, upsertSession, k.Realm, k.Identity, k.Session, []byte(`{}`), 1000+rng.IntN(8)); err != nil {
						return err
					}
					keys = append(keys, k)
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		key := keys[rng.IntN(len(keys))]
		if seed%7 == 3 {
			key.Session = "not-there" // a key the table does not hold
		}
		n := 1 + rng.IntN(len(keys))
		var want, got []coordinator.SessionKey
		var left int
		look := func(fn func(tx *sql.Tx) error) {
			t.Helper()
			if err := db.Tx(ctx, "look", func(tx *sql.Tx) error {
				if err := fn(tx); err != nil {
					return err
				}
				return errRollBack
			}); !errors.Is(err, errRollBack) {
				t.Fatalf("seed %d: %v", seed, err)
			}
		}
		look(func(tx *sql.Tx) (err error) { want, err = evictByRanking(ctx, tx, key, n); return err })
		look(func(tx *sql.Tx) error {
			var wasRanked bool
			var err error
			if got, wasRanked, err = evictFrom(ctx, tx, key, n); err != nil {
				return err
			}
			if wasRanked {
				ranked++
			} else {
				targeted++
			}
			return tx.QueryRowContext(ctx, `SELECT count(*) FROM sessions WHERE realm = ?`, realm).Scan(&left)
		})
		byName := func(a, b coordinator.SessionKey) int {
			return cmp.Or(cmp.Compare(a.Identity, b.Identity), cmp.Compare(a.Session, b.Session))
		}
		slices.SortFunc(want, byName)
		slices.SortFunc(got, byName)
		if !slices.Equal(got, want) {
			t.Fatalf("seed %d (%d identities, %d sessions, n %d, key %v):\n got %v\nwant %v", seed, identities, len(keys), n, key, got, want)
		}
		if slices.Contains(got, key) {
			t.Fatalf("seed %d: key %v evicted", seed, key)
		}
		if left != len(keys)-len(got) {
			t.Fatalf("seed %d: %d sessions left of %d after dropping %d", seed, left, len(keys), len(got))
		}
	}
	if targeted == 0 || ranked == 0 {
		t.Fatalf("targeted %d, ranked %d: both ways must be exercised", targeted, ranked)
	}
}

// TestBoundEvictsManyIdentities: in a realm of many identities of one
// session each, past the bound the oldest go (read as the realm's oldest);
// a flooder of a few sessions among them, which makes the store rank the
// realm, then loses its own older ones, never another's.
func TestBoundEvictsManyIdentities(t *testing.T) {
	clk := newClock()
	s, _ := openStore(t, t.TempDir(), Options{PerRealm: 20, Now: clk.now})
	visit := visitor(t, s, clk)
	for i := range 30 {
		visit(fmt.Sprint("u", i, "/s"))
	}
	for i := range 10 {
		visit(fmt.Sprint("mallory/", i))
	}
	for i := range 30 {
		v := fmt.Sprint("u", i, "/s")
		got := get(t, s, idKey(v))
		if kept := !got.IsZero(); kept != (i > 10) {
			t.Errorf("%s kept = %v", v, kept)
		}
	}
	for i := range 10 {
		v := fmt.Sprint("mallory/", i)
		got := get(t, s, idKey(v))
		if kept := !got.IsZero(); kept != (i == 9) {
			t.Errorf("%s kept = %v", v, kept)
		}
	}
	if n := count(t, s, "r"); n != 20 {
		t.Errorf("the realm holds %d sessions, bound 20", n)
	}
}

// TestBoundTargetsAgainAfterRanking: a realm of many identities of two
// sessions falls back to ranking the whole realm; once they have expired
// and one identity floods it, the store reads the largest identities again
// after rankedSteps steps and evicts the flooder's oldest all along; a zero
// or negative step drops nothing either way.
func TestBoundTargetsAgainAfterRanking(t *testing.T) {
	clk := newClock()
	const bound = 40
	s, db := openStore(t, t.TempDir(), Options{PerRealm: bound, TTL: time.Hour, Now: clk.now})
	visit := visitor(t, s, clk)
	for i := range 18 {
		visit(fmt.Sprint("u", i, "/a"))
		visit(fmt.Sprint("u", i, "/b"))
	}
	for i := range 5 {
		visit(fmt.Sprint("v", i, "/a")) // the last passes the bound
	}
	if s.ranked["r"] != rankedSteps {
		t.Fatalf("18 identities of two sessions in play: ranked = %d, want %d", s.ranked["r"], rankedSteps)
	}
	clk.advance(2 * time.Hour)
	if n, err := s.Expire(ctx); err != nil || n != bound {
		t.Fatalf("Expire dropped %d (%v), want %d", n, err, bound)
	}
	// The flood's first sessions fill the realm; each one past them is an
	// eviction step: rankedSteps of them rank, the next reads mallory.
	for i := range bound + rankedSteps + 1 {
		visit(fmt.Sprint("mallory/", i))
		if _, ranking := s.ranked["r"]; ranking != (i < bound+rankedSteps) {
			t.Fatalf("after mallory's session %d: ranking the realm = %v", i, ranking)
		}
	}
	for i := range bound + rankedSteps + 1 {
		v := fmt.Sprint("mallory/", i)
		got := get(t, s, idKey(v))
		if kept := !got.IsZero(); kept != (i > rankedSteps) {
			t.Errorf("%s kept = %v", v, kept)
		}
	}
	for _, n := range []int{0, -1} {
		err := db.Tx(ctx, "look", func(tx *sql.Tx) error {
			for _, evict := range []func() ([]coordinator.SessionKey, error){
				func() ([]coordinator.SessionKey, error) { return evictByRanking(ctx, tx, idKey("mallory/x"), n) },
				func() ([]coordinator.SessionKey, error) {
					v, _, err := evictFrom(ctx, tx, idKey("mallory/x"), n)
					return v, err
				},
			} {
				if v, err := evict(); err != nil || len(v) != 0 {
					t.Errorf("a step of %d dropped %v (%v)", n, v, err)
				}
			}
			return errRollBack
		})
		if !errors.Is(err, errRollBack) {
			t.Fatal(err)
		}
	}
	if n := count(t, s, "r"); n != bound {
		t.Errorf("the realm holds %d sessions, bound %d", n, bound)
	}
}

// visitor answers a visit that injects into "identity/session" of realm r
// a millisecond after the one before.
func visitor(t *testing.T, s *Store, clk *clock) func(v string) {
	return func(v string) {
		t.Helper()
		clk.advance(time.Millisecond)
		if err := s.Update(ctx, idKey(v), inject(1, v)); err != nil {
			t.Fatal(err)
		}
	}
}
