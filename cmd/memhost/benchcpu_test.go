package main

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/memhost/memhost/internal/bench"
)

// TestCoarseCPU: a row's CPU is marked when a tick per plugin process,
// which a /proc reading may hide, is over a tenth of what the row spent.
func TestCoarseCPU(t *testing.T) {
	for _, c := range []struct {
		spent  time.Duration
		ticked int
		want   bool
	}{
		{60 * time.Millisecond, 1, true},   // 20 turns of 3 ms
		{100 * time.Millisecond, 1, false}, // a tick is a tenth
		{150 * time.Millisecond, 2, true},
		{2 * time.Second, 2, false},
		{5 * time.Millisecond, 0, false}, // no plugin read in ticks
	} {
		if got := coarseCPU(c.spent, c.ticked); got != c.want {
			t.Errorf("coarseCPU(%v, %d) = %v, want %v", c.spent, c.ticked, got, c.want)
		}
	}
}

// TestMeasureFlushedWaitsForTheTurnsWrites: a row's turns are measured
// until every host has written what they queued (ledger rows, usage
// marks), each host flushed once, after the last turn; a failed flush
// fails the row.
func TestMeasureFlushedWaitsForTheTurnsWrites(t *testing.T) {
	queries := make([]bench.Query, 40)
	for _, c := range []struct {
		name    string
		hosts   int
		fail    bool
		clients int
	}{
		{"one host", 1, false, 1},
		{"two hosts", 2, false, 8},
		{"a flush fails", 2, true, 2},
	} {
		var done atomic.Int64
		seen := make([][]int64, c.hosts) // turns done at each flush
		flush := make([]func(context.Context) error, c.hosts)
		for h := range flush {
			flush[h] = func(context.Context) error {
				seen[h] = append(seen[h], done.Load())
				if c.fail && h == 1 {
					return errors.New("ledger write refused")
				}
				return nil
			}
		}
		_, _, perSec, err := measureFlushed(context.Background(), flush, queries, c.clients, func(context.Context, int, bench.Query) error {
			done.Add(1)
			return nil
		})
		if c.fail {
			if err == nil || !strings.Contains(err.Error(), "ledger write refused") {
				t.Errorf("%s: %v, want the flush's error", c.name, err)
			}
			continue
		}
		if err != nil || perSec <= 0 {
			t.Fatalf("%s: %v, %v turns/s", c.name, err, perSec)
		}
		for h, s := range seen {
			if len(s) != 1 || s[0] != int64(len(queries)) {
				t.Errorf("%s: host %d flushed after turns %v, want once after all %d", c.name, h, s, len(queries))
			}
		}
	}
}
