package httpapi

import (
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"

	"github.com/memhost/memhost/sdk"
)

// LocalHostsOnly wraps h, the root handler of a server without tokens, to
// refuse with 403 a request whose Host names neither localhost nor an IP
// address. Such a server trusts whoever reaches it, and a web page whose
// own name an attacker rebinds to 127.0.0.1 reaches it as same-origin:
// its browser sends that name as the Host, so cross-origin protection
// passes it and it could read and write every realm. Clients on the
// machine address it as 127.0.0.1, [::1] or localhost (and *.localhost,
// which never leaves the machine); allowed adds the names a proxy in
// front of it forwards, or a container network's service names.
func (s *Server) LocalHostsOnly(h http.Handler, allowed []string) http.Handler {
	names := make(map[string]bool, len(allowed))
	for _, a := range allowed {
		names[strings.ToLower(a)] = true
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if localHost(r.Host, names) {
			h.ServeHTTP(w, r)
			return
		}
		s.refuseUnrouted(w, r, fmt.Errorf("this host has no tokens and answers only requests addressed to localhost, an IP address or a name in server.allowed_hosts, not to %q: %w", r.Host, sdk.ErrPermission))
	})
}

// localHost reports whether host, a request's Host (with or without a
// port), is localhost, a name under .localhost, one of allowed
// (lowercase), an IP address, or empty (an HTTP/1.0 request, which no
// browser sends).
func localHost(host string, allowed map[string]bool) bool {
	if host == "" {
		return true
	}
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.TrimSuffix(strings.TrimPrefix(host, "["), "]"), ".")
	if _, err := netip.ParseAddr(host); err == nil {
		return true
	}
	host = strings.ToLower(host)
	return host == "localhost" || strings.HasSuffix(host, ".localhost") || allowed[host]
}
