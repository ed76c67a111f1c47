package main

import (
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/memhost/memhost/internal/config"
	"github.com/memhost/memhost/sdk"
)

// checkTokenIdentity holds `memhost mcp` over stdio to the token rules of
// the HTTP surfaces when the config declares tokens: the token in
// MEMHOST_TOKEN must exist, reach id's realm and, when it is bound to
// identities, name id among them. It answers the token's name, to which
// the tools' proposals are counted as /mcp counts them ("" without
// tokens).
func checkTokenIdentity(cfg *config.Config, id sdk.Identity) (string, error) {
	if !cfg.RequiresAuth() {
		return "", nil
	}
	secret := os.Getenv(TokenEnv)
	if secret == "" {
		return "", fmt.Errorf("the config declares tokens: set %s to the token the tools act under", TokenEnv)
	}
	t, ok := cfg.TokenFor(secret)
	if !ok {
		return "", fmt.Errorf("the token in %s is not one the config declares", TokenEnv)
	}
	if !t.Allows(id.Realm) {
		return "", fmt.Errorf("token %q may not access realm %q: %w", t.Name, id.Realm, sdk.ErrPermission)
	}
	if len(t.Identities) > 0 && !slices.Contains(t.Identities, id.ID) {
		return "", fmt.Errorf("token %q may act only as identity %s, not as %q: %w", t.Name, strings.Join(t.Identities, " or "), id.ID, sdk.ErrPermission)
	}
	return t.Name, nil
}
