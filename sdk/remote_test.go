package sdk

import (
	"errors"
	"io"
	"strings"
	"testing"
)

// TestRemoteFlags: serve --listen refuses plaintext off loopback, half a
// TLS setup, and a listen address without a port.
func TestRemoteFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string // "" when accepted
	}{
		{[]string{"--listen", "127.0.0.1:7400"}, ""},
		{[]string{"--listen", "[::1]:7400"}, ""},
		{[]string{"--listen", "localhost:0"}, ""},
		{[]string{"--listen", "10.0.0.5:7400", "--tls-cert", "c", "--tls-key", "k", "--tls-client-ca", "ca"}, ""},
		{[]string{"--listen", "0.0.0.0:7400"}, "refusing to serve without TLS"},
		{[]string{"--listen", ":7400"}, "refusing to serve without TLS"},
		{[]string{"--listen", "memory.internal:7400"}, "refusing to serve without TLS"},
		{[]string{"--listen", "10.0.0.5:7400", "--tls-cert", "c", "--tls-key", "k"}, "needs all of"},
		{[]string{"--listen", "127.0.0.1"}, "missing port"},
		{[]string{}, "--listen is required"},
		{[]string{"--listen", "127.0.0.1:1", "extra"}, `unexpected argument "extra"`},
	} {
		_, err := parseRemoteFlags(tc.args, io.Discard)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("serve %v: %v, want it accepted", tc.args, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("serve %v: %v, want an error saying %q", tc.args, err, tc.want)
		}
	}
	_, err := parseRemoteFlags([]string{"--listen", "0.0.0.0:1"}, io.Discard)
	if !errors.Is(err, errPlaintextOffLoopback) {
		t.Errorf("plaintext off loopback: %v, want errPlaintextOffLoopback", err)
	}
}
