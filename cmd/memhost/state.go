package main

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"time"

	hclog "github.com/hashicorp/go-hclog"
	_ "github.com/mattn/go-sqlite3" // the host state database driver
	"github.com/memhost/memhost/internal/compaction"
	"github.com/memhost/memhost/internal/config"
	"github.com/memhost/memhost/internal/pluginhost"
)

// stateDBName is the host's own state database in data_dir (not a plugin's).
const stateDBName = "memhost-state.db"

// openStateDB opens the host state database. It is the one place that
// knows where and how; the host state package (internal/statedb) replaces
// it when it lands, and every store keeps taking a *sql.DB. WAL with
// synchronous=NORMAL survives a crash of the host; a power cut may lose
// the last compaction, which the next request then redoes (the compactor
// sees the same idempotency key).
func openStateDB(cfg *config.Config) (*sql.DB, error) {
	path := filepath.Join(cfg.DataDir, stateDBName)
	db, err := sql.Open("sqlite3", "file:"+path+"?_journal_mode=WAL&_synchronous=NORMAL&_busy_timeout=5000&_txlock=immediate")
	if err != nil {
		return nil, fmt.Errorf("state database %s: %w", path, err)
	}
	if err := db.Ping(); err != nil {
		db.Close()
		return nil, fmt.Errorf("state database %s: %w", path, err)
	}
	return db, nil
}

// Host-side compaction limits: the artifact cap is a safety net over the
// compactor's own (the template's max_bytes defaults to 4 KiB), and a
// chunk is what one compactor call may carry.
const (
	compactionMaxArtifactBytes = compaction.DefaultMaxArtifactBytes
	compactionChunkBytes       = compaction.DefaultChunkBytes
)

// newCompaction wires the configured compactor (if any) to the state
// database and the coordinator's session reset.
func newCompaction(ctx context.Context, cfg *config.Config, sup *pluginhost.Supervisor, db *sql.DB, reset compaction.Resetter, logger hclog.Logger) (*compaction.Service, error) {
	opts := compaction.Options{
		Resetter: reset, Logger: logger.Named("compaction"),
		MaxArtifactBytes: compactionMaxArtifactBytes, ChunkBytes: compactionChunkBytes,
	}
	if name := cfg.Coordinator.Compactor; name != "" {
		c, err := sup.Compactor(name)
		if err != nil {
			return nil, err
		}
		opts.Compactor = c
	}
	storeCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	store, err := compaction.NewSQLStore(storeCtx, db)
	if err != nil {
		return nil, err
	}
	opts.Store = store
	return compaction.New(opts), nil
}
