package kv_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"example.com/kv"
	"github.com/memhost/memhost/sdk"
	"github.com/memhost/memhost/sdk/conformance"
)

var badConfigs = []json.RawMessage{
	json.RawMessage(`{"file":""}`),
	json.RawMessage(`{"file":42}`),
}

// TestConformance serves the provider inside the test process. It shares
// the test's working directory, so the log path is absolute.
func TestConformance(t *testing.T) {
	conformance.RunProvider(t, conformance.Target{
		New: func() sdk.Plugin { return kv.New() },
		Config: func(dir string) json.RawMessage {
			cfg, _ := json.Marshal(kv.Config{File: filepath.Join(dir, "kv.log")})
			return cfg
		},
		BadConfigs: badConfigs,
	})
}

// TestConformanceBinary runs the kit against the built plugin as memhost
// starts it: its own process, sha256-checked against its manifest, its
// working directory the data directory, and killed with SIGKILL once.
// MEMHOST_PLUGIN_BINARY (and MEMHOST_PLUGIN_MANIFEST) test a binary built
// elsewhere.
func TestConformanceBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the plugin and starts a process per check")
	}
	bin, manifest := os.Getenv("MEMHOST_PLUGIN_BINARY"), os.Getenv("MEMHOST_PLUGIN_MANIFEST")
	if bin == "" {
		bin = conformance.BuildBinary(t, "./cmd/memhost-plugin-kv")
	}
	if manifest == "" {
		manifest = conformance.WriteManifest(t, kv.New().Info(), bin)
	}
	conformance.RunProvider(t, conformance.Target{
		Binary:     bin,
		Manifest:   manifest,
		Config:     func(string) json.RawMessage { return json.RawMessage(`{}`) },
		BadConfigs: badConfigs,
	})
}
