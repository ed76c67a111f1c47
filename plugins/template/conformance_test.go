package template

import (
	"encoding/json"
	"testing"

	"github.com/memhost/memhost/sdk"
	"github.com/memhost/memhost/sdk/conformance"
)

var badConfigs = []json.RawMessage{
	json.RawMessage(`{"max_bytes": 10}`),
	json.RawMessage(`{"line_bytes": "long"}`),
	json.RawMessage(`{"header": ""}`),
}

// TestConformance runs memhost's compactor suite in-process.
func TestConformance(t *testing.T) {
	conformance.RunCompactor(t, conformance.Target{New: func() sdk.Plugin { return New() }, BadConfigs: badConfigs})
}

// TestConformanceBinary runs it against the built plugin and its manifest,
// as the host starts it.
func TestConformanceBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the plugin binary")
	}
	bin := conformance.BuildBinary(t, "./cmd/memhost-plugin-template")
	conformance.RunCompactor(t, conformance.Target{
		Binary: bin, Manifest: conformance.WriteManifest(t, New().Info(), bin), BadConfigs: badConfigs,
	})
}
