package mcpserver

import (
	"context"
	"net/http"
	"testing"

	"github.com/memhost/memhost/coordinator"
	"github.com/memhost/memhost/coordinator/coordinatortest"
	"github.com/memhost/memhost/sdk"
)

// aliceOptions serve provider as the default realm to identity alice,
// through a coordinator closed when the test ends.
func aliceOptions(t *testing.T, provider *coordinatortest.Provider) Options {
	t.Helper()
	coord, err := coordinator.New(coordinator.DefaultConfig(), coordinator.Options{Providers: coordinator.RealmProviders{"default": provider}})
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
