package postgres

import (
	"encoding/json"
	"testing"

	"github.com/memhost/memhost/internal/testbin"
	"github.com/memhost/memhost/sdk"
	"github.com/memhost/memhost/sdk/conformance"
)

// conformanceTarget gives every check a schema of its own, named after its
// data directory, so checks start empty and a restart finds its data. A
// recall with a query vector waits up to read_wait for a replica still
// loading (SQL ranks without the vector): the checks allow a busy machine
// the longest wait the option takes, not the 200 ms default.
func conformanceTarget() conformance.Target {
	return conformance.Target{
		Config: func(dir string) json.RawMessage {
			return configJSON(schemaName(dir), "replica", map[string]any{"read_wait": "10s"})
		},
		BadConfigs: []json.RawMessage{
			json.RawMessage(`{"dsn_env": "MEMHOST_NO_SUCH_VARIABLE_SET"}`),
			json.RawMessage(`{"dsn_env": "not a name"}`),
			json.RawMessage(`{"dsn_env": "` + testDSNEnv + `", "pool_size": 0}`),
			json.RawMessage(`{"dsn_env": "` + testDSNEnv + `", "statement_timeout": "soon"}`),
			json.RawMessage(`{"dsn_env": "` + testDSNEnv + `", "schema": "Bad-Schema"}`),
			json.RawMessage(`{"dsn": "postgres://user:secret@db/memhost"}`),
		},
	}
}

// TestConformance runs memhost's provider suite against the built plugin,
// as the host starts it (with the kit's manifest and crash checks). With
// -short it serves the provider in-process instead: no process to start,
// and the race detector sees the provider's goroutines.
func TestConformance(t *testing.T) {
	testDSN(t)
	target := conformanceTarget()
	if testing.Short() {
		target.New = func() sdk.Plugin { return New() }
	} else {
		target.Binary, _ = testbin.Plugin(t, "postgres")
		target.Manifest = conformance.WriteManifest(t, New().Info(), target.Binary)
	}
	conformance.RunProvider(t, target)
}
