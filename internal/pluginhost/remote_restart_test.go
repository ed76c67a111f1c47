package pluginhost_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	hclog "github.com/hashicorp/go-hclog"
	"github.com/memhost/memhost/internal/pluginhost"
	"github.com/memhost/memhost/internal/testbin"
	"github.com/memhost/memhost/sdk"
	"github.com/memhost/memhost/sdk/host"
)

// TestRemoteEmbedderRestartedWithAnotherModel: gRPC reconnects to a remote
// plugin by itself, so a remote embedder restarted with another model
// between two health checks went unnoticed: the host kept its old Info and
// labelled the new model's vectors with the old model's id. A connection
// that left READY now counts as the process gone, and the next call waits
// for the supervisor to connect anew and read Info again.
func TestRemoteEmbedderRestartedWithAnotherModel(t *testing.T) {
	var limited atomic.Bool
	srv := embeddingsServer(t, &limited)
	exe := testbin.Build(t, "./plugins/openai/cmd/memhost-plugin-openai")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	dir := t.TempDir()
	serve := func(model string) *exec.Cmd {
		cfg := filepath.Join(dir, model+".json")
		if err := os.WriteFile(cfg, fmt.Appendf(nil, `{"base_url": %q, "model": %q, "dimensions": 3}`, srv.URL+"/v1", model), 0o600); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(exe, "serve", "--listen", addr, "--config", cfg)
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			if c, err := net.Dial("tcp", addr); err == nil {
				c.Close()
				return cmd
			}
			if time.Now().After(deadline) {
				t.Fatalf("the remote plugin did not listen on %s", addr)
			}
		}
	}
	first := serve("model-one")
	// No health check within the test: only the connection can tell.
	sup := pluginhost.New(nil, pluginhost.Options{HealthInterval: time.Hour, StartOptions: pluginhost.StartOptions{Logger: hclog.NewNullLogger()}})
	t.Cleanup(sup.Close)
	if err := sup.Start(context.Background(), []pluginhost.Spec{{Kind: sdk.KindEmbedder, Name: "far", Remote: &host.Remote{Address: addr}}}); err != nil {
		t.Fatal(err)
	}
	e, err := sup.Embedder("far")
	if err != nil {
		t.Fatal(err)
	}
	req := sdk.EmbedRequest{Purpose: sdk.EmbedDocument, Texts: []string{"hello"}}
	if _, model, err := e.EmbedModel(context.Background(), req); err != nil || model != "model-one/3" {
		t.Fatalf("before the restart: model %q, %v", model, err)
	}
	_ = first.Process.Kill()
	_ = first.Wait()
	serve("model-two")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, model, err := e.EmbedModel(ctx, req)
	if err != nil || model != "model-two/3" {
		t.Fatalf("after the remote plugin restarted with model-two: vectors labelled %q (%v); want model-two/3", model, err)
	}
}
