package sqlite

import (
	"context"
	"os"
	"path/filepath"
	"testing"
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
	// The bound plus what a few batches write while a checkpoint runs; the
	// database itself is far larger, and an unchecked WAL larger still.
	if limit := db.Size() / 3; peak > limit {
		t.Fatalf("the WAL reached %d KiB, over a third of the %d KiB database: it is not being checkpointed", peak>>10, db.Size()>>10)
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
