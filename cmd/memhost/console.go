package main

import (
	"net/http"

	"github.com/memhost/memhost/internal/config"
)

// handler is the host's root handler: the API, with the operator console
// at /ui unless the config turns it off.
func (h *host) handler(cfg *config.Config) http.Handler {
	return h.server.Handler()
}
