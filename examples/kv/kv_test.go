package kv_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"example.com/kv"
	"github.com/memhost/memhost/sdk"
	"github.com/memhost/memhost/sdk/kvprovider"
)

func configure(t *testing.T, file string) *kvprovider.Provider {
	t.Helper()
	p := kv.New()
	cfg, _ := json.Marshal(kv.Config{File: file})
	if err := p.Configure(context.Background(), cfg); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// A line the plugin died writing is cut off at start; every acknowledged
// change before it survives, and the log takes writes again after it.
func TestTornLastLineIsCutOff(t *testing.T) {
	ctx := context.Background()
	file := filepath.Join(t.TempDir(), "kv.log")
	p := configure(t, file)
	rec := sdk.Record{Scope: sdk.RealmScope, Kind: sdk.KindFact, Title: "espresso", Body: "grinder at 12"}
	if _, err := p.Remember(ctx, "r", []sdk.Record{rec}); err != nil {
		t.Fatal(err)
	}
	p.Close()
	f, err := os.OpenFile(file, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(`{"put":[{"id":"torn","realm":"r","ti`)
	f.Close()

	p = configure(t, file)
	hits, err := p.Recall(ctx, sdk.RecallQuery{Realm: "r", Query: "espresso"})
	if err != nil || len(hits) != 1 {
		t.Fatalf("Recall after a torn write = %v, %v; want the acknowledged record", hits, err)
	}
	rec.Title = "kettle"
	if _, err := p.Remember(ctx, "r", []sdk.Record{rec}); err != nil {
		t.Fatal(err)
	}
	p.Close()
	p = configure(t, file)
	if hits, err := p.Recall(ctx, sdk.RecallQuery{Realm: "r", Query: "kettle espresso"}); err != nil || len(hits) != 2 {
		t.Fatalf("Recall after reopening = %v, %v; want both records", hits, err)
	}
}

// The plugin-authoring guide shows the example whole; it must show this
// code, not an older copy.
func TestGuideShowsThisCode(t *testing.T) {
	guide, err := os.ReadFile("../../docs/plugin-authoring.md")
	if err != nil {
		t.Skip("not inside the memhost repository")
	}
	for _, f := range []string{"kv.go", "cmd/memhost-plugin-kv/main.go"} {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(guide), "```go\n"+string(src)+"```") {
			t.Errorf("docs/plugin-authoring.md does not show %s as it is", f)
		}
	}
}
