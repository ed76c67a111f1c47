package postgres

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/memhost/memhost/sdk"
	sdkindex "github.com/memhost/memhost/sdk/index"
)

// The replica: each plugin process holds the schema's active records in
// an sdk/index, the engine the sqlite provider answers through, and
// answers recall from it, reading only the hits' rows from PostgreSQL.
// PostgreSQL stays the only truth: the replica is loaded from records in
// one snapshot together with the change log's position in it, then
// follows the change log (changes.go) in seq order, re-reading the
// records each change names. sdk/index keeps thread context itself, so it
// ranks as the SQL path does (both follow sdk/index's rules), within
// rounding.
//
// A recall answers from the replica only when that cannot be stale:
//
//   - the replica is loaded, its LISTEN connection is up and it has
//     caught up since that connection (re)started, and it has not known
//     of unapplied changes for longer than max_lag;
//   - it has applied every change this process acknowledged (the recall
//     waits for that, up to read_wait);
//   - the statement that reads the hits also reads the log's head: a
//     change committed anywhere before then and not yet applied makes the
//     recall wait for it (up to read_wait) and search again.
//
// Otherwise the recall answers from SQL, as without a replica.

// loadHook, when set, runs inside a whole load's snapshot, before it
// reads the records (tests make loads slow there).
var loadHook atomic.Pointer[func()]

// snapshotHook, when set, runs at the start of each catch-up's snapshot
// (tests: a slow server).
var snapshotHook atomic.Pointer[func()]

// beatHook, when set, runs before each heartbeat, inside its deadline
// (tests: a slow server).
var beatHook atomic.Pointer[func(context.Context)]

// maxApply is the most changes one catch-up applies; a replica further
// behind catches up in steps of it, each its own snapshot. A variable for
// tests.
var maxApply = 20000

type replica struct {
	set    replicaSettings
	db     *pgdb
	listen *pgx.ConnConfig
	schema string
	opts   sdkindex.Options
	log    *slog.Logger
	name   string // this process's row in replicas

	// mu makes a catch-up one change to searches: apply holds it
	// exclusively, search shared.
	mu      sync.RWMutex
	ix      *sdkindex.Index // nil until loaded
	applied atomic.Int64    // the change log position ix reflects
	moved   chan struct{}   // closed (and replaced) when applied moves; under mu
	// mark is when the change at applied was written (zero when applied
	// is the horizon's): a log whose row at applied no longer matches it
	// went back (see read). Written under mu.
	mark time.Time
	// pin is the position this process's replicas row holds the log
	// after, kept alive by beatLoop whatever the follower is doing (a
	// load may outlast the trim grace); -1 until the first load begins.
	pin atomic.Int64
	// loadTimeout bounds each statement of a load, and its idling between
	// them (see loadSettings).
	loadTimeout time.Duration
	// loading: a whole load is under way, its snapshot's position pinned;
	// the row says so (see trimChanges).
	loading atomic.Bool

	acked atomic.Int64 // the highest change this process committed
	head  atomic.Int64 // the highest change heard of
	// behind is when the replica first knew of a change it had not
	// applied (Unix ns); 0 when current.
	behind atomic.Int64
	// Listening: epoch counts LISTEN connections made; connected says
	// the latest is up; caught is the epoch of the last catch-up that
	// began while it was.
	epoch, caught atomic.Int64
	connected     atomic.Bool

	wake chan struct{}
	// beatNow asks beatLoop to record the pin at once (after a load, or
	// when a reload lowered it).
	beatNow chan struct{}
	stop    context.CancelFunc
	done    sync.WaitGroup

	// loads counts whole loads (the first, and reloads); firstLoadFailures
	// the attempts at the first that failed.
	loads, firstLoadFailures atomic.Int64
	// applyHook, when set, runs before each catch-up's changes are
	// applied (tests stop a replica there).
	applyHook atomic.Pointer[func()]
}

func newReplica(db *pgdb, set settings, log *slog.Logger) *replica {
	var id [8]byte
	rand.Read(id[:])
	opts := sdkindex.Options{Weights: fieldWeights[:], ContextWeight: sdkindex.ContextWeight}
	if set.realmStats {
		opts.Stats = sdkindex.StatsRealm
	}
	listen := set.pool.ConnConfig.Copy()
	listen.AfterConnect = keepWhileIdle(listen.AfterConnect)
	r := &replica{
		set: set.replica, db: db, listen: listen, schema: set.schema, opts: opts, log: log,
		name: hex.EncodeToString(id[:]), moved: make(chan struct{}), wake: make(chan struct{}, 1),
		beatNow: make(chan struct{}, 1),
	}
	r.pin.Store(-1)
	r.loadTimeout = max(set.statementTimeout, maintenanceTimeout)
	return r
}

// start loads the replica and follows the log until close.
func (r *replica) start() {
	ctx, stop := context.WithCancel(context.Background())
	r.stop = stop
	r.done.Add(4)
	go func() { defer r.done.Done(); r.follow(ctx) }()
	go func() { defer r.done.Done(); r.listenLoop(ctx) }()
	go func() { defer r.done.Done(); r.beatLoop(ctx) }()
	go func() { defer r.done.Done(); trimLoop(ctx, r.db, r.set.retention, r.log) }()
}

// close stops the replica and removes its row (best effort).
func (r *replica) close() {
	r.stop()
	r.done.Wait()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	r.db.Exec(ctx, "DELETE FROM replicas WHERE name = $1", r.name)
}

// acknowledge notes a change this process committed.
func (r *replica) acknowledge(seq int64) {
	raise(&r.acked, seq)
	r.heard(seq)
}

// raise sets a to v when v is larger.
func raise(a *atomic.Int64, v int64) {
	for {
		cur := a.Load()
		if v <= cur || a.CompareAndSwap(cur, v) {
			return
		}
	}
}

// lower sets a to v when v is smaller.
func lower(a *atomic.Int64, v int64) {
	for {
		cur := a.Load()
		if v >= cur || a.CompareAndSwap(cur, v) {
			return
		}
	}
}

// heard notes that changes up to seq exist, and wakes the follower when
// they are not applied.
func (r *replica) heard(seq int64) {
	if r.knowOf(seq) {
		r.poke()
	}
}

// knowOf notes that changes up to seq exist, and answers whether some are
// not applied (the replica is behind from now, unless it already was).
func (r *replica) knowOf(seq int64) bool {
	raise(&r.head, seq)
	if seq <= r.applied.Load() {
		return false
	}
	r.behind.CompareAndSwap(0, time.Now().UnixNano())
	return true
}

func (r *replica) poke() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// serving reports whether recall may ask the replica at all.
func (r *replica) serving() bool {
	if !r.connected.Load() || r.caught.Load() != r.epoch.Load() {
		return false
	}
	r.mu.RLock()
	loaded := r.ix != nil
	r.mu.RUnlock()
	if !loaded {
		return false
	}
	b := r.behind.Load()
	return b == 0 || time.Since(time.Unix(0, b)) <= r.set.maxLag
}

// waitApplied waits until the replica has applied seq, until deadline.
func (r *replica) waitApplied(ctx context.Context, seq int64, deadline time.Time) bool {
	for {
		r.mu.RLock()
		applied, moved := r.applied.Load(), r.moved
		r.mu.RUnlock()
		if applied >= seq {
			return true
		}
		r.poke()
		wait := time.Until(deadline)
		if wait <= 0 {
			return false
		}
		t := time.NewTimer(wait)
		select {
		case <-moved:
			t.Stop()
		case <-t.C:
			return false
		case <-ctx.Done():
			t.Stop()
			return false
		}
	}
}

// waitServing waits until the replica serves, until deadline.
func (r *replica) waitServing(ctx context.Context, deadline time.Time) bool {
	for !r.serving() {
		r.mu.RLock()
		moved := r.moved
		r.mu.RUnlock()
		r.poke()
		wait := time.Until(deadline)
		if wait <= 0 {
			return false
		}
		// Serving also turns on when the LISTEN connection comes up, which
		// closes no channel: look again every few milliseconds.
		t := time.NewTimer(min(wait, 5*time.Millisecond))
		select {
		case <-moved:
			t.Stop()
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return false
		}
	}
	return true
}

// recall answers q from the replica; ok is false when it cannot, and the
// caller answers from SQL.
func (r *replica) recall(ctx context.Context, q sdk.RecallQuery, terms []string, limit int, now time.Time) (hits []sdk.Hit, ok bool, err error) {
	deadline := waitDeadline(ctx, r.set.readWait)
	// SQL ranks without the query vector: a recall with one waits for a
	// replica that is loading or catching up, up to read_wait.
	if !r.serving() && (q.QueryVector == nil || !r.waitServing(ctx, deadline)) {
		return nil, false, nil
	}
	need := r.acked.Load()
	since, until := q.WindowMillis()
	iq := sdkindex.Query{Realm: q.Realm, Terms: terms, ExcludeIDs: q.ExcludeIDs, Tags: q.Tags, ExcludeTags: q.ExcludeTags,
		NowMs: now.UnixMilli(), SinceMs: since, UntilMs: until, Limit: limit,
		Vector: q.QueryVector, Model: q.VectorModel, LexicalWeight: q.Fusion.Lexical, SemanticWeight: q.Fusion.Semantic}
	for _, s := range q.Scopes {
		iq.Scopes = append(iq.Scopes, string(s))
	}
	for range 2 {
		if !r.waitApplied(ctx, need, deadline) {
			return nil, false, nil
		}
		r.mu.RLock()
		found, err := r.ix.Search(iq)
		at, mark := r.applied.Load(), r.mark
		r.mu.RUnlock()
		if errors.Is(err, sdkindex.ErrInvalid) {
			// Only the query vector can be wrong here (its model or
			// length), unless the replica is behind a change of the
			// stored vectors: the log's head decides.
			invalid := err
			_, state, _, err := readHitRows(ctx, r.db, q.Realm, at, nil)
			if err != nil {
				return nil, true, fmt.Errorf("postgres: recall: %w", classify(err))
			}
			r.heard(state.head)
			if state.wentBack(at, mark) {
				r.poke() // the follower reloads; SQL answers
				return nil, false, nil
			}
			if state.head == at {
				return nil, true, fmt.Errorf("postgres: recall: %w: %w", sdk.ErrInvalid, invalid)
			}
			need = state.head
			continue
		}
		if err != nil {
			return nil, false, fmt.Errorf("postgres: recall: %w", err)
		}
		hits, state, whole, err := readHitRows(ctx, r.db, q.Realm, at, found)
		if err != nil {
			return nil, true, fmt.Errorf("postgres: recall: %w", classify(err))
		}
		r.heard(state.head)
		if state.wentBack(at, mark) {
			r.poke() // the follower reloads; SQL answers
			return nil, false, nil
		}
		head := state.head
		if head == at {
			// A hit gone or changed since the replica read it means a
			// change at or below head the replica missed: never here,
			// since the row is read after at; SQL answers if it happens.
			return hits, whole, nil
		}
		need = head
	}
	return nil, false, nil
}

// waitDeadline is when a recall stops waiting for the replica: after
// readWait, or once half the time the caller's deadline leaves has passed,
// whichever comes first, so that SQL can still answer a recall that waited
// in vain.
func waitDeadline(ctx context.Context, readWait time.Duration) time.Time {
	now := time.Now()
	deadline := now.Add(readWait)
	if d, ok := ctx.Deadline(); ok {
		if half := now.Add(d.Sub(now) / 2); half.Before(deadline) {
			deadline = half
		}
	}
	return deadline
}

// logHead is the log's position: its last change's, or the horizon when
// it was trimmed empty.
const logHead = `greatest((SELECT coalesce(max(seq), 0) FROM changes), (SELECT trimmed FROM change_horizon))`

// logState is the change log as a recall reads it beside the hits' rows.
type logState struct {
	head    int64      // the last change's position, or the horizon when trimmed empty
	trimmed int64      // the horizon
	at      *time.Time // when the change at the replica's position was written; nil when absent
}

// wentBack reports whether the log no longer holds the change the replica
// applied last (applied, written at mark): it ends before it, or its row
// there is another (a restore, or a failover to a standby that lacked the
// latest changes, numbering new changes as ones the replica applied). At
// or below the horizon the row may be trimmed and proves nothing.
func (l logState) wentBack(applied int64, mark time.Time) bool {
	return l.head < applied || applied > l.trimmed && (l.at == nil || !l.at.Equal(mark))
}

// readHitRows reads the rows of the replica's hits, in one round trip with
// the change log's state around applied, the replica's position. whole is
// false when a hit's row is gone or no longer active. A batch that meets a
// pooled connection the server closed runs again on another (db.run), as
// the SQL path's reads do.
func readHitRows(ctx context.Context, db *pgdb, realm string, applied int64, found []sdkindex.Hit) (hits []sdk.Hit, state logState, whole bool, err error) {
	err = db.run(ctx, readOnly, func(q dbtx) (err error) {
		hits, state, whole, err = readHitRowsOn(ctx, q, realm, applied, found)
		return err
	})
	if err != nil {
		return nil, logState{}, false, err
	}
	return hits, state, whole, nil
}

func readHitRowsOn(ctx context.Context, db dbtx, realm string, applied int64, found []sdkindex.Hit) (hits []sdk.Hit, state logState, whole bool, err error) {
	seqs := make([]int64, len(found))
	for i, h := range found {
		seqs[i] = int64(h.Seq)
	}
	b := &pgx.Batch{}
	// The horizon too: a log trimmed empty still has a position.
	b.Queue(`SELECT `+logHead+`, h.trimmed, (SELECT at FROM changes WHERE seq = $1) FROM change_horizon AS h`, applied)
	if len(seqs) > 0 {
		b.Queue(`SELECT `+recordColumns+`, r.seq FROM records AS r WHERE r.seq = ANY($1) AND r.realm = $2 AND r.status = 'active'`, seqs, realm)
	}
	br := db.SendBatch(ctx, b)
	defer br.Close()
	if err := br.QueryRow().Scan(&state.head, &state.trimmed, &state.at); err != nil {
		return nil, logState{}, false, err
	}
	if len(seqs) == 0 {
		return []sdk.Hit{}, state, true, br.Close()
	}
	rows, err := br.Query()
	if err != nil {
		return nil, logState{}, false, err
	}
	bySeq := make(map[int64]sdk.Record, len(seqs))
	for rows.Next() {
		var rec sdk.Record
		var seq int64
		if err := scanRecord(rows, &rec, &seq); err != nil {
			rows.Close()
			return nil, logState{}, false, err
		}
		bySeq[seq] = rec
	}
	if err := rows.Err(); err != nil {
		return nil, logState{}, false, err
	}
	hits = make([]sdk.Hit, 0, len(found))
	for _, h := range found {
		rec, ok := bySeq[int64(h.Seq)]
		if !ok || rec.ID != h.ID {
			return nil, state, false, br.Close()
		}
		hits = append(hits, sdk.Hit{Record: rec, Score: h.Score})
	}
	return hits, state, true, br.Close()
}

// clusterShare is the least share of a realm's documents that must have
// arrived since its last renumbering in scope order for the replica to
// renumber them: each renumbering leaves one more run of scope order, and
// costs about what encoding those documents does.
const clusterShare = 1.0 / 16

// follow loads the replica, then catches up whenever woken (a
// notification, a write of this process, a waiting recall) or every
// poll_interval; a catch-up that took one step of a longer backlog goes
// on at once.
func (r *replica) follow(ctx context.Context) {
	poll := time.NewTicker(r.set.poll)
	defer poll.Stop()
	for {
		more, err := r.catchUp(ctx)
		if err != nil && ctx.Err() == nil {
			r.log.Warn("postgres: the replica could not read the change log; recall answers from SQL until it does", "error", err)
		}
		// Renumber the documents applied since in scope order
		// (sdkindex.Index.Cluster). Only this goroutine changes r.ix, so
		// no change applies meanwhile; searches go on.
		if r.ix != nil {
			r.ix.Cluster(clusterShare)
		}
		if more {
			if ctx.Err() != nil {
				return
			}
			continue
		}
		select {
		case <-ctx.Done():
			return
		case <-r.wake:
		case <-poll.C:
		}
	}
}

// beatLoop records the replica's pin every heartbeatInterval, and when
// asked, on a connection of its own: a load or a long catch-up holds a
// pooled connection for its snapshot (the only one, with pool_size 1),
// and must not let the replicas row expire, or other processes trim the
// changes it will need once done and it loads again. One goroutine writes
// every beat, so an older pin never lands after a newer one.
func (r *replica) beatLoop(ctx context.Context) {
	t := time.NewTicker(heartbeatInterval)
	defer t.Stop()
	var conn *pgx.Conn
	defer func() {
		if conn != nil {
			conn.Close(context.Background())
		}
	}()
	landed := time.Now() // the row was just written (register) or is about to be
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-r.beatNow:
		}
		pin := r.pin.Load()
		if pin < 0 {
			continue
		}
		// A slow beat is worth waiting for while it can still keep the row
		// alive (cut at one interval, beats on a loaded server failed one
		// after another, each on a new connection, and the row expired),
		// but not to its end: one stuck on a dead connection must leave
		// the next a third of the row's life to connect again.
		start := time.Now()
		budget := time.Until(landed.Add(2 * replicaLiveFor / 3))
		if budget < heartbeatInterval {
			// Past two thirds (a beat was cut): what is left of the row's
			// life, not one interval, or a reconnect on a busy server
			// fails at every tick until the row expires.
			budget = max(heartbeatInterval, time.Until(landed.Add(replicaLiveFor)))
		}
		bctx, cancel := context.WithTimeout(ctx, budget)
		var err error
		if conn == nil {
			conn, err = pgx.ConnectConfig(bctx, r.listen)
		}
		if err == nil {
			if hook := beatHook.Load(); hook != nil {
				(*hook)(bctx)
			}
			if err = heartbeat(bctx, conn, r.name, pin, r.loading.Load()); err == nil {
				landed = start
			}
		}
		cancel()
		if err != nil {
			if conn != nil {
				conn.Close(context.Background())
				conn = nil
			}
			if ctx.Err() == nil {
				r.log.Debug("replica heartbeat", "error", err)
			}
		}
	}
}

// beat asks beatLoop to record the pin now.
func (r *replica) beat() {
	select {
	case r.beatNow <- struct{}{}:
	default:
	}
}

// register pins the log at its position now, before the first load's
// snapshot (whose position is at least that), so that no trimmer takes
// the changes after the snapshot while the load runs.
func (r *replica) register(ctx context.Context) error {
	var pos int64
	if err := r.db.QueryRow(ctx, `SELECT `+logHead).Scan(&pos); err != nil {
		return err
	}
	if err := heartbeat(ctx, r.db, r.name, pos, false); err != nil {
		return err
	}
	r.pin.Store(pos)
	return nil
}

// unregister drops the pin of a replica whose first load failed: a
// replica that never loads must not hold the log for every host. The next
// attempt registers again.
func (r *replica) unregister(ctx context.Context) {
	r.pin.Store(-1)
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), heartbeatInterval)
	defer cancel()
	if _, err := r.db.Exec(dctx, "DELETE FROM replicas WHERE name = $1", r.name); err != nil {
		// Unrefreshed, the row expires after replicaLiveFor.
		r.log.Debug("drop the replica's row", "error", err)
	}
}

// snapshot is a read-only repeatable-read transaction: the log and the
// records it reads agree.
var snapshot = pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}

// step is what one catch-up read, to apply at once.
type step struct {
	to     int64                      // the log position it reflects
	mark   time.Time                  // when the change at to was written; zero at the horizon
	full   *sdkindex.Index            // the whole replica, loaded anew
	realms map[string]*sdkindex.Index // realms loaded anew (re-indexed)
	gone   [][2]string                // realm and id of changed records no longer active
	puts   []docVector                // changed records that are active
	// rewound: the log went back past the replica's position (see read).
	rewound bool
	// more: the step applies the first maxApply changes of a longer
	// backlog; the follower goes on at once.
	more bool
}

// docVector is an index document with its stored vector, if any.
type docVector struct {
	doc sdkindex.Doc
	vec *sdk.RecordVector
}

// catchUp applies the changes after the replica's position (at most
// maxApply of them; more reports that others wait), or loads it whole
// when it is not loaded, the log was trimmed past its position, or went
// back.
func (r *replica) catchUp(ctx context.Context) (more bool, err error) {
	epoch, listening := r.epoch.Load(), r.connected.Load()
	if r.pin.Load() < 0 {
		if err := r.register(ctx); err != nil {
			return false, fmt.Errorf("catch up: %w", classify(err))
		}
	}
	var st step
	r.mu.RLock()
	first := r.ix == nil
	r.mu.RUnlock()
	opts := snapshot
	if first {
		// A first load: the whole snapshot, its first read too, is the
		// load's (on a loaded server that read outlasted a short
		// statement_timeout, and the first load failed).
		opts = withTimeouts(snapshot, r.loadTimeout, r.loadTimeout)
	}
	err = pgx.BeginTxFunc(ctx, r.db, opts, func(tx pgx.Tx) (err error) {
		st, err = r.read(ctx, tx)
		return err
	})
	if r.loading.Swap(false) && err != nil {
		// A failed load's row says it loads no more, and holds back no
		// trim; one that succeeded beats at once below.
		r.beat()
	}
	if err != nil {
		r.mu.RLock()
		loaded := r.ix != nil
		r.mu.RUnlock()
		if !loaded {
			r.unregister(ctx)
			r.firstLoadFailures.Add(1)
		}
		return false, fmt.Errorf("catch up: %w", classify(err))
	}
	if hook := r.applyHook.Load(); hook != nil {
		(*hook)()
	}
	loaded := st.full != nil
	r.apply(&st)
	if loaded {
		// Pinned at once where the load left it, not at the next beat.
		r.beat()
	}
	if listening && !st.more {
		r.caught.Store(epoch)
	}
	return st.more, nil
}

// read reads, in one snapshot, what brings the replica to the log's
// position in it.
func (r *replica) read(ctx context.Context, tx pgx.Tx) (step, error) {
	var st step
	var trimmed, top int64
	var topAt, fromAt *time.Time
	from := r.applied.Load()
	r.mu.RLock()
	loaded := r.ix != nil
	r.mu.RUnlock()
	if hook := snapshotHook.Load(); hook != nil {
		(*hook)()
	}
	if err := tx.QueryRow(ctx, `SELECT h.trimmed, coalesce(c.seq, 0), c.at, (SELECT at FROM changes WHERE seq = $1)
		FROM change_horizon AS h LEFT JOIN LATERAL (SELECT seq, at FROM changes ORDER BY seq DESC LIMIT 1) AS c ON true`, from).Scan(&trimmed, &top, &topAt, &fromAt); err != nil {
		return st, err
	}
	st.to = max(trimmed, top)
	if top >= trimmed && topAt != nil {
		st.mark = *topAt
	}
	// The log's head as this snapshot sees it (a notification may have
	// been missed); the follower reading it needs no poke.
	r.knowOf(st.to)
	// The log went back when it ends before the replica's position, or
	// its change there is not the one the replica applied (above the
	// horizon, that change cannot have been trimmed): the database was
	// restored, or failed over to a standby that lacked the latest
	// changes. The replica may hold what is gone, and would pass over new
	// changes numbered as ones it applied: it reloads.
	st.rewound = loaded && (st.to < from || from > trimmed && (fromAt == nil || !fromAt.Equal(r.mark)))
	if !loaded || from < trimmed || st.rewound {
		if loaded {
			r.log.Info("postgres: the replica reloads", "applied", from, "trimmed", trimmed, "head", st.to, "rewound", st.rewound)
		}
		// The load brings the replica to the snapshot's position: the
		// changes after it must stay while it loads, even past the
		// retention, and those before it may go (after a rewind the pin
		// names a position of the old numbering).
		r.pin.Store(st.to)
		r.loading.Store(true)
		r.beat()
		if loaded {
			if err := r.loadSettings(ctx, tx); err != nil {
				return st, err
			}
		}
		if hook := loadHook.Load(); hook != nil {
			(*hook)()
		}
		var err error
		st.full, err = r.load(ctx, tx, "")
		return st, err
	}
	if st.to <= from {
		return st, nil
	}
	// Records are read as this snapshot holds them, which may be past the
	// step's last change when more follow: a later step reads them again,
	// and no recall answers from the replica before it is at the log's
	// head (recall reads the head with the hits).
	rows, err := tx.Query(ctx, `SELECT seq, realm, record_id, op, at FROM changes WHERE seq > $1 ORDER BY seq LIMIT $2`, from, maxApply)
	if err != nil {
		return st, err
	}
	var realms, ids []string
	seen := map[[2]string]bool{}
	st.realms = map[string]*sdkindex.Index{}
	var realm, id, op string
	var seq, last int64
	var at time.Time
	add := func() error {
		last = seq
		if op == opRealm {
			st.realms[realm] = nil
			return nil
		}
		if k := [2]string{realm, id}; !seen[k] {
			seen[k] = true
			realms, ids = append(realms, realm), append(ids, id)
		}
		return nil
	}
	n, err := pgx.ForEachRow(rows, []any{&seq, &realm, &id, &op, &at}, add)
	if err != nil {
		return st, err
	}
	if n.RowsAffected() == int64(maxApply) && last < st.to {
		// A step ends with its last transaction's changes, which share
		// their at (the transaction's start): cut inside one, a step
		// would apply part of a batch, such as the vectors of a model
		// changing length together, which the index refuses piecemeal.
		cutAt := at
		for more := true; more; {
			rows, err := tx.Query(ctx, `SELECT seq, realm, record_id, op, at FROM changes WHERE seq > $1 ORDER BY seq LIMIT 1000`, last)
			if err != nil {
				return st, err
			}
			read := 0
			_, err = pgx.ForEachRow(rows, []any{&seq, &realm, &id, &op, &at}, func() error {
				if !more || !at.Equal(cutAt) {
					more = false
					return nil
				}
				read++
				return add()
			})
			if err != nil {
				return st, err
			}
			more = more && read == 1000
		}
		if last < st.to {
			st.to, st.mark, st.more = last, cutAt, true
		}
	}
	if len(st.realms) > 0 {
		if err := r.loadSettings(ctx, tx); err != nil {
			return st, err
		}
	}
	for realm := range st.realms {
		if st.realms[realm], err = r.load(ctx, tx, realm); err != nil {
			return st, err
		}
	}
	err = readDocs(ctx, tx, `SELECT `+docColumns+` FROM unnest($1::text[], $2::text[]) AS u(realm, id)
		JOIN records AS r ON r.realm = u.realm AND r.id = u.id AND r.status = 'active'`+docVectorJoin,
		[]any{realms, ids}, func(d sdkindex.Doc, v *sdk.RecordVector) error {
			st.puts = append(st.puts, docVector{d, v})
			return nil
		})
	if err != nil {
		return st, err
	}
	active := map[[2]string]bool{}
	for _, d := range st.puts {
		active[[2]string{d.doc.Realm, d.doc.ID}] = true
	}
	for i := range ids {
		if k := [2]string{realms[i], ids[i]}; !active[k] {
			st.gone = append(st.gone, k)
		}
	}
	return st, nil
}

// apply makes st the replica's state, as one change to searches.
func (r *replica) apply(st *step) {
	r.mu.Lock()
	if st.full != nil {
		r.ix = st.full
		r.loads.Add(1)
		if st.rewound {
			// Positions heard of in the old numbering no longer count.
			lower(&r.acked, st.to)
			lower(&r.head, st.to)
		}
	} else {
		for realm, ix := range st.realms {
			if err := r.ix.Replace(ix, realm); err != nil {
				r.log.Error("postgres: replica: replace a realm", "error", err)
			}
		}
		for _, g := range st.gone {
			if _, whole := st.realms[g[0]]; !whole {
				r.ix.Delete(g[0], g[1])
			}
		}
		// Every changed record's vector is dropped before any is put: a
		// model's vectors may change length together in one batch.
		var vecs []docVector
		for _, d := range st.puts {
			if _, whole := st.realms[d.doc.Realm]; whole {
				continue
			}
			if err := r.ix.Put(d.doc); err != nil {
				r.log.Error("postgres: replica: index a record", "error", err)
			}
			r.ix.DeleteVector(d.doc.Realm, d.doc.ID)
			if d.vec != nil {
				vecs = append(vecs, d)
			}
		}
		for _, d := range vecs {
			r.putVector(r.ix, d.doc.Realm, d.vec)
		}
	}
	if st.to > r.applied.Load() || st.full != nil {
		r.applied.Store(st.to)
		r.mark = st.mark
		close(r.moved)
		r.moved = make(chan struct{})
	}
	r.pin.Store(r.applied.Load())
	r.mu.Unlock()
	if st.more {
		// One step of a backlog: behind still dates from when it was
		// first heard of, so a replica long behind stops serving after
		// max_lag instead of making every recall wait.
		return
	}
	// Current unless a change past st.to was heard of meanwhile (checked
	// again after clearing, against a notification landing in between).
	r.behind.Store(0)
	if r.head.Load() > st.to {
		r.behind.CompareAndSwap(0, time.Now().UnixNano())
	}
}

// loadBatch is how many records one statement of a load reads.
const loadBatch = 5000

// load reads the active records of realm ("": of every realm) into a new
// index, in batches of one snapshot.
func (r *replica) load(ctx context.Context, tx pgx.Tx, realm string) (*sdkindex.Index, error) {
	ix, err := sdkindex.New(r.opts)
	if err != nil {
		return nil, err
	}
	for after := int64(0); ; {
		n := 0
		err := readDocs(ctx, tx, `SELECT `+docColumns+` FROM records AS r`+docVectorJoin+`
			WHERE r.status = 'active' AND r.seq > $1 AND ($2 = '' OR r.realm = $2) ORDER BY r.seq LIMIT $3`,
			[]any{after, realm, loadBatch}, func(d sdkindex.Doc, v *sdk.RecordVector) error {
				n++
				after = int64(d.Seq)
				if err := ix.Put(d); err != nil {
					return err
				}
				if v != nil {
					r.putVector(ix, d.Realm, v)
				}
				return nil
			})
		if err != nil {
			return nil, err
		}
		if n < loadBatch {
			return ix, nil
		}
	}
}

// loadSettings gives the rest of tx, a load's snapshot, loadTimeout: a
// batch's statement lasts while the replica indexes the rows it streams,
// and the snapshot idles while it indexes the last of them. The snapshot
// is read-only and holds no lock a writer waits for.
func (r *replica) loadSettings(ctx context.Context, tx pgx.Tx) error {
	return setTimeouts(ctx, tx, r.loadTimeout, r.loadTimeout)
}

// docColumns are what readDocs scans, over records AS r (a statement
// adds docVectorJoin after its FROM list).
const docColumns = `r.seq, r.realm, r.id, r.scope, r.expires_ms, r.occurred_ms, r.created_ms, r.tags, r.title, r.description, r.body, r.thread_id, r.thread_seq, v.model, v.vec`

// docVectorJoin brings each record's vector, if any, to docColumns.
const docVectorJoin = ` LEFT JOIN vectors AS v ON v.seq = r.seq`

// putVector gives ix's document the stored vector v. PutVectors keeps a
// model's vectors of one length, so a refusal here is a bug: it is
// logged, and recall ranks that record by its text alone.
func (r *replica) putVector(ix *sdkindex.Index, realm string, v *sdk.RecordVector) {
	if _, err := ix.PutVector(realm, v.ID, v.Model, v.Vector); err != nil {
		r.log.Error("postgres: replica: index a vector", "record", v.ID, "error", err)
	}
}

// readDocs reads active records as index documents, handing each to add
// with its stored vector (nil when it has none).
func readDocs(ctx context.Context, tx pgx.Tx, query string, args []any, add func(sdkindex.Doc, *sdk.RecordVector) error) error {
	rows, err := tx.Query(ctx, query, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var d sdkindex.Doc
		var seq, occurred, created int64
		var title, description, body string
		var thread, model *string
		var threadSeq *int64
		var blob []byte
		if err := rows.Scan(&seq, &d.Realm, &d.ID, &d.Scope, &d.ExpiresMs, &occurred, &created, &d.Tags, &title, &description, &body, &thread, &threadSeq, &model, &blob); err != nil {
			return err
		}
		var vec *sdk.RecordVector
		if model != nil {
			v, err := vectorFromBlob(blob)
			if err != nil {
				return fmt.Errorf("record %s: %w", d.ID, err)
			}
			vec = &sdk.RecordVector{ID: d.ID, Model: *model, Vector: v}
		}
		own := recordTerms(d.Tags, title, description, body)
		d.Fields, d.Seq, d.WhenMs = own[:], uint64(seq), created
		if occurred != 0 {
			d.WhenMs = occurred
		}
		if thread != nil && threadSeq != nil {
			d.Thread, d.ThreadSeq = *thread, *threadSeq
		}
		if err := add(d, vec); err != nil {
			return err
		}
	}
	return rows.Err()
}

// listenLoop holds the LISTEN connection, reconnecting with a back-off
// when it fails; while it is down the replica does not serve.
func (r *replica) listenLoop(ctx context.Context) {
	backoff := 100 * time.Millisecond
	for {
		err := r.listenOnce(ctx, &backoff)
		r.connected.Store(false)
		if ctx.Err() != nil {
			return
		}
		r.log.Warn("postgres: the replica's LISTEN connection failed; recall answers from SQL until it is back and caught up", "error", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 5*time.Second)
	}
}

// keepWhileIdle turns off the server's idle_session_timeout on the
// replica's own connections (after then, if set): the LISTEN connection
// idles until a change is written and the heartbeat's for a beat's
// interval, so a server or role ending idle sessions dropped the LISTEN
// connection at every quiet spell, the replica stopping serving each time
// until it was back and caught up. A server before PostgreSQL 14 has no
// such setting and ends no idle session.
func keepWhileIdle(then pgconn.AfterConnectFunc) pgconn.AfterConnectFunc {
	return func(ctx context.Context, c *pgconn.PgConn) error {
		if then != nil {
			if err := then(ctx, c); err != nil {
				return err
			}
		}
		_, err := c.Exec(ctx, "SET idle_session_timeout = 0").ReadAll()
		if sqlState(err) == codeUndefinedObject {
			return nil
		}
		return err
	}
}

func (r *replica) listenOnce(ctx context.Context, backoff *time.Duration) error {
	conn, err := pgx.ConnectConfig(ctx, r.listen)
	if err != nil {
		return classify(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "LISTEN "+changesChannel); err != nil {
		return classify(err)
	}
	*backoff = 100 * time.Millisecond
	r.epoch.Add(1)
	r.connected.Store(true)
	r.poke() // catch up with what was missed while not listening
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return classify(err)
		}
		schema, pos, _ := strings.Cut(n.Payload, " ")
		if schema != r.schema {
			continue
		}
		seq, err := strconv.ParseInt(pos, 10, 64)
		if err != nil {
			r.poke()
			continue
		}
		r.heard(seq)
	}
}
