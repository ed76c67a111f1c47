package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRun converts the tiny source: the table is the committed tiny one
// and the attribution lies beside it.
func TestRun(t *testing.T) {
	out := filepath.Join(t.TempDir(), "sub", "tiny.wvt")
	testdata := filepath.Join("..", "..", "testdata")
	if err := run(filepath.Join(testdata, "tiny-wink.json"), out, 38); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile(filepath.Join(testdata, "tiny.wvt"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Error("the table differs from testdata/tiny.wvt")
	}
	notice, err := os.ReadFile(filepath.Join(filepath.Dir(out), "NOTICE"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"GloVe", "opendatacommons.org/licenses/pddl/1-0", "MIT License", "GRAYPE Systems"} {
		if !strings.Contains(string(notice), want) {
			t.Errorf("NOTICE does not say %q", want)
		}
	}
	if _, err := os.Stat(out + ".tmp"); !os.IsNotExist(err) {
		t.Errorf("the temporary file is left behind: %v", err)
	}
	if err := run(filepath.Join(testdata, "tiny.wvt"), out, 38); err == nil || !strings.Contains(err.Error(), "tiny.wvt") {
		t.Errorf("a source that is not JSON: %v", err)
	}
}
