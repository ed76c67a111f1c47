package main

import (
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// TestBenchRetentionFlags: one LongMemEval file serves retrieval and
// retention, and --retention-llm takes BASE_URL,MODEL[,KEY_ENV].
func TestBenchRetentionFlags(t *testing.T) {
	f := benchCommand().Flags().Lookup("longmemeval")
	if f == nil || !strings.HasSuffix(f.DefValue, "longmemeval_s_dev.jsonl.gz") || !strings.Contains(f.Usage, "LongMemEval") {
		t.Fatalf("--longmemeval: %+v", f)
	}
	for _, c := range []struct {
		llm  string
		want []string // compactor names; nil: an error
	}{
		{"", []string{"template"}},
		{"http://127.0.0.1:8080/v1,qwen", []string{"template", "llm"}},
		{"http://127.0.0.1:8080/v1,qwen,OPENAI_API_KEY", []string{"template", "llm"}},
		{"http://127.0.0.1:8080/v1", nil},
		{",qwen", nil},
		{"a,b,c,d", nil},
	} {
		got, err := retentionCompactors(retentionOptions{llm: c.llm})
		if (err != nil) != (c.want == nil) {
			t.Errorf("--retention-llm %q: %v", c.llm, err)
			continue
		}
		var names []string
		for _, g := range got {
			names = append(names, g[0])
		}
		if strings.Join(names, ",") != strings.Join(c.want, ",") {
			t.Errorf("--retention-llm %q: compactors %v, want %v", c.llm, names, c.want)
		}
		if len(got) == 2 && !strings.Contains(got[1][1], `model = "qwen"`) {
			t.Errorf("--retention-llm %q: config %s", c.llm, got[1][1])
		}
	}
}

var retentionRowRE = regexp.MustCompile(`(?m)^\| template \| (LoCoMo|LongMemEval) \| all \| (\d+) \|(?: [0-9.]+ \|){3} ([0-9.]+) \|(?: [0-9.]+ \|){2} [0-9.–]+ \|$`)

// checkRetentionRows checks the retention table of a bench --quick run:
// a LongMemEval row (2 replays) and, with the LoCoMo file, a LoCoMo row,
// each with a share of evidence reaching the model after compaction well
// above nothing.
func checkRetentionRows(t *testing.T, out string, withLoCoMo, withLongMemEval bool) {
	t.Helper()
	rows := retentionRowRE.FindAllStringSubmatch(out, -1)
	want := 0
	for _, present := range []bool{withLoCoMo, withLongMemEval} {
		if present {
			want++
		}
	}
	if len(rows) != want {
		t.Fatalf("want %d retention rows, got %d:\n%s", want, len(rows), out)
	}
	for _, r := range rows {
		n, _ := strconv.Atoi(r[2])
		compacted, _ := strconv.ParseFloat(r[3], 64)
		if n < 2 || compacted < 0.3 {
			t.Errorf("%s: %d questions, summary + archive %.3f", r[1], n, compacted)
		}
	}
}
