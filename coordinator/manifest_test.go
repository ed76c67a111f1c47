package coordinator

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/memhost/memhost/coordinator/coordinatortest"
	"github.com/memhost/memhost/sdk"
)

// addArchive stores n episodes in alice's scope, newer than any fact the
// tests add, as a compaction of a long conversation leaves them.
func (f *fixture) addArchive(n int) {
	var eps []sdk.Record
	for i := range n {
		r := rec(fmt.Sprintf("user, message %d of conversation c1", i+1), fmt.Sprintf("chatter line %d", i))
		r.Kind = sdk.KindEpisode
		r.UpdatedAt = testNow.Add(-time.Duration(i) * time.Second)
		eps = append(eps, r)
	}
	f.add(eps...)
}

// addFacts stores alice's facts, older than the archive.
func (f *fixture) addFacts(titles ...string) []string {
	var recs []sdk.Record
	for i, title := range titles {
		r := rec(title, "fact body "+title)
		r.UpdatedAt = testNow.Add(-time.Duration(i+1) * time.Hour)
		recs = append(recs, r)
	}
	return f.add(recs...)
}

func TestBuildIndexListsNoEpisode(t *testing.T) {
	f := composedFixture(t, coordinatortest.AllCapabilities...)
	f.addFacts("Espresso order", "Gym schedule")
	// More episodes than the index's working set (24 per scope): they
	// would fill alice's section alone.
	f.addArchive(60)
	res, err := f.c.AssembleBuildInjection(context.Background(), alice, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	sec := indexSections(t, res.Injection)["identity:alice"]
	if strings.Contains(sec, "[episode") || strings.Contains(sec, "of conversation c1") {
		t.Fatalf("the index lists episodes:\n%s", sec)
	}
	if !strings.Contains(sec, "Espresso order") || !strings.Contains(sec, "Gym schedule") {
		t.Fatalf("the index lost the facts behind the archive:\n%s", sec)
	}
	var ks []int
	for _, q := range f.p.ManifestQueries() {
		if q.Scopes[0] == "identity:alice" {
			ks = append(ks, q.K)
		}
	}
	if !slices.Equal(ks, []int{24, 24 * maxWidening}) {
		t.Fatalf("alice's working set read with k %v, want %v", ks, []int{24, 24 * maxWidening})
	}
}

func TestSelectorWorkingSetHoldsNoEpisode(t *testing.T) {
	sel := &recordingSelector{pick: func(req sdk.SelectRequest) (sdk.Selection, error) {
		return sdk.Selection{IDs: []string{req.Rows[0].ID}, Coverage: sdk.CoverageSufficient}, nil
	}}
	f := newFixture(t, func(_ *Config, o *Options) { o.Selector = sel })
	facts := f.addFacts("Coffee", "Tea")
	f.addArchive(250) // more than the selector's 200 rows
	f.turn(alice, "s", "coffee")
	rows := sel.requests()[0].Rows
	var ids []string
	for _, r := range rows {
		if r.Kind == sdk.KindEpisode {
			t.Fatalf("the selector was handed an episode: %+v", r)
		}
		ids = append(ids, r.ID)
	}
	if !slices.Contains(ids, facts[0]) || !slices.Contains(ids, facts[1]) {
		t.Fatalf("working set %v lacks the facts %v", ids, facts)
	}
}

func TestListMemoryFullTier(t *testing.T) {
	f := newFixture(t, nil)
	f.addFacts("Coffee")
	f.addArchive(5)
	rows, err := ListMemory(context.Background(), f.p, sdk.ManifestQuery{Realm: "default", Tier: sdk.TierFull})
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 1 || rows[0].Kind != sdk.KindFact {
		t.Fatalf("full manifest %+v, want the one fact", rows)
	}
}

// TestListMemoryReads: a second, wider read only when episodes were
// dropped from an answer that may have held more.
func TestListMemoryReads(t *testing.T) {
	cases := []struct {
		name     string
		episodes int
		k        int
		wantKs   []int
		wantRows int
	}{
		{"no episodes: one read", 0, 3, []int{3}, 2},
		{"a short answer is the whole set: one read", 1, 5, []int{5}, 2},
		{"a full answer lost rows: one wider read", 10, 3, []int{3, 3 * maxWidening}, 2},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, nil)
			f.addFacts("Coffee", "Tea")
			f.addArchive(tc.episodes)
			rows, err := ListMemory(context.Background(), f.p, sdk.ManifestQuery{Realm: "default", Tier: sdk.TierWorkingSet, K: tc.k})
			if err != nil {
				t.Fatal(err)
			}
			var ks []int
			for _, q := range f.p.ManifestQueries() {
				ks = append(ks, q.K)
			}
			if !slices.Equal(ks, tc.wantKs) || len(rows) != tc.wantRows {
				t.Fatalf("reads with k %v and %d rows, want %v and %d", ks, len(rows), tc.wantKs, tc.wantRows)
			}
		})
	}
}

type listerFunc func(q sdk.ManifestQuery) []sdk.ManifestRow

func (f listerFunc) Manifest(_ context.Context, q sdk.ManifestQuery) ([]sdk.ManifestRow, error) {
	return f(q), nil
}

// TestListMemoryKeepsAFullEnoughSet: a working set of 2k rows (the
// providers' shape) that keeps k rows after the filter is not read again;
// its readers use k.
func TestListMemoryKeepsAFullEnoughSet(t *testing.T) {
	var ks []int
	l := listerFunc(func(q sdk.ManifestQuery) []sdk.ManifestRow {
		ks = append(ks, q.K)
		return []sdk.ManifestRow{{ID: "e1", Kind: sdk.KindEpisode}, {ID: "f1", Kind: sdk.KindFact}, {ID: "e2", Kind: sdk.KindEpisode}, {ID: "f2", Kind: sdk.KindFact}}
	})
	rows, err := ListMemory(context.Background(), l, sdk.ManifestQuery{Realm: "default", Tier: sdk.TierWorkingSet, K: 2})
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 2 || rows[0].ID != "f1" || rows[1].ID != "f2" || !slices.Equal(ks, []int{2}) {
		t.Fatalf("rows %+v after reads with k %v, want f1, f2 after one read", rows, ks)
	}
}

// TestBackgroundSweepListsNoEpisode: the full manifest a sweep pages
// through holds no episode, though the oldest rows are episodes the
// fixture's selector would pick.
func TestBackgroundSweepListsNoEpisode(t *testing.T) {
	f, ids, sel := sweepFixture(t)
	for i := range 3 {
		r := rec(fmt.Sprintf("user, message %d of conversation c1", i+1), "chatter")
		r.Kind = sdk.KindEpisode
		r.UpdatedAt = testNow.Add(-time.Duration(100+i) * time.Hour)
		f.add(r)
	}
	f.turn(alice, "s", "notes")
	f.c.sweeps.Wait()
	if fullSweeps(f.p) != 1 {
		t.Fatalf("%d full sweeps, want 1", fullSweeps(f.p))
	}
	for _, req := range sel.requests() {
		for _, r := range req.Rows {
			if r.Kind == sdk.KindEpisode {
				t.Fatalf("the selector was handed an episode: %+v", r)
			}
		}
	}
	if second := f.turn(alice, "s", "notes"); !slices.Contains(second.RecordIDs, ids[3]) {
		t.Fatalf("turn 2 injected %v, want the swept record %s", second.RecordIDs, ids[3])
	}
}

// manifestOf is a lister answering rows whatever it is asked.
type manifestOf []sdk.ManifestRow

func (m manifestOf) Manifest(context.Context, sdk.ManifestQuery) ([]sdk.ManifestRow, error) {
	return m, nil
}

// TestListFullMemorySaysItIsTruncated: a full manifest of more rows than
// the host reads (the plugin client reads sdk.MaxFullManifestRows and one
// more) is cut there and said to be, its episodes then left out; one
// within the bound is not. Before, memory_index paged the extra row as if
// it were the last (from an outside review).
func TestListFullMemorySaysItIsTruncated(t *testing.T) {
	rows := make(manifestOf, sdk.MaxFullManifestRows+1)
	for i := range rows {
		rows[i] = sdk.ManifestRow{ID: fmt.Sprintf("r%06d", i), Scope: sdk.RealmScope, Kind: sdk.KindFact}
		if i%2 == 0 {
			rows[i].Kind = sdk.KindEpisode
		}
	}
	got, truncated, err := ListFullMemory(context.Background(), rows, sdk.ManifestQuery{Realm: "default"})
	if err != nil || !truncated || len(got) != sdk.MaxFullManifestRows/2 || slices.ContainsFunc(got, func(r sdk.ManifestRow) bool { return r.Kind == sdk.KindEpisode }) {
		t.Fatalf("ListFullMemory = %d rows, truncated %v, %v; want the %d facts of the first %d rows, truncated", len(got), truncated, err, sdk.MaxFullManifestRows/2, sdk.MaxFullManifestRows)
	}
	if got, truncated, err := ListFullMemory(context.Background(), rows[:sdk.MaxFullManifestRows], sdk.ManifestQuery{}); err != nil || truncated || len(got) != sdk.MaxFullManifestRows/2 {
		t.Fatalf("within the bound: %d rows, truncated %v, %v", len(got), truncated, err)
	}
}
