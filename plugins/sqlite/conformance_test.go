package sqlite

import (
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/memhost/memhost/sdk"
	"github.com/memhost/memhost/sdk/conformance"
	"github.com/memhost/memhost/sdk/host"
)

func conformanceTarget() conformance.Target {
	return conformance.Target{
		Config: func(dir string) json.RawMessage { return configJSON(filepath.Join(dir, "memory.db")) },
		BadConfigs: []json.RawMessage{
			json.RawMessage(`{"path": ":memory:"}`),
			json.RawMessage(`{"path": 7}`),
			json.RawMessage(`{"path": "dir/"}`),
		},
	}
}

// TestConformance runs memhost's provider suite in-process.
func TestConformance(t *testing.T) {
	target := conformanceTarget()
	target.New = func() sdk.Plugin { return newStore() }
	conformance.RunProvider(t, target)
}

// TestConformanceBinary runs it against the built plugin, as the host
// starts it (this adds the kit's crash check).
func TestConformanceBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the plugin binary")
	}
	target := conformanceTarget()
	var sum []byte
	target.Binary, sum = pluginBinary(t)
	// The plugin's manifest, as `make build` writes it beside the binary.
	m := host.ManifestFor(New().Info(), filepath.Base(target.Binary), hex.EncodeToString(sum))
	data, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	target.Manifest = filepath.Join(t.TempDir(), "sqlite"+host.ManifestSuffix)
	if err := os.WriteFile(target.Manifest, data, 0o644); err != nil {
		t.Fatal(err)
	}
	conformance.RunProvider(t, target)
}
