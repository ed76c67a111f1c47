package markdown_test

import (
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/memhost/memhost/internal/testbin"
	"github.com/memhost/memhost/plugins/markdown"
	"github.com/memhost/memhost/sdk"
	"github.com/memhost/memhost/sdk/conformance"
)

// TestConformance runs the provider conformance kit against the built
// plugin as memhost starts it: its own process, sha256-checked against its
// manifest, with the data directory as working directory (so the relative
// root lands there), and SIGKILL durability. With -short it serves the
// provider in-process instead (go-plugin test mode over real gRPC), where
// the plugin shares the test's working directory, so its root is absolute.
func TestConformance(t *testing.T) {
	target := conformance.Target{
		Config:     func(string) json.RawMessage { return json.RawMessage(`{"root":"md"}`) },
		BadConfigs: []json.RawMessage{json.RawMessage(`{"root":["md"]}`)},
	}
	if testing.Short() {
		target.New = func() sdk.Plugin { return markdown.New() }
		target.Config = func(dir string) json.RawMessage {
			cfg, _ := json.Marshal(map[string]string{"root": filepath.Join(dir, "md")})
			return cfg
		}
	} else {
		target.Binary, _ = testbin.Plugin(t, "markdown")
		target.Manifest = conformance.WriteManifest(t, markdown.New().Info(), target.Binary)
	}
	conformance.RunProvider(t, target)
}
