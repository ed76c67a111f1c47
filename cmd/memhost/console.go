package main

import (
	"net/http"
	"slices"

	"github.com/memhost/memhost/internal/config"
	"github.com/memhost/memhost/internal/console"
)

// handler is the host's root handler: the API, with the operator console
// at /ui unless the config turns it off, for local names only when the
// host has no tokens.
func (h *host) handler(cfg *config.Config) http.Handler {
	root := h.rootHandler(cfg)
	// Without tokens the host trusts whoever reaches it, and a page whose
	// name rebinds to it reaches it: on loopback, and as much on a port a
	// container publishes there under allow_insecure_listen.
	if len(cfg.Tokens) == 0 {
		return h.server.LocalHostsOnly(root, cfg.Server.AllowedHosts)
	}
	return root
}

func (h *host) rootHandler(cfg *config.Config) http.Handler {
	api := h.server.Handler()
	if !cfg.UI {
		return api
	}
	realms := []string{cfg.DefaultRealm}
	for _, r := range cfg.Realms {
		if !slices.Contains(realms, r.Name) {
			realms = append(realms, r.Name)
		}
	}
	var tokens []console.Token
	for _, t := range cfg.Tokens {
		tokens = append(tokens, console.Token{Name: t.Name, Secret: t.Secret, Realms: t.Realms, Application: t.Role == config.RoleApplication})
	}
	ui, err := console.New(console.Options{API: api, Tokens: tokens, Realms: realms, Logger: h.logger.Named("console"), Shared: h.stores.console})
	if err != nil {
		// The templates are embedded and parsed by the tests: this is a
		// build defect, not an operator's.
		h.logger.Error("console disabled", "error", err)
		return api
	}
	h.console = ui
	mux := http.NewServeMux()
	mux.Handle("/ui/", ui)
	mux.Handle("/ui", http.RedirectHandler(console.Prefix+"/", http.StatusSeeOther))
	mux.Handle("/", api)
	// This mux would redirect an unclean path before the API's own check
	// ran: the check goes in front of it too.
	return h.server.Front(mux)
}
