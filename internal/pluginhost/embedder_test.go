package pluginhost_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	hclog "github.com/hashicorp/go-hclog"
	"github.com/memhost/memhost/internal/pluginhost"
	"github.com/memhost/memhost/internal/testbin"
	"github.com/memhost/memhost/plugins/wordvec"
	"github.com/memhost/memhost/sdk"
)

// embeddingsServer answers every input with a 3-dimensional vector made
// from its length; while *limited is set, it answers 429 once and clears it.
func embeddingsServer(t *testing.T, limited *atomic.Bool) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if limited.CompareAndSwap(true, false) {
			http.Error(w, `{"error":{"message":"slow down"}}`, http.StatusTooManyRequests)
			return
		}
		var req struct{ Input []string }
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		data := make([]map[string]any, len(req.Input))
		for i, in := range req.Input {
			data[i] = map[string]any{"index": i, "embedding": []float32{float32(len(in)), 1, float32(i)}}
		}
		json.NewEncoder(w).Encode(map[string]any{"data": data})
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestSupervisedEmbedder: an embedder instance of the real openai plugin
// is started, called, observed per call, listed in Status, and restarted
// under a call when it dies.
func TestSupervisedEmbedder(t *testing.T) {
	var limited atomic.Bool
	srv := embeddingsServer(t, &limited)
	dir := t.TempDir()
	testbin.InstallPlugin(t, dir, testbin.Build(t, "./plugins/openai/cmd/memhost-plugin-openai"))
	var (
		mu   sync.Mutex
		seen []string
	)
	obs := func(instance, method string, _ time.Duration, err error) {
		mu.Lock()
		defer mu.Unlock()
		seen = append(seen, fmt.Sprintf("%s %s %s", instance, method, sdk.CodeOf(err)))
	}
	sup := pluginhost.New([]pluginhost.Entry{discoverOne(t, dir)}, pluginhost.Options{
		StartOptions:   pluginhost.StartOptions{Logger: hclog.NewNullLogger(), Dir: t.TempDir()},
		HealthInterval: time.Hour, ObserveCall: obs,
	})
	t.Cleanup(sup.Close)
	cfg := json.RawMessage(fmt.Sprintf(`{"base_url": %q, "model": "m", "dimensions": 3}`, srv.URL+"/v1"))
	if err := sup.Start(context.Background(), []pluginhost.Spec{{Kind: sdk.KindEmbedder, Name: "vec", Plugin: "openai", Config: cfg}}); err != nil {
		t.Fatal(err)
	}
	if _, err := sup.Embedder("other"); !errors.Is(err, sdk.ErrNotFound) {
		t.Errorf("Embedder(other) = %v, want not found", err)
	}
	if _, err := sup.Selector("vec"); !errors.Is(err, sdk.ErrNotFound) {
		t.Errorf("Selector(vec) of an embedder = %v, want not found", err)
	}
	emb, err := sup.Embedder("vec")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	info, err := emb.EmbedderInfo(ctx)
	if err != nil || info.Model != "m/3" || info.Dimensions != 3 {
		t.Fatalf("EmbedderInfo = %+v, %v", info, err)
	}
	vecs, err := emb.Embed(ctx, sdk.EmbedRequest{Purpose: sdk.EmbedDocument, Texts: []string{"ab", "abcd"}})
	if err != nil || len(vecs) != 2 || !slices.Equal(vecs[1], []float32{4, 1, 1}) {
		t.Fatalf("Embed = %v, %v", vecs, err)
	}
	if _, err := emb.Embed(ctx, sdk.EmbedRequest{Purpose: sdk.EmbedDocument}); !errors.Is(err, sdk.ErrInvalid) {
		t.Fatalf("Embed of no texts = %v, want invalid", err)
	}

	// A retried request shows as a warning in the instance's status.
	limited.Store(true)
	if _, err := emb.Embed(ctx, sdk.EmbedRequest{Purpose: sdk.EmbedQuery, Texts: []string{"limited"}}); err != nil {
		t.Fatalf("Embed past one 429: %v", err)
	}
	waitStatus(t, sup, "vec", "a warning about the retry", func(s pluginhost.Status) bool {
		return slices.ContainsFunc(s.Warnings, func(w string) bool { return strings.Contains(w, "embeddings request retried") })
	})

	var st pluginhost.Status
	for _, s := range sup.Status() {
		if s.Instance == "vec" {
			st = s
		}
	}
	if st.Kind != sdk.KindEmbedder || st.Plugin != "openai" || st.State != pluginhost.StateReady || st.Capabilities == nil || st.Pid == 0 {
		t.Fatalf("status %+v", st)
	}
	// A plugin killed between calls is restarted under the next one,
	// which is retried: embedding has no side effect.
	if err := syscall.Kill(st.Pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitExited(t, st.Pid)
	callCtx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if _, err := emb.Embed(callCtx, sdk.EmbedRequest{Purpose: sdk.EmbedQuery, Texts: []string{"after"}}); err != nil {
		t.Fatalf("Embed after the plugin died: %v", err)
	}

	mu.Lock()
	defer mu.Unlock()
	want := []string{"vec embedder_info ok", "vec embed ok", "vec embed invalid_argument", "vec embed ok"}
	if len(seen) < 5 || !slices.Equal(seen[:4], want) || seen[len(seen)-1] != "vec embed ok" {
		t.Fatalf("observed %q, want %q then the call after the restart ok", seen, want)
	}
}

// TestEmbedModelFollowsTheProcess: EmbedModel answers the model of the
// process that made the vectors. The wordvec plugin's model id carries
// its table's hash; a table replaced on disk is read by the process that
// replaces one killed, and its answers come under the new id, not the one
// read from the process before.
func TestEmbedModelFollowsTheProcess(t *testing.T) {
	dir := t.TempDir()
	testbin.InstallPlugin(t, dir, testbin.Build(t, "./plugins/wordvec/cmd/memhost-plugin-wordvec"))
	table := filepath.Join(t.TempDir(), "table.wvt")
	writeTable := func(scale float32) {
		t.Helper()
		td := wordvec.TableData{
			Dims: 3, SIFA: 1e-3, Words: []string{"evening", "routine"}, Freq: []float32{0.2, 0.1},
			Scale: []float32{scale, scale}, Vecs: []int8{127, 0, 0, 0, 127, 0},
		}
		data, err := td.Encode()
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(table, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	writeTable(0.01)
	sup := pluginhost.New([]pluginhost.Entry{discoverOne(t, dir)}, pluginhost.Options{
		StartOptions: pluginhost.StartOptions{Logger: hclog.NewNullLogger(), Dir: t.TempDir()}, HealthInterval: time.Hour,
	})
	t.Cleanup(sup.Close)
	cfg := json.RawMessage(fmt.Sprintf(`{"table": %q}`, table))
	if err := sup.Start(context.Background(), []pluginhost.Spec{{Kind: sdk.KindEmbedder, Name: "vec", Plugin: "wordvec", Config: cfg}}); err != nil {
		t.Fatal(err)
	}
	emb, err := sup.Embedder("vec")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	req := sdk.EmbedRequest{Purpose: sdk.EmbedQuery, Texts: []string{"evening routine"}}
	_, before, err := emb.EmbedModel(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if info, err := emb.EmbedderInfo(ctx); err != nil || info.Model != before {
		t.Fatalf("EmbedModel answered model %q, EmbedderInfo %q (%v)", before, info.Model, err)
	}
	writeTable(0.02)
	var pid int
	for _, s := range sup.Status() {
		if s.Instance == "vec" {
			pid = s.Pid
		}
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitExited(t, pid)
	vecs, after, err := emb.EmbedModel(ctx, req)
	if err != nil || len(vecs) != 1 {
		t.Fatalf("EmbedModel after the restart: %v, %v", vecs, err)
	}
	info, err := emb.EmbedderInfo(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if after == before || after != info.Model {
		t.Fatalf("after the restart: EmbedModel answered model %q (before %q), the process declares %q", after, before, info.Model)
	}
}

// TestEmbedRunsUnderItsCallersDeadline: an embed call runs under its
// caller's deadline when that is later than the call timeout (a backlog
// step gives a page 30 s), as a compaction does; without one the call
// timeout still bounds it. Under the 10 s call timeout, an endpoint that
// embedded a page in 12 s, well within the plugin's own 30 s request
// timeout, failed every backlog step and the realm was never embedded.
func TestEmbedRunsUnderItsCallersDeadline(t *testing.T) {
	const callTimeout = 200 * time.Millisecond
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// An endpoint slower than the call timeout, though not than the
		// plugin's request timeout: it answers once the call timeout has
		// passed, or gives up when the request does.
		select {
		case <-time.After(5 * callTimeout):
		case <-r.Context().Done():
			return
		}
		var req struct{ Input []string }
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		data := make([]map[string]any, len(req.Input))
		for i := range req.Input {
			data[i] = map[string]any{"index": i, "embedding": []float32{1, 2, 3}}
		}
		json.NewEncoder(w).Encode(map[string]any{"data": data})
	}))
	t.Cleanup(srv.Close)
	dir := t.TempDir()
	testbin.InstallPlugin(t, dir, testbin.Build(t, "./plugins/openai/cmd/memhost-plugin-openai"))
	sup := pluginhost.New([]pluginhost.Entry{discoverOne(t, dir)}, pluginhost.Options{
		StartOptions:   pluginhost.StartOptions{Logger: hclog.NewNullLogger(), Dir: t.TempDir()},
		HealthInterval: time.Hour, CallTimeout: callTimeout,
	})
	t.Cleanup(sup.Close)
	cfg := json.RawMessage(fmt.Sprintf(`{"base_url": %q, "model": "m", "dimensions": 3, "max_retries": 0}`, srv.URL+"/v1"))
	if err := sup.Start(context.Background(), []pluginhost.Spec{{Kind: sdk.KindEmbedder, Name: "vec", Plugin: "openai", Config: cfg}}); err != nil {
		t.Fatal(err)
	}
	emb, err := sup.Embedder("vec")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := emb.EmbedderInfo(context.Background()); err != nil {
		t.Fatal(err)
	}
	req := sdk.EmbedRequest{Purpose: sdk.EmbedDocument, Texts: []string{"a page of the backlog"}}
	for _, tc := range []struct {
		name     string
		deadline time.Duration // 0: none
		want     error
	}{
		{"a caller's later deadline", time.Minute, nil},
		{"no caller deadline", 0, sdk.ErrDeadline},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			if tc.deadline > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, tc.deadline)
				defer cancel()
			}
			for _, call := range []struct {
				name string
				f    func() error
			}{
				{"Embed", func() error { _, err := emb.Embed(ctx, req); return err }},
				{"EmbedModel", func() error { _, _, err := emb.EmbedModel(ctx, req); return err }},
			} {
				err := call.f()
				if (tc.want == nil && err != nil) || (tc.want != nil && !errors.Is(err, tc.want)) {
					t.Errorf("%s = %v, want %v", call.name, err, tc.want)
				}
			}
		})
	}
}
