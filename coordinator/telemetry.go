package coordinator

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	hclog "github.com/hashicorp/go-hclog"
	"github.com/memhost/memhost/sdk"
)

// telemetryJob is one injection's ledger rows and usage marks, written
// off the request path.
type telemetryJob struct {
	realm    string
	provider sdk.Provider
	ledger   []sdk.LedgerEntry // nil when the provider keeps no ledger
	usage    []string          // record ids; nil when it counts no usage
	at       time.Time
	ack      chan struct{} // a Flush marker: closed once everything before it is written
}

// telemetry batches ledger and usage writes in one background goroutine.
// Its queue is bounded: when full, a job is dropped and counted rather
// than making a turn wait. Telemetry never fails a turn.
type telemetry struct {
	mu       sync.RWMutex // guards closed against a send on a closed queue
	closed   bool
	queue    chan telemetryJob
	done     chan struct{}
	logger   hclog.Logger
	metrics  Metrics
	timeout  time.Duration
	dropped  atomic.Int64
	lastWarn atomic.Int64 // unix nanos of the last drop warning
}

const (
	telemetryMaxBatch    = 256
	telemetryTimeout     = 5 * time.Second
	telemetryWarnEvery   = time.Minute
	telemetryDrainOnStop = 10 * time.Second
)

func newTelemetry(size int, logger hclog.Logger, metrics Metrics) *telemetry {
	t := &telemetry{
		queue: make(chan telemetryJob, size), done: make(chan struct{}),
		logger: logger, metrics: metrics, timeout: telemetryTimeout,
	}
	go t.run()
	return t
}

// enqueue hands a job to the writer without ever blocking.
func (t *telemetry) enqueue(job telemetryJob) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	if t.closed {
		return
	}
	select {
	case t.queue <- job:
	default:
		t.drop(job)
	}
}

func (t *telemetry) drop(job telemetryJob) {
	total := t.dropped.Add(1)
	if len(job.ledger) > 0 {
		t.metrics.TelemetryDropped(TelemetryLedger, len(job.ledger))
	}
	if len(job.usage) > 0 {
		t.metrics.TelemetryDropped(TelemetryUsage, len(job.usage))
	}
	now := time.Now().UnixNano()
	last := t.lastWarn.Load()
	if (last == 0 || now-last >= int64(telemetryWarnEvery)) && t.lastWarn.CompareAndSwap(last, now) {
		t.logger.Warn("telemetry queue full: dropping ledger rows and usage marks", "dropped_batches_total", total, "queue_size", cap(t.queue))
	}
}

// flush waits until every job enqueued before it has been written.
func (t *telemetry) flush(ctx context.Context) error {
	ack := make(chan struct{})
	t.mu.RLock()
	if t.closed {
		t.mu.RUnlock()
		return nil
	}
	select {
	case t.queue <- telemetryJob{ack: ack}:
		t.mu.RUnlock()
	case <-ctx.Done():
		t.mu.RUnlock()
		return ctx.Err()
	}
	select {
	case <-ack:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// close stops accepting jobs and waits for the queued ones to be written.
func (t *telemetry) close(ctx context.Context) error {
	t.mu.Lock()
	if !t.closed {
		t.closed = true
		close(t.queue)
	}
	t.mu.Unlock()
	select {
	case <-t.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (t *telemetry) run() {
	defer close(t.done)
	batch := make([]telemetryJob, 0, telemetryMaxBatch)
	for job := range t.queue {
		batch = append(batch[:0], job)
		// Take whatever else is already waiting: batching costs no latency.
	drain:
		for len(batch) < telemetryMaxBatch {
			select {
			case more, ok := <-t.queue:
				if !ok {
					break drain
				}
				batch = append(batch, more)
			default:
				break drain
			}
		}
		t.write(batch)
	}
}

// write sends a batch: per realm one ledger call and one usage call,
// acknowledging flush markers once what precedes them is written.
func (t *telemetry) write(batch []telemetryJob) {
	type group struct {
		provider sdk.Provider
		ledger   []sdk.LedgerEntry
		usage    []string
		at       time.Time
	}
	groups := map[string]*group{}
	var order []string
	send := func() {
		for _, realm := range order {
			g := groups[realm]
			t.writeGroup(realm, g.provider, g.ledger, g.usage, g.at)
		}
		clear(groups)
		order = order[:0]
	}
	for _, job := range batch {
		if job.ack != nil {
			send()
			close(job.ack)
			continue
		}
		g := groups[job.realm]
		if g == nil {
			g = &group{provider: job.provider}
			groups[job.realm] = g
			order = append(order, job.realm)
		}
		g.ledger = append(g.ledger, job.ledger...)
		g.usage = append(g.usage, job.usage...)
		if job.at.After(g.at) {
			g.at = job.at
		}
	}
	send()
}

func (t *telemetry) writeGroup(realm string, p sdk.Provider, ledger []sdk.LedgerEntry, usage []string, at time.Time) {
	ctx, cancel := context.WithTimeout(context.Background(), t.timeout)
	defer cancel()
	if len(ledger) > 0 {
		if w, ok := p.(sdk.LedgerWriter); ok {
			if err := w.WriteLedger(ctx, ledger); err != nil {
				t.metrics.TelemetryFailed(TelemetryLedger, len(ledger))
				t.logger.Warn("writing the injection ledger failed", "realm", realm, "rows", len(ledger), "error", err)
			}
		}
	}
	if len(usage) > 0 {
		if u, ok := p.(sdk.UsageMarker); ok {
			if err := u.MarkUsed(ctx, realm, usage, at); err != nil {
				t.metrics.TelemetryFailed(TelemetryUsage, len(usage))
				t.logger.Warn("marking records used failed", "realm", realm, "records", len(usage), "error", err)
			}
		}
	}
}
