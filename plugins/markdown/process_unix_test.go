//go:build unix

package markdown

import (
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

// TestAcknowledgedWritesSurviveKill9 writes (and forgets) from a goroutine
// into the real plugin process, kills it with SIGKILL at a random moment,
// restarts it on the same root, and checks that every acknowledged record
// is there and recalled, no acknowledged forget came back, and recall
// ranks as the reference over the files. Each round
// starts by configuring the root again, which closes the old store and so
// snapshots the index; the kill then leaves that snapshot stale, and the
// restart must add what it lacks from the files.
func TestAcknowledgedWritesSurviveKill9(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the plugin binary and kills it")
	}
	root := t.TempDir()
	acked := map[string]sdk.Record{}
	forgotten := map[string]bool{}
	for round := range 3 {
		conn := launchPlugin(t)
		p := configureConn(t, conn, root)
		if round > 0 {
			p = configureConn(t, conn, root) // snapshot what the last round left
			if _, err := os.Stat(filepath.Join(root, DefaultSnapshot)); err != nil {
				t.Fatalf("round %d: no snapshot after a reconfigure: %v", round, err)
			}
		}
		var mu sync.Mutex
		first := make(chan struct{})
		done := make(chan error, 1)
		go func() {
			var once sync.Once
			for i := 0; ; i++ {
				recs := make([]sdk.Record, 1+rand.IntN(10))
				for j := range recs {
					recs[j] = rec(alice, fmt.Sprintf("crash r%db%di%d", round, i, j), fmt.Sprintf("body %d-%d-%d", round, i, j))
					if j%3 == 0 {
						recs[j].Thread = &sdk.Thread{ID: fmt.Sprint("t", round), Seq: int64(i*10 + j)}
					}
				}
				ids, err := p.Remember(ctx, "default", recs)
				if err != nil {
					done <- err
					return
				}
				mu.Lock()
				for k, id := range ids {
					acked[id] = recs[k]
				}
				mu.Unlock()
				if i%4 == 3 {
					// A forget the kill cuts off may or may not have
					// happened: the record is no longer owed.
					mu.Lock()
					delete(acked, ids[0])
					mu.Unlock()
					if _, err := p.Forget(ctx, "default", ids[:1]); err != nil {
						done <- err
						return
					}
					mu.Lock()
					forgotten[ids[0]] = true
					mu.Unlock()
				}
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

		conn = launchPlugin(t)
		p = configureConn(t, conn, root)
		mu.Lock()
		ids := make([]string, 0, len(acked))
		for id := range acked {
			ids = append(ids, id)
		}
		gone := make([]string, 0, len(forgotten))
		for id := range forgotten {
			gone = append(gone, id)
		}
		mu.Unlock()
		found := 0
		for start := 0; start < len(ids); start += sdk.MaxBatch {
			recs, err := p.Get(ctx, "default", ids[start:min(start+sdk.MaxBatch, len(ids))])
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
		if recs, err := p.Get(ctx, "default", gone[:min(len(gone), sdk.MaxBatch)]); err != nil || len(recs) != 0 {
			t.Fatalf("round %d: forgotten records came back: %d (%v)", round, len(recs), err)
		}
		// The index survived too: each record's unique title words find it
		// first.
		for _, id := range ids[:min(len(ids), 50)] {
			title := acked[id].Title
			hits, err := p.Recall(ctx, sdk.RecallQuery{Realm: "default", Query: title[len("crash "):], Limit: 2})
			if err != nil || len(hits) == 0 || hits[0].Record.ID != id {
				t.Errorf("round %d: recall of %q after restart = %v, %v", round, title, hitIDs(hits), err)
			}
		}
		// And it ranks as the reference over the files does (ties aside:
		// their order is in the snapshot, which the kill left stale).
		files := refFiles(t, root)["default"]
		for i := range 10 {
			q := sdk.RecallQuery{Realm: "default", Query: fmt.Sprintf("crash body r%d %d-%d", i%3, i%3, i), Limit: 10}
			hits, err := p.Recall(ctx, q)
			if err != nil {
				t.Fatal(err)
			}
			all := q
			all.Limit = 1 << 30
			if err := sameAsRefUpToTies(hits, refRecall(files, all, time.Now()), q.Limit); err != nil {
				t.Fatalf("round %d: query %q after restart: %v", round, q.Query, err)
			}
		}
		t.Logf("round %d: %d acknowledged records survived, %d forgets held", round, found, len(gone))
		conn.Close()
	}
}
