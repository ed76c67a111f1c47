package coordinator

import (
	"context"
	"fmt"
	"slices"
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
// provider call may carry: it goes out in calls of at most sdk.MaxBatch,
// with no id twice in one usage call (providers count an id once per
// call), and every row and use arrives.
func TestTelemetryBatchFitsProviderLimits(t *testing.T) {
	p := coordinatortest.NewProvider(coordinatortest.AllCapabilities...)
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
	const jobs, perJob = 200, 8 // 1600 rows, each id used by every job
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
		t.Fatal(bad)
	}
	if got := len(p.Ledger()); got != jobs*perJob {
		t.Fatalf("%d ledger rows arrived, want %d", got, jobs*perJob)
	}
	if got := p.UseCount("r0"); got != jobs {
		t.Fatalf("use count %d, want %d", got, jobs)
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
