package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"strconv"
	"strings"
	"testing"

	"github.com/memhost/memhost/sdk"
)

// TestConnectFailureSaysWhy: a connection string naming a host that does
// not resolve, or a server that never answers, is refused at Configure as
// unavailable, saying which, never that the database refused, and never
// the password.
func TestConnectFailureSaysWhy(t *testing.T) {
	silent, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	port := silent.Addr().(*net.TCPAddr).Port
	for _, c := range []struct{ dsn, want string }{
		{"postgres://u:hunter2@nonexistent.invalid:5432/db?sslmode=disable", "host name does not resolve"},
		{"postgres://u:hunter2@127.0.0.1:" + strconv.Itoa(port) + "/db?sslmode=disable&connect_timeout=1", "did not answer a new connection in time"},
	} {
		t.Setenv("MEMHOST_CONNECT_FAILURE_DSN", c.dsn)
		s := New()
		err := s.Configure(context.Background(), json.RawMessage(`{"dsn_env":"MEMHOST_CONNECT_FAILURE_DSN"}`))
		s.Close()
		if !errors.Is(err, sdk.ErrUnavailable) || !strings.Contains(err.Error(), c.want) ||
			strings.Contains(err.Error(), "refused") || strings.Contains(err.Error(), "hunter2") {
			t.Errorf("Configure with %s: %v, want unavailable saying %q", c.dsn, err, c.want)
		}
	}
}
