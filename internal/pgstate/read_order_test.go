package pgstate

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/memhost/memhost/coordinator"
	"github.com/memhost/memhost/internal/pgtest"
)

// TestReadsCountAsVisitsForTheBound: a visit that only reads (a turn of a
// session whose budget is spent, or whose records were all shown) is a
// visit, so the realm bound must not drop that session as the least
// recently visited while an older one sits idle: its budget and dedup set
// would start over, and its next turns would inject again what it holds.
func TestReadsCountAsVisitsForTheBound(t *testing.T) {
	tests := []struct {
		name   string
		bound  int
		visits []string // identity/session; a "?" prefix is a read-only visit
		gone   []string
		kept   []string
	}{
		{name: "a read session outlives an idle older one", bound: 3,
			visits: []string{"a/1", "a/2", "a/3", "?a/1", "a/4"}, gone: []string{"a/2"}, kept: []string{"a/1", "a/3", "a/4"}},
		{name: "reads of every session order them", bound: 3,
			visits: []string{"a/1", "a/2", "a/3", "?a/2", "?a/1", "?a/3", "a/4"}, gone: []string{"a/2"}, kept: []string{"a/1", "a/3", "a/4"}},
		{name: "a read session outlives another identity's tie", bound: 4,
			visits: []string{"a/1", "a/2", "b/1", "b/2", "?a/1", "c/1"}, gone: []string{"a/2"}, kept: []string{"a/1", "b/1", "b/2", "c/1"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := NewSessions(open(t, 1)[0], SessionOptions{PerRealm: tc.bound})
			for _, v := range tc.visits {
				if v[0] == '?' {
					if err := s.Update(context.Background(), idKey(v[1:]), func(*coordinator.SessionState) bool { return false }); err != nil {
						t.Fatal(err)
					}
					continue
				}
				visitInject(t, s, idKey(v), 1)
			}
			var gone, kept []string
			for _, v := range append(slices.Clone(tc.gone), tc.kept...) {
				if st := stateOf(t, s, idKey(v)); st.IsZero() {
					gone = append(gone, v)
				} else {
					kept = append(kept, v)
				}
			}
			if !slices.Equal(gone, tc.gone) || len(kept) != len(tc.kept) {
				t.Fatalf("gone %v, kept %v; want gone %v, kept %v", gone, kept, tc.gone, tc.kept)
			}
		})
	}
}

// TestReadsOnAnotherHostCountForTheBound: a host writes the read-only
// visits it noted within readFlushDelay, so another host's bound sees them.
func TestReadsOnAnotherHostCountForTheBound(t *testing.T) {
	dbs := open(t, 2)
	reader := NewSessions(dbs[0], SessionOptions{PerRealm: 3})
	writer := NewSessions(dbs[1], SessionOptions{PerRealm: 3})
	for _, v := range []string{"a/1", "a/2", "a/3"} {
		visitInject(t, writer, idKey(v), 1)
	}
	if err := reader.Update(context.Background(), idKey("a/1"), func(*coordinator.SessionState) bool { return false }); err != nil {
		t.Fatal(err)
	}
	touched := func(session string) (at time.Time) {
		t.Helper()
		if err := dbs[0].pool.QueryRow(context.Background(), dbs[0].q(`SELECT touched_at FROM sessions WHERE realm = 'r' AND identity = 'a' AND session = $1`), session).Scan(&at); err != nil {
			t.Fatal(err)
		}
		return at
	}
	for deadline := time.Now().Add(time.Minute); !touched("1").After(touched("3")); {
		if time.Now().After(deadline) {
			t.Fatal("the read of a/1 was not written within a minute")
		}
		time.Sleep(50 * time.Millisecond)
	}
	visitInject(t, writer, idKey("a/4"), 1)
	for v, want := range map[string]bool{"a/1": true, "a/2": false, "a/3": true, "a/4": true} {
		st := stateOf(t, writer, idKey(v))
		if kept := !st.IsZero(); kept != want {
			t.Errorf("%s kept = %v, want %v", v, kept, want)
		}
	}
}

// TestNotedReadsEndWithTheDatabase: visits noted just before the host
// closes its database are dropped, not retried every second for ever on
// a closed pool.
func TestNotedReadsEndWithTheDatabase(t *testing.T) {
	db := open(t, 1)[0]
	s := NewSessions(db, SessionOptions{})
	visitInject(t, s, idKey("a/1"), 1)
	if err := s.Update(context.Background(), idKey("a/1"), func(*coordinator.SessionState) bool { return false }); err != nil {
		t.Fatal(err)
	}
	db.Close()
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(50 * time.Millisecond) {
		s.mu.Lock()
		done := !s.flushing
		s.mu.Unlock()
		if done {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the noted reads were still being written a minute after the database closed")
		}
	}
}

// failingExec fails every statement, after running during each the
// visits a host notes meanwhile.
type failingExec struct{ during func() }

func (f failingExec) Exec(context.Context, string, ...any) (pgconn.CommandTag, error) {
	f.during()
	return pgconn.CommandTag{}, errors.New("the server is gone")
}

// TestNotedReadsStayBoundedWhenWritesFail: visits noted while a write of
// the earlier ones fails are not more than maxNotedReads once the failed
// ones are noted again, however many writes fail.
func TestNotedReadsStayBoundedWhenWritesFail(t *testing.T) {
	tests := []struct {
		name     string
		before   int // distinct sessions noted before each write
		during   int // distinct new sessions noted while it runs
		failures int
	}{
		{name: "a full set and a full set meanwhile", before: maxNotedReads, during: maxNotedReads, failures: 1},
		{name: "failures one after another", before: maxNotedReads, during: maxNotedReads, failures: 3},
		{name: "a few meanwhile", before: maxNotedReads - 10, during: 100, failures: 2},
		{name: "room for both", before: 10, during: 10, failures: 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := NewSessions(&DB{}, SessionOptions{})
			s.flushing = true // no timer: the test writes
			next := 0
			note := func(n int) {
				for range n {
					s.noteRead(coordinator.SessionKey{Realm: "r", Identity: "a", Session: strconv.Itoa(next)})
					next++
				}
			}
			note(tc.before)
			for range tc.failures {
				if err := s.writeReads(context.Background(), failingExec{during: func() { note(tc.during) }}, dbClock{}, ""); err == nil {
					t.Fatal("the failed write reported no error")
				}
				s.mu.Lock()
				n := len(s.reads)
				s.mu.Unlock()
				if want := min(next, maxNotedReads); n != want {
					t.Fatalf("%d visits noted after a failed write, want %d", n, want)
				}
			}
		})
	}
}

// TestNotedReadsKeepTheirOrder: the visits a write of noted reads carries
// are timed in the order they happened, however long the write takes: the
// database's clock was read at each row, so a session visited earlier
// whose row came later was timed later (a write of 65,536 took seconds,
// and its times spread over them), and the realm bound then dropped the
// wrong session.
func TestNotedReadsKeepTheirOrder(t *testing.T) {
	for _, n := range []int{100, 2000} {
		t.Run(strconv.Itoa(n), func(t *testing.T) {
			db := open(t, 1)[0]
			ctx := context.Background()
			if _, err := db.pool.Exec(ctx, db.q(`INSERT INTO sessions (realm, identity, session, state, touched_at)
				SELECT 'r', 'a', g::text, '{"bytes":0,"sweep":null}', now() - interval '1 hour' FROM generate_series(0, $1 - 1) g`), n); err != nil {
				t.Fatal(err)
			}
			if _, err := db.pool.Exec(ctx, db.q(`ANALYZE sessions`)); err != nil {
				t.Fatal(err)
			}
			s := NewSessions(db, SessionOptions{})
			s.flushing = true // no timer: the test writes
			for i := range n {
				s.noteRead(coordinator.SessionKey{Realm: "r", Identity: "a", Session: strconv.Itoa(i)})
			}
			s.flushReads()
			rows, err := db.pool.Query(ctx, db.q(`SELECT session FROM sessions WHERE realm = 'r' ORDER BY touched_at, session::int`))
			if err != nil {
				t.Fatal(err)
			}
			var order []int
			for rows.Next() {
				var session string
				if err := rows.Scan(&session); err != nil {
					t.Fatal(err)
				}
				i, _ := strconv.Atoi(session)
				order = append(order, i)
			}
			if err := rows.Err(); err != nil {
				t.Fatal(err)
			}
			for i, v := range order {
				if v != i {
					t.Fatalf("by touched_at, visit %d of %d is of session %d, want session %d", i, n, v, i)
				}
			}
		})
	}
}

// TestATurnDoesNotWriteOtherRealmsVisits: the turn whose new session
// takes its realm past the bound writes, before it evicts, the visits
// noted in that realm, not every realm's: it wrote them all (up to
// 65,536, seconds of work) in its own transaction, so a host busy
// elsewhere failed the turn past statement_timeout.
func TestATurnDoesNotWriteOtherRealmsVisits(t *testing.T) {
	tests := []struct {
		name  string
		other int // sessions of another realm read since their last write
	}{
		{name: "none", other: 0},
		{name: "many", other: 30000},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			// The other realm's visits left noted say the turn did not
			// write them (with 30,000 it outlasted a short timeout).
			_, db := seededSessions(t, "other", tc.other, 0, Options{})
			s := NewSessions(db, SessionOptions{PerRealm: 1})
			s.flushing = true // no timer: the turn alone writes
			for i := range tc.other {
				s.noteRead(coordinator.SessionKey{Realm: "other", Identity: "a", Session: strconv.Itoa(i + 1)})
			}
			visitInject(t, s, idKey("a/1"), 1)
			visitInject(t, s, idKey("a/2"), 1) // past the bound: evicts a/1
			if st := stateOf(t, s, idKey("a/1")); !st.IsZero() {
				t.Error("a/1 was kept past the bound")
			}
			s.mu.Lock()
			noted := len(s.reads)
			s.mu.Unlock()
			if noted != tc.other {
				t.Errorf("%d visits noted after the turn, want %d (another realm's, for the next write)", noted, tc.other)
			}
		})
	}
}

// TestManyNotedReadsAreWritten: a host's noted visits are all written,
// however many: one statement wrote them all, and past statement_timeout
// (5 s by default; 65,536 visits took 3.4 s on an idle machine here) it
// failed, every second, with no visit ever written.
func TestManyNotedReadsAreWritten(t *testing.T) {
	for _, n := range []int{10, 60000} {
		t.Run(strconv.Itoa(n), func(t *testing.T) {
			// One statement for 60,000 takes over 3 s; a batch, tens of
			// milliseconds.
			setup, db := seededSessions(t, "r", n, time.Hour, Options{StatementTimeout: 2 * time.Second})
			s := NewSessions(db, SessionOptions{})
			s.flushing = true // no timer: the test writes
			for i := range n {
				s.noteRead(coordinator.SessionKey{Realm: "r", Identity: "a", Session: strconv.Itoa(i + 1)})
			}
			s.flushReads()
			var old int
			if err := setup.pool.QueryRow(context.Background(), setup.q(`SELECT count(*) FROM sessions WHERE touched_at < now() - interval '30 minutes'`)).Scan(&old); err != nil {
				t.Fatal(err)
			}
			if old != 0 {
				t.Errorf("%d of %d visits not written", old, n)
			}
		})
	}
}

// TestVisitsAreWrittenBeforeTheDatabaseCloses: a host that stops writes
// the visits it noted, as the local store does at its last merge; they
// were dropped with the database.
func TestVisitsAreWrittenBeforeTheDatabaseCloses(t *testing.T) {
	dbs := open(t, 2)
	s := NewSessions(dbs[0], SessionOptions{})
	for _, v := range []string{"a/1", "a/2"} {
		visitInject(t, s, idKey(v), 1)
	}
	if err := s.Update(context.Background(), idKey("a/1"), func(*coordinator.SessionState) bool { return false }); err != nil {
		t.Fatal(err)
	}
	if err := s.WriteVisits(context.Background()); err != nil {
		t.Fatal(err)
	}
	dbs[0].Close()
	var first string
	if err := dbs[1].pool.QueryRow(context.Background(), dbs[1].q(`SELECT session FROM sessions WHERE realm = 'r' AND identity = 'a' ORDER BY touched_at DESC LIMIT 1`)).Scan(&first); err != nil {
		t.Fatal(err)
	}
	if first != "1" {
		t.Fatalf("the latest visited session is a/%s; want a/1, read after a/2 was written", first)
	}
}

// seededSessions makes a database holding n sessions of realm's identity
// "a", named 1 to n and last visited age ago, its statistics taken, and
// answers a handle on it for the test's own reads and one opened with
// opts.
func seededSessions(t *testing.T, realm string, n int, age time.Duration, opts Options) (setup, db *DB) {
	t.Helper()
	ctx := context.Background()
	dsn := pgtest.Shared(t).NewDatabase(t)
	setup, err := Open(ctx, dsn, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(setup.Close)
	if _, err := setup.pool.Exec(ctx, setup.q(`INSERT INTO sessions (realm, identity, session, state, touched_at)
		SELECT $1, 'a', g::text, '{"bytes":0,"sweep":null}', now() - $3 * interval '1 millisecond' FROM generate_series(1, $2) g`), realm, n, age.Milliseconds()); err != nil {
		t.Fatal(err)
	}
	if _, err := setup.pool.Exec(ctx, setup.q(`ANALYZE sessions`)); err != nil {
		t.Fatal(err)
	}
	if db, err = Open(ctx, dsn, opts); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(db.Close)
	return setup, db
}
