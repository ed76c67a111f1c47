package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/memhost/memhost/internal/testbin"
)

// TestMakefileGoTestsHaveTimeouts: every go test the Makefile runs names
// its -timeout, so a slow machine meets a limit chosen for the suite, not
// go test's default ten minutes.
func TestMakefileGoTestsHaveTimeouts(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(testbin.ModuleRoot(t), "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for i, line := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "#") || !strings.Contains(line, "go test ") {
			continue
		}
		n++
		if !strings.Contains(line, " -timeout ") {
			t.Errorf("Makefile:%d: go test without -timeout: %s", i+1, strings.TrimSpace(line))
		}
	}
	if n < 2 {
		t.Fatalf("found %d go test lines in the Makefile", n)
	}
}
