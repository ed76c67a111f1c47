package markdown_test

import (
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/memhost/memhost/plugins/markdown"
	"github.com/memhost/memhost/sdk"
	"github.com/memhost/memhost/sdk/conformance"
)

// TestConformance runs the provider conformance kit in-process (go-plugin
// test mode over real gRPC). The plugin shares the test's working
// directory, so its root is absolute.
func TestConformance(t *testing.T) {
	conformance.RunProvider(t, conformance.Target{
		New: func() sdk.Plugin { return markdown.New() },
		Config: func(dir string) json.RawMessage {
			cfg, _ := json.Marshal(map[string]string{"root": filepath.Join(dir, "md")})
			return cfg
		},
		BadConfigs: []json.RawMessage{json.RawMessage(`{"root":["md"]}`)},
	})
}

// TestConformanceBinary runs the kit against the built plugin as memhost
// starts it: its own process, sha256-checked against its manifest, with
// the data directory as working directory (so the relative root lands
// there), and SIGKILL durability.
func TestConformanceBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the plugin and starts a process per check")
	}
	bin := conformance.BuildBinary(t, "github.com/memhost/memhost/plugins/markdown/cmd/memhost-plugin-markdown")
	conformance.RunProvider(t, conformance.Target{
		Binary:     bin,
		Manifest:   conformance.WriteManifest(t, markdown.New().Info(), bin),
		Config:     func(string) json.RawMessage { return json.RawMessage(`{"root":"md"}`) },
		BadConfigs: []json.RawMessage{json.RawMessage(`{"root":["md"]}`)},
	})
}
