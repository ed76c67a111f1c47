package llm

import (
	"encoding/json"
	"fmt"
	"os"
	"testing"

	"github.com/memhost/memhost/internal/testbin"
	"github.com/memhost/memhost/sdk"
	"github.com/memhost/memhost/sdk/conformance"
)

func conformanceTarget(t *testing.T) conformance.Target {
	_, srv := newFake(t)
	return conformance.Target{
		Config: func(string) json.RawMessage {
			return json.RawMessage(fmt.Sprintf(`{"base_url": %q, "model": "conformance"}`, srv.URL))
		},
		BadConfigs: []json.RawMessage{
			json.RawMessage(`{"model": "m"}`),
			json.RawMessage(fmt.Sprintf(`{"base_url": %q, "model": "m", "timeout_ms": -1}`, srv.URL)),
			json.RawMessage(fmt.Sprintf(`{"base_url": %q, "model": "m", "api_key_env": "MEMHOST_CONFORMANCE_UNSET_KEY"}`, srv.URL)),
		},
	}
}

// TestConformance runs memhost's compactor suite in-process against a
// local chat completions server.
func TestConformance(t *testing.T) {
	target := conformanceTarget(t)
	target.New = func() sdk.Plugin { return New() }
	conformance.RunCompactor(t, target)
}

// TestConformanceBinary runs it against the built plugin and its manifest.
func TestConformanceBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the plugin binary")
	}
	target := conformanceTarget(t)
	target.Binary, _ = testbin.Plugin(t, "llm")
	target.Manifest = conformance.WriteManifest(t, New().Info(), target.Binary)
	conformance.RunCompactor(t, target)
}

// TestMain removes the plugin binary a run built for itself (make test
// hands it the one `make build` made).
func TestMain(m *testing.M) { os.Exit(testbin.Main(m)) }
