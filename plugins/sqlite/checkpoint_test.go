package sqlite

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// With SQLite's own checkpoint off (checkpoint.go), the WAL must still
// stay bounded while writes come back to back: without the checkpointer
// it holds every frame ever written.
func TestWALStaysBoundedUnderWrites(t *testing.T) {
	path := filepath.Join(t.TempDir(), "memory.db")
	const bound = 256 // frames: 1 MiB
	s := openAt(t, path, func(o *options) { o.walBound = bound })
	ctx := context.Background()
	var peak int64
	const batches = 40
	for i := range batches {
		if _, err := s.Remember(ctx, "bench", benchRecords(i*500, 500)); err != nil {
			t.Fatal(err)
		}
		if fi, err := os.Stat(path + "-wal"); err == nil {
			peak = max(peak, fi.Size())
		}
	}
	db, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("WAL peak %d KiB, database %d KiB after %d batches", peak>>10, db.Size()>>10, batches)
	// The bound plus what the writes add while a checkpoint runs, with
	// room for a slow machine; these batches write about 64 MiB of frames,
	// which an unchecked WAL would hold whole.
	const limit = 16 << 20
	if peak > limit {
		t.Fatalf("the WAL reached %d KiB, over %d KiB (the database is %d KiB): it is not kept bounded", peak>>10, limit>>10, db.Size()>>10)
	}
	// Everything written is in the database file once the WAL is folded
	// back on close, and a fresh open reads it.
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s2 := openAt(t, path)
	if n := rowCount(t, s2, "records"); n != batches*500 {
		t.Fatalf("reopened store holds %d records, want %d", n, batches*500)
	}
}

// The bound itself: once the WAL holds walBound frames, a checkpoint
// finishes under the write lock, so that the next write starts the WAL
// over even when writes come back to back. TestWALStaysBoundedUnderWrites
// cannot show it: between its writes a passive checkpoint copies every
// frame, and the WAL starts over without the bound. Here a write holds
// the lock throughout.
func TestCheckpointPastTheBoundWaitsForTheWriteLock(t *testing.T) {
	for _, c := range []struct {
		name  string
		bound int
		waits bool
	}{
		{"past the bound", 1, true},
		{"under the bound", 1 << 30, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := openAt(t, filepath.Join(t.TempDir(), "memory.db"), func(o *options) { o.walBound = c.bound })
			ctx := context.Background()
			if _, err := s.Remember(ctx, "bench", benchRecords(0, 100)); err != nil {
				t.Fatal(err)
			}
			var d *database
			if err := s.use(func(db *database) error { d = db; return nil }); err != nil {
				t.Fatal(err)
			}
			d.wmu.Lock() // a write under way
			locked := true
			defer func() {
				if locked {
					d.wmu.Unlock()
				}
			}()
			done := make(chan error, 1)
			go func() { done <- d.ckpt.checkpoint(ctx) }()
			if c.waits {
				select {
				case err := <-done:
					t.Fatalf("the checkpoint returned (%v) while a write held the lock: past the bound it must finish under the lock", err)
				case <-time.After(300 * time.Millisecond):
				}
				d.wmu.Unlock()
				locked = false
			}
			select {
			case err := <-done:
				if err != nil {
					t.Fatal(err)
				}
			case <-time.After(30 * time.Second):
				t.Fatal("the checkpoint did not return")
			}
		})
	}
}

// A checkpoint that keeps failing is logged once, not once per commit,
// and its recovery once.
func TestCheckpointFailuresLogOncePerStreak(t *testing.T) {
	var logs strings.Builder
	log := slog.New(slog.NewTextHandler(&logs, nil))
	var f failureStreak
	full := errors.New("database or disk is full")
	for i, err := range []error{nil, full, full, full, nil, nil, full, nil} {
		if failed := f.note(log, "memory.db", err); failed != (err != nil) {
			t.Fatalf("outcome %d: note answered %v for %v", i, failed, err)
		}
	}
	if n := strings.Count(logs.String(), "WAL checkpoint failed"); n != 2 {
		t.Errorf("%d failure lines for two failing streaks, want 2:\n%s", n, logs.String())
	}
	if n := strings.Count(logs.String(), "succeed again"); n != 2 {
		t.Errorf("%d recovery lines for two recoveries, want 2:\n%s", n, logs.String())
	}
}

// Small commits gather before a checkpoint (each fsyncs the database
// file): single-record writes leave their frames in the WAL, so it grows
// with each. (TestWALStaysBoundedUnderWrites shows that batches of more
// than checkpointBatch records are checkpointed at once.)
func TestSmallCommitsGatherBeforeACheckpoint(t *testing.T) {
	path := filepath.Join(t.TempDir(), "memory.db")
	s := openAt(t, path, func(o *options) { o.checkpointGather = time.Hour })
	ctx := context.Background()
	walSize := func() int64 {
		fi, err := os.Stat(path + "-wal")
		if err != nil {
			t.Fatal(err)
		}
		return fi.Size()
	}
	if _, err := s.Remember(ctx, "bench", benchRecords(0, 1)); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond) // a checkpoint, were one due, has run
	first := walSize()
	for i := 1; i < 20; i++ {
		if _, err := s.Remember(ctx, "bench", benchRecords(i, 1)); err != nil {
			t.Fatal(err)
		}
		time.Sleep(5 * time.Millisecond)
	}
	// Checkpointed after each, the WAL would start over every time and
	// stay the size of one commit.
	if got := walSize(); got < 4*first {
		t.Fatalf("after 20 single-record writes the WAL is %d bytes, after one %d: small commits were checkpointed one by one", got, first)
	}
}
