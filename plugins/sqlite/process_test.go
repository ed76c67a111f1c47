//go:build unix

package sqlite

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/memhost/memhost/sdk"
)

// TestAcknowledgedWritesSurviveKill9 writes from a goroutine into the real
// plugin process, kills it with SIGKILL at a random moment, restarts it on
// the same database, and checks every acknowledged record is there intact.
func TestAcknowledgedWritesSurviveKill9(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the plugin binary and kills it")
	}
	dir := t.TempDir()
	cfg := configJSON(filepath.Join(dir, "memory.db"))
	ctx := context.Background()
	acked := map[string]sdk.Record{}
	for round := range 3 {
		conn, p, err := launchPlugin(t, dir, cfg)
		if err != nil {
			t.Fatalf("round %d: configure: %v", round, err)
		}
		var mu sync.Mutex
		first := make(chan struct{})
		done := make(chan error, 1)
		go func() {
			var once sync.Once
			for i := 0; ; i++ {
				recs := make([]sdk.Record, 1+rand.IntN(20))
				for j := range recs {
					recs[j] = rec(alice, fmt.Sprintf("crash r%db%di%d", round, i, j), fmt.Sprintf("body %d-%d-%d", round, i, j))
				}
				ids, err := p.Remember(ctx, realm, recs)
				if err != nil {
					done <- err
					return
				}
				mu.Lock()
				for k, id := range ids {
					acked[id] = recs[k]
				}
				mu.Unlock()
				once.Do(func() { close(first) })
			}
		}()
		select {
		case <-first:
		case err := <-done:
			t.Fatalf("round %d: no write was acknowledged: %v", round, err)
		}
		time.Sleep(time.Duration(rand.IntN(300)) * time.Millisecond)
		if err := syscall.Kill(conn.Pid(), syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		if err := <-done; err == nil {
			t.Fatal("writes kept succeeding after SIGKILL")
		}
		conn.Close()

		// A new process opens the database: the lock died with the old one.
		conn, p, err = launchPlugin(t, dir, cfg)
		if err != nil {
			t.Fatalf("round %d: reopen after SIGKILL: %v", round, err)
		}
		mu.Lock()
		ids := make([]string, 0, len(acked))
		for id := range acked {
			ids = append(ids, id)
		}
		mu.Unlock()
		found := 0
		for start := 0; start < len(ids); start += sdk.MaxBatch {
			recs, err := p.Get(ctx, realm, ids[start:min(start+sdk.MaxBatch, len(ids))])
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range recs {
				want := acked[r.ID]
				if r.Title != want.Title || r.Body != want.Body || r.Status != sdk.StatusActive {
					t.Errorf("record %s came back as %q/%q (%s), want %q/%q", r.ID, r.Title, r.Body, r.Status, want.Title, want.Body)
				}
				found++
			}
		}
		if found != len(ids) {
			t.Fatalf("round %d: %d of %d acknowledged records survived SIGKILL", round, found, len(ids))
		}
		// The index survived too: each acknowledged record's unique title
		// word finds it.
		for _, id := range ids[:min(len(ids), 50)] {
			title := acked[id].Title
			hits, err := p.Recall(ctx, sdk.RecallQuery{Realm: realm, Query: title[len("crash "):], Limit: 2})
			if err != nil || len(hits) != 1 || hits[0].Record.ID != id {
				t.Errorf("round %d: recall of %q after restart = %v, %v", round, title, hits, err)
			}
		}
		t.Logf("round %d: %d acknowledged records survived", round, found)
		conn.Close() // the next round's process needs the lock
	}
}

// TestSecondPluginProcessIsRefused starts two plugin processes on one data
// directory, as two hosts would.
func TestSecondPluginProcessIsRefused(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the plugin binary")
	}
	dir := t.TempDir()
	cfg := configJSON("memory.db") // relative: resolved in the data directory
	_, first, err := launchPlugin(t, dir, cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	ids, err := first.Remember(ctx, realm, []sdk.Record{rec(alice, "first host", "owns the data")})
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = launchPlugin(t, dir, cfg)
	wantErr(t, "second process", err, sdk.ErrConflict, filepath.Join(dir, "memory.db.lock"), "another process")
	if got, err := first.Get(ctx, realm, ids); err != nil || len(got) != 1 {
		t.Errorf("first process after the refusal: %v, %v", got, err)
	}
}

// TestPluginRecallMatchesReference asks the real plugin process, over a
// store with ties (the same content in several scopes), forgets,
// supersedes, expired records and scope and tag filters, and holds every
// answer to the FTS5 bm25 reference. The snapshot is removed first, so the
// plugin rebuilds its index from the records, as after a crash.
func TestPluginRecallMatchesReference(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the plugin binary")
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "memory.db")
	ctx := context.Background()
	s := openAt(t, path)
	c := newCorpus()
	const n = 1500
	var recs []sdk.Record
	for i := range n {
		r := c.record(i)
		if i%9 == 0 { // a tie: record i-1's content in another scope
			prev := c.record(i - 1 + boolInt(i == 0))
			r.Title, r.Description, r.Body, r.Tags = prev.Title, prev.Description, prev.Body, prev.Tags
		}
		recs = append(recs, r)
	}
	var ids []string
	for start := 0; start < n; start += 500 {
		ids = append(ids, mustRemember(t, s, realm, recs[start:start+500]...)...)
	}
	if _, err := s.Forget(ctx, realm, ids[10:60]); err != nil {
		t.Fatal(err)
	}
	for i := 100; i < 140; i++ {
		if _, err := s.Supersede(ctx, realm, ids[i], c.record(n+i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// Expire every 13th record in the past, behind the index's back.
	db := rawDB(t, path)
	if _, err := db.Exec("UPDATE records SET expires_ms = 1000 WHERE seq % 13 = 0"); err != nil {
		t.Fatal(err)
	}
	db.Close()
	if err := os.Remove(path + ".index"); err != nil {
		t.Fatal(err)
	}
	s = openAt(t, path)
	ref := fts5Ref(t, s, realm)
	s.Close()

	_, p, err := launchPlugin(t, dir, configJSON(path))
	if err != nil {
		t.Fatal(err)
	}
	compared := 0
	for i := range 150 {
		q := sdk.RecallQuery{Realm: realm, Query: c.query(i, n), Limit: 10,
			Scopes: []sdk.Scope{benchScope(i + 1), sdk.RealmScope}}
		switch i % 4 {
		case 1:
			q.Scopes = nil
		case 2:
			q.Tags = []string{c.tags[i%len(c.tags)]}
		case 3:
			q.ExcludeIDs, q.ExcludeTags = ids[i:i+20], []string{c.tags[i%len(c.tags)]}
		}
		hits, err := p.Recall(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		if err := sameAsRef(hits, refRecall(t, ref, q, time.Now().UnixMilli())); err != nil {
			t.Fatalf("query %d %q: %v", i, q.Query, err)
		}
		compared += len(hits)
	}
	if compared < 500 {
		t.Errorf("only %d hits compared", compared)
	}
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}
