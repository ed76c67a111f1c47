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
// many, ties in time and names, key anywhere in its identity's order),
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
		identities := 1 + rng.IntN(24)
		if seed%3 == 0 {
			identities = 1 + rng.IntN(4) // a realm a few identities flood
		}
		err := db.Tx(ctx, "fill", func(tx *sql.Tx) error {
			for i := range identities {
				for j := range 1 + rng.IntN(30) {
					k := coordinator.SessionKey{Realm: realm, Identity: fmt.Sprint("id", i), Session: fmt.Sprint("s", rng.IntN(4), "-", j)}
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
			_, ok, err := pickFromLargest(ctx, tx, key, n)
			if ok {
				targeted++
			} else {
				ranked++
			}
			if err != nil {
				return err
			}
			if got, _, err = evictFrom(ctx, tx, key, n); err != nil {
				return err
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
// session each, past the bound the oldest go, whichever way the victims are
// read; a flooder then loses its own older sessions, never another's, and
// the store ranks such a realm straight away for a few steps.
func TestBoundEvictsManyIdentities(t *testing.T) {
	clk := newClock()
	s, _ := openStore(t, t.TempDir(), Options{PerRealm: 20, Now: clk.now})
	visit := func(v string) {
		t.Helper()
		clk.advance(time.Millisecond)
		if err := s.Update(ctx, idKey(v), inject(1, v)); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 30 {
		visit(fmt.Sprint("u", i, "/s"))
	}
	if s.ranked["r"] == 0 {
		t.Error("a realm of 20 identities in play was not marked for ranking")
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
