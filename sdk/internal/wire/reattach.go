package wire

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
)

// ReattachEnv names the environment variable that makes the host attach
// to plugins a developer started by hand (under a debugger) instead of
// starting them: a JSON object from plugin name to ReattachTarget, which
// a plugin started with --debug prints ready to export.
const ReattachEnv = "MEMHOST_REATTACH_PLUGINS"

// ReattachTarget is where a plugin started with --debug serves.
type ReattachTarget struct {
	Protocol        string `json:"protocol"`
	ProtocolVersion int    `json:"protocol_version"`
	Pid             int    `json:"pid"`
	Network         string `json:"network"`
	Address         string `json:"address"`
}

// ReattachLine is the line a plugin started with --debug prints: a shell
// assignment of ReattachEnv naming only itself.
func ReattachLine(name string, t ReattachTarget) string {
	data, _ := json.Marshal(map[string]ReattachTarget{name: t})
	return ReattachEnv + "='" + string(data) + "'"
}

// ParseReattach reads ReattachEnv's value. A debug plugin serves without
// TLS, so only a Unix socket or a loopback TCP address is accepted.
func ParseReattach(value string) (map[string]ReattachTarget, error) {
	var out map[string]ReattachTarget
	if err := json.Unmarshal([]byte(value), &out); err != nil {
		return nil, fmt.Errorf("%s: %v (want the line a plugin started with --debug prints)", ReattachEnv, err)
	}
	for name, t := range out {
		if err := t.check(); err != nil {
			return nil, fmt.Errorf("%s: plugin %s: %v", ReattachEnv, name, err)
		}
	}
	return out, nil
}

func (t ReattachTarget) check() error {
	switch {
	case t.Protocol != "grpc":
		return fmt.Errorf("protocol %q, want grpc", t.Protocol)
	case t.ProtocolVersion != ProtocolVersion:
		return fmt.Errorf("protocol version %d, this host speaks %d", t.ProtocolVersion, ProtocolVersion)
	case t.Pid <= 0:
		return fmt.Errorf("pid %d is not a process id", t.Pid)
	case t.Network == "unix":
		if !strings.HasPrefix(t.Address, "/") {
			return fmt.Errorf("unix socket %q is not an absolute path", t.Address)
		}
	case t.Network == "tcp":
		host, port, err := net.SplitHostPort(t.Address)
		if ip := net.ParseIP(host); err != nil || ip == nil || !ip.IsLoopback() {
			return fmt.Errorf("tcp address %q is not on loopback: a debug plugin serves without TLS", t.Address)
		}
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
			return fmt.Errorf("tcp address %q has no port from 1 to 65535", t.Address)
		}
	default:
		return fmt.Errorf("network %q, want unix or tcp", t.Network)
	}
	return nil
}

// Addr is the target's address.
func (t ReattachTarget) Addr() (net.Addr, error) {
	if t.Network == "unix" {
		return net.ResolveUnixAddr("unix", t.Address)
	}
	return net.ResolveTCPAddr("tcp", t.Address)
}

// IsLoopbackHost reports whether host (an address's host part) is a
// loopback IP or "localhost": only there may a plugin connection go
// without TLS.
func IsLoopbackHost(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// LoadTLS reads one end's mutual TLS files: its certificate and key, and
// the CA certificates (or pinned self-signed ones) the peer's certificate
// must chain to, all PEM. The files are read at each call, so a renewed
// certificate is used from the next connection on.
func LoadTLS(certFile, keyFile, caFile string) (tls.Certificate, *x509.CertPool, error) {
	pair, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return tls.Certificate{}, nil, fmt.Errorf("certificate %s and key %s: %v", certFile, keyFile, err)
	}
	data, err := os.ReadFile(caFile)
	if err != nil {
		return tls.Certificate{}, nil, fmt.Errorf("CA file: %v", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(data) {
		return tls.Certificate{}, nil, fmt.Errorf("CA file %s: no PEM certificate in it", caFile)
	}
	return pair, pool, nil
}
