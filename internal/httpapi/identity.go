package httpapi

import (
	"context"
	"fmt"
	"github.com/memhost/memhost/internal/proposal"
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

// identities are the identities a bound token acts as; nil (every
// identity) for any other caller.
func (c caller) identities() []string {
	if !c.bound() {
		return nil
	}
	return c.token.Identities
}

// actAs refuses an identity the caller's token is not bound to.
func (c caller) actAs(id string) error {
	if !c.bound() || slices.Contains(c.token.Identities, id) {
		return nil
	}
	return fmt.Errorf("token %q may act only as identity %s, not as %q: %w", c.token.Name, quoteAll(c.token.Identities), id, sdk.ErrPermission)
}

// touchScope refuses another identity's own scope to a bound token; the
// shared scopes stay under the role rules. A scope that does not parse
// (a provider may answer a stored one padded or case-folded) is refused
// too: it may be another identity's in another form.
func (c caller) touchScope(sc sdk.Scope) error {
	if !c.bound() {
		return nil
	}
	class, owner, err := sc.Parse()
	if err != nil {
		return fmt.Errorf("token %q may act only as identity %s; scope %q is not a scope it reads: %w", c.token.Name, quoteAll(c.token.Identities), sc, sdk.ErrPermission)
	}
	if class != sdk.ScopeIdentity || slices.Contains(c.token.Identities, owner) {
		return nil
	}
	return fmt.Errorf("token %q may act only as identity %s; scope %q belongs to another identity: %w", c.token.Name, quoteAll(c.token.Identities), sc, sdk.ErrPermission)
}

// touchStored is touchScope for a stored record the caller named by id
// alone, which for a bound token also refuses a shared scope none of its
// identities reads (another mob's, another operator's), as a write there
// is refused. Either answers as a missing record does: a refusal would
// confirm that the id exists, and ids of archived conversations can be
// computed from a guessed conversation name.
func (s *Server) touchStored(ctx context.Context, c caller, realm, id string, sc sdk.Scope) error {
	hidden, err := s.hides(ctx, c, realm, sc)
	if err != nil {
		return err
	}
	if hidden {
		return recordNotFound(realm, id)
	}
	return nil
}

// hides reports whether a record of scope sc is hidden from a bound
// token: another identity's own scope, or a mob or operator scope none of
// its identities reads. Nothing is hidden from any other caller.
func (s *Server) hides(ctx context.Context, c caller, realm string, sc sdk.Scope) (bool, error) {
	v := readView{c: c}
	if c.bound() && sharedScope(sc) {
		var err error
		if v.readable, err = s.readable(ctx, c, realm); err != nil {
			return false, err
		}
	}
	return v.hides(sc), nil
}

// readView is what a caller may read of one realm, for the answers that
// list many records (browsing, scope counts, proposals): the scopes a
// bound token's identities read are resolved once per request.
type readView struct {
	c        caller
	readable []sdk.Scope // the bound token's identities' scopes
}

// readView resolves c's view of realm.
func (s *Server) readView(ctx context.Context, c caller, realm string) (readView, error) {
	v := readView{c: c}
	if !c.bound() {
		return v, nil
	}
	var err error
	v.readable, err = s.readable(ctx, c, realm)
	return v, err
}

// hides is Server.hides on the resolved view.
func (v readView) hides(sc sdk.Scope) bool {
	if v.c.touchScope(sc) != nil {
		return true
	}
	return v.c.bound() && sharedScope(sc) && !slices.Contains(v.readable, sc)
}

// checkScope refuses a scope the view hides, for a request that names it.
func (v readView) checkScope(sc sdk.Scope) error {
	if err := v.c.touchScope(sc); err != nil {
		return err
	}
	if v.hides(sc) {
		return fmt.Errorf("token %q acts as identity %s, which does not read scope %q: %w", v.c.token.Name, quoteAll(v.c.token.Identities), sc, sdk.ErrPermission)
	}
	return nil
}

// sharedScope reports whether sc is a mob's or an operator's, which a
// bound token reads only where one of its identities does.
func sharedScope(sc sdk.Scope) bool {
	class, _, err := sc.Parse()
	return err == nil && (class == sdk.ScopeMob || class == sdk.ScopeOperator)
}

// readable answers the scopes a bound token's identities read in realm.
func (s *Server) readable(ctx context.Context, c caller, realm string) ([]sdk.Scope, error) {
	var out []sdk.Scope
	for _, id := range c.token.Identities {
		scopes, err := s.opts.Coordinator.Scopes(ctx, sdk.Identity{Realm: realm, ID: id})
		if err != nil {
			return nil, err
		}
		out = append(out, scopes...)
	}
	return out, nil
}

// recordNotFound is the answer for an id the realm does not hold.
func recordNotFound(realm, id string) error {
	return fmt.Errorf("record %q not found in realm %q: %w", id, realm, sdk.ErrNotFound)
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

// touchRecord refuses a bound token the stored record id when it lies in
// another identity's own scope, for the verbs that act on a record by id
// alone (approve, reject), as not found. A record that does not exist is
// refused the same way at once (the verb would answer not found later,
// and the time between would tell a hidden id from a missing one, as in
// mayForget); a provider that cannot fetch passes, the verb itself
// answering as it would.
func (s *Server) touchRecord(ctx context.Context, c caller, realm, id string, p sdk.Provider) error {
	if !c.bound() {
		return nil
	}
	getter, ok := host.ProviderOf(p).Getter()
	if !ok {
		return nil
	}
	recs, err := getter.Get(ctx, realm, []string{id})
	if err != nil {
		return err
	}
	if len(recs) == 0 {
		return recordNotFound(realm, id)
	}
	for _, r := range recs {
		if err := s.touchStored(ctx, c, realm, id, r.Scope); err != nil {
			return err
		}
	}
	return nil
}

// mayForget applies the forget rules to the stored record, read once: a
// bound token touches only its identities' records, and an agent forgets
// only identity-scope records (proposal.CheckAgentForget). A record in
// another identity's scope for a bound token answers hidden: the forget
// then answers as for a missing record without forgetting. So does a
// record that does not exist (Get answers records of every status, so
// there is nothing to forget): were its forget to go on to the provider
// and the queue, it would take longer than a hidden one's, and the
// difference would tell a bound token which guessed ids (an archived
// conversation's are computable) another identity holds. A provider that
// cannot fetch leaves the scope unknown, so such callers are refused.
func (s *Server) mayForget(ctx context.Context, c caller, realm, id string, p sdk.Provider) (hidden bool, err error) {
	if !c.bound() && c.application() {
		return false, nil
	}
	getter, ok := host.ProviderOf(p).Getter()
	if !ok {
		return false, fmt.Errorf("token %q may forget only records whose scope the provider of realm %q can tell, and it cannot: %w", c.token.Name, realm, sdk.ErrPermission)
	}
	recs, err := getter.Get(ctx, realm, []string{id})
	if err != nil {
		return false, err
	}
	own := ""
	if c.token != nil && len(c.token.Identities) == 1 {
		own = c.token.Identities[0]
	}
	if len(recs) == 0 {
		return true, nil
	}
	for _, r := range recs {
		if hidden, err := s.hides(ctx, c, realm, r.Scope); err != nil || hidden {
			return hidden, err
		}
		if !c.application() {
			// Another token's pending proposal reads as a missing id, as
			// GET answers it.
			if proposal.IsPending(&r) {
				if mine, err := s.proposedBy(ctx, c, realm, id); err != nil || !mine {
					return !mine, err
				}
			}
			if err := proposal.CheckAgentForget(r.Scope, own); err != nil {
				return false, err
			}
		}
	}
	return false, nil
}

// Query parameters of /mcp, for MCP clients that cannot send headers.
const (
	QueryIdentity = "identity"
	QueryRealm    = "realm"
)

// mcpHeader folds /mcp?identity=&realm= into the request's headers; a
// header and a parameter that disagree are refused.
func mcpHeader(r *http.Request) error {
	// A parameter it does not read is refused, as on /v1: a mistyped
	// ?Realm= would otherwise act in the default realm.
	if err := checkQuery("POST /mcp", r.URL.RawQuery); err != nil {
		return err
	}
	q := r.URL.Query()
	for _, p := range []struct{ param, header string }{{QueryIdentity, HeaderIdentity}, {QueryRealm, HeaderRealm}} {
		// Two of one are ambiguous: a proxy in front may have checked the
		// one this server would not act on.
		if n := len(q[p.param]); n > 1 {
			return &sdk.FieldError{Field: p.param, Problem: fmt.Sprintf("is given %d times; give it once", n), Err: sdk.ErrInvalid}
		}
		if n := len(r.Header.Values(p.header)); n > 1 {
			return badRequest("the request carries %d %s headers; send exactly one", n, p.header)
		}
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
