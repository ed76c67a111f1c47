package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/memhost/memhost/internal/bench"
)

// TestBenchLoCoMoDefault: the default LoCoMo file is looked for in the
// working directory, and the flag's help says where the file comes from.
func TestBenchLoCoMoDefault(t *testing.T) {
	f := benchCommand().Flags().Lookup("locomo")
	if f == nil {
		t.Fatal("bench has no --locomo flag")
	}
	if filepath.Base(f.DefValue) != f.DefValue {
		t.Errorf("--locomo defaults to %q, a path outside the working directory", f.DefValue)
	}
	if !strings.Contains(f.Usage, "github.com/snap-research/locomo") {
		t.Errorf("--locomo's help does not say where to get the file: %q", f.Usage)
	}
}

// TestBenchLoCoMoSubsetSaysSo: a LoCoMo block of some samples only names
// them and says its figures are not those of a run of all (the samples
// share one realm's statistics); a run of all says nothing more.
func TestBenchLoCoMoSubsetSaysSo(t *testing.T) {
	results := map[string][]bench.Retrieval{"sqlite": {{Split: "dev", Category: "all", Questions: 1}}}
	for _, c := range []struct {
		name    string
		samples []int
		total   int
		want    string
	}{
		{"subset", []int{0, 5}, 10, "Samples 0, 5 only, of 10"},
		{"all", []int{0, 1, 2}, 3, ""},
	} {
		var samples []bench.Sample
		for _, i := range c.samples {
			samples = append(samples, bench.Sample{Index: i})
		}
		var out strings.Builder
		writeLoCoMo(&out, results, samples, c.total, false)
		note := strings.Contains(out.String(), "differ from the same samples' in a run of all")
		if c.want != "" && (!note || !strings.Contains(out.String(), c.want)) || c.want == "" && note {
			t.Errorf("%s: report\n%s", c.name, out.String())
		}
	}
	// Evidence the data set gets wrong is reported, not dropped.
	samples := []bench.Sample{{Index: 3, Questions: []bench.Question{
		{Category: 4, Unreadable: []string{"D"}}, {Category: 1, Evidence: []string{"D10:19"}, Missing: []string{"D10:19"}}}}}
	var out strings.Builder
	writeLoCoMo(&out, results, samples, 1, false)
	if !strings.Contains(out.String(), `1 string(s) naming no dia id, left out (sample 3: "D")`) || !strings.Contains(out.String(), "1 id(s) naming no turn of their sample, kept and never retrieved (sample 3: D10:19)") {
		t.Errorf("evidence faults not reported:\n%s", out.String())
	}
	f := benchCommand().Flags().Lookup("locomo-samples")
	if !strings.Contains(f.Usage, "subset") || !strings.Contains(f.Usage, "one realm") {
		t.Errorf("--locomo-samples's help does not say a subset ranks differently: %q", f.Usage)
	}
}

// TestBenchQuickKeepsExplicitFlags: --quick sets its small run on the
// flags not given; a flag given explicitly keeps its value.
func TestBenchQuickKeepsExplicitFlags(t *testing.T) {
	// Data files to take subsets of (only their presence is checked).
	locomo, lme := filepath.Join(t.TempDir(), "locomo.json"), filepath.Join(t.TempDir(), "lme.jsonl.gz")
	for _, p := range []string{locomo, lme} {
		if err := os.WriteFile(p, nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		args                   []string
		sizes, clients, sample []int
		queries, questions     int
	}{
		{[]string{"--quick"}, []int{1000}, []int{1, 8}, []int{0, 5}, 60, quickLongMemEval},
		{[]string{"--quick", "--sizes", "5000", "--queries", "20"}, []int{5000}, []int{1, 8}, []int{0, 5}, 20, quickLongMemEval},
		{[]string{"--quick", "--clients", "2", "--locomo-samples", "7", "--longmemeval-questions", "9"}, []int{1000}, []int{2}, []int{7}, 60, 9},
		{[]string{"--queries", "20"}, []int{10000, 100000}, []int{1, 8}, nil, 20, 0},
	} {
		var got benchOptions
		cmd := benchCommandRunning(func(_ context.Context, o benchOptions, _, _ io.Writer) error {
			got = o
			return nil
		})
		cmd.SetArgs(append(c.args, "--locomo", locomo, "--longmemeval", lme))
		if err := cmd.Execute(); err != nil {
			t.Fatalf("%v: %v", c.args, err)
		}
		if !slices.Equal(got.sizes, c.sizes) || !slices.Equal(got.clients, c.clients) || !slices.Equal(got.samples, c.sample) || got.queries != c.queries || got.lmeQuestions != c.questions {
			t.Errorf("%v: sizes %v clients %v samples %v queries %d questions %d; want %v %v %v %d %d", c.args,
				got.sizes, got.clients, got.samples, got.queries, got.lmeQuestions, c.sizes, c.clients, c.sample, c.queries, c.questions)
		}
	}
}

// TestBenchDataPaths: a data set named explicitly that is not there ends
// the run with an error naming it, before anything is measured; at its
// default path, the run goes on and its report says what was not run.
func TestBenchDataPaths(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "absent.json")
	for _, flag := range []string{"--locomo", "--longmemeval"} {
		ran := false
		cmd := benchCommandRunning(func(context.Context, benchOptions, io.Writer, io.Writer) error {
			ran = true
			return nil
		})
		cmd.SetArgs([]string{flag, missing})
		cmd.SetOut(io.Discard)
		cmd.SetErr(io.Discard)
		err := cmd.Execute()
		if err == nil || ran || !strings.Contains(err.Error(), flag) || !strings.Contains(err.Error(), missing) {
			t.Errorf("%s %s: ran %v, error %v; want an error naming both before the run", flag, missing, ran, err)
		}
	}
	// A subset of the default LoCoMo file, which is not in this directory,
	// names the file before the run; it was dropped in silence.
	ran := false
	cmd := benchCommandRunning(func(context.Context, benchOptions, io.Writer, io.Writer) error {
		ran = true
		return nil
	})
	cmd.SetArgs([]string{"--locomo-samples", "3", "--longmemeval", ""})
	cmd.SetOut(io.Discard)
	cmd.SetErr(io.Discard)
	if err := cmd.Execute(); err == nil || ran || !strings.Contains(err.Error(), "--locomo locomo10.json does not exist") {
		t.Errorf("--locomo-samples 3 without the default file: ran %v, error %v; want it named before the run", ran, err)
	}
	// The defaults, missing: every section that needs them says so.
	o := benchOptions{sizes: []int{10}, queries: 2, clients: []int{1}, locomo: missing, longMemEval: missing + ".gz", retention: retentionOptions{on: true}}
	var report strings.Builder
	if err := runBench(context.Background(), o, &report, io.Discard); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"## LoCoMo retrieval\n\nNot run: no LoCoMo file at " + missing,
		"## LongMemEval-S retrieval\n\nNot run: no LongMemEval file at " + missing + ".gz",
		"## Retention through compaction\n\nNot run: no file at the default path of LoCoMo (" + missing + ") or LongMemEval (" + missing + ".gz)",
	} {
		if !strings.Contains(report.String(), want) {
			t.Errorf("no %q in the report:\n%s", want, report.String())
		}
	}
}

// TestBenchUnknownProviderListsTheChoices: from an outside review. An
// unknown --providers name was refused without the names it may be.
func TestBenchUnknownProviderListsTheChoices(t *testing.T) {
	_, err := runRoot(t, "bench", "--providers", "nope", "--quick")
	if err == nil || !strings.Contains(err.Error(), `"nope"`) || !strings.Contains(err.Error(), "bleve, markdown, postgres, sqlite") {
		t.Fatalf("bench --providers nope = %v, want the choices named", err)
	}
}

// TestBenchRefusesFlagsBeforeMeasuring: from this stop's review of bench
// as a careless operator. Each of these ran: --queries 0 reported rows of
// zeros, --providers "" an empty report, --semantic-weight without an
// embedder was dropped in silence, and a chart path that could not be
// written failed only after the whole run.
func TestBenchRefusesFlagsBeforeMeasuring(t *testing.T) {
	missingDir := filepath.Join(t.TempDir(), "absent")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--queries", "0"}, "--queries: 0 is not an integer of at least 1"},
		{[]string{"--queries", "-3"}, "--queries: -3 is not"},
		{[]string{"--longmemeval-questions", "-1"}, "--longmemeval-questions: -1 is not"},
		{[]string{"--providers", ""}, "--providers: name at least one; choose among bleve, markdown, postgres, sqlite"},
		{[]string{"--providers", "sqlite,sqlite"}, `--providers: "sqlite" is named twice`},
		{[]string{"--semantic-weight", "0.3"}, "--semantic-weight needs --embedder"},
		{[]string{"--embedder-config", "{}"}, "--embedder-config needs --embedder"},
		{[]string{"--embedder", "wordvec", "--semantic-weight", "1.5"}, "--semantic-weight: 1.5 is not between 0 and 1"},
		{[]string{"--embedder", "wordvec", "--semantic-weight", "NaN"}, "--semantic-weight: NaN is not between 0 and 1"},
		{[]string{"--svg", filepath.Join(missingDir, "chart.svg")}, "--svg: cannot write " + filepath.Join(missingDir, "chart.svg") + ": directory " + missingDir + ": no such file or directory"},
		{[]string{"--out", filepath.Join(missingDir, "run.md")}, "--out: cannot write " + filepath.Join(missingDir, "run.md") + ": directory " + missingDir + ": no such file or directory"},
		{[]string{"--out", t.TempDir()}, "is a directory"},
		{[]string{"--locomo-samples", "3"}, "--locomo-samples needs --locomo, which is empty"},
		{[]string{"--longmemeval-questions", "5"}, "--longmemeval-questions needs --longmemeval, which is empty"},
	} {
		ran := false
		cmd := benchCommandRunning(func(context.Context, benchOptions, io.Writer, io.Writer) error {
			ran = true
			return nil
		})
		cmd.SetArgs(append(c.args, "--locomo", "", "--longmemeval", ""))
		cmd.SetOut(io.Discard)
		cmd.SetErr(io.Discard)
		err := cmd.Execute()
		if err == nil || ran || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: ran %v, error %v; want %q before the run", c.args, ran, err, c.want)
		}
	}
	// A sample the file does not hold is named before anything is measured.
	locomo := filepath.Join(t.TempDir(), "locomo.json")
	if err := os.WriteFile(locomo, []byte(`[{"sample_id": "s0", "conversation": {}, "qa": []}]`), 0o644); err != nil {
		t.Fatal(err)
	}
	o := benchOptions{sizes: []int{10}, queries: 2, clients: []int{1}, locomo: locomo, samples: []int{0, 7}}
	err := runBench(context.Background(), o, io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "--locomo-samples: "+locomo+" has no sample 7 (it has 1, from 0)") {
		t.Errorf("--locomo-samples 0,7 on a file of one sample: %v", err)
	}
}

// TestBenchDataSetPathsSaidOnce: from an outside review. A --locomo or
// --longmemeval file that is missing was refused as "stat F: no such file
// or directory", the system call that met it; a directory ran into the
// loader.
func TestBenchDataSetPathsSaidOnce(t *testing.T) {
	dir := t.TempDir()
	gone := filepath.Join(dir, "gone.json")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--locomo", gone, "--longmemeval", ""}, "--locomo " + gone + " does not exist (locomo10.json is data/locomo10.json"},
		{[]string{"--locomo", dir, "--longmemeval", ""}, "--locomo " + dir + " is a directory: name the data set's file"},
		{[]string{"--longmemeval", gone, "--locomo", ""}, "--longmemeval " + gone + " does not exist ("},
	} {
		ran := false
		cmd := benchCommandRunning(func(context.Context, benchOptions, io.Writer, io.Writer) error {
			ran = true
			return nil
		})
		cmd.SetArgs(c.args)
		cmd.SetOut(io.Discard)
		cmd.SetErr(io.Discard)
		err := cmd.Execute()
		if err == nil || ran || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "stat ") {
			t.Errorf("%q: ran %v, error %v; want %q before the run", c.args, ran, err, c.want)
		}
	}
}

// TestBenchOutReplacesTheReportWhole: --out names a report a team keeps
// (docs/bench-run.md); a run that fails or is stopped before its report
// leaves the last one, and a run that writes replaces it whole.
func TestBenchOutReplacesTheReportWhole(t *testing.T) {
	out := filepath.Join(t.TempDir(), "run.md")
	if err := os.WriteFile(out, []byte("last run's report\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	runWith := func(run func(context.Context, benchOptions, io.Writer, io.Writer) error) error {
		cmd := benchCommandRunning(run)
		cmd.SetArgs([]string{"--out", out, "--locomo", "", "--longmemeval", ""})
		cmd.SetOut(io.Discard)
		cmd.SetErr(io.Discard)
		return cmd.Execute()
	}
	stopped := errors.New("interrupted")
	if err := runWith(func(context.Context, benchOptions, io.Writer, io.Writer) error { return stopped }); !errors.Is(err, stopped) {
		t.Fatalf("run error %v, want %v", err, stopped)
	}
	if got, _ := os.ReadFile(out); string(got) != "last run's report\n" {
		t.Errorf("a run stopped before its report left %q", got)
	}
	err := runWith(func(_ context.Context, _ benchOptions, w, _ io.Writer) error {
		fmt.Fprint(w, "## new report\n")
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(out)
	st, _ := os.Stat(out)
	if string(got) != "## new report\n" || st.Mode().Perm() != 0o644 {
		t.Errorf("report %q mode %v, want the new report, 0644", got, st.Mode().Perm())
	}
	if left, _ := filepath.Glob(filepath.Join(filepath.Dir(out), ".run.md.*")); len(left) > 0 {
		t.Errorf("temporary files left: %v", left)
	}
}

// TestBenchOutKeepsTheReportOfAnInterruptedRun: a run interrupted after
// it began its report (during the retention or multihost runs, which come
// after the latency tables) leaves the last report, not the half written.
func TestBenchOutKeepsTheReportOfAnInterruptedRun(t *testing.T) {
	out := filepath.Join(t.TempDir(), "run.md")
	if err := os.WriteFile(out, []byte("last run's report\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, interrupt := context.WithCancel(context.Background())
	defer interrupt()
	cmd := benchCommandRunning(func(ctx context.Context, _ benchOptions, w, _ io.Writer) error {
		fmt.Fprint(w, "## Latency and throughput\n")
		interrupt()
		<-ctx.Done()
		return fmt.Errorf("retention: %w", ctx.Err())
	})
	cmd.SetArgs([]string{"--out", out, "--locomo", "", "--longmemeval", ""})
	cmd.SetOut(io.Discard)
	cmd.SetErr(io.Discard)
	if err := cmd.ExecuteContext(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("run error %v, want it interrupted", err)
	}
	if got, _ := os.ReadFile(out); string(got) != "last run's report\n" {
		t.Errorf("an interrupted run left %q", got)
	}
	if left, _ := filepath.Glob(filepath.Join(filepath.Dir(out), ".run.md.*")); len(left) > 0 {
		t.Errorf("temporary files left: %v", left)
	}
}
