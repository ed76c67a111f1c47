package main

import (
	"context"
	"database/sql"
	"time"

	hclog "github.com/hashicorp/go-hclog"
	"github.com/memhost/memhost/internal/compaction"
	"github.com/memhost/memhost/internal/config"
	"github.com/memhost/memhost/internal/pluginhost"
)

// Host-side compaction limits: the artifact cap is a safety net over the
// compactor's own (the template's max_bytes defaults to 4 KiB), and a
// chunk is what one compactor call may carry.
const (
	compactionMaxArtifactBytes = compaction.DefaultMaxArtifactBytes
	compactionChunkBytes       = compaction.DefaultChunkBytes
)

// coordinatorForCompaction is what compaction needs of the coordinator:
// the session reset and the rendering of messages and artifacts.
type coordinatorForCompaction interface {
	compaction.Resetter
	compaction.Renderer
}

// newCompaction wires the configured compactor (if any) to the state
// database (or the shared store, when not nil) and the coordinator's
// session reset and defanging.
func newCompaction(ctx context.Context, cfg *config.Config, sup *pluginhost.Supervisor, db *sql.DB, shared compaction.Store, coord coordinatorForCompaction, logger hclog.Logger) (*compaction.Service, error) {
	opts := compaction.Options{
		Resetter: coord, Renderer: coord, Logger: logger.Named("compaction"),
		MaxArtifactBytes: compactionMaxArtifactBytes, ChunkBytes: compactionChunkBytes,
	}
	if name := cfg.Coordinator.Compactor; name != "" {
		c, err := sup.Compactor(name)
		if err != nil {
			return nil, err
		}
		opts.Compactor = c
	}
	if shared != nil {
		opts.Store = shared
		return compaction.New(opts), nil
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
