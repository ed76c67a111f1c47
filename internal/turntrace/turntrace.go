// Package turntrace keeps the turn trace (what each turn injected, what
// it left out and why) in a bounded, per-realm store: the host's state
// database, or PostgreSQL when the state is shared (internal/pgstate).
// The coordinator hands traces to a Recorder, which writes them off the
// request path.
package turntrace

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	hclog "github.com/hashicorp/go-hclog"
	"github.com/memhost/memhost/coordinator"
	"github.com/memhost/memhost/coordinator/queueshare"
	"github.com/memhost/memhost/sdk"
)

// Store holds traces. Times are UTC.
type Store interface {
	// Append stores traces.
	Append(ctx context.Context, traces []coordinator.TurnTrace) error
	// SessionPage answers the newest page.Limit traces of a session in
	// realm older than page.After (all when 0), oldest first, and the
	// After of the next older page (0 when this one is not full). Each
	// read keeps only the turns of identities when it is not nil, before
	// the limit applies.
	SessionPage(ctx context.Context, realm string, identities []string, session string, page Page) ([]coordinator.TurnTrace, int64, error)
	// RecordPage answers the newest page.Limit traces of realm older than
	// page.After that injected the record id, newest first, and the
	// next page's After.
	RecordPage(ctx context.Context, realm string, identities []string, id string, page Page) ([]coordinator.TurnTrace, int64, error)
	// RecentPage answers the sessions of realm with the newest traces,
	// those whose newest trace is older than page.After, and the next
	// page's After.
	RecentPage(ctx context.Context, realm string, identities []string, page Page) ([]SessionSummary, int64, error)
	// Prune drops traces older than before and, per realm, all but keep
	// (OverRealmBound); it answers how many went.
	Prune(ctx context.Context, before time.Time, keep int) (int, error)
	// Forget blanks the titles of the records ids of realm in every
	// trace that names them (ForgetTitles).
	Forget(ctx context.Context, realm string, ids []string) error
}

// Page is where a trace listing starts and how much it answers. After is
// a place in the store's order of writes, the next of the page before (0:
// from the newest), not a count of rows: a trace written or pruned
// between pages moves no other row from its page.
type Page struct {
	After int64
	Limit int
}

// next is the After of the page following one of n rows whose oldest is
// at last: none once a page is not full.
func (p Page) next(n int, last int64) int64 {
	if n < p.Limit || n == 0 {
		return 0
	}
	return last
}

// OverRealmBound selects the seq of every trace beyond the newest keep
// (the first parameter) of its realm, taken fairly among the realm's
// identities: an identity's newest trace ranks before any identity's
// second newest, and so on. A realm over its bound therefore loses the
// oldest traces of the identity holding the most, so one identity's flood
// of turns drops its own history, never a quieter identity's. The same
// SQL serves SQLite and PostgreSQL (each store binds the parameter its
// own way).
const OverRealmBound = `SELECT seq FROM (
	SELECT seq, row_number() OVER (PARTITION BY realm ORDER BY own, seq DESC) AS n
	FROM (SELECT seq, realm, row_number() OVER (PARTITION BY realm, identity ORDER BY seq DESC) AS own FROM turn_trace) AS by_identity
) AS by_realm WHERE n > %s`

// ForgetTitles blanks the title of every row of t naming one of ids and
// marks it forgotten; it reports whether t changed. A forgotten record's
// title must not outlive it in the traces.
func ForgetTitles(t *coordinator.TurnTrace, ids []string) bool {
	changed := false
	for _, rows := range [][]coordinator.TraceRecord{t.Included, t.Excluded} {
		for i := range rows {
			if slices.Contains(ids, rows[i].ID) && (rows[i].Title != "" || !rows[i].Forgotten) {
				rows[i].Title, rows[i].Forgotten = "", true
				changed = true
			}
		}
	}
	return changed
}

// Named answers the ids of the records t names, included and left out:
// what the stores index a trace by, so that a forget reads only the
// traces naming its records.
func Named(t coordinator.TurnTrace) []string {
	out := make([]string, 0, len(t.Included)+len(t.Excluded))
	for _, r := range slices.Concat(t.Included, t.Excluded) {
		out = append(out, r.ID)
	}
	return out
}

// SessionSummary is one traced session of a realm.
type SessionSummary struct {
	Realm    string    `json:"realm"`
	Identity string    `json:"identity"`
	Session  string    `json:"session"`
	Turns    int       `json:"turns"`
	Bytes    int       `json:"bytes"`
	Last     time.Time `json:"last"`
}

// Options bound the store.
type Options struct {
	Retention        time.Duration
	MaxTurnsPerRealm int
	// QueueSize bounds traces waiting to be written; beyond it they are
	// dropped (counted) rather than slowing a turn.
	QueueSize int
	// Linger is how long a write waits after its first trace for more
	// (default 10 ms). A commit costs about what a dozen traces' inserts
	// do, so under load one transaction carries many turns, not one. A
	// read flushes at once, without waiting for it.
	Linger time.Duration
	Logger hclog.Logger
}

// Recorder is the coordinator's TraceSink: it queues traces and writes
// them in batches from one goroutine, pruning now and then.
type Recorder struct {
	store Store
	opts  Options
	queue chan coordinator.TurnTrace
	// flushes carries flushes and forgets, which both wait for the
	// traces queued before them to be written.
	flushes chan request
	// forgotten are ids forgotten lately, by realm, with when (run's
	// goroutine only): a turn that recalled a record just before it was
	// forgotten may trace it after, and its title must not come back.
	forgotten map[string]map[string]time.Time
	done      chan struct{}
	stop      context.CancelFunc
	once      sync.Once
	// dropped counts every trace not stored: queue full, recorder closed
	// or write failed.
	dropped atomic.Int64
	// lost counts, by realm and identity, the traces the queue had no
	// room for since a read of them last answered them: a loss is answered
	// to a read of its own realm, never to another realm's (whose traces
	// are whole), nor to a read kept to other identities' turns (a token
	// bound to one identity: another's flood is none of its error, and its
	// count of drops none of its business).
	lostMu sync.Mutex
	lost   map[string]*owed[int64]
	// shares holds a place for each trace in the queue or being written,
	// shared by realm and by identity within it (queueshare.HoldFor), so
	// no number of flooding realms can drop every other realm's traces,
	// nor one identity's turns its neighbours'.
	shares *queueshare.Shares
	// overflow is, by realm, its runs of traces the queue had no room for
	// (guarded by lostMu). A run is logged at its start and end, not per
	// trace (a realm past its share is dropped while other realms' traces
	// still find room), and at most once per overflowWarnEvery: a steady
	// flood ends and starts a run with every write, and would otherwise
	// grow the log at that rate.
	overflow map[string]overflowRuns
	// closing guards closed: a Trace after Close is counted as dropped
	// instead of left in a queue no one writes.
	closing sync.RWMutex
	closed  bool
	// failed is, by realm and identity, the first write failure of its
	// traces since a read of them, which that read answers (run's
	// goroutine only): as with lost, a read kept to other identities'
	// turns is neither told of it nor uses it up.
	failed map[string]*owed[writeFailure]
	// failures numbers the failed writes, so a read answers its first.
	failures uint64
}

// writeFailure is a failed write and its order among the failures.
type writeFailure struct {
	err error
	seq uint64
}

// request is a flush, or a Forget when forget is set, handed to the
// writer and answered on done.
type request struct {
	done  chan error
	realm string
	// identities are those a flush's read keeps (every one when nil).
	identities []string
	forget     *forgetting
}

// forgetting is what a Forget blanks.
type forgetting struct {
	realm string
	ids   []string
}

const (
	// forgottenFor is how long a forgotten id's title is blanked in the
	// traces written after (a turn runs within the request timeout).
	forgottenFor = 2 * time.Minute
	// maxForgotten bounds those ids per realm; past it the realm's own
	// oldest go, never another realm's.
	maxForgotten     = 4096
	defaultQueueSize = 4096
	defaultLinger    = 10 * time.Millisecond
	writeBatch       = 256
	pruneEvery       = time.Minute
	// closeTimeout bounds Close's writes of what is queued; what is left
	// then is dropped (counted).
	closeTimeout = 5 * time.Second
)

// NewRecorder starts a recorder over store; Close stops it.
func NewRecorder(store Store, opts Options) *Recorder {
	if opts.QueueSize <= 0 {
		opts.QueueSize = defaultQueueSize
	}
	if opts.Linger <= 0 {
		opts.Linger = defaultLinger
	}
	if opts.Logger == nil {
		opts.Logger = hclog.NewNullLogger()
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &Recorder{
		store: store, opts: opts, queue: make(chan coordinator.TurnTrace, opts.QueueSize),
		flushes: make(chan request), done: make(chan struct{}), stop: cancel,
		forgotten: map[string]map[string]time.Time{},
		lost:      map[string]*owed[int64]{}, failed: map[string]*owed[writeFailure]{}, shares: queueshare.New(opts.QueueSize),
		overflow: map[string]overflowRuns{},
	}
	go r.run(ctx)
	return r
}

// Trace implements coordinator.TraceSink without blocking.
func (r *Recorder) Trace(t coordinator.TurnTrace) {
	r.closing.RLock()
	defer r.closing.RUnlock()
	if r.closed {
		r.drop(t.Realm, t.Identity)
		return
	}
	if !r.shares.HoldFor(t.Realm, t.Identity) {
		r.overflowed(t.Realm, t.Identity)
		return
	}
	select {
	case r.queue <- t:
		r.queued(t.Realm)
	default:
		r.shares.ReleaseFor(t.Realm, t.Identity)
		r.overflowed(t.Realm, t.Identity)
	}
}

// overflowWarnEvery is how often a realm's runs of drops may start a
// logged one.
var overflowWarnEvery = time.Minute

// overflowRuns is a realm's runs of drops: the drops no log line has
// counted yet, whether a logged run is under way, and when it started.
type overflowRuns struct {
	dropped int64
	logging bool
	warned  time.Time
}

// overflowed drops a trace of realm the queue had no room for, and logs
// the start of a run of such drops (see Recorder.overflow).
func (r *Recorder) overflowed(realm, identity string) {
	r.drop(realm, identity)
	r.lostMu.Lock()
	o := r.overflow[realm]
	o.dropped++
	first := !o.logging && (o.warned.IsZero() || time.Since(o.warned) >= overflowWarnEvery)
	if first {
		o.logging, o.warned = true, time.Now()
	}
	r.overflow[realm] = o
	r.lostMu.Unlock()
	if first {
		r.opts.Logger.Warn("turn trace: the queue has no room for the realm's traces (the store writes slower than turns come; each realm, and each identity in it, holds only a share of it); they are dropped until it has room", "realm", realm, "queue_size", r.opts.QueueSize)
	}
}

// queued ends realm's logged run of drops, if one was under way, and logs
// the drops counted since the last such line.
func (r *Recorder) queued(realm string) {
	r.lostMu.Lock()
	o, ok := r.overflow[realm]
	ended := ok && o.logging
	if ended {
		r.overflow[realm] = overflowRuns{warned: o.warned}
	}
	r.lostMu.Unlock()
	if ended {
		r.opts.Logger.Warn("turn trace: the queue has room again", "realm", realm, "dropped_traces", o.dropped)
	}
}

// queueLoss is the error a read answers for n traces of its realm the
// queue had no room for: unavailable (503), said as the host's own queue,
// not as a plugin.
type queueLoss int64

func (n queueLoss) Error() string {
	if n == 1 {
		return "turn trace: the trace of an earlier turn was dropped, the queue having no room for it (the next read answers the turns stored)"
	}
	return fmt.Sprintf("turn trace: the traces of %d earlier turns were dropped, the queue having no room for them (the next read answers the turns stored)", int64(n))
}

func (queueLoss) Is(target error) bool { return target == sdk.ErrUnavailable }

// maxLossIdentities bounds the identities whose drops and failed writes
// a realm keeps apart; those of any more are told to every read of it.
const maxLossIdentities = 4096

// owed is what a realm's reads are owed, by identity: the traces the
// queue had no room for, or the first failed write of them. A read kept
// to some identities is told theirs alone.
type owed[T any] struct {
	byIdentity map[string]T
	// unattributed is what is owed for identities past
	// maxLossIdentities, told to the realm's next read whoever it reads.
	unattributed    T
	hasUnattributed bool
}

// note records what identity is owed in the realm of *o (made when nil),
// merge answering the new value from the old (had is false when none).
func note[T any](o **owed[T], identity string, merge func(old T, had bool) T) {
	if *o == nil {
		*o = &owed[T]{byIdentity: map[string]T{}}
	}
	if old, ok := (*o).byIdentity[identity]; ok || len((*o).byIdentity) < maxLossIdentities {
		(*o).byIdentity[identity] = merge(old, ok)
		return
	}
	(*o).unattributed = merge((*o).unattributed, (*o).hasUnattributed)
	(*o).hasUnattributed = true
}

// take hands each value a read kept to identities (every identity's when
// nil) is owed to each and forgets it, answering whether nothing is left.
// The unattributed may be anyone's: every read is told of it.
func (o *owed[T]) take(identities []string, each func(T)) (empty bool) {
	if o.hasUnattributed {
		each(o.unattributed)
		var zero T
		o.unattributed, o.hasUnattributed = zero, false
	}
	if identities == nil {
		for _, v := range o.byIdentity {
			each(v)
		}
		return true
	}
	for _, id := range identities {
		if v, ok := o.byIdentity[id]; ok {
			each(v)
			delete(o.byIdentity, id)
		}
	}
	return len(o.byIdentity) == 0
}

// drop counts a trace of identity in realm the queue did not take.
func (r *Recorder) drop(realm, identity string) {
	r.dropped.Add(1)
	r.lostMu.Lock()
	defer r.lostMu.Unlock()
	l := r.lost[realm]
	note(&l, identity, func(n int64, _ bool) int64 { return n + 1 })
	r.lost[realm] = l
}

// takeLost answers and forgets the drops of realm a read kept to
// identities (every identity's when nil) is told of.
func (r *Recorder) takeLost(realm string, identities []string) int64 {
	r.lostMu.Lock()
	defer r.lostMu.Unlock()
	l := r.lost[realm]
	if l == nil {
		return 0
	}
	var n int64
	if l.take(identities, func(k int64) { n += k }) {
		delete(r.lost, realm)
	}
	return n
}

// fail notes a failed write of a trace of identity in realm, keeping the
// first failure of each identity (run's goroutine only).
func (r *Recorder) fail(realm, identity string, err error) {
	f := r.failed[realm]
	note(&f, identity, func(old writeFailure, had bool) writeFailure {
		if had {
			return old
		}
		r.failures++
		return writeFailure{err: err, seq: r.failures}
	})
	r.failed[realm] = f
}

// takeFailed answers and forgets the first failed write of realm a read
// kept to identities (every identity's when nil) is told of, nil when
// none (run's goroutine only).
func (r *Recorder) takeFailed(realm string, identities []string) error {
	f := r.failed[realm]
	if f == nil {
		return nil
	}
	var first *writeFailure
	if f.take(identities, func(w writeFailure) {
		if first == nil || w.seq < first.seq {
			first = &w
		}
	}) {
		delete(r.failed, realm)
	}
	if first == nil {
		return nil
	}
	return first.err
}

// Dropped answers how many traces were not stored: a full queue, a write
// that failed or a trace sent after Close.
func (r *Recorder) Dropped() int64 { return r.dropped.Load() }

// SessionPage, RecordPage and RecentPage read the store after a flush,
// so a reader sees every turn traced before its request (read your
// writes). identities, when not nil, keeps only their turns, before the
// limit applies.
func (r *Recorder) SessionPage(ctx context.Context, realm string, identities []string, session string, page Page) ([]coordinator.TurnTrace, int64, error) {
	if err := r.flush(ctx, realm, identities); err != nil {
		return nil, 0, err
	}
	return r.store.SessionPage(ctx, realm, identities, session, page)
}

func (r *Recorder) RecordPage(ctx context.Context, realm string, identities []string, id string, page Page) ([]coordinator.TurnTrace, int64, error) {
	if err := r.flush(ctx, realm, identities); err != nil {
		return nil, 0, err
	}
	return r.store.RecordPage(ctx, realm, identities, id, page)
}

func (r *Recorder) RecentPage(ctx context.Context, realm string, identities []string, page Page) ([]SessionSummary, int64, error) {
	if err := r.flush(ctx, realm, identities); err != nil {
		return nil, 0, err
	}
	return r.store.RecentPage(ctx, realm, identities, page)
}

// Session, Record and Recent are the first pages of SessionPage,
// RecordPage and RecentPage.
func (r *Recorder) Session(ctx context.Context, realm string, identities []string, session string, limit int) ([]coordinator.TurnTrace, error) {
	out, _, err := r.SessionPage(ctx, realm, identities, session, Page{Limit: limit})
	return out, err
}

func (r *Recorder) Record(ctx context.Context, realm string, identities []string, id string, limit int) ([]coordinator.TurnTrace, error) {
	out, _, err := r.RecordPage(ctx, realm, identities, id, Page{Limit: limit})
	return out, err
}

func (r *Recorder) Recent(ctx context.Context, realm string, identities []string, limit int) ([]SessionSummary, error) {
	out, _, err := r.RecentPage(ctx, realm, identities, Page{Limit: limit})
	return out, err
}

// flush waits until every trace queued before it is written. It answers
// an error when traces of realm were dropped since the last flush of realm
// (a write failed or the queue was full): those traces are lost, and a
// read must not pass for complete without them. Each loss is answered
// once, to a read of its realm.
func (r *Recorder) flush(ctx context.Context, realm string, identities []string) error {
	req := request{done: make(chan error, 1), realm: realm, identities: identities}
	select {
	case r.flushes <- req:
	case <-r.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case err := <-req.done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Forget blanks the titles of the records ids of realm in the stored
// traces, after writing every trace queued before it, and in the traces
// written for a while after (a turn that recalled a record just before
// it was forgotten).
func (r *Recorder) Forget(ctx context.Context, realm string, ids []string) error {
	req := request{done: make(chan error, 1), forget: &forgetting{realm: realm, ids: ids}}
	select {
	case r.flushes <- req:
	case <-r.done:
		return errors.New("turn trace: the recorder has stopped")
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case err := <-req.done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Close writes what is queued and stops.
func (r *Recorder) Close() {
	r.once.Do(func() {
		r.closing.Lock()
		r.closed = true
		r.closing.Unlock()
		r.stop()
		<-r.done
	})
}

func (r *Recorder) run(ctx context.Context) {
	defer close(r.done)
	tick := time.NewTicker(pruneEvery)
	defer tick.Stop()
	batch := make([]coordinator.TurnTrace, 0, writeBatch)
	// Writes end closeTimeout after Close, the drain's and those under way
	// then (a flush's among them) alike: a store that stopped answering
	// would otherwise hold Close, and the host's shutdown, a write timeout
	// per batch queued.
	writes, cancelWrites := context.WithCancel(context.Background())
	defer cancelWrites()
	defer context.AfterFunc(ctx, func() { time.AfterFunc(closeTimeout, cancelWrites) })()
	for {
		select {
		case t := <-r.queue:
			var req *request
			batch, req = r.gather(ctx, append(batch[:0], t))
			r.write(writes, batch)
			if req != nil {
				r.writeQueued(writes, batch)
				r.answer(*req)
			}
		case req := <-r.flushes:
			r.writeQueued(writes, batch)
			r.answer(req)
		case <-tick.C:
			r.prune(ctx)
		case <-ctx.Done():
			r.writeQueued(writes, batch)
			return
		}
	}
}

// answer tells a flush its traces are written, or that some were lost,
// and carries out a forget.
func (r *Recorder) answer(req request) {
	if req.forget != nil {
		req.done <- r.forget(*req.forget)
		return
	}
	err := r.takeFailed(req.realm, req.identities)
	n := r.takeLost(req.realm, req.identities)
	if err == nil && n > 0 {
		err = queueLoss(n)
	}
	req.done <- err
}

// writeQueued writes everything queued now, within ctx.
func (r *Recorder) writeQueued(ctx context.Context, batch []coordinator.TurnTrace) {
	for {
		b := r.drain(batch[:0])
		if len(b) == 0 {
			return
		}
		r.write(ctx, b)
	}
}

// gather adds to batch what arrives within the linger, up to a batch. A
// flush or forget, or the recorder stopping, ends the wait early; the
// request is returned for the caller to answer once everything queued is
// written.
func (r *Recorder) gather(ctx context.Context, batch []coordinator.TurnTrace) ([]coordinator.TurnTrace, *request) {
	linger := time.NewTimer(r.opts.Linger)
	defer linger.Stop()
	for len(batch) < writeBatch {
		select {
		case t := <-r.queue:
			batch = append(batch, t)
		case req := <-r.flushes:
			// A trace queued before the flush may still be in the queue
			// (select picks among ready cases at random): it belongs in
			// this write.
			return r.drain(batch), &req
		case <-linger.C:
			return batch, nil
		case <-ctx.Done():
			return batch, nil
		}
	}
	return batch, nil
}

// drain adds what is queued now, up to a batch.
func (r *Recorder) drain(batch []coordinator.TurnTrace) []coordinator.TurnTrace {
	for len(batch) < writeBatch {
		select {
		case t := <-r.queue:
			batch = append(batch, t)
		default:
			return batch
		}
	}
	return batch
}

// forget scrubs the store and remembers the ids for the traces to come.
func (r *Recorder) forget(f forgetting) error {
	now := time.Now()
	for realm, ids := range r.forgotten {
		for id, at := range ids {
			if now.Sub(at) >= forgottenFor {
				delete(ids, id)
			}
		}
		if len(ids) == 0 {
			delete(r.forgotten, realm)
		}
	}
	own := r.forgotten[f.realm]
	if own == nil {
		own = map[string]time.Time{}
		r.forgotten[f.realm] = own
	}
	for _, id := range f.ids {
		own[id] = now
	}
	// A realm forgetting many records at once gives up its own oldest:
	// another realm's forgets must not bring its titles back.
	for len(own) > maxForgotten {
		oldest, at := "", now
		for id, t := range own {
			if oldest == "" || t.Before(at) {
				oldest, at = id, t
			}
		}
		delete(own, oldest)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// The store's error names the turn trace itself.
	return r.store.Forget(ctx, f.realm, f.ids)
}

func (r *Recorder) write(ctx context.Context, batch []coordinator.TurnTrace) {
	if len(batch) == 0 {
		return
	}
	defer func() {
		for _, t := range batch {
			r.shares.ReleaseFor(t.Realm, t.Identity)
		}
	}()
	for i := range batch {
		if ids := r.forgotten[batch[i].Realm]; len(ids) > 0 {
			batch[i].Included, batch[i].Excluded = slices.Clone(batch[i].Included), slices.Clone(batch[i].Excluded)
			ForgetTitles(&batch[i], slices.Collect(maps.Keys(ids)))
		}
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := r.store.Append(ctx, batch); err != nil {
		r.dropped.Add(int64(len(batch)))
		r.opts.Logger.Warn("turn trace: write failed; traces dropped", "traces", len(batch), "error", err)
		// The store's error names the turn trace itself.
		lost := fmt.Errorf("traces of earlier turns were lost: %w", err)
		for _, t := range batch {
			r.fail(t.Realm, t.Identity, lost)
		}
	}
}

// prune ends with ctx too: Close does not wait for it.
func (r *Recorder) prune(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if _, err := r.store.Prune(ctx, time.Now().Add(-r.opts.Retention), r.opts.MaxTurnsPerRealm); err != nil {
		r.opts.Logger.Warn("turn trace: prune failed", "error", err)
	}
}

var _ coordinator.TraceSink = (*Recorder)(nil)
