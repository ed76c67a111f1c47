package sqlite

import (
	"context"
	"database/sql"
	"log/slog"
	"sync/atomic"
	"time"
)

// The WAL is folded back into the database file by a checkpointer of its
// own, not by SQLite's automatic checkpoint: that one runs inside the
// commit that takes the WAL past 1,000 pages, so at 100k records every
// other batch copied each page it dirtied a second time and fsynced the
// database file before the write could answer (a fifth of the write time
// in BenchmarkWrite). Passive checkpoints on their own connection copy
// committed frames while the next write runs; durability is unchanged, as
// a frame is durable once its commit returns.
//
// A passive checkpoint cannot let the WAL start over while writes keep
// coming (the writer restarts it only when every frame has been copied),
// so once the WAL holds walBoundFrames the checkpointer copies the rest
// under the write lock, a short copy of what arrived since its last pass,
// and the next write starts the WAL from the beginning: it stays bounded.
//
// Small commits gather first, as SQLite's own checkpoint waited for 1,000
// pages: a checkpoint fsyncs the database file, and one after every
// single-record write made such writes a fifth to a third slower. A pass
// runs once commits of checkpointBatch records have come, or
// options.checkpointGather after the first of them.

// walBoundFrames is the WAL size (4 KiB pages) past which a checkpoint
// waits for the write lock to finish (options.walBound).
const walBoundFrames = 4096

// checkpointBatch is how many records' commits start a checkpoint at once.
const checkpointBatch = 256

type checkpointer struct {
	d    *database
	db   *sql.DB // one connection, for checkpoints alone
	kick chan struct{}
	stop context.CancelFunc
	done chan struct{}
	// pending counts the commits (weighted by the records each changed)
	// since the last pass began.
	pending atomic.Int64
}

func startCheckpointer(d *database) (*checkpointer, error) {
	db, err := sql.Open(driverName, dsn(d.path, "_busy_timeout=1000", "_cache_size=-1024"))
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(1)
	db.SetMaxIdleConns(1)
	ctx, cancel := context.WithCancel(context.Background())
	c := &checkpointer{d: d, db: db, kick: make(chan struct{}, 1), stop: cancel, done: make(chan struct{})}
	go c.run(ctx)
	return c, nil
}

// noteCommit asks for a checkpoint after a commit that changed records
// records; it never blocks. The database's own writes while it opens
// come before the checkpointer.
func (c *checkpointer) noteCommit(records int) {
	if c == nil {
		return
	}
	c.pending.Add(int64(records) + 1)
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

func (c *checkpointer) close() error {
	c.stop()
	<-c.done
	return c.db.Close()
}

func (c *checkpointer) run(ctx context.Context) {
	defer close(c.done)
	var streak failureStreak
	for {
		select {
		case <-ctx.Done():
			return
		case <-c.kick:
		}
		if !c.gather(ctx) {
			return
		}
		c.pending.Store(0)
		err := c.checkpoint(ctx)
		if ctx.Err() != nil {
			return
		}
		if streak.note(c.d.log, c.d.path, err) {
			// A failing disk is not retried in a tight loop.
			select {
			case <-ctx.Done():
				return
			case <-time.After(checkpointRetry):
			}
		}
	}
}

// gather waits until commits of checkpointBatch records have come since
// the last pass, or checkpointGather has passed; false once stopped.
func (c *checkpointer) gather(ctx context.Context) bool {
	if c.pending.Load() >= checkpointBatch {
		return true
	}
	timer := time.NewTimer(c.d.opts.checkpointGather)
	defer timer.Stop()
	for c.pending.Load() < checkpointBatch {
		select {
		case <-ctx.Done():
			return false
		case <-timer.C:
			return true
		case <-c.kick:
		}
	}
	return true
}

// failureStreak logs one line when checkpoints start failing (a full
// disk, say) and one when they recover, not one per commit.
type failureStreak struct{ failing bool }

// note records one checkpoint's outcome and answers whether it failed.
func (f *failureStreak) note(log *slog.Logger, path string, err error) bool {
	switch {
	case err != nil && !f.failing:
		log.Warn("WAL checkpoint failed; the WAL grows until one succeeds", "path", path, "error", err.Error())
	case err == nil && f.failing:
		log.Info("WAL checkpoints succeed again", "path", path)
	}
	f.failing = err != nil
	return f.failing
}

// checkpointRetry spaces the attempts while checkpoints fail.
const checkpointRetry = time.Second

// checkpoint copies the committed frames into the database file, and
// finishes under the write lock once the WAL has grown past its bound.
func (c *checkpointer) checkpoint(ctx context.Context) error {
	frames, err := c.passive(ctx)
	if err != nil || frames < c.d.opts.walBound {
		return err
	}
	c.d.wmu.Lock()
	defer c.d.wmu.Unlock()
	_, err = c.passive(ctx)
	return err
}

// passive runs one passive checkpoint and answers the frames the WAL holds.
func (c *checkpointer) passive(ctx context.Context) (int, error) {
	var busy, frames, copied int
	err := c.db.QueryRowContext(ctx, "PRAGMA wal_checkpoint(PASSIVE)").Scan(&busy, &frames, &copied)
	return frames, err
}
