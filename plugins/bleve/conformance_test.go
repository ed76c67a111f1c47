package bleve

import (
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/memhost/memhost/sdk"
	"github.com/memhost/memhost/sdk/conformance"
)

func conformanceTarget() conformance.Target {
	return conformance.Target{
		Config: func(dir string) json.RawMessage { return configJSON(filepath.Join(dir, "bleve")) },
		BadConfigs: []json.RawMessage{
			json.RawMessage(`{"dir": ""}`),
			json.RawMessage(`{"dir": 7}`),
			json.RawMessage(`{"dir": "bleve", "path": "x"}`),
		},
	}
}

// TestConformance runs memhost's provider suite in-process.
func TestConformance(t *testing.T) {
	target := conformanceTarget()
	target.New = func() sdk.Plugin { return NewWithLogger(nil) }
	conformance.RunProvider(t, target)
}

// TestConformanceBinary runs it against the built plugin, as the host
// starts it, with the manifest `make build` writes (this adds the kit's
// manifest and crash checks).
func TestConformanceBinary(t *testing.T) {
	target := conformanceTarget()
	target.Binary, _ = pluginBinary(t)
	target.Manifest = conformance.WriteManifest(t, New().Info(), target.Binary)
	conformance.RunProvider(t, target)
}
