package conformance

import (
	"context"
	"testing"

	"github.com/memhost/memhost/sdk"
	"github.com/memhost/memhost/sdk/host"
)

// Served serves an already configured p through the SDK's server, as
// sdk.Serve does in production, and answers the host-side client. A unit
// test calling through it meets the SDK's request validation (realms,
// scopes, ids, batch sizes, limits) before the provider, as a real caller
// would. The connection closes when the test ends.
func Served(t testing.TB, p sdk.Plugin) *Client {
	t.Helper()
	conn, err := host.ServeInProcess(context.Background(), p, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(conn.Close)
	c, err := ClientOf(conn)
	if err != nil {
		t.Fatal(err)
	}
	return c
}
