package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/memhost/memhost/internal/testbin"
	"github.com/memhost/memhost/sdk"
	"github.com/memhost/memhost/sdk/conformance"
)

// target configures the plugin on the tiny test table.
func target(t *testing.T) conformance.Target {
	table, err := filepath.Abs(filepath.Join("..", "..", "testdata", "tiny.wvt"))
	if err != nil {
		t.Fatal(err)
	}
	return conformance.Target{
		Config: func(string) json.RawMessage { return json.RawMessage(`{"table":` + strconv.Quote(table) + `}`) },
		BadConfigs: []json.RawMessage{
			json.RawMessage(`{"table":` + strconv.Quote(filepath.Join(t.TempDir(), "none.wvt")) + `}`),
			json.RawMessage(`{"table":` + strconv.Quote(filepath.Join("..", "..", "testdata", "tiny-wink.json")) + `}`),
			json.RawMessage(`{"tabel":"x"}`),
		},
	}
}

// TestConformance runs memhost's embedder suite in-process.
func TestConformance(t *testing.T) {
	tg := target(t)
	tg.New = func() sdk.Plugin { return newPlugin() }
	conformance.RunEmbedder(t, tg)
}

// TestConformanceBinary runs it against the built plugin and its manifest.
func TestConformanceBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the plugin binary")
	}
	tg := target(t)
	tg.Binary, _ = testbin.Plugin(t, "wordvec")
	tg.Manifest = conformance.WriteManifest(t, newPlugin().Info(), tg.Binary)
	conformance.RunEmbedder(t, tg)
}

// TestMain removes the plugin binary a run built for itself (make test
// hands it the one `make build` made).
func TestMain(m *testing.M) { os.Exit(testbin.Main(m)) }
