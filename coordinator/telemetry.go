package coordinator

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	hclog "github.com/hashicorp/go-hclog"
	"github.com/memhost/memhost/coordinator/queueshare"
	"github.com/memhost/memhost/sdk"
	"github.com/memhost/memhost/sdk/host"
)

// telemetryJob is one injection's ledger rows and usage marks, written
// off the request path.
type telemetryJob struct {
	realm    string
	provider *host.Provider
	ledger   []sdk.LedgerEntry // nil when the provider keeps no ledger
	usage    []string          // record ids; nil when it counts no usage
	at       time.Time
	ack      chan struct{} // a Flush marker: closed once everything before it is written
}

// telemetry batches ledger and usage writes in one background goroutine.
// Its queue is bounded: when full, a job is dropped and counted rather
// than making a turn wait. Telemetry never fails a turn. A realm holds at
// most half of the places the other realms leave, so one tenant's flood
// of turns cannot drop every other tenant's usage counts.
type telemetry struct {
	mu       sync.RWMutex // guards closed against a send on a closed queue
	closed   bool
	queue    chan telemetryJob
	shares   *queueshare.Shares // a place per job in the queue
	done     chan struct{}
	logger   hclog.Logger
	metrics  Metrics
	timeout  time.Duration
	interval time.Duration
	dropped  atomic.Int64
	// dropLog bounds the drop warnings: a line per realm a minute, so one
	// realm's flood cannot hide another realm's drops.
	dropLog tallyLog[string]
}

const (
	telemetryMaxBatch  = 256
	telemetryTimeout   = 5 * time.Second
	telemetryInterval  = 200 * time.Millisecond
	telemetryWarnEvery = time.Minute
	// maxTelemetryWarnRealms bounds the realms dropLog remembers.
	maxTelemetryWarnRealms = 1024
	telemetryDrainOnStop   = 10 * time.Second
)

func newTelemetry(size int, logger hclog.Logger, metrics Metrics) *telemetry {
	t := &telemetry{
		queue: make(chan telemetryJob, size), shares: queueshare.New(size), done: make(chan struct{}),
		logger: logger, metrics: metrics, timeout: telemetryTimeout, interval: telemetryInterval,
		dropLog: newTallyLog(telemetryWarnEvery, maxTelemetryWarnRealms, func(realm string) string { return realm }),
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
	if !t.shares.Hold(job.realm) {
		t.drop(job)
		return
	}
	select {
	case t.queue <- job:
	default:
		t.shares.Release(job.realm)
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
	if n, _, held, due := t.dropLog.add(time.Now(), job.realm, 1); due {
		t.logger.Warn("telemetry queue full for the realm: dropping ledger rows and usage marks",
			append([]any{"realm", job.realm, "dropped_batches", n, "dropped_batches_total", total, "queue_size", cap(t.queue)}, heldArgs(held)...)...)
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
		t.taken(job)
		batch = append(batch[:0], job)
		if job.ack == nil {
			batch = t.gather(batch)
		}
		t.write(batch)
	}
}

// taken gives back the place of a job the writer took from the queue.
func (t *telemetry) taken(job telemetryJob) {
	if job.ack == nil {
		t.shares.Release(job.realm)
	}
}

// gather adds to batch what arrives within one interval of its first job:
// a provider's ledger and usage writes then commit once per interval
// rather than once per turn, so they stop competing with the turns that
// follow (each commit is an fsync and a gRPC call). A flush marker, a
// full batch or a closed queue end the wait early.
func (t *telemetry) gather(batch []telemetryJob) []telemetryJob {
	timer := time.NewTimer(t.interval)
	defer timer.Stop()
	for len(batch) < telemetryMaxBatch {
		select {
		case more, ok := <-t.queue:
			if !ok {
				return batch
			}
			t.taken(more)
			batch = append(batch, more)
			if more.ack != nil {
				return batch
			}
		case <-timer.C:
			return batch
		}
	}
	return batch
}

// write sends a batch: per realm one ledger call and one usage call,
// acknowledging flush markers once what precedes them is written.
func (t *telemetry) write(batch []telemetryJob) {
	type group struct {
		provider *host.Provider
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

func (t *telemetry) writeGroup(realm string, p *host.Provider, ledger []sdk.LedgerEntry, usage []string, at time.Time) {
	ctx, cancel := context.WithTimeout(context.Background(), t.timeout)
	defer cancel()
	if w, ok := p.Ledger(); ok {
		for part := range slices.Chunk(ledger, sdk.MaxBatch) {
			if err := w.WriteLedger(ctx, part); err != nil {
				t.metrics.TelemetryFailed(TelemetryLedger, len(part))
				t.logger.Warn("writing the injection ledger failed", "realm", realm, "rows", len(part), "error", err)
			}
		}
	}
	if c, ok := p.UsageCounter(); ok {
		for part := range slices.Chunk(usageCounts(usage), sdk.MaxBatch) {
			if err := c.CountUses(ctx, realm, part, at); err != nil {
				t.metrics.TelemetryFailed(TelemetryUsage, len(part))
				t.logger.Warn("counting records' uses failed", "realm", realm, "records", len(part), "error", err)
			}
		}
	} else if u, ok := p.UsageMarker(); ok {
		for _, round := range usageRounds(usage) {
			for part := range slices.Chunk(round, sdk.MaxBatch) {
				if err := u.MarkUsed(ctx, realm, part, at); err != nil {
					t.metrics.TelemetryFailed(TelemetryUsage, len(part))
					t.logger.Warn("marking records used failed", "realm", realm, "records", len(part), "error", err)
				}
			}
		}
	}
}

// usageCounts folds a batch's usage marks into one use per record, with
// its count, in the order of first use: one write for a provider that
// counts uses (sdk.CapUsageCounts), however often a record repeats.
func usageCounts(ids []string) []sdk.Use {
	place := make(map[string]int, len(ids))
	var uses []sdk.Use
	for _, id := range ids {
		if i, ok := place[id]; ok {
			uses[i].Count++
			continue
		}
		place[id] = len(uses)
		uses = append(uses, sdk.Use{ID: id, Count: 1})
	}
	return uses
}

// usageRounds splits a batch's usage marks into lists without repeats for
// a provider that only marks usage: it counts an id once per call, so a
// record injected by three turns of one batch goes into three rounds and
// is counted three times.
func usageRounds(ids []string) [][]string {
	seen := make(map[string]int, len(ids))
	var rounds [][]string
	for _, id := range ids {
		n := seen[id]
		seen[id] = n + 1
		if n == len(rounds) {
			rounds = append(rounds, nil)
		}
		rounds[n] = append(rounds[n], id)
	}
	return rounds
}
