package bleve

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/memhost/memhost/sdk"
	"github.com/memhost/memhost/sdk/tokenize"
)

func TestCatalogCodec(t *testing.T) {
	cases := []catEntry{
		{id: "r1", scope: "identity:alice", status: sdk.StatusActive, updated: 1},
		{id: "x.y-z_1", scope: "realm", status: sdk.StatusQuarantined, updated: math.MinInt64, expires: math.MaxInt64, useCount: math.MaxInt64, usageKey: 1234.5678901234567},
		{id: "r2", scope: "mob:m", status: sdk.StatusActive, useCount: 1, usageKey: -1e-300},
	}
	for _, e := range cases {
		got, err := decodeCatalog(encodeCatalog(e))
		if err != nil || got != e {
			t.Fatalf("round trip of %+v = %+v, %v", e, got, err)
		}
	}
	for _, bad := range []string{"", "c1", "c2\tr\trealm\tactive\t1\t0\t0\t0", "c1\t\trealm\tactive\t1\t0\t0\t0",
		"c1\tr\trealm\tactive\tx\t0\t0\t0", "c1\tr\trealm\tactive\t1\t0\t0\t0\textra", "c1\tr\trealm\tactive\t1\t0\t1\tNaN", "c1\tr\trealm\tactive\t1\t0\t1\t+Inf"} {
		if _, err := decodeCatalog(bad); err == nil {
			t.Errorf("decodeCatalog(%q) accepted", bad)
		}
	}
}

func FuzzDecodeCatalog(f *testing.F) {
	f.Add(encodeCatalog(catEntry{id: "r1", scope: "realm", status: sdk.StatusActive, updated: 7}))
	f.Add("c1\tr\trealm\tactive\t-1\t9223372036854775807\t0\t0")
	f.Add("c1\tr\trealm\tactive\t1\t0\t3\t1e300")
	f.Add("c1\t\t\t\t\t\t\t")
	f.Add("\t\t\t")
	f.Fuzz(func(t *testing.T, s string) {
		e, err := decodeCatalog(s)
		if err != nil {
			return
		}
		if again, err := decodeCatalog(encodeCatalog(e)); err != nil || again != e {
			t.Fatalf("decoded %+v does not round-trip: %+v, %v", e, again, err)
		}
	})
}

func TestNanosClamps(t *testing.T) {
	far := time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC)
	if nanos(far) != math.MaxInt64 || nanos(time.Date(1000, 1, 1, 0, 0, 0, 0, time.UTC)) != math.MinInt64 || nanos(time.Time{}) != 0 {
		t.Fatal("nanos does not clamp")
	}
	now := time.Now()
	if nanos(now) != now.UnixNano() {
		t.Fatal("nanos changed an ordinary time")
	}
}

func TestFarTimes(t *testing.T) {
	p := newProvider(t, "")
	far := rec("realm", "far future", "expires in the year 9999")
	far.ExpiresAt = time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC)
	past := rec("realm", "far past", "expired in the year 1000")
	past.ExpiresAt = time.Date(1000, 1, 1, 0, 0, 0, 0, time.UTC)
	ids := remember(t, p, realm, far, past)
	if got := recallIDs(t, p, sdk.RecallQuery{Query: "expires expired year"}); !slices.Equal(got, ids[:1]) {
		t.Fatalf("recall = %v, want only the far-future record %s", got, ids[0])
	}
	rows, err := p.Manifest(ctx, sdk.ManifestQuery{Realm: realm, Tier: sdk.TierFull})
	if err != nil || len(rows) != 1 || rows[0].ID != ids[0] {
		t.Fatalf("manifest = %v, %v", rows, err)
	}
	tooFar := rec("realm", "x", "y")
	tooFar.ExpiresAt = time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)
	if _, err := p.Remember(ctx, realm, []sdk.Record{tooFar}); !errors.Is(err, sdk.ErrInvalid) || !strings.Contains(err.Error(), "expires_at") {
		t.Fatalf("year 10000: %v, want ErrInvalid naming expires_at", err)
	}
	if err := p.MarkUsed(ctx, realm, ids, time.Date(20000, 1, 1, 0, 0, 0, 0, time.UTC)); !errors.Is(err, sdk.ErrInvalid) {
		t.Fatalf("MarkUsed in year 20000: %v, want ErrInvalid", err)
	}
}

// TestCatalogSurvivesReopen checks that the catalog rebuilt from the index
// at open answers exactly what the live one did.
func TestCatalogSurvivesReopen(t *testing.T) {
	dir := t.TempDir()
	p := newProvider(t, dir)
	var ids []string
	for i := range 30 {
		r := rec(fmt.Sprintf("identity:u%d", i%3), fmt.Sprintf("reopen %d", i), fmt.Sprintf("body %d", i))
		if i%7 == 0 {
			r.ExpiresAt = time.Now().Add(time.Hour)
		}
		ids = append(ids, remember(t, p, realm, r)...)
	}
	if err := p.MarkUsed(ctx, realm, ids[3:9], time.Now()); err != nil {
		t.Fatal(err)
	}
	if err := p.MarkUsed(ctx, realm, ids[5:7], time.Now().Add(-48*time.Hour)); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Forget(ctx, realm, ids[10:12]); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Supersede(ctx, realm, ids[12], rec("", "replacement", "new body")); err != nil {
		t.Fatal(err)
	}
	queries := []sdk.ManifestQuery{
		{Realm: realm, Tier: sdk.TierFull},
		{Realm: realm, Tier: sdk.TierWorkingSet, K: 3},
		{Realm: realm, Tier: sdk.TierWorkingSet, K: 4, Scopes: []sdk.Scope{"identity:u1"}},
	}
	var before [][]sdk.ManifestRow
	for _, q := range queries {
		rows, err := p.Manifest(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		before = append(before, rows)
	}
	if !p.realms[realm].cat.mayHoldExpiring() {
		t.Fatal("catalog lost track of expiring records")
	}
	p.Close()
	p2 := newProvider(t, dir)
	for i, q := range queries {
		rows, err := p2.Manifest(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		if len(rows) != len(before[i]) {
			t.Fatalf("query %+v: %d rows after reopen, %d before", q, len(rows), len(before[i]))
		}
		for j := range rows {
			a, b := rows[j], before[i][j]
			if a.ID != b.ID || math.Abs(a.Rank-b.Rank) > 1e-6*b.Rank {
				t.Fatalf("query %+v row %d: %s rank %v after reopen, %s rank %v before", q, j, a.ID, a.Rank, b.ID, b.Rank)
			}
		}
	}
}

// TestSchemaFollowsTokenizer: an index's text fields hold the tokenizer's
// terms, so a tokenizer version the schema does not name would let an old
// index answer with terms no query cuts any more.
func TestSchemaFollowsTokenizer(t *testing.T) {
	if want := " terms/" + strconv.Itoa(tokenize.Version); !strings.HasSuffix(schemaVersion, want) {
		t.Fatalf("schemaVersion is %q with tokenizer version %d; want it to end in %q", schemaVersion, tokenize.Version, want)
	}
}
