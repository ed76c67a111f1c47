package main

import (
	"path/filepath"
	"strings"
	"testing"
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
