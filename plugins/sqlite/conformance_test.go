package sqlite

import (
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/memhost/memhost/internal/testbin"
	"github.com/memhost/memhost/sdk"
	"github.com/memhost/memhost/sdk/conformance"
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

// TestConformance runs memhost's provider suite against the built plugin,
// as the host starts it (with the kit's manifest and crash checks). With
// -short it serves the provider in-process instead: no process to start,
// and the race detector sees the provider's goroutines.
func TestConformance(t *testing.T) {
	target := conformanceTarget()
	if testing.Short() {
		target.New = func() sdk.Plugin { return newStore() }
	} else {
		target.Binary, _ = testbin.Plugin(t, "sqlite")
		target.Manifest = conformance.WriteManifest(t, New().Info(), target.Binary)
	}
	conformance.RunProvider(t, target)
}
