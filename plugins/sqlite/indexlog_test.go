package sqlite

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/memhost/memhost/sdk"
)

// crashImage copies the database's files as they stand, between writes,
// into a fresh directory: what a kill -9 at that moment leaves behind.
func crashImage(t *testing.T, path string) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), "memory.db")
	for _, suffix := range []string{"", "-wal", ".index", ".index.log"} {
		data, err := os.ReadFile(path + suffix)
		if os.IsNotExist(err) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dst+suffix, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dst
}

// logQueries cover every record the log test writes, and their ranking.
var logQueries = []string{"walrus", "tusks", "otter river", "seal cousin", "thread harbour", "crane"}

type scored struct {
	id    string
	score float64
}

func rankings(t *testing.T, s *Store) [][]scored {
	t.Helper()
	var out [][]scored
	for _, q := range logQueries {
		var row []scored
		for _, h := range mustRecall(t, s, sdk.RecallQuery{Realm: realm, Query: q, Limit: 20}) {
			row = append(row, scored{h.Record.ID, h.Score})
		}
		out = append(out, row)
	}
	return out
}

func sameRankings(t *testing.T, what string, got, want [][]scored) {
	t.Helper()
	for i := range want {
		if len(got[i]) != len(want[i]) {
			t.Errorf("%s: %q answers %v, a rebuild %v", what, logQueries[i], got[i], want[i])
			continue
		}
		for j := range want[i] {
			if got[i][j] != want[i][j] {
				t.Errorf("%s: %q answers %v, a rebuild %v", what, logQueries[i], got[i], want[i])
				break
			}
		}
	}
}

// TestIndexLogReplaysAfterACrash opens crash images whose snapshot is
// older than the database: the log's frames after the snapshot bring the
// index to exactly what a rebuild from the records gives; a torn or
// missing log, or a frame missing in the middle, falls back to the rebuild.
func TestIndexLogReplaysAfterACrash(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "memory.db")
	s := openAt(t, path)
	first := mustRemember(t, s, realm, rec(alice, "Walrus", "tusks"), rec(bob, "Otter", "river"))
	noSnapshot := crashImage(t, path) // every change is in the log only
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openAt(t, path)
	later := mustRemember(t, s, realm, rec(alice, "Walrus again", "more tusks"), rec(alice, "Seal", "walrus cousin"))
	threaded := rec(alice, "Thread harbour", "crane at the quay")
	threaded.Thread = &sdk.Thread{ID: "t1", Seq: 1}
	next := rec(alice, "Thread reply", "the harbour crane")
	next.Thread = &sdk.Thread{ID: "t1", Seq: 2}
	mustRemember(t, s, realm, threaded, next)
	if _, err := s.Forget(ctx, realm, first[:1]); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Supersede(ctx, realm, later[1], rec(alice, "Seal", "walrus cousin, grey")); err != nil {
		t.Fatal(err)
	}
	stale := crashImage(t, path)
	want := rankings(t, s)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	logSize := func(p string) int64 {
		fi, err := os.Stat(p + ".index.log")
		if err != nil {
			t.Fatal(err)
		}
		return fi.Size()
	}
	for _, tc := range []struct {
		name     string
		image    string
		mutate   func(p string)
		replayed bool
	}{
		{"stale snapshot", stale, nil, true},
		{"no snapshot yet", noSnapshot, nil, true},
		{"torn log", stale, func(p string) { os.Truncate(p+".index.log", logSize(p)-3) }, false},
		{"no log", stale, func(p string) { os.Remove(p + ".index.log") }, false},
		// Frames hold terms cut by the rule of their version: a log of
		// version 3 holds system tags as text and is not replayed.
		{"log of version 3", stale, func(p string) {
			f, err := os.OpenFile(p+".index.log", os.O_RDWR, 0)
			if err != nil {
				t.Fatal(err)
			}
			f.WriteAt([]byte{0x03}, int64(len(logMagic)-1))
			f.Close()
		}, false},
		{"corrupt frame", stale, func(p string) {
			f, err := os.OpenFile(p+".index.log", os.O_RDWR, 0)
			if err != nil {
				t.Fatal(err)
			}
			f.WriteAt([]byte{0xff}, int64(len(logMagic)+16)+12) // past the header and its 16-byte identity
			f.Close()
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := crashImage(t, tc.image)
			if tc.mutate != nil {
				tc.mutate(p)
			}
			s := openAt(t, p)
			if got := s.db.replayed > 0; got != tc.replayed {
				t.Fatalf("replayed %d frames, want replay: %v", s.db.replayed, tc.replayed)
			}
			checkIndex(t, s)
			if tc.image == stale {
				sameRankings(t, tc.name, rankings(t, s), want)
			}
			// Writes after the open append to the kept log, and the next
			// crash replays them too.
			mustRemember(t, s, realm, rec(alice, "Crane", "a heron-like bird"))
			again := crashImage(t, p)
			ref := rankings(t, s)
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			s2 := openAt(t, again)
			if tc.replayed && s2.db.replayed == 0 {
				t.Fatal("the log written after a replay did not replay")
			}
			checkIndex(t, s2)
			sameRankings(t, tc.name+", second crash", rankings(t, s2), ref)
		})
	}
}

// holdSnapshot opens a store at path, writes recs, and starts a snapshot
// that stops as it begins to encode the index (the one at close does
// not). It returns once the snapshot is held; release lets it go on (once
// the test ends at the latest), and done answers its error.
func holdSnapshot(t *testing.T, path string, recs ...sdk.Record) (s *Store, release func(), done <-chan error) {
	t.Helper()
	encoding, resume := make(chan struct{}), make(chan struct{})
	var held sync.Once
	s = openAt(t, path, func(o *options) {
		o.maintainIdle = time.Hour
		o.encoding = func() { held.Do(func() { close(encoding); <-resume }) }
	})
	release = sync.OnceFunc(func() { close(resume) })
	t.Cleanup(release) // before the store closes: its snapshot waits for this one
	mustRemember(t, s, realm, recs...)
	snapped := make(chan error, 1)
	go func() { snapped <- s.db.snapshot(context.Background()) }()
	<-encoding
	return s, release, snapped
}

// TestWritesGoOnDuringASnapshot holds a snapshot while it encodes the
// index: a write meanwhile is answered at once (the snapshot held the
// write lock, so writes waited for the whole encode and fsync: at 1M
// records under load, past their deadline), recall then reads it, and the
// log keeps its frame past the snapshot, so a crash image opens from the
// snapshot and that frame.
func TestWritesGoOnDuringASnapshot(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "memory.db")
	s, release, snapped := holdSnapshot(t, path, rec(alice, "Walrus", "tusks"), rec(bob, "Otter", "river"))
	written := make(chan error, 1)
	go func() {
		_, err := s.Remember(ctx, realm, []sdk.Record{rec(alice, "Crane", "at the quay")})
		written <- err
	}()
	select {
	case err := <-written:
		if err != nil {
			t.Fatalf("write during the snapshot: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("a write waited for the snapshot being encoded")
	}
	release()
	if err := <-snapped; err != nil {
		t.Fatalf("snapshot: %v", err)
	}
	if got := recallIDs(t, s, sdk.RecallQuery{Realm: realm, Query: "crane quay", Limit: 5}); len(got) != 1 {
		t.Fatalf("recall after the snapshot answered %v, want the write made during it", got)
	}
	image := crashImage(t, path)
	want := rankings(t, s)
	c := openAt(t, image, func(o *options) { o.maintainIdle = time.Hour })
	if c.db.fromSnapshot || c.db.replayed != 1 || c.db.snapGen == noSnapshot {
		t.Fatalf("crash image: from snapshot %v, snapshot generation %d, %d frames replayed; want the snapshot and the one frame after it",
			c.db.fromSnapshot, c.db.snapGen, c.db.replayed)
	}
	sameRankings(t, "the crash image", rankings(t, c), want)
}

// TestReadsDuringASnapshotKeepTheirDeadline: a recall, a thread read or a
// backlog read after a write made during a held snapshot waits for the
// write's index change, which waits for the encode; the wait ends with
// the call's deadline (it outlived it, holding the store, however long
// the encode took: at 1M records, seconds), in any realm.
func TestReadsDuringASnapshotKeepTheirDeadline(t *testing.T) {
	s, release, snapped := holdSnapshot(t, filepath.Join(t.TempDir(), "memory.db"), rec(alice, "Walrus", "tusks"))
	mustRemember(t, s, realm, rec(alice, "Crane", "at the quay"))
	reads := map[string]func(context.Context) error{
		"recall": func(ctx context.Context) error {
			_, err := s.Recall(ctx, sdk.RecallQuery{Realm: "elsewhere", Query: "walrus", Limit: 5})
			return err
		},
		"read thread": func(ctx context.Context) error {
			_, err := s.ReadThread(ctx, realm, []sdk.ThreadPlace{{Scope: alice, Thread: "t", Seq: 1}})
			return err
		},
		"missing vectors": func(ctx context.Context) error {
			_, err := s.MissingVectors(ctx, realm, "m", "", 5)
			return err
		},
	}
	for name, read := range reads {
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		done := make(chan error, 1)
		go func() { done <- read(ctx) }()
		select {
		case err := <-done:
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("%s during the snapshot answered %v, want its deadline", name, err)
			}
		case <-time.After(10 * time.Second):
			t.Errorf("%s waited past its deadline for the snapshot being encoded", name)
		}
		cancel()
	}
	release()
	if err := <-snapped; err != nil {
		t.Fatalf("snapshot: %v", err)
	}
	if got := recallIDs(t, s, sdk.RecallQuery{Realm: realm, Query: "crane quay", Limit: 5}); len(got) != 1 {
		t.Fatalf("recall after the snapshot answered %v, want the write made during it", got)
	}
}

// TestSnapshotQueueIsBounded: writes during a held snapshot queue their
// index changes up to maxPendingOps and are answered; the write past the
// bound waits for the snapshot rather than grow the queue (it holds every
// queued document); once the snapshot ends, every write is recalled.
func TestSnapshotQueueIsBounded(t *testing.T) {
	ctx := context.Background()
	s, release, snapped := holdSnapshot(t, filepath.Join(t.TempDir(), "memory.db"), rec(alice, "Walrus", "tusks"))
	const batch = 500
	within := maxPendingOps / batch
	answered := make(chan error, within+1)
	go func() {
		for b := range within + 1 {
			recs := make([]sdk.Record, batch)
			for i := range recs {
				recs[i] = rec(alice, fmt.Sprintf("Lighthouse %d-%d", b, i), "keeper's log")
			}
			_, err := s.Remember(ctx, realm, recs)
			answered <- err
		}
	}()
	for b := range within {
		select {
		case err := <-answered:
			if err != nil {
				t.Fatalf("batch %d: %v", b, err)
			}
		case <-time.After(20 * time.Second):
			t.Fatalf("batch %d of %d within the bound waited for the snapshot", b+1, within)
		}
	}
	select {
	case <-answered:
		t.Fatalf("the batch past %d queued operations was answered while the snapshot held the queue", maxPendingOps)
	case <-time.After(300 * time.Millisecond):
	}
	release()
	if err := <-answered; err != nil {
		t.Fatalf("the batch past the bound: %v", err)
	}
	if err := <-snapped; err != nil {
		t.Fatalf("snapshot: %v", err)
	}
	hits := mustRecall(t, s, sdk.RecallQuery{Realm: realm, Query: "keeper lighthouse", Limit: 500})
	if want := (within + 1) * batch; len(hits) != 500 || s.db.ix.Len() != want+1 {
		t.Fatalf("after the snapshot: %d hits, %d indexed; want 500 hits, %d indexed", len(hits), s.db.ix.Len(), want+1)
	}
}

// TestSnapshotRenumbersByScope: a snapshot renumbers the documents written
// since the last one in scope order (sdk/index Cluster), so a query of one
// identity's scope passes over the other identities' blocks; recall
// answers as before, and the store reopens from the snapshot in that order.
func TestSnapshotRenumbersByScope(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "memory.db")
	s := openAt(t, path, func(o *options) { o.maintainIdle = time.Hour })
	r := rand.New(rand.NewPCG(1, 2))
	words := strings.Fields("harbour crane tide lantern ferry gull anchor rope quay salt")
	const n = 9000
	for b := 0; b < n; b += 500 {
		recs := make([]sdk.Record, 500)
		for i := range recs {
			scope := sdk.RealmScope
			if r.IntN(10) < 7 {
				scope = sdk.IdentityScope(fmt.Sprintf("u%02d", r.IntN(20)))
			}
			recs[i] = rec(scope, fmt.Sprintf("%s %s %d", words[r.IntN(len(words))], words[r.IntN(len(words))], b+i), words[r.IntN(len(words))])
		}
		mustRemember(t, s, realm, recs...)
	}
	queries := []sdk.RecallQuery{
		{Realm: realm, Query: "harbour crane", Limit: 20},
		{Realm: realm, Query: "ferry gull rope", Scopes: []sdk.Scope{sdk.IdentityScope("u07"), sdk.RealmScope}, Limit: 20},
		{Realm: realm, Query: "tide lantern", Scopes: []sdk.Scope{sdk.IdentityScope("u13")}, Limit: 10},
	}
	answers := func(s *Store) [][]scored {
		var out [][]scored
		for _, q := range queries {
			var row []scored
			for _, h := range mustRecall(t, s, q) {
				row = append(row, scored{h.Record.ID, h.Score})
			}
			out = append(out, row)
		}
		return out
	}
	want := answers(s)
	if out := s.db.ix.Unclustered(realm); out < n*9/10 {
		t.Fatalf("%d of %d documents out of scope order before the snapshot", out, n)
	}
	if err := s.db.snapshot(ctx); err != nil {
		t.Fatal(err)
	}
	if out := s.db.ix.Unclustered(realm); out != 0 {
		t.Fatalf("%d documents out of scope order after the snapshot", out)
	}
	if got := answers(s); !reflect.DeepEqual(got, want) {
		t.Fatalf("after renumbering, recall answers\n %v\nwant\n %v", got, want)
	}
	s.Close()
	back := openAt(t, path, func(o *options) { o.maintainIdle = time.Hour })
	if !back.db.fromSnapshot || back.db.ix.Unclustered(realm) != 0 {
		t.Fatalf("reopened: from the snapshot %v, %d documents out of scope order", back.db.fromSnapshot, back.db.ix.Unclustered(realm))
	}
	if got := answers(back); !reflect.DeepEqual(got, want) {
		t.Fatalf("reopened, recall answers\n %v\nwant\n %v", got, want)
	}
}
