// Package sessionstore is the host's durable coordinator.SessionStore: each
// session's byte counter, dedup set and cached sweep live in the host state
// database (internal/statedb), with an in-memory LRU in front so a turn
// reads without a query. State survives a restart; sessions idle longer
// than a TTL are dropped; the bound on sessions is per realm and evicts from
// the identity holding the most sessions there, so a flood of new sessions
// never reaches another realm and, within its realm, evicts the flooding
// identity's own first.
//
// The cache is exact only while one process owns the database, which
// memhost guarantees by giving each host its own data_dir. A store shared
// by many hosts (PostgreSQL) implements coordinator.SessionStore itself,
// with a versioned compare-and-swap instead of this cache.
package sessionstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"time"

	"github.com/memhost/memhost/coordinator"
	"github.com/memhost/memhost/coordinator/lru"
	"github.com/memhost/memhost/coordinator/queueshare"
	"github.com/memhost/memhost/internal/statedb"
)

// Defaults of Options.
const (
	DefaultTTL       = 24 * time.Hour
	DefaultPerRealm  = 10000
	DefaultCacheSize = 10000
)

// component names this package's tables in the state database.
const component = "sessions"

// migrations are the sessions tables' schema steps; append, never edit.
var migrations = []string{
	`CREATE TABLE sessions (
		realm      TEXT    NOT NULL,
		identity   TEXT    NOT NULL,
		session    TEXT    NOT NULL,
		state      BLOB    NOT NULL, -- JSON, see record
		touched_at INTEGER NOT NULL, -- Unix milliseconds of the last visit kept
		PRIMARY KEY (realm, identity, session)
	) WITHOUT ROWID;
	CREATE INDEX sessions_by_realm_age ON sessions (realm, touched_at);
	CREATE INDEX sessions_by_age ON sessions (touched_at);`,
	// The realm bound evicts per identity (see evictFrom), which walks a
	// realm's sessions by identity, newest first; the realm-wide age
	// order is no longer read.
	`DROP INDEX sessions_by_realm_age;
	CREATE INDEX sessions_by_realm_identity_age ON sessions (realm, identity, touched_at DESC, session DESC);`,
	// merged is the epoch of the last journal merged into sessions
	// (journal.go).
	`CREATE TABLE sessions_journal (id INTEGER PRIMARY KEY CHECK (id = 1), merged INTEGER NOT NULL);
	INSERT INTO sessions_journal (id, merged) VALUES (1, 0);`,
}

// Options tune a Store. Zero values take the defaults.
type Options struct {
	// TTL drops a session idle (neither written nor read) for longer.
	TTL time.Duration
	// PerRealm bounds the sessions kept per realm; beyond it the least
	// recently visited session of the identity holding the most sessions
	// in the realm is dropped (ties: the least recently visited of those
	// identities' sessions), so one identity's flood drops its own.
	PerRealm int
	// CacheSize bounds the sessions cached in memory, all realms together.
	// An evicted entry is read back from the database on its next visit.
	CacheSize int
	// MaxPending bounds the sessions kept in memory only while the disk
	// is full; past it a visit that must write fails with ErrStorageFull
	// (507 storage_full) rather than grow without end. A realm holds at
	// most half of the places the other realms leave. Default CacheSize.
	MaxPending int
	// Now is the clock (tests); default time.Now.
	Now func() time.Time
}

// Journal merges: every mergeEvery, or once mergeAt sessions are dirty.
// maxJournalBytes bounds the file while merges fail (a full disk); past
// it, and past CacheSize dirty sessions, visits write the table directly.
const (
	mergeEvery      = 200 * time.Millisecond
	mergeAt         = 1024
	mergeTimeout    = 10 * time.Second
	maxJournalBytes = 64 << 20
)

// Store is a durable coordinator.SessionStore. It is safe for concurrent
// use.
type Store struct {
	db   *statedb.DB
	opts Options
	// refresh: a read-only visit rewrites touched_at only when it is
	// older than this, so reads keep a session alive at a small cost.
	refresh time.Duration
	// reads holds the time of each read-only visit the table's touched_at
	// does not show yet (one within refresh of the last write). The merge
	// writes them, and the realm bound and expiry merge first, so a
	// session in use (every turn skipped, its budget spent) is never
	// dropped as the least recently visited: its next turns would inject
	// again what it already holds. A crash loses them, which only makes
	// the order less exact.
	reads map[coordinator.SessionKey]int64

	// turn serializes visits (a token in a channel of one): the database
	// has one connection, so writes are serial anyway, and one lock keeps
	// cache and file in step. A visit waiting for its turn still ends at
	// its own deadline, however long the one ahead waits for the database.
	turn  chan struct{}
	cache *lru.Cache[coordinator.SessionKey, *entry]
	// counts holds each realm's rows in the file, counted on the realm's
	// first new session and kept exact since: this process owns the file.
	// A realm left with no rows is dropped, and counted again at its next.
	counts map[string]int
	// ranked holds, per realm, how many eviction steps go on ranking the
	// whole realm before trying the largest identities again (evict).
	ranked map[string]int
	// pending holds sessions whose last state the file refused for want of
	// space: a turn on a full disk still injects, its accounting kept here
	// (never evicted, so the budget and dedup hold) and written once there
	// is room, by the next visit, the merge loop or Close. A crash before
	// then loses it.
	pending map[coordinator.SessionKey]*entry
	// pendingShares shares MaxPending by realm and by identity within it
	// (queueshare.HoldFor), so one realm's flood on a full disk cannot
	// fail every other realm's turns, nor one identity's its neighbours'.
	pendingShares *queueshare.Shares
	// journal holds, durably, the states in dirty until a merge writes
	// them to the table (journal.go).
	journal   *journal
	dirty     map[coordinator.SessionKey]dirtySession
	kick      chan struct{}
	stop      chan struct{}
	closeOnce sync.Once
	done      chan struct{}
}

// dirtySession is a state the journal holds and the table does not yet.
type dirtySession struct {
	entry *entry
	blob  []byte
}

type entry struct {
	state   coordinator.SessionState
	touched time.Time
	// absent marks a session the file does not hold: a turn of a new
	// session visits twice (before and after its recall), and the second
	// visit need not ask the file again.
	absent bool
	// fresh marks a pending session the file has no row for yet.
	fresh bool
}

// record is the stored form of a SessionState. Sweep keeps null apart
// from [] (no sweep waiting versus a finished sweep that found nothing).
type record struct {
	Bytes int      `json:"bytes"`
	IDs   []string `json:"ids,omitempty"`
	Epoch uint64   `json:"epoch,omitempty"`
	Sweep []string `json:"sweep"`
	// Excerpts: SessionState.ExcerptIDs.
	Excerpts []string `json:"excerpts,omitempty"`
}

// Open migrates the sessions tables in db and answers a store over them.
// The store does not own db.
func Open(ctx context.Context, db *statedb.DB, opts Options) (*Store, error) {
	if opts.TTL <= 0 {
		opts.TTL = DefaultTTL
	}
	if opts.PerRealm <= 0 {
		opts.PerRealm = DefaultPerRealm
	}
	if opts.CacheSize <= 0 {
		opts.CacheSize = DefaultCacheSize
	}
	if opts.MaxPending <= 0 {
		opts.MaxPending = opts.CacheSize
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if err := db.Migrate(ctx, component, migrations); err != nil {
		return nil, fmt.Errorf("session store: %w", err)
	}
	path := filepath.Join(filepath.Dir(db.Path()), JournalName)
	j, entries, err := openJournal(path)
	if err != nil {
		return nil, fmt.Errorf("session store: %w", err)
	}
	s := &Store{
		db: db, opts: opts, refresh: opts.TTL / 16, turn: make(chan struct{}, 1),
		cache:  lru.New[coordinator.SessionKey, *entry](opts.CacheSize),
		counts: map[string]int{}, ranked: map[string]int{}, pending: map[coordinator.SessionKey]*entry{}, reads: map[coordinator.SessionKey]int64{},
		pendingShares: queueshare.New(opts.MaxPending), journal: j, dirty: map[coordinator.SessionKey]dirtySession{},
		kick: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{}),
	}
	if err := s.replay(ctx, entries); err != nil {
		j.close()
		return nil, fmt.Errorf("session store: replay %s: %w", path, err)
	}
	go s.mergeLoop()
	return s, nil
}

// replay takes back what a journal the table has not merged holds (a
// host stopped without merging it: killed, or its last merge failed) as
// dirty sessions, the last state of each winning, for the merge loop to
// write; the journal goes on under its epoch. Nothing is written here, so
// a start on a full disk still serves. A journal already merged starts
// over.
func (s *Store) replay(ctx context.Context, entries []journalEntry) error {
	var merged uint64
	if err := s.db.QueryRow(ctx, []any{&merged}, `SELECT merged FROM sessions_journal`); err != nil {
		return s.db.Wrap("read journal epoch", err)
	}
	if s.journal.epoch <= merged || len(entries) == 0 {
		// A journal that cannot start over leaves visits writing the
		// table directly; the next merge tries again.
		_ = s.journal.restart(max(merged, s.journal.epoch) + 1)
		return nil
	}
	for _, je := range entries {
		st, err := decodeState(je.State)
		if err != nil {
			return err
		}
		k := coordinator.SessionKey{Realm: je.Realm, Identity: je.Identity, Session: je.Session}
		s.dirty[k] = dirtySession{entry: &entry{state: st, touched: time.UnixMilli(je.Touched)}, blob: je.State}
	}
	s.kick <- struct{}{}
	return nil
}

// mergeLoop merges the journal into the table now and then, until Close.
func (s *Store) mergeLoop() {
	defer close(s.done)
	t := time.NewTicker(mergeEvery)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
		case <-s.kick:
		}
		ctx, cancel := context.WithTimeout(context.Background(), mergeTimeout)
		if s.lock(ctx) == nil {
			// Room may have come back with no visit to notice.
			s.flushAll(ctx)
			if len(s.dirty) > 0 || len(s.reads) > 0 || s.journal.broken {
				_ = s.merge(ctx) // a failure keeps the journal; the next pass retries
			}
			s.unlock()
		}
		cancel()
	}
}

// merge writes the dirty sessions to the table with the journal's epoch,
// in one transaction, and starts the journal over. Callers hold the turn.
func (s *Store) merge(ctx context.Context) error {
	epoch := s.journal.epoch
	if len(s.dirty) > 0 {
		err := s.db.Tx(ctx, "merge session journal", func(tx *sql.Tx) error {
			for k, d := range s.dirty {
				if _, err := tx.ExecContext(ctx, upsertSession, k.Realm, k.Identity, k.Session, d.blob, d.entry.touched.UnixMilli()); err != nil {
					return err
				}
			}
			_, err := tx.ExecContext(ctx, `UPDATE sessions_journal SET merged = ?`, epoch)
			return err
		})
		if err != nil {
			if errors.Is(err, statedb.ErrReadOnly) {
				// The database file is gone or refuses writes: visits
				// must fail as a table write would, not pile up here.
				s.journal.broken = true
			}
			return err
		}
		clear(s.dirty)
	} else if !s.journal.broken {
		s.writeReads(ctx)
		return nil
	}
	s.writeReads(ctx)
	// The table holds everything the journal did: a journal that cannot
	// start over holds nothing a replay would apply (its epoch is merged).
	// One deleted or replaced meanwhile is made again at its path.
	if err := s.journal.reopenIfMoved(); err == nil {
		_ = s.journal.restart(epoch + 1)
	}
	return nil
}

// journalSave appends a session's new state to the journal and keeps it
// dirty until merged. It refuses, and the caller writes the table, when
// the journal is unusable or past its bounds.
func (s *Store) journalSave(key coordinator.SessionKey, e *entry, blob []byte) error {
	if _, ok := s.dirty[key]; !ok && len(s.dirty) >= s.opts.CacheSize {
		return errJournalFull
	}
	if s.journal.size >= maxJournalBytes {
		return errJournalFull
	}
	err := s.journal.append(journalEntry{Realm: key.Realm, Identity: key.Identity, Session: key.Session, Touched: e.touched.UnixMilli(), State: blob})
	if err != nil {
		return err
	}
	s.dirty[key] = dirtySession{entry: e, blob: blob}
	if len(s.dirty) >= mergeAt {
		select {
		case s.kick <- struct{}{}:
		default:
		}
	}
	return nil
}

// Close stops merging and merges the journal into the table; visits after
// it write the table directly. When the merge fails (or ctx ends first)
// the journal stays, visits still go to it, and a later Close or the next
// start takes it up. The store still does not own the database.
func (s *Store) Close(ctx context.Context) error {
	s.closeOnce.Do(func() { close(s.stop) })
	select {
	case <-s.done:
	case <-ctx.Done():
		return fmt.Errorf("session store: %w", ctx.Err())
	}
	if err := s.lock(ctx); err != nil {
		return fmt.Errorf("session store: %w", err)
	}
	defer s.unlock()
	if s.journal.closed {
		return nil
	}
	s.flushAll(ctx)
	err := s.merge(ctx)
	if err == nil {
		s.journal.close()
	}
	// What the disk had no room for lives in memory alone: said, since
	// the process is about to end.
	if n := len(s.pending); n > 0 {
		lost := fmt.Errorf("session store: the accounting of %d sessions held in memory, the disk being full, is lost (those sessions may inject their records again)", n)
		if err != nil {
			return fmt.Errorf("%w; and merging the journal failed: %w", lost, err)
		}
		return lost
	}
	if err != nil {
		return fmt.Errorf("session store: %w", err)
	}
	return nil
}

// Update implements coordinator.SessionStore. fn runs once, on a copy: a
// failed write leaves both the file and the cache as they were. Errors come
// from the state database (the caller names the store).
func (s *Store) Update(ctx context.Context, key coordinator.SessionKey, fn func(*coordinator.SessionState) bool) error {
	if err := s.lock(ctx); err != nil {
		return err
	}
	defer s.unlock()
	now := s.opts.Now()
	e, err := s.load(ctx, key)
	if err != nil {
		return err
	}
	stored := e != nil
	if stored && now.Sub(e.touched) >= s.opts.TTL {
		e = nil // idle too long: a fresh session over the old row
	}
	var st coordinator.SessionState
	if e != nil {
		st = e.state.Clone()
	}
	if !fn(&st) {
		if e != nil && now.Sub(e.touched) >= s.refresh {
			// Only a refresh of the idle clock: a full disk must not fail
			// the read it came with.
			if err := s.touch(ctx, key, e, now); err != nil && !errors.Is(err, statedb.ErrStorageFull) {
				return err
			}
		} else if e != nil {
			s.read(key, e, now)
		}
		return nil
	}
	fresh := !stored
	p, wasPending := s.pending[key]
	if wasPending {
		fresh = p.fresh
	}
	saved := &entry{state: st, touched: now}
	evicted, err := s.save(ctx, key, saved, fresh)
	if errors.Is(err, statedb.ErrStorageFull) && (wasPending || len(s.pending) < s.opts.MaxPending && s.pendingShares.HoldFor(key.Realm, key.Identity)) {
		saved.fresh = fresh
		s.pending[key] = saved
		s.cache.Add(key, saved)
		return nil
	}
	if err != nil {
		// A pending session keeps its last state: the memory holds the
		// only copy of what it already injected.
		return err
	}
	s.unpend(key)
	s.cache.Add(key, saved)
	s.forget(evicted)
	s.flush(ctx)
	return nil
}

// lock waits for the store's turn, or until ctx ends.
func (s *Store) lock(ctx context.Context) error {
	select {
	case s.turn <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (s *Store) unlock() { <-s.turn }

// flushBatch bounds the pending sessions one visit writes.
const flushBatch = 16

// flush writes sessions held in memory since the disk was full, a few per
// call, once a write has succeeded again; it stops at the first refusal.
func (s *Store) flush(ctx context.Context) {
	n := 0
	for key, e := range s.pending {
		if n == flushBatch {
			return
		}
		n++
		saved := &entry{state: e.state, touched: e.touched}
		evicted, err := s.save(ctx, key, saved, e.fresh)
		if err != nil {
			return
		}
		s.unpend(key)
		s.cache.Add(key, saved)
		s.forget(evicted)
	}
}

// read notes a read-only visit of e, a stored session, for the next merge
// (see reads), and gives e its time: the next visit's idle clock runs
// from it, as Expire's does once it is merged. Once as many wait as the
// cache holds it asks for a merge, and notes no new session until then.
func (s *Store) read(key coordinator.SessionKey, e *entry, now time.Time) {
	if _, ok := s.pending[key]; ok {
		return // its write back carries the time (touch)
	}
	if _, ok := s.reads[key]; !ok && len(s.reads) >= s.opts.CacheSize {
		select {
		case s.kick <- struct{}{}:
		default:
		}
		return
	}
	s.reads[key] = now.UnixMilli()
	if now.After(e.touched) {
		e.touched = now
	}
}

// writeReads writes the times of the read-only visits noted since the
// last merge (see reads), after the merge's states, which are older. It
// is best effort: a failure (a full disk) keeps them for the next merge
// and fails nothing, as a read must not.
func (s *Store) writeReads(ctx context.Context) {
	if len(s.reads) == 0 {
		return
	}
	err := s.db.Tx(ctx, "note session reads", func(tx *sql.Tx) error {
		for k, at := range s.reads {
			if _, err := tx.ExecContext(ctx, touchSession, k.Realm, k.Identity, k.Session, at); err != nil {
				return err
			}
		}
		return nil
	})
	if err == nil {
		clear(s.reads)
	}
}

// unpend drops key from the pending sessions, giving back its realm's place.
func (s *Store) unpend(key coordinator.SessionKey) {
	if _, ok := s.pending[key]; ok {
		delete(s.pending, key)
		s.pendingShares.ReleaseFor(key.Realm, key.Identity)
	}
}

// flushAll writes every pending session it can: until none is left or
// the file refuses one.
func (s *Store) flushAll(ctx context.Context) {
	for len(s.pending) > 0 {
		before := len(s.pending)
		s.flush(ctx)
		if len(s.pending) == before {
			return
		}
	}
}

// Pending answers how many sessions are held in memory only, waiting for
// room on the disk.
func (s *Store) Pending() int {
	_ = s.lock(context.Background()) // never fails without a deadline
	defer s.unlock()
	return len(s.pending)
}

// load answers key's entry from the cache or the file; nil when unknown.
func (s *Store) load(ctx context.Context, key coordinator.SessionKey) (*entry, error) {
	if e, ok := s.pending[key]; ok {
		return e, nil
	}
	if d, ok := s.dirty[key]; ok {
		return d.entry, nil
	}
	if e, ok := s.cache.Get(key); ok {
		if e.absent {
			return nil, nil
		}
		return e, nil
	}
	var blob []byte
	var touched int64
	err := s.db.QueryRow(ctx, []any{&blob, &touched}, `SELECT state, touched_at FROM sessions WHERE realm = ? AND identity = ? AND session = ?`,
		key.Realm, key.Identity, key.Session)
	if errors.Is(err, sql.ErrNoRows) {
		s.cache.Add(key, &entry{absent: true})
		return nil, nil
	}
	if err != nil {
		return nil, s.db.Wrap("load session", err)
	}
	st, err := decodeState(blob)
	if err != nil {
		return nil, err
	}
	if at, ok := s.reads[key]; ok && at > touched {
		touched = at // a read the merge has not written yet
	}
	e := &entry{state: st, touched: time.UnixMilli(touched)}
	s.cache.Add(key, e)
	return e, nil
}

// forget drops deleted rows from the cache and the realm counts (a realm
// left with none is dropped from them). A
// pending session among them keeps its state, and is a new row again when
// written back, counted then.
func (s *Store) forget(keys []coordinator.SessionKey) {
	for _, k := range keys {
		if p, ok := s.pending[k]; ok {
			p.fresh = true
		}
		s.cache.Remove(k)
		delete(s.dirty, k)
		delete(s.reads, k)
		if n, ok := s.counts[k.Realm]; ok && n > 1 {
			s.counts[k.Realm] = n - 1
		} else {
			// None left: a realm is counted from the table at its next
			// new session, so realms that come and go (any realm name
			// is served) are not each remembered for good.
			delete(s.counts, k.Realm)
		}
	}
}

// save writes e (a state as of e.touched) and, for a row new to the file, drops sessions of the
// realm beyond the bound (see evictFrom); it answers the keys dropped.
func (s *Store) save(ctx context.Context, key coordinator.SessionKey, e *entry, fresh bool) ([]coordinator.SessionKey, error) {
	// A visit whose caller has gone writes nothing: its turn fails.
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	blob, err := marshalState(&e.state)
	if err != nil {
		return nil, err
	}
	count, known := s.counts[key.Realm]
	if !fresh || known && count < s.opts.PerRealm {
		// Nothing to evict.
		if err := s.write(ctx, "save session", key, e, blob); err != nil {
			return nil, err
		}
		if fresh {
			s.counts[key.Realm] = count + 1
		}
		return nil, nil
	}
	// The realm bound reads the table: it must hold every session first.
	if err := s.merge(ctx); err != nil {
		return nil, err
	}
	var evicted []coordinator.SessionKey
	newCount := 0
	err = s.db.Tx(ctx, "save session", func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, upsertSession, key.Realm, key.Identity, key.Session, blob, e.touched.UnixMilli()); err != nil {
			return err
		}
		if known {
			count++
		} else if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM sessions WHERE realm = ?`, key.Realm).Scan(&count); err != nil {
			return err
		}
		newCount = count
		if count <= s.opts.PerRealm {
			return nil
		}
		evicted, err = s.evict(ctx, tx, key, count-s.opts.PerRealm+coordinator.EvictionSlack(s.opts.PerRealm))
		return err
	})
	if err != nil {
		return nil, err
	}
	s.counts[key.Realm] = newCount
	return evicted, nil
}

// write puts e, a session's state as blob, in the journal, or when the
// journal refuses, in the table after a merge (the table must not be
// ahead of the journal). e is then what the journal holds dirty, and the
// caller caches the same entry.
func (s *Store) write(ctx context.Context, op string, key coordinator.SessionKey, e *entry, blob []byte) error {
	if s.journalSave(key, e, blob) == nil {
		return nil
	}
	if err := s.merge(ctx); err != nil {
		return err
	}
	_, err := s.db.Exec(ctx, op, upsertSession, key.Realm, key.Identity, key.Session, blob, e.touched.UnixMilli())
	return err
}

// touchSession moves a stored session's touched_at forward to a read's
// time; a row dropped meanwhile stays dropped.
const touchSession = `UPDATE sessions SET touched_at = max(touched_at, ?4) WHERE realm = ?1 AND identity = ?2 AND session = ?3`

const upsertSession = `INSERT INTO sessions (realm, identity, session, state, touched_at) VALUES (?, ?, ?, ?, ?)
	ON CONFLICT (realm, identity, session) DO UPDATE SET state = excluded.state, touched_at = excluded.touched_at`

func decodeState(blob []byte) (coordinator.SessionState, error) {
	var r record
	if err := json.Unmarshal(blob, &r); err != nil {
		return coordinator.SessionState{}, fmt.Errorf("a stored session is unreadable: %w", err)
	}
	return coordinator.SessionState{InjectedBytes: r.Bytes, InjectedIDs: r.IDs, ExcerptIDs: r.Excerpts, Epoch: r.Epoch, SweepIDs: r.Sweep}, nil
}

func marshalState(st *coordinator.SessionState) ([]byte, error) {
	blob, err := json.Marshal(record{Bytes: st.InjectedBytes, IDs: st.InjectedIDs, Excerpts: st.ExcerptIDs, Epoch: st.Epoch, Sweep: st.SweepIDs})
	if err != nil {
		return nil, fmt.Errorf("session store: %w", err)
	}
	return blob, nil
}

// touch records a read-only visit, so a session still in use is not
// dropped as idle.
func (s *Store) touch(ctx context.Context, key coordinator.SessionKey, e *entry, now time.Time) error {
	if _, ok := s.pending[key]; ok {
		// Held in memory for want of space: the write that puts it back
		// carries the time; a journal record now would land in the table
		// without counting in the realm's bound.
		e.touched = now
		return nil
	}
	blob, err := marshalState(&e.state)
	if err != nil {
		return err
	}
	refreshed := &entry{state: e.state, touched: now}
	if err := s.write(ctx, "touch session", key, refreshed, blob); err != nil {
		return err
	}
	// The cached copy and the journal's must agree on the time, or the
	// cache answers the old one once the merge clears dirty.
	s.cache.Add(key, refreshed)
	return nil
}

// Expire drops every session idle longer than the TTL and answers how many
// it dropped. Visits ignore idle sessions regardless; Expire reclaims
// their space.
func (s *Store) Expire(ctx context.Context) (int, error) {
	if err := s.lock(ctx); err != nil {
		return 0, fmt.Errorf("session store: %w", err)
	}
	defer s.unlock()
	s.flush(ctx)
	if err := s.merge(ctx); err != nil {
		return 0, fmt.Errorf("session store: %w", err)
	}
	cutoff := s.opts.Now().Add(-s.opts.TTL)
	var dropped []coordinator.SessionKey
	err := s.db.Tx(ctx, "expire sessions", func(tx *sql.Tx) error {
		rows, err := tx.QueryContext(ctx, `DELETE FROM sessions WHERE touched_at <= ? RETURNING realm, identity, session`, cutoff.UnixMilli())
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var k coordinator.SessionKey
			if err := rows.Scan(&k.Realm, &k.Identity, &k.Session); err != nil {
				return err
			}
			dropped = append(dropped, k)
		}
		return rows.Err()
	})
	if err != nil {
		return 0, fmt.Errorf("session store: %w", err)
	}
	s.forget(dropped)
	return len(dropped), nil
}

// Len answers how many sessions of realm the file holds, idle ones not yet
// expired included.
func (s *Store) Len(ctx context.Context, realm string) (int, error) {
	if err := s.lock(ctx); err != nil {
		return 0, fmt.Errorf("session store: %w", err)
	}
	defer s.unlock()
	if err := s.merge(ctx); err != nil {
		return 0, fmt.Errorf("session store: %w", err)
	}
	var n int
	if err := s.db.QueryRow(ctx, []any{&n}, `SELECT count(*) FROM sessions WHERE realm = ?`, realm); err != nil {
		return 0, fmt.Errorf("session store: %w", s.db.Wrap("count sessions", err))
	}
	return n, nil
}
