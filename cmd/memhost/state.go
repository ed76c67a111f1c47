package main

import (
	"context"
	"database/sql"
	"os"
	"time"

	hclog "github.com/hashicorp/go-hclog"
	"github.com/memhost/memhost/internal/compaction"
	"github.com/memhost/memhost/internal/config"
	"github.com/memhost/memhost/internal/pluginhost"
	"github.com/memhost/memhost/sdk"
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
	compaction.EchoStripper
}

// newCompaction wires the configured compactor (if any) to the state
// database (or the shared store, when not nil), the coordinator's session
// reset, defanging and injected-memory stripping, and the realms'
// archives on their providers.
func newCompaction(ctx context.Context, cfg *config.Config, sup *pluginhost.Supervisor, db *sql.DB, shared compaction.Store, coord coordinatorForCompaction,
	providerOf func(string) (sdk.Provider, error), logger hclog.Logger) (*compaction.Service, error) {
	opts := compaction.Options{
		Resetter: coord, Renderer: coord, Echoes: coord, Logger: logger.Named("compaction"),
		MaxArtifactBytes: compactionMaxArtifactBytes, ChunkBytes: compactionChunkBytes,
		Archive: archiveHook(&compaction.EpisodeArchive{
			Provider: providerOf,
			Policy: func(realm string) compaction.ArchivePolicy {
				a := cfg.ArchiveForRealm(realm)
				return compaction.ArchivePolicy{Enabled: a.Enabled, MaxAge: a.MaxAge, MaxRecords: a.MaxRecords}
			},
			Logger: logger.Named("compaction"),
		}),
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

// killAfterArchiveEnv, set to 1 in a test's environment, makes the host
// kill itself (SIGKILL, as kill -9 does) right after a compaction's
// archive is written and before its summary commits: the e2e test of the
// repair on retry needs to die at exactly that point.
const killAfterArchiveEnv = "MEMHOST_TEST_KILL_AFTER_ARCHIVE"

type killingArchive struct{ compaction.Archiver }

func (k killingArchive) Archive(ctx context.Context, id sdk.Identity, conversation string, start, end int, eps []compaction.Episode) error {
	err := k.Archiver.Archive(ctx, id, conversation, start, end, eps)
	if err == nil {
		if self, ferr := os.FindProcess(os.Getpid()); ferr == nil {
			_ = self.Kill() // SIGKILL on Unix
		}
		select {} // the kill lands before this request answers
	}
	return err
}

func archiveHook(a compaction.Archiver) compaction.Archiver {
	if os.Getenv(killAfterArchiveEnv) == "1" {
		return killingArchive{a}
	}
	return a
}
