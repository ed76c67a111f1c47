package static

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/memhost/memhost/internal/testbin"
	"github.com/memhost/memhost/sdk"
	"github.com/memhost/memhost/sdk/conformance"
)

// bind writes b as a bindings file in dir and answers the config naming it.
func bind(t *testing.T) func(string, conformance.Bindings) json.RawMessage {
	return func(dir string, b conformance.Bindings) json.RawMessage {
		f := File{Realms: map[string]RealmBindings{}}
		for id, mobs := range b.Mobs {
			rb := f.Realms[id.Realm]
			if rb.Mobs == nil {
				rb.Mobs = map[string][]string{}
			}
			rb.Mobs[id.ID] = mobs
			f.Realms[id.Realm] = rb
		}
		for id, op := range b.Operators {
			rb := f.Realms[id.Realm]
			if rb.Operators == nil {
				rb.Operators = map[string]string{}
			}
			rb.Operators[id.ID] = op
			f.Realms[id.Realm] = rb
		}
		data, err := json.Marshal(f)
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(dir, "bindings.json")
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		cfg, _ := json.Marshal(Config{File: path})
		return cfg
	}
}

var badConfigs = []json.RawMessage{json.RawMessage(`{}`), json.RawMessage(`{"file":7}`)}

func targets(t *testing.T) map[string]conformance.ResolverTarget {
	out := map[string]conformance.ResolverTarget{
		"InProcess": {Target: conformance.Target{New: func() sdk.Plugin { return New() }, BadConfigs: badConfigs}, Bind: bind(t)},
	}
	if !testing.Short() {
		bin, _ := testbin.Plugin(t, "static")
		out["Binary"] = conformance.ResolverTarget{
			Target: conformance.Target{Binary: bin, Manifest: conformance.WriteManifest(t, New().Info(), bin), BadConfigs: badConfigs},
			Bind:   bind(t),
		}
	}
	return out
}

func TestConformance(t *testing.T) {
	for name, target := range targets(t) {
		t.Run(name, func(t *testing.T) {
			t.Run("MobResolver", func(t *testing.T) { conformance.RunMobResolver(t, target) })
			t.Run("OperatorResolver", func(t *testing.T) { conformance.RunOperatorResolver(t, target) })
		})
	}
}

// TestMain removes the plugin binary a run built for itself (make test
// hands it the one `make build` made).
func TestMain(m *testing.M) { os.Exit(testbin.Main(m)) }
