package main

import (
	"path/filepath"
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
