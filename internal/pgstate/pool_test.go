package pgstate

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/memhost/memhost/coordinator"
	"github.com/memhost/memhost/internal/compaction"
	"github.com/memhost/memhost/internal/pgtest"
	"github.com/memhost/memhost/internal/proposal"
)

// TestDeadPooledConnectionIsReplaced: after a restart or failover every
// pooled connection is dead, and one used less than a second ago is not
// pinged before reuse. A turn's session visit, a compaction's load and
// save, and the console's reads must go through on a fresh connection,
// not fail the call.
func TestDeadPooledConnectionIsReplaced(t *testing.T) {
	ctx := context.Background()
	const app = "memhost_state_dead_conn_test"
	db, admin := namedPool(t, app, func(pc *pgxpool.Config) {
		pc.MaxConns = 1                                                                       // the dead connection is the one reused
		pc.ShouldPing = func(context.Context, pgxpool.ShouldPingParams) bool { return false } // as for one idle under a second
	})
	sessions, comp, props := NewSessions(db, SessionOptions{}), NewCompaction(db), NewProposals(db)
	key := coordinator.SessionKey{Realm: "r", Identity: "i", Session: "s"}
	ckey := compaction.Key{Realm: "r", Identity: "alice", Conversation: "c"}
	watermark := 0
	for _, tc := range []struct {
		name string
		call func() error
	}{
		{"session visit", func() error {
			return sessions.Update(ctx, key, func(st *coordinator.SessionState) bool { st.InjectedBytes++; return true })
		}},
		{"compaction load", func() error { _, _, err := comp.Load(ctx, ckey); return err }},
		{"compaction save with a session reset", func() error {
			st := compaction.State{Watermark: watermark + 1, PrefixHash: "h", UpdatedAt: time.Now()}
			err := comp.SaveWith(ctx, ckey, watermark, st, func(ctx context.Context) error {
				return sessions.Update(ctx, key, func(st *coordinator.SessionState) bool { st.InjectedBytes = 0; return true })
			})
			if err == nil {
				watermark++
			}
			return err
		}},
		{"proposal list", func() error { _, _, err := props.List(ctx, "r", proposal.Cursor{}, 10); return err }},
		{"session count", func() error { _, err := sessions.Len(ctx, "r"); return err }},
	} {
		if err := tc.call(); err != nil {
			t.Fatalf("%s before: %v", tc.name, err)
		}
		if _, err := admin.Exec(ctx, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1", app); err != nil {
			t.Fatal(err)
		}
		for deadline := time.Now().Add(10 * time.Second); ; {
			var n int
			if err := admin.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE application_name = $1", app).Scan(&n); err != nil {
				t.Fatal(err)
			}
			if n == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%d backends still there", n)
			}
			time.Sleep(10 * time.Millisecond)
		}
		if err := tc.call(); err != nil {
			t.Errorf("%s on a connection the server closed: %v, want it run on a new one", tc.name, err)
		}
	}
}

// TestPoolOutlivesIdleSessionTimeout: a server or role ending sessions
// idle for less than the second after which the pool pings a connection
// before handing it out ended every pooled connection in a quiet spell,
// and the next turn's session visit failed on each in turn (past three,
// or at once with "terminating connection due to idle-session timeout").
// Nothing of the call ran: it runs again on another connection.
func TestPoolOutlivesIdleSessionTimeout(t *testing.T) {
	ctx := context.Background()
	const app = "memhost_state_idle_session_test"
	db, admin := namedPool(t, app, func(pc *pgxpool.Config) {
		// Under the pool's one-second ping threshold, and long enough that
		// a connection the retry opens is not ended before its first
		// statement on a loaded machine.
		pc.ConnConfig.RuntimeParams["idle_session_timeout"] = "400"
		pc.MaxConns = 4
	})
	sessions, props := NewSessions(db, SessionOptions{}), NewProposals(db)
	key := coordinator.SessionKey{Realm: "r", Identity: "i", Session: "s"}
	for _, tc := range []struct {
		name string
		call func() error
	}{
		{"session visit", func() error {
			return sessions.Update(ctx, key, func(st *coordinator.SessionState) bool { st.InjectedBytes++; return true })
		}},
		{"proposal list", func() error { _, _, err := props.List(ctx, "r", proposal.Cursor{}, 10); return err }},
		{"session count", func() error { _, err := sessions.Len(ctx, "r"); return err }},
		// Compaction holds are renewed on a connection of their own,
		// idle between compactions.
		{"hold renewal", func() error { _, err := db.renewals.exec(ctx, "SELECT 1"); return err }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := db.renewals.exec(ctx, "SELECT 1"); err != nil {
				t.Fatal(err)
			}
			var held []*pgxpool.Conn
			for range db.pool.Config().MaxConns {
				conn, err := db.pool.Acquire(ctx)
				if err != nil {
					t.Fatal(err)
				}
				held = append(held, conn)
			}
			for _, conn := range held {
				conn.Release()
			}
			for {
				var n int
				if err := admin.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE application_name = $1", app).Scan(&n); err != nil {
					t.Fatal(err)
				}
				if n == 0 {
					break
				}
				time.Sleep(10 * time.Millisecond)
			}
			if err := tc.call(); err != nil {
				t.Errorf("%s after the server ended the idle connections: %v", tc.name, err)
			}
		})
	}
}

// namedPool opens the shared state on a new database of the shared
// server, its connections named app (so admin, a connection of its own,
// can find and end them) and its pool set by configure.
func namedPool(t *testing.T, app string, configure func(*pgxpool.Config)) (*DB, *pgx.Conn) {
	t.Helper()
	ctx := context.Background()
	c := pgtest.Shared(t)
	pc, err := pgxpool.ParseConfig(c.NewDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	pc.ConnConfig.RuntimeParams["application_name"] = app
	configure(pc)
	admin, err := pgx.Connect(ctx, c.DSN("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { admin.Close(ctx) })
	db, err := openPool(ctx, pc, DefaultSchema)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(db.Close)
	return db, admin
}
