package main

import (
	"strings"
	"testing"

	"github.com/memhost/memhost/internal/testbin"
)

// TestEmbedderInstanceThroughServe: an embedder block starts the openai
// plugin under the supervisor; /v1/plugins lists it ready as an embedder,
// and the start warns that nothing uses it yet.
func TestEmbedderInstanceThroughServe(t *testing.T) {
	t.Parallel()
	cfgPath, dataDir := writeConfigIn(t, testbin.PluginDir(t, "sqlite", "template", "openai"), providerDeployment("sqlite", `{ path = "memory.db" }`)+`
embedder "vectors" {
  plugin = "openai"
  config = { base_url = "http://127.0.0.1:1/v1", model = "test-embed", dimensions = 8 }
}
`)
	m, err := startWithConfig(t, cfgPath, dataDir)
	if err != nil {
		t.Fatal(err)
	}
	var plugins struct {
		Plugins []struct {
			Instance string `json:"instance"`
			Kind     string `json:"kind"`
			Name     string `json:"name"`
			Healthy  bool   `json:"healthy"`
			State    string `json:"state"`
		} `json:"plugins"`
	}
	if code := m.do("GET", "/v1/plugins", nil, &plugins); code != 200 {
		t.Fatalf("GET /v1/plugins = %d\n%s", code, m.logs())
	}
	found := false
	for _, p := range plugins.Plugins {
		if p.Instance == "vectors" {
			found = true
			if p.Kind != "embedder" || p.Name != "openai" || !p.Healthy || p.State != "ready" {
				t.Errorf("embedder instance %+v, want a ready, healthy openai embedder", p)
			}
		}
	}
	if !found {
		t.Fatalf("/v1/plugins does not list the embedder: %+v", plugins)
	}
	if logs := m.logs(); !strings.Contains(logs, `vectors`) || !strings.Contains(logs, `is declared but unused: no realm block names it`) {
		t.Errorf("the start does not say the embedder is unused:\n%s", logs)
	}
}
