package mcpserver

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/memhost/memhost/coordinator"
	"github.com/memhost/memhost/coordinator/coordinatortest"
	"github.com/memhost/memhost/sdk"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// connectWith serves the tools built from opts to an in-memory client.
func connectWith(t *testing.T, opts Options) *mcp.ClientSession {
	t.Helper()
	st, ct := mcp.NewInMemoryTransports()
	if _, err := New(opts).Connect(t.Context(), st, nil); err != nil {
		t.Fatal(err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test"}, nil).Connect(t.Context(), ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// TestToolCallsHaveADeadline: every tool call runs under a deadline, as
// every /v1 request does: memory_recall under the coordinator's recall
// timeout (a hung plugin fails it quickly, as POST /v1/recall), the
// others under the call timeout. Before, a tool's provider calls had no
// deadline at all, and over HTTP the SDK does not cancel a call whose
// client went away, so a hung provider held the call, its goroutine and
// its connection for as long as it hung.
func TestToolCallsHaveADeadline(t *testing.T) {
	provider := coordinatortest.NewProvider(coordinatortest.AllCapabilities...)
	id := provider.MustAdd("default", sdk.Record{Scope: "identity:alice", Kind: sdk.KindFact, Title: "kept", Body: "b"})[0]
	opts := aliceOptions(t, provider)
	// Both bounds generous, so that neither passes before the provider is
	// reached on a loaded machine (the default recall timeout, 500 ms,
	// did not promise it), and apart, so that a recall under the call
	// timeout instead of the recall timeout is told apart.
	cfg := coordinator.DefaultConfig()
	cfg.RecallTimeout = 20 * time.Second
	coord, err := coordinator.New(cfg, coordinator.Options{Providers: coordinator.RealmProviders{"default": provider}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { coord.Close(context.Background()) })
	opts.Coordinator = coord
	opts.CallTimeout = 2 * time.Minute
	cs := connectWith(t, opts)
	recallLimit := cfg.RecallTimeout
	cases := []struct {
		tool, args, method string
		limit              time.Duration
	}{
		{ToolRecall, `{"query":"kept"}`, coordinatortest.MethodRecall, recallLimit},
		{ToolRemember, `{"title":"t","body":"b"}`, coordinatortest.MethodRemember, opts.CallTimeout},
		{ToolForget, `{"id":"` + id + `"}`, coordinatortest.MethodGet, opts.CallTimeout},
		{ToolIndex, `{}`, coordinatortest.MethodManifest, opts.CallTimeout},
	}
	for _, tc := range cases {
		t.Run(tc.tool, func(t *testing.T) {
			var left time.Duration
			provider.SetHook(tc.method, func(ctx context.Context, _ any) error {
				if dl, ok := ctx.Deadline(); ok {
					left = time.Until(dl)
				}
				return nil
			})
			defer provider.SetHook(tc.method, nil)
			res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: tc.tool, Arguments: json.RawMessage(tc.args)})
			if err != nil || res.IsError {
				t.Fatalf("%s: %v %+v", tc.tool, err, res)
			}
			if left <= 0 || left > tc.limit {
				t.Fatalf("the provider's %s had a deadline %v away, want one within %v", tc.method, left, tc.limit)
			}
		})
	}
}
