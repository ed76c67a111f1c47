package bench

import (
	"strings"
	"testing"
	"time"
)

func TestWriteLatencyTable(t *testing.T) {
	rows := []Latency{
		{Provider: "sdk/index", Records: 1000, Op: "recall", Path: PathInProcess, Clients: 1, P50: 100 * time.Microsecond, P99: time.Millisecond, PerSec: 9000},
		{Provider: "sqlite", Records: 1000, Op: "recall", Path: PathHTTP, Clients: 8, P50: 800 * time.Microsecond, P99: 4 * time.Millisecond, PerSec: 3000, CPU: 650 * time.Microsecond},
		{Provider: "sqlite", Records: 5000, Op: "recall", Path: PathHTTP, Clients: 1, P50: time.Millisecond, P99: 2 * time.Millisecond, PerSec: 1000},
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
			if !strings.Contains(out, line+"\n") {
				t.Errorf("cores %d: no line %q in\n%s", tc.cores, line, out)
			}
		}
	}
}
