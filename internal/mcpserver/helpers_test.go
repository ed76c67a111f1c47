package mcpserver

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"sync"
	"testing"

	"github.com/memhost/memhost/coordinator"
	"github.com/memhost/memhost/coordinator/coordinatortest"
	"github.com/memhost/memhost/sdk"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// aliceOptions serve provider as the default realm to identity alice,
// through a coordinator closed when the test ends.
func aliceOptions(t *testing.T, provider *coordinatortest.Provider) Options {
	t.Helper()
	coord, err := coordinator.New(testConfig(), coordinator.Options{Providers: coordinator.RealmProviders{"default": provider}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { coord.Close(context.Background()) })
	return Options{
		Provider:    func(string) (sdk.Provider, error) { return provider, nil },
		Coordinator: coord,
		Bind: func(http.Header) (Caller, error) {
			return Caller{Identity: sdk.Identity{Realm: "default", ID: "alice"}}, nil
		},
	}
}

// testConfig is the coordinator's default configuration with a recall
// timeout of 30 s, not 500 ms: a test's memory_recall must not fail
// because a loaded machine starved it for half a second.
func testConfig() coordinator.Config {
	cfg := coordinator.DefaultConfig()
	cfg.RecallTimeout = coordinator.MaxRecallTimeout
	return cfg
}

// forgetLog is a TraceForgetter that keeps what it was asked.
type forgetLog struct {
	mu   sync.Mutex
	asks []string
}

func (f *forgetLog) Forget(_ context.Context, realm string, ids []string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, id := range ids {
		f.asks = append(f.asks, realm+"/"+id)
	}
	return nil
}

// TestForgetBlanksTheTraces: memory_forget blanks the record's title in
// the turn traces too, as DELETE /v1/records/{id} does.
func TestForgetBlanksTheTraces(t *testing.T) {
	provider := coordinatortest.NewProvider(coordinatortest.AllCapabilities...)
	id := provider.MustAdd("default", sdk.Record{Scope: "identity:alice", Kind: sdk.KindFact, Title: "kept", Body: "b"})[0]
	opts := aliceOptions(t, provider)
	traces := &forgetLog{}
	opts.Traces = traces
	cs := connectWith(t, opts)
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: ToolForget, Arguments: json.RawMessage(`{"id":"` + id + `"}`)})
	if err != nil || res.IsError {
		t.Fatalf("forget: %v %+v", err, res)
	}
	if !slices.Equal(traces.asks, []string{"default/" + id}) {
		t.Fatalf("the traces were asked to forget %v, want [default/%s]", traces.asks, id)
	}
}
