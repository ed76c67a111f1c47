package lexical

import (
	"encoding/json"
	"os"
	"testing"

	"github.com/memhost/memhost/internal/testbin"
	"github.com/memhost/memhost/sdk"
	"github.com/memhost/memhost/sdk/conformance"
)

var badConfigs = []json.RawMessage{json.RawMessage(`{"min_score":0}`), json.RawMessage(`{"recency_weight":"high"}`)}

func TestConformance(t *testing.T) {
	conformance.RunSelector(t, conformance.Target{New: func() sdk.Plugin { return New() }, BadConfigs: badConfigs})
}

func TestConformanceBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the plugin binary")
	}
	bin, _ := testbin.Plugin(t, "lexical")
	conformance.RunSelector(t, conformance.Target{
		Binary: bin, Manifest: conformance.WriteManifest(t, New().Info(), bin), BadConfigs: badConfigs,
	})
}

// TestMain removes the plugin binary a run built for itself (make test
// hands it the one `make build` made).
func TestMain(m *testing.M) { os.Exit(testbin.Main(m)) }
