package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/memhost/memhost/internal/bench"
	"github.com/memhost/memhost/internal/testbin"
	"github.com/memhost/memhost/sdk"
)

// BenchmarkSqlitePaths is one recall (of nothing, or of ten hits), turn or
// batch write of 500 through the host `memhost bench` runs (in this
// process, the sqlite plugin as a real process) on 20k synthetic records. Besides wall time it reports the
// CPU time of the host and of the plugin per operation, read from /proc:
// on a shared machine CPU time measures work where wall time measures
// waiting. -cpuprofile covers the host only.
//
//	go test ./cmd/memhost/ -run '^$' -bench SqlitePaths -benchtime 2000x
func BenchmarkSqlitePaths(b *testing.B) {
	ctx := context.Background()
	h, err := startBenchHostOn(ctx, benchOptions{pluginDir: testbin.PluginDir(b)}, "sqlite", nil)
	if err != nil {
		b.Fatal(err)
	}
	defer h.close()
	const size = 20_000
	c := bench.NewCorpus(1, size, 500)
	if _, err := c.Load(ctx, h, sdk.DefaultRealm, 500, nil); err != nil {
		b.Fatal(err)
	}
	// The provider's process: the host runs a compactor plugin beside it.
	var pid int
	for _, st := range h.h.supervisor.Status() {
		if st.Plugin == "sqlite" {
			pid = st.Pid
		}
	}
	if pid == 0 {
		b.Fatal("no sqlite plugin process")
	}
	more := bench.NewCorpus(2, 500*1000, 0).Records
	paths := []struct {
		name string
		run  func(i int, q bench.Query) error
	}{
		// A recall whose word no record holds: no search work, no hits,
		// so what is left is the transport's own cost.
		{"plugin-recall-nothing", func(_ int, q bench.Query) error {
			return h.pluginRecall(ctx, sdk.DefaultRealm, q.Identity, "zzqqxx", 10)
		}},
		{"http-recall-nothing", func(_ int, q bench.Query) error {
			_, err := h.Recall(ctx, sdk.DefaultRealm, q.Identity, "zzqqxx", 10, time.Time{})
			return err
		}},
		{"plugin-recall", func(_ int, q bench.Query) error {
			return h.pluginRecall(ctx, sdk.DefaultRealm, q.Identity, q.Text, 10)
		}},
		{"http-recall", func(_ int, q bench.Query) error {
			_, err := h.Recall(ctx, sdk.DefaultRealm, q.Identity, q.Text, 10, time.Time{})
			return err
		}},
		{"http-inject", func(i int, q bench.Query) error {
			_, err := h.Inject(ctx, sdk.DefaultRealm, q.Identity, fmt.Sprintf("b-%d", i), q.Text, time.Time{})
			return err
		}},
		{"http-write-500", func(i int, _ bench.Query) error {
			part := more[(i%1000)*500 : (i%1000+1)*500]
			_, err := h.Remember(ctx, sdk.DefaultRealm, part)
			return err
		}},
	}
	for _, p := range paths {
		b.Run(p.name, func(b *testing.B) {
			host0, plugin0 := procCPU("self"), procCPU(strconv.Itoa(pid))
			i := 0
			for b.Loop() {
				if err := p.run(i, c.Queries[i%len(c.Queries)]); err != nil {
					b.Fatal(err)
				}
				i++
			}
			if host0 > 0 && plugin0 > 0 {
				b.ReportMetric(float64(procCPU("self")-host0)/float64(b.N), "host-cpu-ns/op")
				b.ReportMetric(float64(procCPU(strconv.Itoa(pid))-plugin0)/float64(b.N), "plugin-cpu-ns/op")
			}
		})
	}
}

// procCPU answers the user and system CPU time of a process from
// /proc/<pid>/stat, 0 where there is no /proc.
func procCPU(pid string) time.Duration {
	data, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return 0
	}
	// The command name may hold spaces; the fields after it do not.
	fields := strings.Fields(string(data[strings.LastIndexByte(string(data), ')')+1:]))
	if len(fields) < 13 {
		return 0
	}
	utime, _ := strconv.ParseInt(fields[11], 10, 64)
	stime, _ := strconv.ParseInt(fields[12], 10, 64)
	const tick = 10 * time.Millisecond // USER_HZ is 100 on Linux
	return time.Duration(utime+stime) * tick
}
