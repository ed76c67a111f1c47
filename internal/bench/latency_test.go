package bench

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

func TestWriteLatencyTable(t *testing.T) {
	rows := []Latency{
		{Provider: "sdk/index", Records: 1000, Op: "recall", Path: PathInProcess, Clients: 1, P50: 100 * time.Microsecond, P99: time.Millisecond, PerSec: 9000},
		{Provider: "sqlite", Records: 1000, Op: "recall", Path: PathHTTP, Clients: 8, P50: 800 * time.Microsecond, P99: 4 * time.Millisecond, PerSec: 3000, CPU: 650 * time.Microsecond},
		{Provider: "sqlite", Records: 5000, Op: "recall", Path: PathHTTP, Clients: 1, P50: time.Millisecond, P99: 2 * time.Millisecond, PerSec: 1000},
		{Provider: "sqlite", Records: 5000, Op: "inject", Path: PathHTTP, Clients: 1, P50: time.Millisecond, P99: 2 * time.Millisecond, PerSec: 1000, CPU: 700 * time.Microsecond, CPUCoarse: true},
	}
	for _, tc := range []struct {
		cores int
		want  []string
	}{
		{2, []string{
			"| sdk/index | 1000 | recall | in-process | 1 | 0.100 ms | 1.000 ms | 9000 | 4500 | — | — |",
			"| sqlite | 1000 | recall | http | 8 | 0.800 ms | 4.000 ms | 3000 | 1500 | 0.650 ms | 8.0× |",
			// No in-process row at this size: no ratio.
			"| sqlite | 5000 | recall | http | 1 | 1.000 ms | 2.000 ms | 1000 | 500 | — | — |",
			// Too short a run to resolve the plugins' ticks: marked, and said why.
			"| sqlite | 5000 | inject | http | 1 | 1.000 ms | 2.000 ms | 1000 | 500 | ~0.700 ms | — |",
			"~ CPU per op of a row too short to resolve it",
		}},
		{0, []string{"| sqlite | 1000 | recall | http | 8 | 0.800 ms | 4.000 ms | 3000 | 3000 | 0.650 ms | 8.0× |"}},
	} {
		var b strings.Builder
		WriteLatencyTable(&b, rows, tc.cores)
		out := b.String()
		if !strings.Contains(out, "| ops/s | ops/s per core | CPU per op | p50 ÷ in-process |") {
			t.Errorf("cores %d: no per-core column in\n%s", tc.cores, out)
		}
		for _, line := range tc.want {
			if !strings.Contains(out, line) {
				t.Errorf("cores %d: no line %q in\n%s", tc.cores, line, out)
			}
		}
	}
}

// TestPercentileNearestRank: the p-th percentile is the smallest value
// at least a share p of the values do not exceed.
func TestPercentileNearestRank(t *testing.T) {
	values := func(n int) []time.Duration {
		out := make([]time.Duration, n)
		for i := range out {
			out[i] = time.Duration(i + 1)
		}
		return out
	}
	for _, c := range []struct {
		n    int
		p    float64
		want time.Duration
	}{
		{20, 0.99, 20}, // the largest, not the second largest
		{20, 0.50, 10},
		{1, 0.99, 1},
		{1, 0.50, 1},
		{2, 0.50, 1},
		{100, 0.99, 99},
		{100, 0.50, 50},
		{300, 0.99, 297},
		{500, 0.99, 495},
		{0, 0.99, 0},
	} {
		if got := percentile(values(c.n), c.p); got != c.want {
			t.Errorf("p%g of 1..%d = %d, want %d", c.p*100, c.n, got, c.want)
		}
	}
}

// TestMeasurePaired: every query runs through both sides, which go first
// in turn, and the first error stops the run and is answered.
func TestMeasurePaired(t *testing.T) {
	var calls []string
	side := func(name string, failAt int) func(context.Context, int) error {
		return func(_ context.Context, i int) error {
			calls = append(calls, fmt.Sprintf("%s%d", name, i))
			if i == failAt {
				return errors.New(name + " failed")
			}
			return nil
		}
	}
	for _, tc := range []struct {
		name       string
		n          int
		failA      int
		failB      int
		wantCalls  string
		wantErr    string
		wantTiming bool
	}{
		{"alternating", 4, -1, -1, "a0 b0 b1 a1 a2 b2 b3 a3", "", true},
		{"none", 0, -1, -1, "", "", false},
		{"a fails", 4, 2, -1, "a0 b0 b1 a1 a2", "a failed", false},
		{"b fails going first", 4, -1, 1, "a0 b0 b1", "b failed", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			calls = nil
			p, err := MeasurePaired(context.Background(), tc.n, side("a", tc.failA), side("b", tc.failB))
			if got := strings.Join(calls, " "); got != tc.wantCalls {
				t.Errorf("calls %q, want %q", got, tc.wantCalls)
			}
			if gotErr := fmt.Sprint(err); (tc.wantErr == "" && err != nil) || (tc.wantErr != "" && gotErr != tc.wantErr) {
				t.Errorf("error %v, want %q", err, tc.wantErr)
			}
			if timed := p.P50A > 0 && p.P50B > 0 && p.P99A >= p.P50A && p.P99B >= p.P50B && p.Ratio > 0; timed != tc.wantTiming {
				t.Errorf("timings %+v, want them measured: %v", p, tc.wantTiming)
			}
		})
	}
}

func TestWritePairedTable(t *testing.T) {
	var b strings.Builder
	WritePairedTable(&b, []Paired{{Provider: "sqlite+wordvec", Records: 100000, A: "lexical", B: "hybrid",
		P50A: time.Millisecond, P99A: 3 * time.Millisecond, P50B: 1400 * time.Microsecond, P99B: 4 * time.Millisecond, Ratio: 1.38}})
	want := "| sqlite+wordvec | 100000 | lexical | hybrid | 1.000 ms | 1.400 ms | 1.40× | 1.38× | 3.000 ms | 4.000 ms |\n"
	if !strings.Contains(b.String(), want) {
		t.Errorf("no row %q in\n%s", want, b.String())
	}
}
