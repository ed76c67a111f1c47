package sqlite

import (
	"context"
	"sync"
	"time"
)

// The maintainer writes the recall index's snapshot once writes have gone
// quiet for opts.maintainIdle (or the index log has grown large), so that
// a process killed later reopens from the snapshot and a short log. A
// write arriving meanwhile commits and is answered at once; its index
// change is applied once the index is encoded (about 0.2 s at 100k
// records), so only a recall that must read it waits.

type maintainer struct {
	d      *database
	wake   chan struct{}
	cancel context.CancelFunc
	done   chan struct{}

	mu        sync.Mutex
	lastWrite time.Time
}

func startMaintainer(d *database) *maintainer {
	ctx, cancel := context.WithCancel(context.Background())
	m := &maintainer{d: d, wake: make(chan struct{}, 1), cancel: cancel, done: make(chan struct{})}
	// An index rebuilt at open has no snapshot yet.
	m.lastWrite = time.Now()
	m.wake <- struct{}{}
	go m.run(ctx)
	return m
}

func (m *maintainer) stop() {
	m.cancel()
	<-m.done
}

// noteWrite records that a commit changed the index.
func (m *maintainer) noteWrite() {
	m.mu.Lock()
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
		if err := m.d.snapshot(ctx); err != nil && ctx.Err() == nil {
			m.d.log.Warn("index snapshot failed", "path", m.d.path, "error", err)
		}
	}
}

// waitIdle sleeps until no write has come for maintainIdle, or the index
// log has grown past logSnapshotBytes under writes that never pause; false
// when stopped.
func (m *maintainer) waitIdle(ctx context.Context) bool {
	for {
		m.mu.Lock()
		wait := m.d.opts.maintainIdle - time.Since(m.lastWrite)
		m.mu.Unlock()
		if wait <= 0 || m.d.ilog.size.Load() > logSnapshotBytes {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(wait):
		}
	}
}
