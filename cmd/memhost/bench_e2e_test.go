package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/memhost/memhost/internal/testbin"
)

var locomoRowRE = regexp.MustCompile(`(?m)^\| (\w+) \| all \| (dev|held-out) \| (\d+) \| [0-9.]+ \| ([0-9.]+) \|`)

// TestBenchQuick is the smoke test of `memhost bench --quick`: every
// provider is measured through real plugin processes, and LoCoMo retrieval
// (when the data set is beside the repository, as in CI) is far above
// chance on both splits.
func TestBenchQuick(t *testing.T) {
	locomo := filepath.Join(testbin.ModuleRoot(t), "..", "shared", "data", "locomo", "locomo10.json")
	_, statErr := os.Stat(locomo)
	out, err := runCLI(t, nil, "bench", "--quick", "--plugin-dir", testbin.PluginDir(t), "--locomo", locomo)
	if err != nil {
		t.Fatalf("bench --quick: %v\n%s", err, out)
	}
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
	if statErr != nil {
		t.Logf("LoCoMo not checked: %v", statErr)
		return
	}
	rows := locomoRowRE.FindAllStringSubmatch(out, -1)
	if len(rows) != 6 {
		t.Fatalf("want a dev and a held-out LoCoMo row per provider, got %d:\n%s", len(rows), out)
	}
	for _, r := range rows {
		recall, _ := strconv.ParseFloat(r[4], 64)
		if n, _ := strconv.Atoi(r[3]); n < 100 || recall < 0.4 {
			t.Errorf("%s %s: %s questions, turn recall@10 %.3f", r[1], r[2], r[3], recall)
		}
	}
}
