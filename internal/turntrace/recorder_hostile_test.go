package turntrace

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	hclog "github.com/hashicorp/go-hclog"
	"github.com/memhost/memhost/coordinator"
	"github.com/memhost/memhost/internal/statedb"
	"github.com/memhost/memhost/sdk"
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

// gatedStore holds its first Append until release is closed, as a slow
// disk holds a write while turns keep coming.
type gatedStore struct {
	*SQLStore
	entered, release chan struct{}
	once             sync.Once
}

func (g *gatedStore) Append(ctx context.Context, t []coordinator.TurnTrace) error {
	g.once.Do(func() {
		close(g.entered)
		<-g.release
	})
	return g.SQLStore.Append(ctx, t)
}

// lockedBuffer is a log output safe to read while the recorder writes.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestQueueDropsAreReported: while a write is stuck, traces beyond the
// queue are dropped. The drops are counted, the run of them is logged
// once at its start and once at its end (not per trace), and the next
// read says turns are missing instead of passing for complete.
func TestQueueDropsAreReported(t *testing.T) {
	g := &gatedStore{SQLStore: openStore(t), entered: make(chan struct{}), release: make(chan struct{})}
	var logs lockedBuffer
	// An identity alone holds at most three eighths of the queue, the
	// trace being written counted: "a" and two of the five others fit.
	r := NewRecorder(g, Options{Retention: time.Hour, MaxTurnsPerRealm: 100, QueueSize: 8, Linger: time.Millisecond,
		Logger: hclog.New(&hclog.LoggerOptions{Output: &logs})})
	defer r.Close()
	now := time.Now().UTC()
	r.Trace(tr("r", "s", now, "a"))
	<-g.entered
	for range 5 {
		r.Trace(tr("r", "s", now, "b"))
	}
	close(g.release)
	got, err := r.Session(context.Background(), "r", nil, "s", 100)
	if r.Dropped() != 3 || !errors.Is(err, sdk.ErrUnavailable) {
		t.Fatalf("dropped = %d; the read answered %d turns and %v, want an unavailable error", r.Dropped(), len(got), err)
	}
	if _, err := r.Session(context.Background(), "r", nil, "s", 100); err != nil {
		t.Fatalf("second read = %v, want no error: a loss is reported once", err)
	}
	r.Trace(tr("r", "s", now, "c")) // room again: the run ends
	text := logs.String()
	if n := strings.Count(text, "dropped until"); n != 1 {
		t.Errorf("the run's start was logged %d times, want once:\n%s", n, text)
	}
	if !strings.Contains(text, "room again") || !strings.Contains(text, "dropped_traces=3") {
		t.Errorf("the run's end is not logged with its count:\n%s", text)
	}
}

// TestDropsAreReportedToTheirRealm: one realm's flood fills the queue and
// its traces are dropped. A read of another realm, whose traces are all
// stored, answers them (a loss that is not its own is no error of its,
// nor its to consume); the flooding realm's next read says turns are
// missing.
func TestDropsAreReportedToTheirRealm(t *testing.T) {
	g := &gatedStore{SQLStore: openStore(t), entered: make(chan struct{}), release: make(chan struct{})}
	r := NewRecorder(g, Options{Retention: time.Hour, MaxTurnsPerRealm: 100, QueueSize: 2, Linger: time.Millisecond})
	defer r.Close()
	now := time.Now().UTC()
	r.Trace(tr("quiet", "s", now, "a"))
	<-g.entered
	for range 5 {
		r.Trace(tr("flood", "s", now, "b"))
	}
	close(g.release)
	ctx := context.Background()
	got, err := r.Session(ctx, "quiet", nil, "s", 100)
	if err != nil || len(got) != 1 {
		t.Fatalf("the quiet realm's read = %d turns, %v; want its one turn: the drops were another realm's", len(got), err)
	}
	if _, err := r.Session(ctx, "flood", nil, "s", 100); !errors.Is(err, sdk.ErrUnavailable) {
		t.Fatalf("the flooding realm's read = %v, want an unavailable error for its dropped turns", err)
	}
	if _, err := r.Session(ctx, "flood", nil, "s", 100); err != nil {
		t.Fatalf("second read = %v, want no error: a loss is reported once", err)
	}
}

// TestDropsAreReportedToTheirIdentity: within one realm, alice's flood
// fills the queue and her traces are dropped while bob's one turn is
// stored. A read kept to bob's turns (a token bound to bob) answered 503
// with alice's count of dropped turns, and consumed the notice alice's own
// read was owed. Each read is now told of the drops of the identities it
// reads; a realm-wide read (nil) of every one.
func TestDropsAreReportedToTheirIdentity(t *testing.T) {
	alice, bob := []string{"alice"}, []string{"bob"}
	for _, c := range []struct {
		name  string
		reads [][]string // in order
		lost  []bool     // whether each read is told of dropped turns
	}{
		{"bound to the quiet identity", [][]string{bob, alice, alice}, []bool{false, true, false}},
		{"realm-wide", [][]string{nil, alice, bob}, []bool{true, false, false}},
		{"both identities", [][]string{{"alice", "bob"}, alice}, []bool{true, false}},
	} {
		t.Run(c.name, func(t *testing.T) {
			g := &gatedStore{SQLStore: openStore(t), entered: make(chan struct{}), release: make(chan struct{})}
			r := NewRecorder(g, Options{Retention: time.Hour, MaxTurnsPerRealm: 100, QueueSize: 2, Linger: time.Millisecond})
			defer r.Close()
			now := time.Now().UTC()
			quiet := tr("r", "s", now, "a")
			quiet.Identity = "bob"
			r.Trace(quiet)
			<-g.entered
			for range 5 {
				r.Trace(tr("r", "s", now, "b")) // alice's
			}
			close(g.release)
			for i, who := range c.reads {
				_, err := r.Session(context.Background(), "r", who, "s", 100)
				if told := errors.Is(err, sdk.ErrUnavailable); told != c.lost[i] || (err != nil && !told) {
					t.Fatalf("read %d (identities %v) = %v; want told of dropped turns: %v", i+1, who, err, c.lost[i])
				}
			}
		})
	}
}

// failingStore fails every Append while fail is set.
type failingStore struct {
	*SQLStore
	fail atomic.Bool
}

func (f *failingStore) Append(ctx context.Context, t []coordinator.TurnTrace) error {
	if f.fail.Load() {
		return errors.New("disk on fire")
	}
	return f.SQLStore.Append(ctx, t)
}

// TestWriteFailuresAreReportedToTheirIdentity: a write of alice's traces
// fails. A read kept to bob's turns (a token bound to bob) was answered
// the failure, though none of his turns was lost, and used up the notice:
// alice's own read then passed for whole without her turns. Each read is
// now told of the failed writes of the identities it reads; a realm-wide
// read (nil) of every one.
func TestWriteFailuresAreReportedToTheirIdentity(t *testing.T) {
	alice, bob := []string{"alice"}, []string{"bob"}
	for _, c := range []struct {
		name  string
		reads [][]string // in order
		told  []bool     // whether each read is told of the failed write
	}{
		{"bound to the other identity", [][]string{bob, alice, alice}, []bool{false, true, false}},
		{"realm-wide", [][]string{nil, alice, bob}, []bool{true, false, false}},
		{"both identities", [][]string{{"alice", "bob"}, alice, nil}, []bool{true, false, false}},
		{"identity, then realm-wide", [][]string{alice, nil}, []bool{true, false}},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := &failingStore{SQLStore: openStore(t)}
			f.fail.Store(true)
			r := NewRecorder(f, Options{Retention: time.Hour, MaxTurnsPerRealm: 100, Linger: time.Hour})
			defer r.Close()
			r.Trace(tr("r", "s", time.Now().UTC(), "a")) // alice's
			for i, who := range c.reads {
				_, err := r.Session(context.Background(), "r", who, "s", 100)
				f.fail.Store(false) // the first read's flush wrote, and failed
				if told := err != nil; told != c.told[i] {
					t.Fatalf("read %d (identities %v) = %v; want told of the failed write: %v", i+1, who, err, c.told[i])
				}
			}
		})
	}
}

// TestDropsOfManyIdentitiesAreBounded: drops are counted apart for at
// most maxLossIdentities identities of a realm (a flood naming a new
// identity each turn must not grow the host's memory); the drops of any
// more are told to the realm's next read, whoever it reads.
func TestDropsOfManyIdentitiesAreBounded(t *testing.T) {
	r := NewRecorder(openStore(t), Options{Retention: time.Hour, MaxTurnsPerRealm: 100})
	defer r.Close()
	for i := range maxLossIdentities + 10 {
		r.drop("r", fmt.Sprintf("user-%d", i))
	}
	r.lostMu.Lock()
	kept := len(r.lost["r"].byIdentity)
	r.lostMu.Unlock()
	if kept != maxLossIdentities {
		t.Fatalf("drops counted apart for %d identities, want %d", kept, maxLossIdentities)
	}
	ctx := context.Background()
	for i, want := range []bool{true, false} {
		if _, err := r.Session(ctx, "r", []string{"bob"}, "s", 10); errors.Is(err, sdk.ErrUnavailable) != want {
			t.Fatalf("bob's read %d = %v; want told of the unattributed drops: %v", i+1, err, want)
		}
	}
	if _, err := r.Session(ctx, "r", []string{"user-0"}, "s", 10); !errors.Is(err, sdk.ErrUnavailable) {
		t.Fatalf("user-0's read = %v; want told of its own drop", err)
	}
}

// TestFloodsLeaveRoomForOtherRealms: while the store is slow, realms
// flood the queue, each taking at most half of what the others leave, so
// a quiet realm's trace still finds room and its read is whole; each
// flood's drops are its own.
func TestFloodsLeaveRoomForOtherRealms(t *testing.T) {
	cases := []struct {
		name    string
		size    int
		floods  []string // realms flooding at once, taking turns
		dropped int64    // -1: not counted
	}{
		{"one flood", 8, []string{"flood"}, 18}, // three eighths of the queue: the written trace and two queued
		{"two floods", 12, []string{"flood-a", "flood-b"}, -1},
		{"three floods", 16, []string{"flood-a", "flood-b", "flood-c"}, -1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g := &gatedStore{SQLStore: openStore(t), entered: make(chan struct{}), release: make(chan struct{})}
			r := NewRecorder(g, Options{Retention: time.Hour, MaxTurnsPerRealm: 100, QueueSize: c.size, Linger: time.Millisecond})
			defer r.Close()
			now := time.Now().UTC()
			r.Trace(tr(c.floods[0], "s", now, "a"))
			<-g.entered
			for range 20 {
				for _, realm := range c.floods {
					r.Trace(tr(realm, "s", now, "b"))
				}
			}
			r.Trace(tr("quiet", "s", now, "c"))
			close(g.release)
			ctx := context.Background()
			if got, err := r.Session(ctx, "quiet", nil, "s", 100); err != nil || len(got) != 1 {
				t.Fatalf("the quiet realm's read = %d turns, %v; want its one turn", len(got), err)
			}
			for _, realm := range c.floods {
				if _, err := r.Session(ctx, realm, nil, "s", 100); !errors.Is(err, sdk.ErrUnavailable) {
					t.Fatalf("%s's read = %v, want an unavailable error for its dropped turns", realm, err)
				}
			}
			if c.dropped >= 0 && r.Dropped() != c.dropped {
				t.Fatalf("dropped %d traces, want %d", r.Dropped(), c.dropped)
			}
		})
	}
}

// TestAFloodLeavesRoomForItsRealmsOtherIdentities: one identity's flood
// of turns takes at most half of what the others leave, so a quieter
// identity of the same realm still has its trace stored; the realm's
// whole share used to go to the flood, and bob's turns were dropped.
func TestAFloodLeavesRoomForItsRealmsOtherIdentities(t *testing.T) {
	for _, size := range []int{4, 16} {
		t.Run(fmt.Sprint("queue of ", size), func(t *testing.T) {
			g := &gatedStore{SQLStore: openStore(t), entered: make(chan struct{}), release: make(chan struct{})}
			r := NewRecorder(g, Options{Retention: time.Hour, MaxTurnsPerRealm: 100, QueueSize: size, Linger: time.Millisecond})
			defer r.Close()
			now := time.Now().UTC()
			r.Trace(tr("r", "s", now, "a")) // alice's, held in the write
			<-g.entered
			for range 20 {
				r.Trace(tr("r", "s", now, "b")) // alice's flood
			}
			quiet := tr("r", "s", now, "c")
			quiet.Identity = "bob"
			r.Trace(quiet)
			close(g.release)
			got, err := r.Session(context.Background(), "r", []string{"bob"}, "s", 100)
			if err != nil || len(got) != 1 {
				t.Fatalf("bob's read = %d turns, %v; want his one turn", len(got), err)
			}
		})
	}
}

// TestAnotherRealmsForgetsKeepLateBlanking: a realm forgets a record, then
// another realm forgets more records than the recorder remembers. A trace
// of the first realm written just after (a turn that recalled the record
// before it was forgotten) must still come without its title: another
// realm's forgets are not its to undo.
func TestAnotherRealmsForgetsKeepLateBlanking(t *testing.T) {
	ctx := context.Background()
	r := NewRecorder(openStore(t), Options{Retention: time.Hour, MaxTurnsPerRealm: 100, Linger: time.Millisecond})
	defer r.Close()
	if err := r.Forget(ctx, "victim", []string{"gone"}); err != nil {
		t.Fatal(err)
	}
	for i := range maxForgotten + 1 {
		if err := r.Forget(ctx, "busy", []string{fmt.Sprint("id-", i)}); err != nil {
			t.Fatal(err)
		}
	}
	late := tr("victim", "s", time.Now().UTC(), "gone")
	late.Included[0].Title = "the secret"
	r.Trace(late)
	got, err := r.Session(ctx, "victim", nil, "s", 10)
	if err != nil || len(got) != 1 {
		t.Fatalf("read %d traces, %v", len(got), err)
	}
	if row := got[0].Included[0]; row.Title != "" || !row.Forgotten {
		t.Fatalf("the late trace names the forgotten record as %+v", row)
	}
}

// TestAFloodsRunIsLoggedOnce: a realm flooding past its share of the queue
// while other realms' traces still find room is one run of drops, logged
// once at its start, not again after each other realm's trace, and its
// end is not logged while its traces are still dropped.
func TestAFloodsRunIsLoggedOnce(t *testing.T) {
	g := &gatedStore{SQLStore: openStore(t), entered: make(chan struct{}), release: make(chan struct{})}
	var logs lockedBuffer
	r := NewRecorder(g, Options{Retention: time.Hour, MaxTurnsPerRealm: 100, QueueSize: 16, Linger: time.Millisecond,
		Logger: hclog.New(&hclog.LoggerOptions{Output: &logs})})
	defer r.Close()
	now := time.Now().UTC()
	r.Trace(tr("flood", "s", now, "a"))
	<-g.entered
	for range 5 {
		r.Trace(tr("flood", "s", now, "b")) // the flood's share of the queue is taken
	}
	for range 2 {
		r.Trace(tr("flood", "s", now, "c"))
		r.Trace(tr("quiet", "s", now, "d"))
	}
	r.Trace(tr("flood", "s", now, "c"))
	text := logs.String()
	close(g.release)
	if n := strings.Count(text, "dropped until"); n != 1 {
		t.Errorf("the flood's run was logged %d times, want once:\n%s", n, text)
	}
	if strings.Contains(text, "room again") {
		t.Errorf("the run's end was logged while the flood's traces were still dropped:\n%s", text)
	}
	if !strings.Contains(text, "realm=flood") {
		t.Errorf("the run's start does not name its realm:\n%s", text)
	}
}

// TestASteadyFloodLogsAMinute: from an outside review. A realm flooding
// past its share ends a run of drops with each write that makes room and
// starts another with its next trace: each was logged, two lines a write,
// so one tenant grew the host's log at the store's write rate. A realm's
// runs are now logged once a minute, the next logged end counting every
// drop since.
func TestASteadyFloodLogsAMinute(t *testing.T) {
	var logs lockedBuffer
	r := NewRecorder(openStore(t), Options{Retention: time.Hour, MaxTurnsPerRealm: 100, QueueSize: 8, Linger: time.Millisecond,
		Logger: hclog.New(&hclog.LoggerOptions{Output: &logs})})
	defer r.Close()
	for range 50 { // as Trace meets them: no room, then room after a write
		r.overflowed("flood", "alice")
		r.overflowed("flood", "alice")
		r.queued("flood")
	}
	text := logs.String()
	if n := strings.Count(text, "dropped until"); n != 1 {
		t.Errorf("50 runs of drops within a minute logged %d starts, want 1", n)
	}
	if n := strings.Count(text, "room again"); n != 1 || !strings.Contains(text, "dropped_traces=2") {
		t.Errorf("logged %d ends, want 1 counting its run's 2 drops:\n%.600s", n, text)
	}
	defer func(d time.Duration) { overflowWarnEvery = d }(overflowWarnEvery)
	overflowWarnEvery = 0 // a minute later
	logs.mu.Lock()
	logs.buf.Reset()
	logs.mu.Unlock()
	r.overflowed("flood", "alice")
	r.queued("flood")
	text = logs.String()
	if !strings.Contains(text, "dropped until") || !strings.Contains(text, "dropped_traces=99") {
		t.Errorf("the next logged run does not count the 98 drops since the last line and its own:\n%s", text)
	}
}

// hungStore never answers a write, as a PostgreSQL that stopped
// answering (frozen, or cut off without a reset): each Append says it
// entered, then waits for its deadline.
type hungStore struct {
	Store
	entered chan struct{}
}

func (h *hungStore) Append(ctx context.Context, _ []coordinator.TurnTrace) error {
	select {
	case h.entered <- struct{}{}:
	case <-ctx.Done():
	}
	<-ctx.Done()
	return ctx.Err()
}

// queuedBehindAHungWrite answers a recorder over a hungStore whose first
// write is under way, with 2,400 traces of 8 realms queued behind it.
func queuedBehindAHungWrite(t *testing.T) (*Recorder, *hungStore) {
	h := &hungStore{Store: openStore(t), entered: make(chan struct{}, 64)}
	r := NewRecorder(h, Options{Retention: time.Hour, MaxTurnsPerRealm: 100, Linger: time.Millisecond})
	now := time.Now().UTC()
	r.Trace(tr("r0", "s", now, "a"))
	<-h.entered
	for i := range 8 {
		for range 300 {
			r.Trace(tr(fmt.Sprintf("r%d", i), "s", now, "b"))
		}
	}
	return r, h
}

// closesWithin fails t unless r's Close returns within bound.
func closesWithin(t *testing.T, r *Recorder, bound time.Duration) {
	t.Helper()
	start := time.Now()
	closed := make(chan struct{})
	go func() {
		r.Close()
		close(closed)
	}()
	select {
	case <-closed:
	case <-time.After(bound):
		t.Fatalf("Close still waits on the hung store after %v", time.Since(start))
	}
}

// TestCloseWithAHungStoreEnds: traces queued while the store stopped
// answering are written at Close within one bound, not each batch within
// its own: a full queue held the host's shutdown for its 10 s write
// timeout per batch of 256 (minutes), past any service manager's grace.
func TestCloseWithAHungStoreEnds(t *testing.T) {
	r, _ := queuedBehindAHungWrite(t)
	closesWithin(t, r, 30*time.Second)
	if r.Dropped() < 2000 {
		t.Fatalf("dropped %d traces, want every queued one counted", r.Dropped())
	}
}

// TestCloseDuringAFlushWithAHungStoreEnds: Close's bound holds for the
// writes under way when it comes too, a trace read's flush among them: the
// flush wrote every queued batch at its own 10 s, so a Close during it
// waited for all of them (minutes at a full queue).
func TestCloseDuringAFlushWithAHungStoreEnds(t *testing.T) {
	r, h := queuedBehindAHungWrite(t)
	go r.flush(context.Background(), "r0", nil)
	<-h.entered // the first write gave up; the flush's writes have begun
	closesWithin(t, r, 3*closeTimeout)
}
