package openai

import (
	"encoding/json"
	"fmt"
	"os"
	"testing"

	"github.com/memhost/memhost/internal/testbin"
	"github.com/memhost/memhost/sdk"
	"github.com/memhost/memhost/sdk/conformance"
)

// conformanceTarget configures the plugin on a local embeddings server
// that answers deterministic vectors, in batches smaller than the host's
// so the suite's full batch is split.
func conformanceTarget(t *testing.T) conformance.Target {
	_, srv := newFake(t)
	return conformance.Target{
		Config: func(string) json.RawMessage {
			return json.RawMessage(fmt.Sprintf(`{"base_url": %q, "model": "conformance", "dimensions": 4, "request_batch": 100, "max_input_bytes": 2048, "deterministic": true}`, srv.URL))
		},
		BadConfigs: []json.RawMessage{
			json.RawMessage(`{"model": "m", "dimensions": 4}`),
			json.RawMessage(fmt.Sprintf(`{"base_url": %q, "model": "m"}`, srv.URL)),
			json.RawMessage(fmt.Sprintf(`{"base_url": %q, "model": "m", "dimensions": 4, "timeout_ms": -1}`, srv.URL)),
			json.RawMessage(fmt.Sprintf(`{"base_url": %q, "model": "m", "dimensions": 4, "api_key_env": "MEMHOST_CONFORMANCE_UNSET_KEY"}`, srv.URL)),
		},
	}
}

// TestConformance runs memhost's embedder suite in-process against a
// local embeddings server.
func TestConformance(t *testing.T) {
	target := conformanceTarget(t)
	target.New = func() sdk.Plugin { return New() }
	conformance.RunEmbedder(t, target)
}

// TestConformanceBinary runs it against the built plugin and its manifest.
func TestConformanceBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the plugin binary")
	}
	target := conformanceTarget(t)
	target.Binary, _ = testbin.Plugin(t, "openai")
	target.Manifest = conformance.WriteManifest(t, New().Info(), target.Binary)
	conformance.RunEmbedder(t, target)
}

// TestMain removes the plugin binary a run built for itself (make test
// hands it the one `make build` made).
func TestMain(m *testing.M) { os.Exit(testbin.Main(m)) }
