package markdown

import (
	"context"
	"testing"

	"github.com/memhost/memhost/sdk"
	"github.com/memhost/memhost/sdk/host"
)

// served serves an already configured p through the SDK's server, as
// sdk.Serve does in production, so bad input meets the SDK's validation
// (realms, scopes, ids, batch sizes, limits) before the provider.
func served(t testing.TB, p sdk.Plugin) host.FullProvider {
	t.Helper()
	conn, err := host.ServeInProcess(context.Background(), p, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(conn.Close)
	fp, err := conn.FullProvider()
	if err != nil {
		t.Fatal(err)
	}
	return fp
}
