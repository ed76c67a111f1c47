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

// TestConformance runs memhost's provider suite against the built plugin,
// as the host starts it, with the manifest `make build` writes (this adds
// the kit's manifest and crash checks). With -short it serves the provider
// in-process instead: no process to start, and the race detector sees the
// provider's goroutines.
func TestConformance(t *testing.T) {
	target := conformanceTarget()
	if testing.Short() {
		target.New = func() sdk.Plugin { return NewWithLogger(nil) }
	} else {
		target.Binary, _ = pluginBinary(t)
		target.Manifest = conformance.WriteManifest(t, New().Info(), target.Binary)
	}
	conformance.RunProvider(t, target)
}
