package bleve

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	blevesearch "github.com/blevesearch/bleve/v2"
	"github.com/memhost/memhost/sdk"
	"github.com/memhost/memhost/sdk/conformance"
	memindex "github.com/memhost/memhost/sdk/index"
	"github.com/memhost/memhost/sdk/usage"
)

// TestWeightsMatchIndex: the context weight is sdk/index's, scaled.
func TestWeightsMatchIndex(t *testing.T) {
	if got := float64(weightContext) / weightScale; got != memindex.ContextWeight {
		t.Fatalf("context weight %v, sdk/index uses %v", got, memindex.ContextWeight)
	}
}

// realmState is everything a rebuild must keep of a realm: every stored
// record, what recall ranks, and the working set's ranks.
type realmState struct {
	records map[string]sdk.Record
	recalls [][]sdk.Hit
	ranks   map[string]float64
	// ranksAt is when the working set was read: a rank decays with time,
	// so two reads compare at one moment.
	ranksAt time.Time
}

var rebuildQueries = []sdk.RecallQuery{
	{Realm: realm, Query: "garden tomatoes", Limit: 10},
	{Realm: realm, Query: "pottery bowl", Limit: 10, Scopes: []sdk.Scope{"identity:u1", "realm"}},
	{Realm: realm, Query: "note", Limit: 5, Tags: []string{"Blue"}},
}

// seedRealm writes records of every kind a rebuild must carry: threaded
// turns, tagged and used records, a superseded and a forgotten one.
func seedRealm(t *testing.T, p *Provider, n int) []string {
	t.Helper()
	var ids []string
	for start := 0; start < n; start += sdk.MaxBatch {
		var recs []sdk.Record
		for i := start; i < min(n, start+sdk.MaxBatch); i++ {
			r := rec([]string{"identity:u1", "realm", "mob:m"}[i%3], fmt.Sprintf("note %d", i),
				[]string{"garden tomatoes and basil", "the pottery class made a bowl", "a note about nothing"}[i%3]+fmt.Sprintf(" item%d", i))
			if i%4 == 0 {
				r.Tags = []string{"blue"}
			}
			if i%5 == 0 {
				r.Thread = &sdk.Thread{ID: fmt.Sprintf("conv%d", i%7), Seq: int64(i)}
			}
			recs = append(recs, r)
		}
		ids = append(ids, remember(t, p, realm, recs...)...)
	}
	if err := p.MarkUsed(ctx, realm, ids[:min(len(ids), 20)], time.Now()); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Supersede(ctx, realm, ids[1], rec("", "replacement", "garden tomatoes replaced")); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Forget(ctx, realm, ids[2:3]); err != nil {
		t.Fatal(err)
	}
	return ids
}

func captureState(t *testing.T, p *Provider) realmState {
	t.Helper()
	st := realmState{records: map[string]sdk.Record{}, ranks: map[string]float64{}}
	for after := ""; ; {
		page, err := p.Export(ctx, realm, after, sdk.MaxBatch)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range page.Records {
			st.records[r.ID] = r
		}
		if page.Next == "" {
			break
		}
		after = page.Next
	}
	for _, q := range rebuildQueries {
		hits, err := p.Recall(ctx, q)
		if err != nil {
			t.Fatalf("Recall(%q): %v", q.Query, err)
		}
		st.recalls = append(st.recalls, hits)
	}
	st.ranksAt = time.Now()
	rows, err := p.Manifest(ctx, sdk.ManifestQuery{Realm: realm, Tier: sdk.TierWorkingSet, K: 24})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		st.ranks[r.ID] = r.Rank
	}
	return st
}

// wire answers st with its times as the protocol carries them (ms).
func (st realmState) wire() realmState {
	out := realmState{records: map[string]sdk.Record{}, ranks: st.ranks, ranksAt: st.ranksAt}
	ms := func(t time.Time) time.Time { return t.Truncate(time.Millisecond) }
	fix := func(r sdk.Record) sdk.Record {
		r.CreatedAt, r.UpdatedAt, r.LastUsedAt, r.ExpiresAt = ms(r.CreatedAt), ms(r.UpdatedAt), ms(r.LastUsedAt), ms(r.ExpiresAt)
		return r
	}
	for id, r := range st.records {
		out.records[id] = fix(r)
	}
	for _, hits := range st.recalls {
		var hs []sdk.Hit
		for _, h := range hits {
			hs = append(hs, sdk.Hit{Record: fix(h.Record), Score: h.Score})
		}
		out.recalls = append(out.recalls, hs)
	}
	return out
}

func (st realmState) equal(t *testing.T, other realmState, what string) {
	t.Helper()
	if len(st.records) != len(other.records) {
		t.Fatalf("%s: %d records, want %d", what, len(other.records), len(st.records))
	}
	for id, want := range st.records {
		got, ok := other.records[id]
		if !ok {
			t.Fatalf("%s: record %s lost", what, id)
		}
		a, _ := json.Marshal(want)
		b, _ := json.Marshal(got)
		if string(a) != string(b) {
			t.Fatalf("%s: record %s changed:\n got %s\nwant %s", what, id, b, a)
		}
	}
	for i, want := range st.recalls {
		got := other.recalls[i]
		if len(got) != len(want) {
			t.Fatalf("%s: recall %q has %d hits, want %d", what, rebuildQueries[i].Query, len(got), len(want))
		}
		for j := range want {
			if got[j].Record.ID != want[j].Record.ID || math.Abs(got[j].Score-want[j].Score) > 1e-9*want[j].Score {
				t.Fatalf("%s: recall %q hit %d is %s (%v), want %s (%v)", what, rebuildQueries[i].Query, j, got[j].Record.ID, got[j].Score, want[j].Record.ID, want[j].Score)
			}
		}
	}
	if len(st.ranks) != len(other.ranks) {
		t.Fatalf("%s: working set of %d rows, want %d", what, len(other.ranks), len(st.ranks))
	}
	decay := math.Exp2(-float64(other.ranksAt.Sub(st.ranksAt)) / float64(usage.HalfLife))
	for id, want := range st.ranks {
		want *= decay
		if got, ok := other.ranks[id]; !ok || math.Abs(got-want) > 1e-6*math.Max(want, 1e-300) {
			t.Fatalf("%s: working-set rank of %s is %v (present %v), want %v", what, id, got, ok, want)
		}
	}
}

func TestReindex(t *testing.T) {
	dir := t.TempDir()
	p := newProvider(t, dir)
	seedRealm(t, p, 1200)
	remember(t, p, "other", rec("realm", "other realm", "garden tomatoes elsewhere"))
	before := captureState(t, p)
	if len(before.recalls[0]) == 0 || len(before.recalls[1]) == 0 || len(before.recalls[2]) == 0 {
		t.Fatalf("the queries recall nothing; the test checks nothing: %v", before.recalls)
	}
	var calls, lastDone, lastTotal int
	n, err := p.Reindex(ctx, "", func(done, total int) { calls++; lastDone, lastTotal = done, total })
	if err != nil {
		t.Fatal(err)
	}
	if want := len(before.records) + 1; n != want {
		t.Fatalf("Reindex rewrote %d records, want %d", n, want)
	}
	if calls < 3 || lastDone != lastTotal {
		t.Fatalf("progress called %d times, last %d of %d", calls, lastDone, lastTotal)
	}
	before.equal(t, captureState(t, p), "after Reindex")
	if n, err := p.Reindex(ctx, "nosuchrealm", nil); err != nil || n != 0 {
		t.Fatalf("Reindex of a realm without an index = %d, %v; want 0, nil", n, err)
	}
	// Writes go on into the rebuilt index and survive a reopen.
	id := remember(t, p, realm, rec("realm", "after", "garden tomatoes after the rebuild"))[0]
	p.Close()
	p = newProvider(t, dir)
	after := captureState(t, p)
	if _, ok := after.records[id]; !ok {
		t.Fatal("a write after the rebuild was lost at reopen")
	}
	if entries, _ := os.ReadDir(dir); slices.ContainsFunc(entries, func(e os.DirEntry) bool {
		return strings.HasSuffix(e.Name(), rebuildSuffix) || strings.HasSuffix(e.Name(), staleSuffix)
	}) {
		t.Fatalf("a finished rebuild left files behind: %v", entries)
	}
}

// markStale stamps the realm's index with an older layout, as an index
// written by an earlier plugin version is stamped.
func markStale(t *testing.T, dir string) { stampSchema(t, dir, "memhost-bleve/2 terms/2") }

// stampSchema overwrites the schema stamp of the realm's index.
func stampSchema(t *testing.T, dir, stamp string) {
	t.Helper()
	idx, err := blevesearch.OpenUsing(filepath.Join(dir, realm+indexSuffix), runtimeConfig())
	if err != nil {
		t.Fatal(err)
	}
	if err := idx.SetInternal(schemaKey, []byte(stamp)); err != nil {
		t.Fatal(err)
	}
	if err := idx.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestStaleIndexRebuildsAtOpen(t *testing.T) {
	dir := t.TempDir()
	p := newProvider(t, dir)
	seedRealm(t, p, 700)
	before := captureState(t, p)
	p.Close()
	markStale(t, dir)

	p = newProvider(t, dir)
	ri := p.realms[realm]
	ri.loading.Wait() // the background rebuild
	before.equal(t, captureState(t, p), "after the rebuild at open")
	p.Close()
	p = newProvider(t, dir)
	before.equal(t, captureState(t, p), "after the rebuild and a reopen")

	// While stale, recall, writes and manifests say why they fail; Get
	// still answers from the stored records.
	ri = p.realms[realm]
	ri.idxMu.Lock()
	ri.stale = true
	ri.idxMu.Unlock()
	_, err := p.Recall(ctx, rebuildQueries[0])
	if !errors.Is(err, ErrRebuilding) || !errors.Is(err, sdk.ErrUnavailable) || !strings.Contains(err.Error(), "rebuilt") {
		t.Fatalf("recall of a stale realm: %v, want ErrRebuilding", err)
	}
	if _, err := p.Remember(ctx, realm, []sdk.Record{rec("realm", "x", "y")}); !errors.Is(err, ErrRebuilding) {
		t.Fatalf("write to a stale realm: %v, want ErrRebuilding", err)
	}
	if _, err := p.Manifest(ctx, sdk.ManifestQuery{Realm: realm, Tier: sdk.TierFull}); !errors.Is(err, ErrRebuilding) {
		t.Fatalf("manifest of a stale realm: %v, want ErrRebuilding", err)
	}
	var ids []string
	for id := range before.records {
		ids = append(ids, id)
	}
	if got, err := p.Get(ctx, realm, ids[:10]); err != nil || len(got) != 10 {
		t.Fatalf("Get from a stale realm = %d records, %v", len(got), err)
	}
}

func TestForeignIndexRefused(t *testing.T) {
	dir := t.TempDir()
	p := newProvider(t, dir)
	remember(t, p, realm, rec("realm", "x", "y"))
	p.Close()
	stampSchema(t, dir, "someone else's")
	if err := NewWithLogger(nil).Configure(ctx, configJSON(dir)); err == nil || !strings.Contains(err.Error(), "not written by this plugin") {
		t.Fatalf("Configure on a foreign index: %v, want a refusal", err)
	}
}

// TestRecoverRebuildStates: each state a kill can leave a rebuild in opens
// with the data whole.
func TestRecoverRebuildStates(t *testing.T) {
	for _, state := range []string{"rebuild half-written", "old moved aside", "swap done, old not removed"} {
		t.Run(state, func(t *testing.T) {
			dir := t.TempDir()
			p := newProvider(t, dir)
			seedRealm(t, p, 60)
			before := captureState(t, p)
			p.Close()
			final := filepath.Join(dir, realm+indexSuffix)
			tmp := filepath.Join(dir, realm+rebuildSuffix)
			stale := filepath.Join(dir, realm+staleSuffix)
			if err := os.MkdirAll(filepath.Join(tmp, "store"), 0o700); err != nil {
				t.Fatal(err)
			}
			switch state {
			case "old moved aside":
				if err := os.Rename(final, stale); err != nil {
					t.Fatal(err)
				}
			case "swap done, old not removed":
				if err := os.RemoveAll(tmp); err != nil {
					t.Fatal(err)
				}
				if err := os.MkdirAll(filepath.Join(stale, "store"), 0o700); err != nil {
					t.Fatal(err)
				}
			}
			p = newProvider(t, dir)
			before.equal(t, captureState(t, p), state)
			for _, leftover := range []string{tmp, stale} {
				if _, err := os.Stat(leftover); err == nil {
					t.Fatalf("%s left in place", leftover)
				}
			}
		})
	}
}

// TestRebuildKilledHalfway kills the plugin process with SIGKILL while it
// rebuilds a stale index at start, then starts it again: the rebuild runs
// again from the old index, and every record is there afterwards.
func TestRebuildKilledHalfway(t *testing.T) {
	dir := t.TempDir()
	p := newProvider(t, dir)
	seedRealm(t, p, 15000)
	before := captureState(t, p)
	p.Close()
	markStale(t, dir)

	conn, _ := launchProvider(t, dir)
	tmpStore := filepath.Join(dir, realm+rebuildSuffix, "store")
	deadline := time.Now().Add(2 * time.Minute)
	for {
		// The first durable batch of the rebuild names a segment file.
		entries, _ := os.ReadDir(tmpStore)
		if slices.ContainsFunc(entries, func(e os.DirEntry) bool { return strings.HasSuffix(e.Name(), ".zap") }) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the rebuild never wrote a segment")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := syscall.Kill(conn.Pid(), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	conn.Close()
	if _, err := os.Stat(filepath.Join(dir, realm+rebuildSuffix)); err != nil {
		t.Fatalf("the kill did not land mid-rebuild (%v): the test checks nothing", err)
	}

	conn2, prov := launchProvider(t, dir)
	defer conn2.Close()
	waitRebuilt(t, prov)
	got := realmState{records: map[string]sdk.Record{}}
	var ids []string
	for id := range before.records {
		ids = append(ids, id)
	}
	for start := 0; start < len(ids); start += sdk.MaxBatch {
		recs, err := prov.Get(ctx, realm, ids[start:min(len(ids), start+sdk.MaxBatch)])
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			got.records[r.ID] = r
		}
	}
	for _, q := range rebuildQueries {
		hits, err := prov.Recall(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		got.recalls = append(got.recalls, hits)
	}
	got.ranks, got.ranksAt = before.ranks, before.ranksAt // the manifest is checked in-process above
	before.wire().equal(t, got.wire(), "after a rebuild killed half-way and run again")
}

// waitRebuilt waits until the plugin's recall stops answering that the
// realm is being rebuilt (a bound on a condition, not a timing).
func waitRebuilt(t *testing.T, prov *conformance.Client) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Minute)
	for {
		_, err := prov.Recall(ctx, rebuildQueries[0])
		if err == nil {
			return
		}
		if !errors.Is(err, sdk.ErrUnavailable) || time.Now().After(deadline) {
			t.Fatalf("recall after the restart: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestPruningExact: the MaxScore walk answers the same hits, with the
// same scores, as walking every list, with and without filters.
func TestPruningExact(t *testing.T) {
	p := newProvider(t, "")
	c := newCorpus(3)
	for range 6 {
		recs := make([]sdk.Record, sdk.MaxBatch)
		for i := range recs {
			recs[i] = c.record()
		}
		remember(t, p, realm, recs...)
	}
	checked := 0
	for i, text := range queries(150) {
		q := sdk.RecallQuery{Realm: realm, Query: text, Limit: 10}
		if i%2 == 1 {
			q.Scopes = []sdk.Scope{sdk.IdentityScope("user7"), sdk.RealmScope}
		}
		pruned, err := p.Recall(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		pruning = false
		full, err := p.Recall(ctx, q)
		pruning = true
		if err != nil {
			t.Fatal(err)
		}
		if len(pruned) != len(full) {
			t.Fatalf("query %q: %d hits pruned, %d exhaustive", text, len(pruned), len(full))
		}
		for j := range full {
			if pruned[j].Record.ID != full[j].Record.ID || math.Abs(pruned[j].Score-full[j].Score) > 1e-9*full[j].Score {
				t.Fatalf("query %q hit %d: pruned %s (%v), exhaustive %s (%v)", text, j, pruned[j].Record.ID, pruned[j].Score, full[j].Record.ID, full[j].Score)
			}
		}
		checked += len(full)
	}
	if checked == 0 {
		t.Fatal("no query found anything")
	}
}

// TestWritesDuringReindex: a reindex of a current realm lets writes go on
// while it copies, and every one of them is in the rebuilt index.
func TestWritesDuringReindex(t *testing.T) {
	dir := t.TempDir()
	p := newProvider(t, dir)
	ids := seedRealm(t, p, 1500)
	var added []string
	var forgot string
	calls := 0
	n, err := p.Reindex(ctx, realm, func(done, total int) {
		calls++
		if calls != 1 {
			return
		}
		// Called from the rebuild, between its batches: the write lock is free.
		r := rec("realm", "mid reindex", "zanzibar written during the rebuild")
		r.Thread = &sdk.Thread{ID: "conv0", Seq: 0}
		added = remember(t, p, realm, r)
		if _, err := p.Forget(ctx, realm, ids[3:4]); err != nil {
			t.Error(err)
		}
		forgot = ids[3]
		if err := p.MarkUsed(ctx, realm, ids[4:5], time.Now()); err != nil {
			t.Error(err)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(added) != 1 || calls < 2 {
		t.Fatalf("the writes during the reindex did not run (%d progress calls)", calls)
	}
	if n < 1400 {
		t.Fatalf("Reindex answered %d records", n)
	}
	for round, prov := range []*Provider{p, nil} {
		if prov == nil {
			p.Close()
			prov = newProvider(t, dir)
		}
		if got := recallIDs(t, prov, sdk.RecallQuery{Query: "zanzibar", Limit: 5}); !slices.Equal(got, added) {
			t.Fatalf("round %d: a record written during the reindex recalls as %v, want %v", round, got, added)
		}
		got, err := prov.Get(ctx, realm, []string{forgot, ids[4]})
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 1 || got[0].ID != ids[4] || got[0].UseCount != 2 {
			t.Fatalf("round %d: after a forget and a use during the reindex, Get = %+v", round, got)
		}
	}
}

// TestCrossScopeContextIndexRebuilds: an index of layout 4 joined thread
// context across scopes (alice's record beside bob's under his thread id
// held his words), so it is rebuilt at open and her recall no longer finds
// her record by them.
func TestCrossScopeContextIndexRebuilds(t *testing.T) {
	dir := t.TempDir()
	p := newProvider(t, dir)
	b, a := rec("identity:bob", "Trip", "we flew to zanzibar"), rec("identity:alice", "Probe", "what else")
	b.Thread, a.Thread = &sdk.Thread{ID: "conv-bob", Seq: 0}, &sdk.Thread{ID: "conv-bob", Seq: 1}
	ids := remember(t, p, realm, b, a)
	got, err := p.Get(ctx, realm, ids[1:])
	if err != nil || len(got) != 1 {
		t.Fatalf("Get = %v, %v", got, err)
	}
	p.Close()
	// Alice's document as layout 4 indexed it: bob's words in its context.
	doc, _, err := buildDocument(&got[0], 0, recordTerms(&b))
	if err != nil {
		t.Fatal(err)
	}
	idx, err := blevesearch.OpenUsing(filepath.Join(dir, realm+indexSuffix), runtimeConfig())
	if err != nil {
		t.Fatal(err)
	}
	batch := idx.NewBatch()
	if err := batch.IndexAdvanced(doc); err != nil {
		t.Fatal(err)
	}
	if err := errors.Join(idx.Batch(batch), idx.Close()); err != nil {
		t.Fatal(err)
	}
	stampSchema(t, dir, "memhost-bleve/4 terms/2")
	p = newProvider(t, dir)
	p.realms[realm].loading.Wait()
	hits, err := p.Recall(ctx, sdk.RecallQuery{Realm: realm, Query: "zanzibar", Scopes: []sdk.Scope{"identity:alice"}})
	if err != nil || len(hits) != 0 {
		t.Fatalf("alice's recall by bob's words: %v, %v; want nothing", hits, err)
	}
}
