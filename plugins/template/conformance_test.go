package template

import (
	"encoding/json"
	"os"
	"testing"

	"github.com/memhost/memhost/internal/testbin"
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
	bin, _ := testbin.Plugin(t, "template")
	conformance.RunCompactor(t, conformance.Target{
		Binary: bin, Manifest: conformance.WriteManifest(t, New().Info(), bin), BadConfigs: badConfigs,
	})
}

// TestMain removes the plugin binary a run built for itself (make test
// hands it the one `make build` made).
func TestMain(m *testing.M) { os.Exit(testbin.Main(m)) }
