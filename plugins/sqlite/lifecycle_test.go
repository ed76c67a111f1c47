package sqlite

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/memhost/memhost/sdk"
	"github.com/memhost/memhost/sdk/conformance"
	"github.com/memhost/memhost/sdk/usage"
)

func TestForget(t *testing.T) {
	s, _ := open(t, nil)
	ctx := context.Background()
	ids := mustRemember(t, s, realm, rec(alice, "Ferret", "ferret facts"), rec(alice, "Otter", "otter facts"))
	if err := s.MarkUsed(ctx, realm, ids, time.Time{}); err != nil {
		t.Fatal(err)
	}
	n, err := s.Forget(ctx, realm, []string{ids[0], ids[0], "r-missing"})
	if err != nil || n != 1 {
		t.Fatalf("Forget = %d, %v; want 1", n, err)
	}
	if n, err := s.Forget(ctx, realm, []string{ids[0]}); err != nil || n != 0 {
		t.Errorf("second Forget = %d, %v; want 0, nil", n, err)
	}
	if got := mustGet(t, s, realm, ids...); len(got) != 1 || got[0].ID != ids[1] {
		t.Errorf("Get after Forget = %v", got)
	}
	if got := recallIDs(t, s, sdk.RecallQuery{Realm: realm, Query: "ferret otter facts"}); !slices.Equal(got, ids[1:]) {
		t.Errorf("Recall after Forget = %v", got)
	}
	for _, tier := range []sdk.ManifestTier{sdk.TierFull, sdk.TierWorkingSet} {
		rows, err := s.Manifest(ctx, sdk.ManifestQuery{Realm: realm, Tier: tier, K: 5})
		if err != nil || len(rows) != 1 || rows[0].ID != ids[1] {
			t.Errorf("Manifest tier %d after Forget = %v, %v", tier, rows, err)
		}
	}
	if rowCount(t, s, "records") != 1 {
		t.Error("forgotten row is still stored")
	}
}

func TestSupersede(t *testing.T) {
	s, c := open(t, nil)
	ctx := context.Background()
	old := mustRemember(t, s, realm, sdk.Record{Scope: team, Kind: sdk.KindProcedure, Title: "Release", Body: "Tag, then build the narwhal image."})[0]
	c.advance(time.Minute)
	// Scope and kind come from the old record when the replacement has none.
	newID, err := s.Supersede(ctx, realm, old, sdk.Record{Title: "Release", Body: "Build the narwhal image, then tag."})
	if err != nil {
		t.Fatal(err)
	}
	got := mustGet(t, s, realm, old, newID)
	if len(got) != 2 {
		t.Fatalf("Get = %v", got)
	}
	if got[0].Status != sdk.StatusSuperseded || !got[0].UpdatedAt.Equal(c.now()) {
		t.Errorf("old record: status %q updated %v", got[0].Status, got[0].UpdatedAt)
	}
	if r := got[1]; r.Status != sdk.StatusActive || r.Supersedes != old || r.Scope != team || r.Kind != sdk.KindProcedure {
		t.Errorf("replacement: %+v", r)
	}
	if ids := recallIDs(t, s, sdk.RecallQuery{Realm: realm, Query: "narwhal image"}); !slices.Equal(ids, []string{newID}) {
		t.Errorf("Recall = %v, want only the replacement", ids)
	}
	// A retry of the same supersede answers the same replacement.
	again, err := s.Supersede(ctx, realm, old, sdk.Record{Title: "Release", Body: "Build the narwhal image, then tag."})
	if err != nil || again != newID {
		t.Errorf("retried Supersede = %s, %v; want %s", again, err, newID)
	}
	_, err = s.Supersede(ctx, realm, old, sdk.Record{Title: "Release", Body: "Something else."})
	wantErr(t, "Supersede of a superseded record", err, sdk.ErrConflict, old)
	_, err = s.Supersede(ctx, realm, "r-missing", rec(team, "x", "y"))
	wantErr(t, "Supersede of a missing record", err, sdk.ErrNotFound, "r-missing")
	_, err = s.Supersede(ctx, realm, newID, sdk.Record{Supersedes: "r-other", Title: "x"})
	wantErr(t, "Supersede naming another predecessor", err, sdk.ErrInvalid, "r-other")
	// The old content may be remembered again: it is no longer live.
	if id := mustRemember(t, s, realm, sdk.Record{Scope: team, Kind: sdk.KindProcedure, Title: "Release", Body: "Tag, then build the narwhal image."})[0]; id == old {
		t.Error("remembering superseded content answered the superseded id")
	}
	// Replacing a record by its own content works too.
	same, err := s.Supersede(ctx, realm, newID, sdk.Record{Title: "Release", Body: "Build the narwhal image, then tag."})
	if err != nil || same == newID {
		t.Errorf("Supersede with identical content = %s, %v", same, err)
	}
}

func TestMarkUsed(t *testing.T) {
	s, c := open(t, nil)
	ctx := context.Background()
	ids := mustRemember(t, s, realm, rec(alice, "A", "a"), rec(alice, "B", "b"))
	at := c.now().Add(-time.Hour)
	if err := s.MarkUsed(ctx, realm, []string{ids[0], ids[0], "r-missing"}, at); err != nil {
		t.Fatal(err)
	}
	if err := s.MarkUsed(ctx, realm, []string{ids[0]}, at.Add(-time.Hour)); err != nil {
		t.Fatal(err)
	}
	if err := s.MarkUsed(ctx, realm, []string{ids[1]}, time.Time{}); err != nil {
		t.Fatal(err)
	}
	got := mustGet(t, s, realm, ids...)
	if got[0].UseCount != 2 || !got[0].LastUsedAt.Equal(at) {
		t.Errorf("record 0: uses %d last %v; want 2 and the latest use %v", got[0].UseCount, got[0].LastUsedAt, at)
	}
	if got[1].UseCount != 1 || !got[1].LastUsedAt.Equal(c.now()) {
		t.Errorf("record 1: uses %d last %v; want 1 at now", got[1].UseCount, got[1].LastUsedAt)
	}
}

func TestUsageKeyDecays(t *testing.T) {
	now := time.Date(2025, 6, 1, 0, 0, 0, 0, time.UTC)
	once := usage.Key(0, false, now)
	if r := usage.Rank(once, now); abs(r-1) > 1e-9 {
		t.Errorf("one use now ranks %v, want 1", r)
	}
	if r := usage.Rank(once, now.Add(usage.HalfLife)); abs(r-0.5) > 1e-9 {
		t.Errorf("one use a half-life ago ranks %v, want 0.5", r)
	}
	twice := usage.Key(once, true, now.Add(-usage.HalfLife))
	if r := usage.Rank(twice, now); abs(r-1.5) > 1e-9 {
		t.Errorf("uses now and a half-life ago rank %v, want 1.5", r)
	}
	if r := usage.Rank(once, now.Add(100*365*24*time.Hour)); r <= 0 {
		t.Errorf("an ancient use ranks %v, want > 0 (ranked rows never rank 0)", r)
	}
}

func abs(x float64) float64 { return max(x, -x) }

func TestManifestWorkingSet(t *testing.T) {
	s, c := open(t, nil)
	ctx := context.Background()
	var recs []sdk.Record
	for i := range 12 {
		scope := alice
		if i%3 == 2 {
			scope = bob
		}
		recs = append(recs, rec(scope, fmt.Sprintf("Note %d", i), fmt.Sprintf("body %d", i)))
	}
	var ids []string
	for _, r := range recs { // one per batch, so updated times differ
		ids = append(ids, mustRemember(t, s, realm, r)...)
		c.advance(time.Minute)
	}
	expired := rec(alice, "Expired", "gone")
	expired.ExpiresAt = c.now().Add(time.Second)
	mustRemember(t, s, realm, expired)
	c.advance(time.Hour)
	// Uses: record 0 three times 90 days ago, record 1 twice now, record 3
	// once now, record 4 once a year ago (all alice's).
	old := c.now().Add(-90 * 24 * time.Hour)
	for _, u := range []struct {
		id string
		at time.Time
	}{{ids[0], old}, {ids[0], old}, {ids[0], old}, {ids[1], c.now()}, {ids[1], c.now()}, {ids[3], c.now()}, {ids[4], c.now().Add(-365 * 24 * time.Hour)}} {
		if err := s.MarkUsed(ctx, realm, []string{u.id}, u.at); err != nil {
			t.Fatal(err)
		}
	}
	rows, err := s.Manifest(ctx, sdk.ManifestQuery{Realm: realm, Tier: sdk.TierWorkingSet, K: 2, Scopes: []sdk.Scope{alice}})
	if err != nil {
		t.Fatal(err)
	}
	// Top 2 used by decayed count: 1 (2 uses now), 3 (1 use now); record 0
	// (3 uses 90 days ago = 3/8) and 4 are used but not in the top 2. Then
	// the newest unused alice rows fill up to 4: 10, 9 (not 11: bob's).
	want := []string{ids[1], ids[3], ids[10], ids[9]}
	if got := manifestIDs(rows); !slices.Equal(got, want) {
		t.Errorf("working set ids %v, want %v", got, want)
	}
	if rows[0].Rank <= rows[1].Rank || rows[1].Rank <= 0 || rows[2].Rank != 0 || rows[3].Rank != 0 {
		t.Errorf("ranks %v %v %v %v", rows[0].Rank, rows[1].Rank, rows[2].Rank, rows[3].Rank)
	}
	if abs(rows[0].Rank-2) > 1e-6 {
		t.Errorf("two uses now rank %v, want 2", rows[0].Rank)
	}
	r := rows[2]
	if r.Scope != alice || r.Kind != sdk.KindFact || r.Title != "Note 10" || !r.UpdatedAt.Equal(c.now().Add(-time.Hour-2*time.Minute)) {
		t.Errorf("row fields: %+v", r)
	}
	// Larger k: every used alice row ranks, then unused, capped at 2k.
	rows, err = s.Manifest(ctx, sdk.ManifestQuery{Realm: realm, Tier: sdk.TierWorkingSet, K: 50, Scopes: []sdk.Scope{alice}})
	if err != nil {
		t.Fatal(err)
	}
	if got := manifestIDs(rows); !slices.Equal(got[:4], []string{ids[1], ids[3], ids[0], ids[4]}) || len(got) != 8 {
		t.Errorf("working set(50) = %v", got)
	}
	// No scopes: the whole realm; k=1 caps the list at 2.
	rows, err = s.Manifest(ctx, sdk.ManifestQuery{Realm: realm, Tier: sdk.TierWorkingSet, K: 1})
	if err != nil {
		t.Fatal(err)
	}
	if got := manifestIDs(rows); !slices.Equal(got, []string{ids[1], ids[11]}) {
		t.Errorf("realm working set(1) = %v, want %v", got, []string{ids[1], ids[11]})
	}
	for _, q := range []sdk.ManifestQuery{
		{Realm: realm, Tier: sdk.TierWorkingSet, K: 0},
		{Realm: realm, Tier: 0},
		{Realm: realm, Tier: 9},
		{Realm: "", Tier: sdk.TierFull},
		{Realm: realm, Tier: sdk.TierFull, Scopes: []sdk.Scope{"mob:"}},
	} {
		_, err := conformance.Served(t, s).Manifest(ctx, q)
		wantErr(t, fmt.Sprintf("Manifest(%+v)", q), err, sdk.ErrInvalid)
	}
}

func TestManifestFull(t *testing.T) {
	s, c := open(t, nil)
	ctx := context.Background()
	gone := rec(alice, "Soon gone", "x")
	gone.ExpiresAt = c.now().Add(time.Minute)
	held := rec(alice, "Held", "y")
	held.Status = sdk.StatusQuarantined
	ids := mustRemember(t, s, realm, rec(alice, "One", "1"), rec(bob, "Two", "2"), rec(team, "Three", "3"), gone, held)
	if _, err := s.Supersede(ctx, realm, ids[2], rec(team, "Three v2", "3b")); err != nil {
		t.Fatal(err)
	}
	c.advance(time.Hour)
	rows, err := s.Manifest(ctx, sdk.ManifestQuery{Realm: realm, Tier: sdk.TierFull})
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 3 {
		t.Fatalf("full manifest = %v, want the 3 recallable rows", manifestIDs(rows))
	}
	if rows[0].Title != "Three v2" {
		t.Errorf("newest row first: got %q", rows[0].Title)
	}
	rows, err = s.Manifest(ctx, sdk.ManifestQuery{Realm: realm, Tier: sdk.TierFull, Scopes: []sdk.Scope{alice, bob}})
	if err != nil {
		t.Fatal(err)
	}
	if got := sortedCopy(manifestIDs(rows)); !slices.Equal(got, sortedCopy(ids[:2])) {
		t.Errorf("full manifest of alice+bob = %v, want %v", got, ids[:2])
	}
}

func manifestIDs(rows []sdk.ManifestRow) []string {
	out := make([]string, len(rows))
	for i, r := range rows {
		out[i] = r.ID
	}
	return out
}

func TestWriteLedger(t *testing.T) {
	s, c := open(t, nil)
	ctx := context.Background()
	at := c.now().Add(-time.Minute)
	entries := []sdk.LedgerEntry{
		{Realm: realm, Identity: "alice", Session: "s1", RecordID: "r1", Surface: "turn", Bytes: 120, At: at},
		{Realm: realm, Identity: "alice", RecordID: "r2", Surface: "build"},
	}
	if err := s.WriteLedger(ctx, entries); err != nil {
		t.Fatal(err)
	}
	rows, err := s.db.r.Query("SELECT realm, identity, session, record_id, surface, bytes, at_ms FROM ledger ORDER BY seq")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var got []sdk.LedgerEntry
	for rows.Next() {
		var e sdk.LedgerEntry
		var ms int64
		if err := rows.Scan(&e.Realm, &e.Identity, &e.Session, &e.RecordID, &e.Surface, &e.Bytes, &ms); err != nil {
			t.Fatal(err)
		}
		e.At = fromMillis(ms)
		got = append(got, e)
	}
	entries[1].At = c.now() // stamped on write
	if !slices.EqualFunc(got, entries, sameEntry) {
		t.Errorf("ledger = %+v, want %+v", got, entries)
	}
	bad := []struct {
		e       sdk.LedgerEntry
		mention string
	}{
		{sdk.LedgerEntry{Realm: "", Identity: "a", RecordID: "r", Surface: "turn"}, "realm"},
		{sdk.LedgerEntry{Realm: realm, Identity: "", RecordID: "r", Surface: "turn"}, "identity"},
		{sdk.LedgerEntry{Realm: realm, Identity: "a", RecordID: "../r", Surface: "turn"}, "record_id"},
		{sdk.LedgerEntry{Realm: realm, Identity: "a", RecordID: "r", Surface: " "}, "surface"},
		{sdk.LedgerEntry{Realm: realm, Identity: "a", RecordID: "r", Surface: "turn", Bytes: -1}, "bytes"},
		{sdk.LedgerEntry{Realm: realm, Identity: "a", RecordID: "r", Surface: "turn", Session: "\xff"}, "session"},
	}
	for _, b := range bad {
		err := conformance.Served(t, s).WriteLedger(ctx, []sdk.LedgerEntry{entries[0], b.e})
		wantErr(t, "WriteLedger("+b.mention+")", err, nil, "entries[1]", b.mention)
		if !errorsIsInvalid(err) {
			t.Errorf("WriteLedger(%s): %v does not wrap ErrInvalid or ErrTooLarge", b.mention, err)
		}
	}
	if n := rowCount(t, s, "ledger"); n != 2 {
		t.Errorf("%d ledger rows after bad batches, want 2", n)
	}
}

func sameEntry(a, b sdk.LedgerEntry) bool {
	at := a.At.Equal(b.At)
	a.At, b.At = time.Time{}, time.Time{}
	return at && a == b
}

func errorsIsInvalid(err error) bool {
	c := sdk.CodeOf(err)
	return c == sdk.CodeInvalidArgument || c == sdk.CodeTooLarge
}

// A store whose data directory is removed while it runs refuses writes as
// read-only: it answered them, into a file no later start reads, so every
// write after the removal was acknowledged and lost (from an outside
// review). Reads of what it holds go on.
func TestWritesToADeletedDatabaseAreRefused(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "data")
	s := openAt(t, filepath.Join(dir, "memory.db"))
	ids, err := s.Remember(ctx, "r", []sdk.Record{rec(sdk.RealmScope, "kumquat", "before the removal")})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Remember(ctx, "r", []sdk.Record{rec(sdk.RealmScope, "quince", "after the removal")}); !errors.Is(err, sdk.ErrReadOnly) {
		t.Fatalf("a write after the removal: %v, want read-only", err)
	}
	if _, err := s.Forget(ctx, "r", ids); !errors.Is(err, sdk.ErrReadOnly) {
		t.Fatalf("a forget after the removal: %v, want read-only", err)
	}
	if got, err := s.Get(ctx, "r", ids); err != nil || len(got) != 1 {
		t.Fatalf("a read after the removal: %v, %v", got, err)
	}
}
