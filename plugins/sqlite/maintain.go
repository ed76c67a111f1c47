package sqlite

import (
	"context"
	"fmt"
	"math"
	"sync"
	"time"
)

// FTS5 keeps its index as a stack of b-tree segments; each write commit
// adds one and FTS5's automerge folds them together as they pile up, so
// writes stay cheap. Recall reads every segment, and a single merged segment
// answers about twice as fast as a freshly written index. The maintainer
// therefore merges the whole index down to one segment once enough of it has
// changed (optimizeFraction of the rows, at least minOptimizeRows) and
// writes have gone quiet for opts.maintainIdle. It merges in steps of
// mergePages pages, one short write transaction each, and stops at the next
// write, so writes are never held behind a whole-index rewrite.

const (
	optimizeFraction = 10 // optimize after 1/optimizeFraction of the rows changed
	minOptimizeRows  = 1000
	mergePages       = 500
)

type maintainer struct {
	d      *database
	wake   chan struct{}
	cancel context.CancelFunc
	done   chan struct{}

	mu        sync.Mutex
	pending   int // index rows added or removed since the last full merge
	lastWrite time.Time
}

func startMaintainer(d *database) *maintainer {
	ctx, cancel := context.WithCancel(context.Background())
	m := &maintainer{d: d, wake: make(chan struct{}, 1), cancel: cancel, done: make(chan struct{})}
	// A previous process may have died mid-merge or before merging a bulk
	// load: merge once after start (on a merged index, one no-op step).
	m.pending = math.MaxInt32
	m.lastWrite = time.Now()
	m.wake <- struct{}{}
	go m.run(ctx)
	return m
}

func (m *maintainer) stop() {
	m.cancel()
	<-m.done
}

// noteWrite records that a commit changed rows of the index.
func (m *maintainer) noteWrite(rows int) {
	m.mu.Lock()
	m.pending += rows
	m.lastWrite = time.Now()
	m.mu.Unlock()
	select {
	case m.wake <- struct{}{}:
	default:
	}
}

func (m *maintainer) run(ctx context.Context) {
	defer close(m.done)
	for {
		select {
		case <-ctx.Done():
			return
		case <-m.wake:
		}
		if !m.waitIdle(ctx) {
			return
		}
		if !m.due(ctx) {
			continue
		}
		if _, err := m.optimize(ctx, true); err != nil && ctx.Err() == nil {
			m.d.log.Warn("full-text index merge failed", "path", m.d.path, "error", err)
		}
	}
}

// waitIdle sleeps until no write has come for maintainIdle; false when
// stopped.
func (m *maintainer) waitIdle(ctx context.Context) bool {
	for {
		m.mu.Lock()
		wait := m.d.opts.maintainIdle - time.Since(m.lastWrite)
		m.mu.Unlock()
		if wait <= 0 {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(wait):
		}
	}
}

// due reports whether enough of the index changed to merge it.
func (m *maintainer) due(ctx context.Context) bool {
	var docs int64
	if err := m.d.r.QueryRowContext(ctx, "SELECT docs FROM fts_totals").Scan(&docs); err != nil {
		return false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.pending >= max(minOptimizeRows, int(docs/optimizeFraction))
}

// optimize merges the index down to one segment, step by step. With
// yield, it stops when a write arrives (the merge resumes later). It answers
// whether the merge finished.
func (m *maintainer) optimize(ctx context.Context, yield bool) (bool, error) {
	m.mu.Lock()
	started, pending := m.lastWrite, m.pending
	m.mu.Unlock()
	for {
		if yield {
			m.mu.Lock()
			interrupted := m.lastWrite != started
			m.mu.Unlock()
			if interrupted {
				return false, nil
			}
		}
		worked, err := m.step(ctx)
		if err != nil {
			return false, err
		}
		if !worked {
			m.mu.Lock()
			m.pending = max(0, m.pending-pending)
			m.mu.Unlock()
			return true, nil
		}
	}
}

// step does one bounded merge in its own transaction and reports whether
// there was work: FTS5 documents that the merge command changed at least
// two rows when it did any.
func (m *maintainer) step(ctx context.Context) (bool, error) {
	conn, err := m.d.w.Conn(ctx)
	if err != nil {
		return false, err
	}
	defer conn.Close()
	var before, after int64
	if err := conn.QueryRowContext(ctx, "SELECT total_changes()").Scan(&before); err != nil {
		return false, err
	}
	if _, err := conn.ExecContext(ctx, fmt.Sprintf("INSERT INTO records_fts (records_fts, rank) VALUES ('merge', %d)", -mergePages)); err != nil {
		return false, fmt.Errorf("merge: %w", err)
	}
	if err := conn.QueryRowContext(ctx, "SELECT total_changes()").Scan(&after); err != nil {
		return false, err
	}
	return after-before >= 2, nil
}
