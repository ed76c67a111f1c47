//go:build unix

package sqlite

import (
	"context"
	"fmt"
	"math/rand/v2"
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
