package journal_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"example.com/journal"
	"github.com/memhost/memhost/sdk"
	"github.com/memhost/memhost/sdk/conformance"
)

var badConfigs = []json.RawMessage{
	json.RawMessage(`{"file":""}`),
	json.RawMessage(`{"file":42}`),
	json.RawMessage(`{"file":"a.jsonl"} {"file":"b.jsonl"}`),
}

// TestConformance serves the provider inside the test process: fast, and
// coverage and debuggers see the plugin's code. The plugin shares the
// test's working directory, so the journal path is absolute.
func TestConformance(t *testing.T) {
	conformance.RunProvider(t, conformance.Target{
		New: func() sdk.Plugin { return journal.New() },
		Config: func(dir string) json.RawMessage {
			cfg, _ := json.Marshal(journal.Config{File: filepath.Join(dir, "memory", "journal.jsonl")})
			return cfg
		},
		BadConfigs: badConfigs,
	})
}

// TestConformanceBinary runs the kit against the built plugin exactly as
// memhost starts it: its own process, sha256-checked, its working directory
// in the data directory (so the relative path lands there), checked against
// its manifest. MEMHOST_PLUGIN_BINARY (and MEMHOST_PLUGIN_MANIFEST) test a
// binary built elsewhere; otherwise the test builds one.
func TestConformanceBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the plugin and starts a process per check")
	}
	bin, manifest := os.Getenv("MEMHOST_PLUGIN_BINARY"), os.Getenv("MEMHOST_PLUGIN_MANIFEST")
	if bin == "" {
		bin = conformance.BuildBinary(t, "./cmd/memhost-plugin-journal")
	}
	if manifest == "" {
		manifest = conformance.WriteManifest(t, journal.New().Info(), bin)
	}
	conformance.RunProvider(t, conformance.Target{
		Binary:     bin,
		Manifest:   manifest,
		Config:     func(string) json.RawMessage { return json.RawMessage(`{"file":"journal.jsonl"}`) },
		BadConfigs: badConfigs,
	})
}
