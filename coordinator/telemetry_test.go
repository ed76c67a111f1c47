package coordinator

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	hclog "github.com/hashicorp/go-hclog"
	"github.com/memhost/memhost/coordinator/coordinatortest"
	"github.com/memhost/memhost/sdk"
	"github.com/memhost/memhost/sdk/host"
)

func TestUsageRounds(t *testing.T) {
	for _, tc := range []struct {
		name string
		ids  []string
		want [][]string
	}{
		{"none", nil, nil},
		{"distinct", []string{"a", "b"}, [][]string{{"a", "b"}}},
		{"repeats", []string{"a", "b", "a", "a", "c", "b"}, [][]string{{"a", "b", "c"}, {"a", "b"}, {"a"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := usageRounds(tc.ids); !slices.EqualFunc(got, tc.want, slices.Equal[[]string]) {
				t.Fatalf("usageRounds(%q) = %q, want %q", tc.ids, got, tc.want)
			}
		})
	}
}

// TestTelemetryBatchFitsProviderLimits writes one batch larger than a
// provider call may carry, each record used by every turn: it goes out in
// calls of at most sdk.MaxBatch, and every row and use arrives. A provider
// that counts uses gets one usage call per MaxBatch records, each id once
// with its count; one that only marks usage gets no id twice in one call
// (it counts an id once per call), so one round per repeat.
func TestTelemetryBatchFitsProviderLimits(t *testing.T) {
	const jobs, perJob = 20, 1500 // 30k ledger rows; each of 1500 ids used by every job
	for _, tc := range []struct {
		name       string
		caps       []sdk.Capability
		usageCalls map[string]int // calls per method
	}{
		{"counts", coordinatortest.AllCapabilities, map[string]int{coordinatortest.MethodCountUses: 2, coordinatortest.MethodMarkUsed: 0}},
		{"marks", []sdk.Capability{sdk.CapLedger, sdk.CapUsage}, map[string]int{coordinatortest.MethodCountUses: 0, coordinatortest.MethodMarkUsed: 2 * jobs}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := coordinatortest.NewProvider(tc.caps...)
			var mu sync.Mutex
			var bad []string
			p.SetHook(coordinatortest.MethodMarkUsed, func(_ context.Context, req any) error {
				ids := req.([]string)
				mu.Lock()
				defer mu.Unlock()
				if len(ids) > sdk.MaxBatch || len(slices.Compact(slices.Sorted(slices.Values(ids)))) != len(ids) {
					bad = append(bad, fmt.Sprintf("usage call of %d ids with repeats or over the limit", len(ids)))
				}
				return nil
			})
			p.SetHook(coordinatortest.MethodCountUses, func(_ context.Context, req any) error {
				uses := req.([]sdk.Use)
				mu.Lock()
				defer mu.Unlock()
				for _, u := range uses {
					if u.Count != jobs {
						bad = append(bad, fmt.Sprintf("%s counted %d times in one call, want %d", u.ID, u.Count, jobs))
						break
					}
				}
				return nil
			})
			p.SetHook(coordinatortest.MethodWriteLedger, func(_ context.Context, req any) error {
				if n := len(req.([]sdk.LedgerEntry)); n > sdk.MaxBatch {
					mu.Lock()
					bad = append(bad, fmt.Sprintf("ledger call of %d rows", n))
					mu.Unlock()
				}
				return nil
			})
			tel := newTelemetry(1, hclog.NewNullLogger(), NopMetrics{})
			defer tel.close(context.Background())
			var batch []telemetryJob
			for range jobs {
				job := telemetryJob{realm: "default", provider: host.ProviderOf(p), at: testNow}
				for i := range perJob {
					id := fmt.Sprintf("r%d", i)
					job.ledger = append(job.ledger, sdk.LedgerEntry{Realm: "default", Identity: "alice", RecordID: id, Surface: "turn", Bytes: 1, At: testNow})
					job.usage = append(job.usage, id)
				}
				batch = append(batch, job)
			}
			tel.write(batch)
			if len(bad) > 0 {
				t.Fatal(bad[:min(len(bad), 5)])
			}
			if got := len(p.Ledger()); got != jobs*perJob {
				t.Fatalf("%d ledger rows arrived, want %d", got, jobs*perJob)
			}
			for _, id := range []string{"r0", fmt.Sprintf("r%d", perJob-1)} {
				if got := p.UseCount(id); got != jobs {
					t.Fatalf("%s: use count %d, want %d", id, got, jobs)
				}
			}
			for m, want := range tc.usageCalls {
				if got := p.Calls(m); got != want {
					t.Errorf("%d %s calls, want %d", got, m, want)
				}
			}
		})
	}
}

func TestUsageCounts(t *testing.T) {
	got := usageCounts([]string{"a", "b", "a", "a", "c", "b"})
	want := []sdk.Use{{ID: "a", Count: 3}, {ID: "b", Count: 2}, {ID: "c", Count: 1}}
	if !slices.Equal(got, want) {
		t.Fatalf("usageCounts = %v, want %v", got, want)
	}
	if got := usageCounts(nil); len(got) != 0 {
		t.Fatalf("usageCounts(nil) = %v, want none", got)
	}
}

// TestTelemetryGathersAnInterval checks turns inside one interval share a
// provider call, and that Flush does not wait for the interval to end.
func TestTelemetryGathersAnInterval(t *testing.T) {
	f := newFixture(t, nil)
	f.c.telemetry.interval = time.Hour // only the flush ends the gathering
	f.add(rec("Coffee", "flat white"))
	for i := range 5 {
		if res := f.turn(alice, fmt.Sprintf("s%d", i), "coffee"); res.SkipReason != SkipNone {
			t.Fatalf("turn %d: %q", i, res.SkipReason)
		}
	}
	if err := f.c.Flush(closeCtx(t)); err != nil {
		t.Fatal(err)
	}
	if n := f.p.Calls(coordinatortest.MethodWriteLedger); n != 1 {
		t.Fatalf("%d ledger writes for 5 turns in one interval, want 1", n)
	}
	if n := len(f.p.Ledger()); n != 5 {
		t.Fatalf("%d ledger rows, want 5", n)
	}
}

// TestTelemetryFloodsLeaveRoomForOtherRealms: while the provider's writes
// are stuck, two realms flood the telemetry queue; a quiet realm's turn
// still finds a place, and its ledger row and use arrive.
func TestTelemetryFloodsLeaveRoomForOtherRealms(t *testing.T) {
	p := coordinatortest.NewProvider(coordinatortest.AllCapabilities...)
	gate, entered := make(chan struct{}), make(chan struct{}, 1)
	p.SetHook(coordinatortest.MethodWriteLedger, func(context.Context, any) error {
		select {
		case entered <- struct{}{}:
		default:
		}
		<-gate
		return nil
	})
	tel := newTelemetry(6, hclog.NewNullLogger(), NopMetrics{})
	defer tel.close(context.Background())
	job := func(realm string) telemetryJob {
		return telemetryJob{realm: realm, provider: host.ProviderOf(p), at: testNow, usage: []string{realm + "-record"},
			ledger: []sdk.LedgerEntry{{Realm: realm, Identity: "alice", RecordID: realm + "-record", Surface: "turn", Bytes: 1, At: testNow}}}
	}
	tel.enqueue(job("flood-a"))
	<-entered // the writer is stuck on the first job
	for range 20 {
		tel.enqueue(job("flood-a"))
		tel.enqueue(job("flood-b"))
	}
	tel.enqueue(job("quiet"))
	close(gate)
	if err := tel.flush(closeCtx(t)); err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(p.Ledger(), func(e sdk.LedgerEntry) bool { return e.Realm == "quiet" }) {
		t.Fatal("the quiet realm's ledger row was dropped: the floods took every place")
	}
	if p.UseCount("quiet-record") != 1 {
		t.Fatalf("the quiet realm's record was used %d times, want 1", p.UseCount("quiet-record"))
	}
	if tel.dropped.Load() == 0 {
		t.Fatal("nothing was dropped: the floods did not fill the queue")
	}
}

// TestTelemetryDropsAreLoggedPerRealm: from an outside review. The drop
// warning was one line a minute for every realm together, so the first
// realm to flood hid every other realm's drops from the operator for that
// minute. It is a line per realm a minute, counting the realm's drops.
func TestTelemetryDropsAreLoggedPerRealm(t *testing.T) {
	p := coordinatortest.NewProvider(coordinatortest.AllCapabilities...)
	gate, entered := make(chan struct{}), make(chan struct{}, 1)
	p.SetHook(coordinatortest.MethodWriteLedger, func(context.Context, any) error {
		select {
		case entered <- struct{}{}:
		default:
		}
		<-gate
		return nil
	})
	var logs strings.Builder
	var mu sync.Mutex
	logger := hclog.New(&hclog.LoggerOptions{Output: writerFunc(func(b []byte) (int, error) {
		mu.Lock()
		defer mu.Unlock()
		return logs.Write(b)
	})})
	tel := newTelemetry(4, logger, NopMetrics{})
	defer tel.close(context.Background())
	job := func(realm string) telemetryJob {
		return telemetryJob{realm: realm, provider: host.ProviderOf(p), at: testNow,
			ledger: []sdk.LedgerEntry{{Realm: realm, Identity: "alice", RecordID: realm + "-record", Surface: "turn", Bytes: 1, At: testNow}}}
	}
	tel.enqueue(job("flood-a"))
	<-entered // the writer is stuck on the first job
	for range 10 {
		tel.enqueue(job("flood-a"))
	}
	for range 10 {
		tel.enqueue(job("flood-b"))
	}
	close(gate)
	if err := tel.flush(closeCtx(t)); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	text := logs.String()
	mu.Unlock()
	for _, realm := range []string{"flood-a", "flood-b"} {
		if n := strings.Count(text, "realm="+realm); n != 1 {
			t.Errorf("realm %s's drops were logged in %d lines, want 1:\n%s", realm, n, text)
		}
	}
}

// writerFunc is an io.Writer of a function.
type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(b []byte) (int, error) { return f(b) }
