package turntrace

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/memhost/memhost/internal/statedb"
)

// TestReadAfterLostWriteFails: the state file refuses writes (here it was
// deleted under the host, as a full disk refuses them). A read flushes the
// traces queued before it; when that write fails the read must say so
// rather than answer a session without the turns it was promised.
func TestReadAfterLostWriteFails(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	db, err := statedb.Open(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	store, err := NewSQLStore(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	r := NewRecorder(store, Options{Retention: time.Hour, MaxTurnsPerRealm: 100, Linger: time.Hour})
	defer r.Close()
	if err := os.Remove(filepath.Join(dir, statedb.FileName)); err != nil {
		t.Fatal(err)
	}
	r.Trace(tr("r", "s", time.Now().UTC(), "id"))
	got, err := r.Session(ctx, "r", nil, "s", 10)
	if !errors.Is(err, statedb.ErrReadOnly) {
		t.Fatalf("read after a failed write = %d traces, %v; want an error wrapping the write's", len(got), err)
	}
	if r.Dropped() != 1 {
		t.Fatalf("dropped = %d, want 1", r.Dropped())
	}
	// The loss is reported once; later reads answer what is stored.
	if _, err := r.Session(ctx, "r", nil, "s", 10); err != nil {
		t.Fatalf("second read = %v, want no error", err)
	}
}

// TestTraceAfterCloseIsCounted: a trace sent once the recorder stopped
// (a compaction's reset finishing during shutdown) is never written; it
// must be counted as dropped, not vanish into the queue.
func TestTraceAfterCloseIsCounted(t *testing.T) {
	r := NewRecorder(openStore(t), Options{Retention: time.Hour, MaxTurnsPerRealm: 100})
	r.Close()
	r.Trace(tr("r", "s", time.Now().UTC(), "id"))
	if r.Dropped() != 1 {
		t.Fatalf("dropped after close = %d, want 1", r.Dropped())
	}
	r.Close() // a second close is harmless
}
