package main

import (
	"bufio"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/memhost/memhost/internal/testbin"
)

var lmeRowRE = regexp.MustCompile(`(?m)^\| (\w+) \| all \| (\d+) \| ([0-9.]+) \| [0-9.]+ \| [0-9.]+ \| [0-9.]+ \| ([0-9.]+) \| ([0-9.]+) \|`)

var locomoRowRE = regexp.MustCompile(`(?m)^\| (\w+) \| all \| (dev|held-out) \| (\d+) \| [0-9.]+ \| ([0-9.]+) \|`)

// TestBenchQuick is the smoke test of `memhost bench --quick`: every
// provider is measured through real plugin processes, and LoCoMo retrieval
// (when the data set is beside the repository, as in CI) is far above
// chance on both splits.
func TestBenchQuick(t *testing.T) {
	t.Parallel()
	locomo := filepath.Join(testbin.ModuleRoot(t), "..", "shared", "data", "locomo", "locomo10.json")
	_, statErr := os.Stat(locomo)
	lme := filepath.Join(testbin.ModuleRoot(t), "..", "shared", "data", "longmemeval", "longmemeval_s_dev.jsonl.gz")
	_, lmeErr := os.Stat(lme)
	tmp := testbin.ShortTempDir(t)
	out, err := runCLI(t, []string{"TMPDIR=" + tmp}, "bench", "--quick", "--plugin-dir", testbin.PluginDir(t), "--locomo", locomo, "--longmemeval", lme)
	if err != nil {
		t.Fatalf("bench --quick: %v\n%s", err, out)
	}
	assertNoBenchData(t, tmp)
	checkRetentionRows(t, out, statErr == nil, lmeErr == nil)
	for _, p := range []string{"sqlite", "bleve", "markdown"} {
		for _, row := range []string{"| recall | plugin | 1 |", "| recall | http | 8 |", "| inject | http | 1 |"} {
			if !strings.Contains(out, "| "+p+" | 1000 "+row) {
				t.Errorf("no %s row %q in:\n%s", p, row, out)
			}
		}
	}
	if !strings.Contains(out, "| sdk/index | 1000 | recall | in-process | 1 |") {
		t.Errorf("no in-process reference row in:\n%s", out)
	}
	if strings.Count(out, "× |") < 9 {
		t.Errorf("rows lack their ratio to the in-process reference:\n%s", out)
	}
	// Every row through a plugin has its CPU per op: host, clients and
	// plugins read from the kernel, never the "—" of a failed reading.
	if rows := cpuPerOpRE.FindAllString(out, -1); len(rows) < 9 {
		t.Errorf("%d provider rows with a CPU per op, want 9 or more:\n%s", len(rows), out)
	}
	// LongMemEval: one "all" row per provider over the questions --quick
	// keeps, far above chance.
	for _, r := range retrievalRows(t, out, lmeRowRE, 3, "LongMemEval", lmeErr) {
		n, _ := strconv.Atoi(r[2])
		any5, _ := strconv.ParseFloat(r[3], 64)
		evidence, _ := strconv.ParseFloat(r[5], 64)
		if n < 1 || n > quickLongMemEval || any5 < 0.5 || evidence <= 0 {
			t.Errorf("%s LongMemEval: %d questions, session any@5 %.3f, evidence %.3f", r[1], n, any5, evidence)
		}
	}
	// LoCoMo: a dev and a held-out row per provider.
	for _, r := range retrievalRows(t, out, locomoRowRE, 6, "LoCoMo", statErr) {
		recall, _ := strconv.ParseFloat(r[4], 64)
		if n, _ := strconv.Atoi(r[3]); n < 100 || recall < 0.4 {
			t.Errorf("%s %s: %s questions, turn recall@10 %.3f", r[1], r[2], r[3], recall)
		}
	}
}

// cpuPerOpRE matches a provider's latency row (plugin or HTTP) whose CPU
// per op column holds a figure.
var cpuPerOpRE = regexp.MustCompile(`(?m)^\| (sqlite|bleve|markdown) \| \d+ \| (recall|inject) \| (plugin|http) \| \d+ \| [^|]+ \| [^|]+ \| [^|]+ \| [^|]+ \| \d+\.\d+ ms \|`)

// retrievalRows answers the report's rows re matches, want of them, or
// none (logged) when the data set was not there (statErr).
func retrievalRows(t *testing.T, out string, re *regexp.Regexp, want int, what string, statErr error) [][]string {
	t.Helper()
	if statErr != nil {
		t.Logf("%s not checked: %v", what, statErr)
		return nil
	}
	rows := re.FindAllStringSubmatch(out, -1)
	if len(rows) != want {
		t.Fatalf("want %d %s rows, got %d:\n%s", want, what, len(rows), out)
	}
	return rows
}

// TestBenchInterruptedRemovesItsData interrupts a bench while it loads
// 100k records: it must exit with an error and still remove the data
// directory it made, as a finished run does (each is hundreds of MB).
func TestBenchInterruptedRemovesItsData(t *testing.T) {
	t.Parallel()
	tmp := testbin.ShortTempDir(t)
	cmd := testbin.Command(testbin.Build(t, "./cmd/memhost"), "bench", "--providers", "sqlite", "--sizes", "100000",
		"--queries", "20", "--clients", "1", "--locomo", "", "--longmemeval", "", "--plugin-dir", testbin.PluginDir(t))
	cmd.Env = append(cmd.Environ(), "TMPDIR="+tmp)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := bufio.NewScanner(stderr)
	for lines.Scan() && !strings.Contains(lines.Text(), "loading") {
	}
	if dirs, _ := filepath.Glob(filepath.Join(tmp, "memhost-bench-*")); len(dirs) != 1 {
		t.Fatalf("while loading, want the run's one data directory in %s, got %v", tmp, dirs)
	}
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	go io.Copy(io.Discard, stderr)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err == nil {
			t.Error("an interrupted bench exited 0")
		}
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatal("bench did not exit within 30 s of an interrupt")
	}
	assertNoBenchData(t, tmp)
}

// assertNoBenchData fails when a bench left a data directory in tmp.
func assertNoBenchData(t *testing.T, tmp string) {
	t.Helper()
	if dirs, _ := filepath.Glob(filepath.Join(tmp, "memhost-bench-*")); len(dirs) > 0 {
		t.Errorf("bench left its data behind: %v", dirs)
	}
}
