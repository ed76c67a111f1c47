package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"time"

	"github.com/memhost/memhost/coordinator"
	"github.com/memhost/memhost/internal/compaction"
	"github.com/memhost/memhost/internal/config"
	"github.com/memhost/memhost/internal/console"
	"github.com/memhost/memhost/internal/httpapi"
	"github.com/memhost/memhost/internal/pgstate"
	"github.com/memhost/memhost/internal/proposal"
	"github.com/memhost/memhost/internal/sessionstore"
	"github.com/memhost/memhost/internal/statedb"
	"github.com/memhost/memhost/internal/turntrace"
)

// sessionStores is where session and compaction state live: the host's
// state database, or PostgreSQL shared with other hosts.
type sessionStores struct {
	sessions   coordinator.SessionStore
	compaction compaction.Store                       // nil: the state database's
	expire     func(ctx context.Context) (int, error) // drops idle sessions
	proposals  proposal.Ledger
	traces     turntrace.Store
	console    console.SharedSessions // nil: each host's own memory
	// differ are the realms another host sharing the store started with
	// other settings (realmDigests).
	differ []string
	// ready, when set, tells /readyz whether the store's schema is whole.
	ready func(ctx context.Context) error
	// close answers what the caller should log: the session journal's
	// last merge failing (it is then replayed at the next start).
	close func() error
}

// openSessionStores opens the configured session store (config block
// session_store).
// A shared store checks that hostKey is the key the other hosts use.
func openSessionStores(ctx context.Context, cfg *config.Config, state *statedb.DB, hostKey []byte) (*sessionStores, error) {
	if cfg.SessionStore.Kind != config.SessionStorePostgres {
		s, err := sessionstore.Open(ctx, state, sessionstore.Options{
			TTL: cfg.Sessions.IdleTTL, PerRealm: cfg.Sessions.MaxPerRealm, CacheSize: cfg.Coordinator.SessionCacheSize,
		})
		if err != nil {
			return nil, err
		}
		closeSessions := func() error {
			// Merge the session journal now rather than replay it at the next start.
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			return s.Close(ctx)
		}
		ledger, err := proposal.NewSQLLedger(ctx, state)
		if err != nil {
			_ = closeSessions() // the start fails with err; what is unmerged is replayed next time
			return nil, err
		}
		traces, err := turntrace.NewSQLStore(ctx, state)
		if err != nil {
			_ = closeSessions()
			return nil, err
		}
		return &sessionStores{sessions: s, expire: s.Expire, proposals: ledger, traces: traces, close: closeSessions}, nil
	}
	dsn := os.Getenv(cfg.SessionStore.DSNEnv)
	if dsn == "" {
		return nil, fmt.Errorf("session_store: environment variable %s is unset or empty", cfg.SessionStore.DSNEnv)
	}
	openCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	db, err := pgstate.Open(openCtx, dsn, pgstate.Options{Schema: cfg.SessionStore.Schema})
	if err != nil {
		return nil, fmt.Errorf("session_store (from %s): %w", cfg.SessionStore.DSNEnv, err)
	}
	if err := db.CheckHostKey(openCtx, hostKey); err != nil {
		db.Close()
		return nil, fmt.Errorf("session_store (from %s): %w", cfg.SessionStore.DSNEnv, err)
	}
	differ, err := db.CompareRealmSettings(openCtx, realmDigests(cfg))
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("session_store (from %s): %w", cfg.SessionStore.DSNEnv, err)
	}
	s := pgstate.NewSessions(db, pgstate.SessionOptions{TTL: cfg.Sessions.IdleTTL, PerRealm: cfg.Sessions.MaxPerRealm})
	return &sessionStores{differ: differ,
		sessions: s, compaction: pgstate.NewCompaction(db), expire: s.Expire, ready: db.CheckSchema,
		proposals: pgstate.NewProposals(db), traces: pgstate.NewTraces(db), console: pgstate.NewConsoleSessions(db), close: func() error {
			// The last second's read-only visits, so the realm bound
			// still counts them (a crash loses them).
			wctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			err := s.WriteVisits(wctx)
			db.Close()
			return err
		},
	}, nil
}

// realmDigests answers, per realm, a digest of its settings that must
// agree on every host sharing a session store: the provider it lives in,
// its archive and embedder, and the budgets and session bounds its
// sessions are kept by. Settings a host may tune alone (pool sizes,
// timeouts, files) are left out.
func realmDigests(cfg *config.Config) map[string]string {
	out := map[string]string{}
	for _, r := range cfg.Realms {
		shape := map[string]any{
			"realm": r.Name, "provider": r.Provider, "archive": cfg.ArchiveForRealm(r.Name), "embedder": r.Embedder,
			"budgets": cfg.Coordinator.Budgets, "sessions": cfg.Sessions,
		}
		if inst, ok := cfg.ProviderForRealm(r.Name); ok {
			shape["plugin"], shape["remote"] = inst.Plugin, inst.Remote != nil
		}
		blob, _ := json.Marshal(shape) // maps of strings, numbers and flat structs
		sum := sha256.Sum256(blob)
		out[r.Name] = hex.EncodeToString(sum[:])
	}
	return out
}

// runExpiry drops idle sessions every interval until ctx ends, reporting
// failures to report. Each pass has the interval to finish, so a hung
// store fails a pass instead of pinning the loop (and the shutdown that
// waits for it).
func runExpiry(ctx context.Context, expire func(context.Context) (int, error), interval time.Duration, report func(error)) {
	t := time.NewTicker(interval)
	defer t.Stop()
	pass := func() error {
		ctx, cancel := context.WithTimeout(ctx, interval)
		defer cancel()
		_, err := expire(ctx)
		return err
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := pass(); err != nil && ctx.Err() == nil {
				report(err)
			}
		}
	}
}

// readyChecks are the stores' conditions of GET /readyz.
func readyChecks(s *sessionStores) []httpapi.ReadyCheck {
	if s.ready == nil {
		return nil
	}
	return []httpapi.ReadyCheck{{Name: "session_store", Check: s.ready}}
}
