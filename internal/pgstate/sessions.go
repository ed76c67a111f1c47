package pgstate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/memhost/memhost/coordinator"
)

// Defaults of SessionOptions, the local store's.
const (
	DefaultTTL      = 24 * time.Hour
	DefaultPerRealm = 10000
)

// SessionOptions tune a Sessions store.
type SessionOptions struct {
	// TTL drops a session idle (neither written nor read) for longer.
	TTL time.Duration
	// PerRealm bounds the sessions kept per realm; a new session beyond
	// it drops the least recently visited session of the identity holding
	// the most sessions in the realm (see bound).
	PerRealm int
}

// Sessions is a coordinator.SessionStore shared by every host on the
// database. It is safe for concurrent use on any number of hosts.
type Sessions struct {
	db      *DB
	opts    SessionOptions
	refresh time.Duration

	mu     sync.Mutex
	counts map[string]*realmCount // by realm; see bound
	// reads holds the read-only visits whose time touched_at does not
	// show yet (see noteRead); flushing: a write of them is due.
	reads    map[coordinator.SessionKey]time.Time
	flushing bool
}

// A read-only visit (a turn of a session whose budget is spent, or whose
// records were all shown) rewrites touched_at only once it is older than
// refresh, so reads cost no write per turn. The realm bound drops the
// least recently visited sessions by touched_at, and would drop a session
// in use while an older one sat idle: its budget and its record of what
// it showed would start over, and its next turns show it all again. So a
// read-only visit is noted in memory and written within readFlushDelay,
// and a host writes its own noted visits of a realm before its bound
// evicts there (best effort: they must not fail the turn). Another
// host's visits of the last readFlushDelay may not count yet; a crash
// loses this host's, which only makes the order less exact.
const (
	readFlushDelay = time.Second
	// maxNotedReads bounds the visits noted between writes, those a
	// failed write keeps included; one beyond is not noted (its session is
	// ordered by its last write).
	maxNotedReads = 1 << 16
	// readWriteBatch bounds the visits one statement of flushReads writes.
	readWriteBatch = 1024
)

// realmCount is this host's view of a realm's sessions: the last count it
// took, plus the new sessions it wrote since.
type realmCount struct {
	n, since int
}

// NewSessions answers the session store on db.
func NewSessions(db *DB, opts SessionOptions) *Sessions {
	if opts.TTL <= 0 {
		opts.TTL = DefaultTTL
	}
	if opts.PerRealm <= 0 {
		opts.PerRealm = DefaultPerRealm
	}
	return &Sessions{db: db, opts: opts, refresh: opts.TTL / 16, counts: map[string]*realmCount{}, reads: map[coordinator.SessionKey]time.Time{}}
}

// record is the stored form of a SessionState (the local store's JSON):
// Sweep keeps null apart from [].
type record struct {
	Bytes int      `json:"bytes"`
	IDs   []string `json:"ids,omitempty"`
	Epoch uint64   `json:"epoch,omitempty"`
	Sweep []string `json:"sweep"`
	// Excerpts: SessionState.ExcerptIDs.
	Excerpts []string `json:"excerpts,omitempty"`
}

func decode(blob []byte) (coordinator.SessionState, error) {
	var r record
	if err := json.Unmarshal(blob, &r); err != nil {
		return coordinator.SessionState{}, fmt.Errorf("a stored session is unreadable: %w", err)
	}
	return coordinator.SessionState{InjectedBytes: r.Bytes, InjectedIDs: r.IDs, ExcerptIDs: r.Excerpts, Epoch: r.Epoch, SweepIDs: r.Sweep}, nil
}

func encode(st *coordinator.SessionState) ([]byte, error) {
	return json.Marshal(record{Bytes: st.InjectedBytes, IDs: st.InjectedIDs, Excerpts: st.ExcerptIDs, Epoch: st.Epoch, Sweep: st.SweepIDs})
}

// maxAttempts bounds retries of a transaction PostgreSQL aborted to break
// a deadlock between hosts.
const maxAttempts = 5

// Update implements coordinator.SessionStore. It first reads without a
// lock and runs fn on that copy; most visits change nothing and end there.
// A visit that changes state runs fn again, on the state read under the
// row's lock, and writes in the same transaction: a turn on another host
// either saw this write or waits for it.
func (s *Sessions) Update(ctx context.Context, key coordinator.SessionKey, fn func(*coordinator.SessionState) bool) error {
	if j, ok := ctx.Value(txKey{}).(*joined); ok && j.db == s.db {
		// Inside a compaction's transaction (Compaction.SaveWith): the
		// visit is part of it, in a savepoint so a visit that changes
		// nothing drops its placeholder row.
		err := pgx.BeginFunc(ctx, j.tx, func(tx pgx.Tx) error { return s.locked(ctx, tx, key, fn) })
		if err != nil && !errors.Is(err, errUnchanged) {
			return fmt.Errorf("save session: %w", classify(err))
		}
		return nil
	}
	st, found, stale, err := s.read(ctx, key)
	if err != nil {
		return err
	}
	if !fn(&st) {
		if found && stale {
			return s.touch(ctx, key)
		}
		if found {
			s.noteRead(key)
		}
		return nil
	}
	for range maxAttempts {
		err = pgx.BeginFunc(ctx, s.db.pool, func(tx pgx.Tx) error { return s.locked(ctx, tx, key, fn) })
		switch sqlState(err) {
		case codeDeadlock, codeSerialization:
			continue
		}
		break
	}
	if err != nil && !errors.Is(err, errUnchanged) {
		return fmt.Errorf("save session: %w", classify(err))
	}
	return nil
}

// read answers key's live state without a lock; stale reports a
// touched_at old enough to refresh.
func (s *Sessions) read(ctx context.Context, key coordinator.SessionKey) (st coordinator.SessionState, found, stale bool, err error) {
	var blob []byte
	var expired bool
	err = s.db.pool.QueryRow(ctx, s.db.q(`SELECT state, touched_at <= now() - $4 * interval '1 millisecond', touched_at <= now() - $5 * interval '1 millisecond'
		FROM sessions WHERE realm = $1 AND identity = $2 AND session = $3`),
		key.Realm, key.Identity, key.Session, s.opts.TTL.Milliseconds(), s.refresh.Milliseconds()).Scan(&blob, &expired, &stale)
	if errors.Is(err, pgx.ErrNoRows) || err == nil && expired {
		return coordinator.SessionState{}, false, false, nil
	}
	if err != nil {
		return st, false, false, fmt.Errorf("load session: %w", classify(err))
	}
	st, err = decode(blob)
	return st, true, stale, err
}

// locked runs fn on key's state under its row lock and writes the result.
// An unknown key gets a placeholder row first, so a concurrent first turn
// on another host waits on it instead of inserting beside it; rolling back
// (fn changed nothing after all) removes the placeholder.
func (s *Sessions) locked(ctx context.Context, tx pgx.Tx, key coordinator.SessionKey, fn func(*coordinator.SessionState) bool) error {
	var fresh, expired bool
	var blob []byte
	// Another host may delete the row (Expire, the realm bound) between
	// the insert that found it and the lock: then insert it again.
	for attempt := 1; ; attempt++ {
		tag, err := tx.Exec(ctx, s.db.q(`INSERT INTO sessions (realm, identity, session, state, touched_at) VALUES ($1, $2, $3, '{"bytes":0,"sweep":null}', now())
			ON CONFLICT DO NOTHING`), key.Realm, key.Identity, key.Session)
		if err != nil {
			return err
		}
		fresh = tag.RowsAffected() == 1
		err = tx.QueryRow(ctx, s.db.q(`SELECT state, touched_at <= now() - $4 * interval '1 millisecond' FROM sessions
			WHERE realm = $1 AND identity = $2 AND session = $3 FOR UPDATE`),
			key.Realm, key.Identity, key.Session, s.opts.TTL.Milliseconds()).Scan(&blob, &expired)
		if err == nil {
			break
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		if attempt == maxAttempts {
			return fmt.Errorf("the session row was deleted %d times while a turn waited for it", attempt)
		}
	}
	var err error
	var st coordinator.SessionState
	if !expired {
		if st, err = decode(blob); err != nil {
			return err
		}
	}
	if !fn(&st) {
		return errUnchanged
	}
	if blob, err = encode(&st); err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, s.db.q(`UPDATE sessions SET state = $4, touched_at = now() WHERE realm = $1 AND identity = $2 AND session = $3`),
		key.Realm, key.Identity, key.Session, blob); err != nil {
		return err
	}
	if fresh {
		return s.bound(ctx, tx, key)
	}
	return nil
}

// txKey carries a joined transaction in a context.
type txKey struct{}

// joined is a transaction of db that a store visit joins.
type joined struct {
	db *DB
	tx pgx.Tx
}

// errUnchanged rolls back a transaction whose fn changed nothing.
var errUnchanged = errors.New("unchanged")

// bound drops sessions of key's realm beyond the bound, never key itself:
// each time the least recently visited session of the identity holding the
// most sessions (key's own counted), ties to the least recently visited of
// those identities' sessions, so one identity's flood drops its own. Rows
// another host holds locked are skipped (they are being visited, so they
// are not the idlest); the count is therefore exact only between visits,
// which is all a bound on memory use needs.
//
// Counting a realm's sessions cost about half a new session's write at
// 5,000 sessions, so a host counts only when its own view (the last count
// plus the sessions it added since) reaches the bound, and at least once
// per recountEvery new sessions for the ones other hosts add. One host
// alone keeps the bound as exactly as counting every time; several let a
// realm pass it by at most their number times recountEvery before one of
// them counts and evicts.
func (s *Sessions) bound(ctx context.Context, tx pgx.Tx, key coordinator.SessionKey) error {
	if s.belowBound(key.Realm) {
		return nil
	}
	var n int
	if err := tx.QueryRow(ctx, s.db.q(`SELECT count(*) FROM sessions WHERE realm = $1`), key.Realm).Scan(&n); err != nil {
		return err
	}
	excess := n - s.opts.PerRealm
	if excess <= 0 {
		s.counted(key.Realm, n)
		return nil
	}
	// This realm's noted visits first, so none of its sessions in use is
	// taken for idle; in a savepoint, since they only order the victims:
	// a failure keeps them noted and does not fail the turn.
	_ = pgx.BeginFunc(ctx, tx, func(sp pgx.Tx) error {
		ref, err := clockOf(ctx, sp)
		if err != nil {
			return err
		}
		return s.writeReads(ctx, sp, ref, key.Realm)
	})
	excess += coordinator.EvictionSlack(s.opts.PerRealm)
	// One pass in the order above: evicting the identity with the most
	// sessions, again and again, takes each identity's sessions from the
	// oldest, so the one taken next is the oldest among those furthest
	// from their identity's newest. It reads the realm's sessions, which
	// is why a realm past its bound evicts in steps.
	tag, err := tx.Exec(ctx, s.db.q(`WITH victims AS (
			SELECT v.identity, v.session FROM sessions v JOIN (
				SELECT identity, session,
					row_number() OVER (PARTITION BY identity ORDER BY touched_at DESC, session DESC) AS rank
				FROM sessions WHERE realm = $1) r USING (identity, session)
			WHERE v.realm = $1 AND NOT (v.identity = $2 AND v.session = $3)
			ORDER BY r.rank DESC, v.touched_at, v.identity, v.session LIMIT $4
			FOR UPDATE OF v SKIP LOCKED)
		DELETE FROM sessions s USING victims d WHERE s.realm = $1 AND s.identity = d.identity AND s.session = d.session`),
		key.Realm, key.Identity, key.Session, excess)
	if err != nil {
		return err
	}
	s.counted(key.Realm, n-int(tag.RowsAffected()))
	return nil
}

// recountEvery is how many new sessions a host writes in a realm on its
// view of the count before counting again.
func (s *Sessions) recountEvery() int { return max(1, coordinator.EvictionSlack(s.opts.PerRealm)/2) }

// belowBound reports, for a new session just written, whether this host's
// view of the realm keeps it within the bound without counting, and adds
// the session to the view if so. A view that is too high (another host
// expired or evicted sessions, a new session's transaction rolled back)
// only counts sooner; one too low (an eviction rolled back) lasts at most
// recountEvery new sessions.
func (s *Sessions) belowBound(realm string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.counts[realm]
	if c == nil || c.n+1 > s.opts.PerRealm || c.since >= s.recountEvery() {
		return false
	}
	c.n++
	c.since++
	return true
}

// counted sets this host's view of realm to n sessions, just counted.
func (s *Sessions) counted(realm string, n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.counts[realm] = &realmCount{n: n}
}

// touch records a read-only visit, so a session still in use is not
// dropped as idle.
func (s *Sessions) touch(ctx context.Context, key coordinator.SessionKey) error {
	if _, err := s.db.pool.Exec(ctx, s.db.q(`UPDATE sessions SET touched_at = now() WHERE realm = $1 AND identity = $2 AND session = $3`),
		key.Realm, key.Identity, key.Session); err != nil {
		return fmt.Errorf("touch session: %w", classify(err))
	}
	return nil
}

// noteRead notes a read-only visit of key now, and has it written within
// readFlushDelay (see reads).
func (s *Sessions) noteRead(key coordinator.SessionKey) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.reads[key]; !ok && len(s.reads) >= maxNotedReads {
		return
	}
	s.reads[key] = time.Now()
	if !s.flushing {
		s.flushing = true
		time.AfterFunc(readFlushDelay, s.flushReads)
	}
}

// flushReads writes the noted visits, and has the ones noted meanwhile
// (or kept by a failure) written a delay later.
func (s *Sessions) flushReads() {
	_ = s.WriteVisits(context.Background()) // a failure keeps them for the next
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.reads) == 0 || s.db.closed.Load() {
		clear(s.reads)
		s.flushing = false
		return
	}
	time.AfterFunc(readFlushDelay, s.flushReads)
}

// WriteVisits writes the visits noted and not yet written, within ctx,
// each statement also within 10 s: a host that stops calls it before it
// closes the database, which drops what is still noted. One reading of
// the database's clock times every statement's rows; visits noted
// meanwhile wait for the next write once the set as it was is written.
func (s *Sessions) WriteVisits(ctx context.Context) error {
	clockCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	ref, err := clockOf(clockCtx, s.db.pool)
	cancel()
	for range maxNotedReads/readWriteBatch + 1 {
		if err != nil {
			return err
		}
		s.mu.Lock()
		left := len(s.reads)
		s.mu.Unlock()
		if left == 0 {
			return nil
		}
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		err = s.writeReads(wctx, s.db.pool, ref, "")
		cancel()
	}
	return err
}

// writeReads moves each noted visit's session's touched_at forward to the
// visit, timed by the database's clock less the visit's age (hosts'
// clocks may disagree): ref, one reading for every row and statement,
// since a write of many rows lasts seconds and a clock read per row would
// time the rows written last later than visits that came after them.
// Rows another transaction holds are left as they are: they are being
// visited. On failure the visits stay noted. A realm
// other than "" writes that realm's visits alone; "" writes at most
// readWriteBatch of any realm's, so one statement stays well within
// statement_timeout (each row costs about 50 µs: 65,536 took seconds, and
// past the timeout a full set of noted visits was never written).
func (s *Sessions) writeReads(ctx context.Context, q interface {
	Exec(context.Context, string, ...any) (pgconn.CommandTag, error)
}, ref dbClock, realm string) error {
	s.mu.Lock()
	noted := map[coordinator.SessionKey]time.Time{}
	for k, at := range s.reads {
		if realm == "" && len(noted) == readWriteBatch {
			break
		}
		if realm == "" || k.Realm == realm {
			noted[k] = at
			delete(s.reads, k)
		}
	}
	s.mu.Unlock()
	if len(noted) == 0 {
		return nil
	}
	var realms, identities, sessions []string
	var ages []int64
	for k, at := range noted {
		realms, identities, sessions = append(realms, k.Realm), append(identities, k.Identity), append(sessions, k.Session)
		ages = append(ages, ref.host.Sub(at).Microseconds())
	}
	_, err := q.Exec(ctx, s.db.q(`WITH visits AS (
			SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::bigint[]) AS v(realm, identity, session, age)),
		visited AS (
			SELECT t.realm, t.identity, t.session, $5::timestamptz - v.age * interval '1 microsecond' AS at FROM sessions t
			JOIN visits v ON t.realm = v.realm AND t.identity = v.identity AND t.session = v.session
			FOR UPDATE OF t SKIP LOCKED)
		UPDATE sessions t SET touched_at = greatest(t.touched_at, d.at) FROM visited d
		WHERE t.realm = d.realm AND t.identity = d.identity AND t.session = d.session`), realms, identities, sessions, ages, ref.db)
	if err != nil {
		s.mu.Lock()
		for k, at := range noted {
			cur, ok := s.reads[k]
			if !ok && len(s.reads) >= maxNotedReads {
				continue // the bound holds: those noted meanwhile are newer
			}
			if !ok || cur.Before(at) {
				s.reads[k] = at
			}
		}
		s.mu.Unlock()
		return fmt.Errorf("note session visits: %w", classify(err))
	}
	return nil
}

// dbClock is one reading of the database's clock (db), and the host's
// clock (host) as the reading was asked for: a visit is timed late by the
// request's trip rather than early by the answer's, so a visit noted
// after a write is not timed before it.
type dbClock struct{ db, host time.Time }

// clockOf reads the database's clock on q.
func clockOf(ctx context.Context, q interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}) (dbClock, error) {
	c := dbClock{host: time.Now()}
	if err := q.QueryRow(ctx, `SELECT clock_timestamp()`).Scan(&c.db); err != nil {
		return c, fmt.Errorf("note session visits: %w", classify(err))
	}
	return c, nil
}

// Expire drops every session idle longer than the TTL and answers how many
// it dropped. Any host may run it; concurrent runs only split the work.
// It also forgets this host's views of the realms' counts (each realm is
// counted again at its next new session), which are too high after it
// anyway, so the views held are those of realms with new sessions since
// the last expiry, not of every realm the host ever served.
func (s *Sessions) Expire(ctx context.Context) (int, error) {
	tag, err := s.db.pool.Exec(ctx, s.db.q(`DELETE FROM sessions WHERE touched_at <= now() - $1 * interval '1 millisecond'`), s.opts.TTL.Milliseconds())
	if err != nil {
		return 0, fmt.Errorf("expire sessions: %w", classify(err))
	}
	s.mu.Lock()
	s.counts = map[string]*realmCount{}
	s.mu.Unlock()
	return int(tag.RowsAffected()), nil
}

// Len answers how many sessions of realm the database holds.
func (s *Sessions) Len(ctx context.Context, realm string) (int, error) {
	var n int
	if err := s.db.pool.QueryRow(ctx, s.db.q(`SELECT count(*) FROM sessions WHERE realm = $1`), realm).Scan(&n); err != nil {
		return 0, fmt.Errorf("count sessions: %w", classify(err))
	}
	return n, nil
}

var _ coordinator.SessionStore = (*Sessions)(nil)
