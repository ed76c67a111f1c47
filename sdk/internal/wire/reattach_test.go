package wire

import (
	"net"
	"strings"
	"testing"
)

func TestParseReattach(t *testing.T) {
	line := ReattachLine("sqlite", ReattachTarget{Protocol: "grpc", ProtocolVersion: 1, Pid: 42, Network: "unix", Address: "/tmp/mhdebug-1/plugin1"})
	value, ok := strings.CutPrefix(line, ReattachEnv+"='")
	if !ok {
		t.Fatalf("line %q does not assign %s", line, ReattachEnv)
	}
	got, err := ParseReattach(strings.TrimSuffix(value, "'"))
	if err != nil || got["sqlite"].Pid != 42 || got["sqlite"].Address != "/tmp/mhdebug-1/plugin1" {
		t.Fatalf("ParseReattach(its own line) = %+v, %v", got, err)
	}
	for _, tc := range []struct{ value, want string }{
		{`[]`, "want the line a plugin started with --debug prints"},
		{`{"p":{"protocol":"netrpc","protocol_version":1,"pid":1,"network":"unix","address":"/s"}}`, `protocol "netrpc"`},
		{`{"p":{"protocol":"grpc","protocol_version":2,"pid":1,"network":"unix","address":"/s"}}`, "protocol version 2"},
		{`{"p":{"protocol":"grpc","protocol_version":1,"pid":0,"network":"unix","address":"/s"}}`, "pid 0"},
		{`{"p":{"protocol":"grpc","protocol_version":1,"pid":1,"network":"unix","address":"s"}}`, "not an absolute path"},
		{`{"p":{"protocol":"grpc","protocol_version":1,"pid":1,"network":"tcp","address":"10.0.0.1:4000"}}`, "not on loopback"},
		{`{"p":{"protocol":"grpc","protocol_version":1,"pid":1,"network":"tcp","address":"localhost"}}`, "not on loopback"},
		{`{"p":{"protocol":"grpc","protocol_version":1,"pid":1,"network":"tcp","address":"127.0.0.1:99999"}}`, "no port from 1 to 65535"},
		{`{"p":{"protocol":"grpc","protocol_version":1,"pid":1,"network":"tcp","address":"127.0.0.1:"}}`, "no port from 1 to 65535"},
		{`{"p":{"protocol":"grpc","protocol_version":1,"pid":1,"network":"tcp","address":"[::1]:http"}}`, "no port from 1 to 65535"},
		{`{"p":{"protocol":"grpc","protocol_version":1,"pid":1,"network":"udp","address":"127.0.0.1:1"}}`, `network "udp"`},
	} {
		if _, err := ParseReattach(tc.value); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParseReattach(%s) = %v, want an error saying %q", tc.value, err, tc.want)
		}
	}
	if _, err := ParseReattach(`{"p":{"protocol":"grpc","protocol_version":1,"pid":1,"network":"tcp","address":"127.0.0.1:4000"}}`); err != nil {
		t.Errorf("loopback TCP refused: %v", err)
	}
}

// FuzzParseReattach: any value is parsed or refused, never a panic, and
// what is accepted has an address to dial: a Unix socket path, or a
// loopback IP with a port from 1 to 65535.
func FuzzParseReattach(f *testing.F) {
	f.Add(`{"p":{"protocol":"grpc","protocol_version":1,"pid":1,"network":"unix","address":"/s"}}`)
	f.Add(`{"p":{"protocol":"grpc","protocol_version":1,"pid":1,"network":"tcp","address":"[::1]:1"}}`)
	f.Add(`{}`)
	f.Fuzz(func(t *testing.T, value string) {
		targets, err := ParseReattach(value)
		if err != nil {
			return
		}
		for name, target := range targets {
			addr, err := target.Addr()
			if err != nil {
				t.Fatalf("accepted target %s has no address: %v", name, err)
			}
			if tcp, ok := addr.(*net.TCPAddr); ok && (!tcp.IP.IsLoopback() || tcp.Port < 1) {
				t.Fatalf("accepted target %s at %v, not a loopback port", name, addr)
			}
		}
	})
}
