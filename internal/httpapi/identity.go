package httpapi

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/memhost/memhost/sdk"
	"github.com/memhost/memhost/sdk/host"
)

// A token may be bound to identities (Token.Identities): it then acts only
// as them, on every surface, and touches no other identity's own scope. A
// token without identities acts as any identity of its realms (an agent
// runtime serving many users names the user on each call).

// bound reports whether the caller's token is bound to identities.
func (c caller) bound() bool { return c.token != nil && len(c.token.Identities) > 0 }

// actAs refuses an identity the caller's token is not bound to.
func (c caller) actAs(id string) error {
	if !c.bound() || slices.Contains(c.token.Identities, id) {
		return nil
	}
	return fmt.Errorf("token %q may act only as identity %s, not as %q: %w", c.token.Name, quoteAll(c.token.Identities), id, sdk.ErrPermission)
}

// touchScope refuses another identity's own scope to a bound token; the
// shared scopes stay under the role rules.
func (c caller) touchScope(sc sdk.Scope) error {
	if !c.bound() {
		return nil
	}
	class, owner, err := sc.Parse()
	if err != nil || class != sdk.ScopeIdentity || slices.Contains(c.token.Identities, owner) {
		return nil
	}
	return fmt.Errorf("token %q may act only as identity %s; scope %q belongs to another identity: %w", c.token.Name, quoteAll(c.token.Identities), sc, sdk.ErrPermission)
}

// requireRealmWide refuses a realm-wide operation (export, import) to a
// bound token: it would reach every identity's records.
func (c caller) requireRealmWide(what string) error {
	if !c.bound() {
		return nil
	}
	return fmt.Errorf("token %q is bound to identity %s; %s reach every identity of a realm and need a token without identity: %w", c.token.Name, quoteAll(c.token.Identities), what, sdk.ErrPermission)
}

func quoteAll(ids []string) string {
	q := make([]string, len(ids))
	for i, id := range ids {
		q[i] = fmt.Sprintf("%q", id)
	}
	return strings.Join(q, " or ")
}

// ownRecord refuses a bound token a record in another identity's scope,
// fetching it to learn its scope; a record that does not exist passes (the
// operation answers as it would). A provider that cannot fetch leaves the
// scope unknown, so a bound token is refused.
func (s *Server) ownRecord(ctx context.Context, c caller, realm, id string, p sdk.Provider) error {
	if !c.bound() {
		return nil
	}
	getter, ok := host.ProviderOf(p).Getter()
	if !ok {
		return fmt.Errorf("token %q is bound to identity %s and the provider of realm %q cannot tell a record's scope: %w", c.token.Name, quoteAll(c.token.Identities), realm, sdk.ErrPermission)
	}
	recs, err := getter.Get(ctx, realm, []string{id})
	if err != nil {
		return err
	}
	for _, r := range recs {
		if err := c.touchScope(r.Scope); err != nil {
			return err
		}
	}
	return nil
}

// Query parameters of /mcp, for MCP clients that cannot send headers.
const (
	QueryIdentity = "identity"
	QueryRealm    = "realm"
)

// mcpHeader folds /mcp?identity=&realm= into the request's headers; a
// header and a parameter that disagree are refused.
func mcpHeader(r *http.Request) error {
	q := r.URL.Query()
	for _, p := range []struct{ param, header string }{{QueryIdentity, HeaderIdentity}, {QueryRealm, HeaderRealm}} {
		v := q.Get(p.param)
		if v == "" {
			continue
		}
		if h := r.Header.Get(p.header); h != "" && h != v {
			return badRequest("the %s header (%q) and ?%s= (%q) name different values", p.header, h, p.param, v)
		}
		r.Header.Set(p.header, v)
	}
	return nil
}
