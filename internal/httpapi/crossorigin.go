package httpapi

import (
	"fmt"
	"net/http"

	"github.com/memhost/memhost/sdk"
)

// refuseCrossOrigin refuses, with 403, a write a browser makes for a page
// of another origin (http.CrossOriginProtection: Sec-Fetch-Site, else
// Origin against Host). Every route reads its body as JSON whatever the
// Content-Type, as curl -d sends it, so without this a page could have
// its visitor's browser store memory in a loopback server without tokens
// through a plain form or no-cors fetch, which needs no preflight. curl,
// the SDKs and the console send neither header and are served as before;
// reads stay open (the browser keeps their answers from the page).
func (s *Server) refuseCrossOrigin(h http.Handler) http.Handler {
	p := http.NewCrossOriginProtection()
	p.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.refuseUnrouted(w, r, fmt.Errorf("a cross-origin request from a browser may not %s %s: %w", r.Method, r.URL.Path, sdk.ErrPermission))
	}))
	return p.Handler(h)
}
