package main

import "testing"

// TestDuplicatesAcrossRestart: writes are idempotent by content through
// memhost serve and the real plugin processes, and stay so after a
// restart, when each provider has to find its live contents again (sqlite
// reads them back from its records at open).
func TestDuplicatesAcrossRestart(t *testing.T) {
	t.Parallel()
	for _, pc := range providerConfigs {
		t.Run(pc.plugin, func(t *testing.T) {
			t.Parallel()
			env := envFor(t, pc.env)
			cfgPath, dataDir := writeConfig(t, providerDeployment(pc.plugin, pc.config))
			m, err := startWithConfig(t, cfgPath, dataDir, env...)
			if err != nil {
				t.Fatal(err)
			}
			coffee := map[string]any{"scope": "identity:alice", "kind": "preference", "title": "Coffee order", "body": "Alice drinks her espresso without sugar."}
			id := remember(t, m, coffee)[0]
			if again := remember(t, m, coffee)[0]; again != id {
				t.Fatalf("duplicate write answered %s, want %s", again, id)
			}
			m.stop()
			if m, err = startWithConfig(t, cfgPath, dataDir, env...); err != nil {
				t.Fatal(err)
			}
			if again := remember(t, m, coffee)[0]; again != id {
				t.Fatalf("duplicate write after a restart answered %s, want %s", again, id)
			}
			bob := map[string]any{"scope": "identity:bob", "kind": "preference", "title": coffee["title"], "body": coffee["body"]}
			if other := remember(t, m, bob)[0]; other == id {
				t.Fatalf("the same content in another scope answered %s, alice's record", other)
			}
			if code := m.do("DELETE", "/v1/records/"+id, nil, nil); code != 204 {
				t.Fatalf("DELETE = %d\n%s", code, m.logs())
			}
			if fresh := remember(t, m, coffee)[0]; fresh == id {
				t.Fatalf("the content of a deleted record answered the deleted id %s", id)
			}
		})
	}
}
