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

// maxScopeScan bounds the records a scope count reads: past it the
// answer says it is partial rather than holding a request for minutes.
const maxScopeScan = 200_000

// ScopeCount is one scope's records by status.
type ScopeCount struct {
	Scope    sdk.Scope          `json:"scope"`
	Total    int                `json:"total"`
	ByStatus map[sdk.Status]int `json:"by_status"`
}

// handleScopes counts a realm's records per scope and status from its
// archive (application callers only: it names every identity's scope; a
// bound token's answer leaves out the other identities').
func (s *Server) handleScopes(ctx context.Context, c caller, w http.ResponseWriter, r *http.Request) error {
	if err := c.requireApplication("read scope counts"); err != nil {
		return err
	}
	realm, p, err := s.provider(c, r.URL.Query().Get("realm"))
	if err != nil {
		return err
	}
	counts, partial, err := CountScopes(ctx, realm, p)
	if err != nil {
		return err
	}
	// A bound token is told of no scope it could not read by id.
	view, err := s.readView(ctx, c, realm)
	if err != nil {
		return err
	}
	counts = slices.DeleteFunc(counts, func(sc ScopeCount) bool { return view.hides(sc.Scope) })
	return writeJSON(w, http.StatusOK, map[string]any{"realm": realm, "scopes": counts, "partial": partial})
}

// CountScopes pages through a realm's records and counts them per scope
// and status, scopes in order; partial is true when it stopped at the
// scan bound.
func CountScopes(ctx context.Context, realm string, p sdk.Provider) ([]ScopeCount, bool, error) {
	a, ok := host.ProviderOf(p).Archiver()
	if !ok {
		return nil, false, fmt.Errorf("the provider of realm %q cannot list its records (it lacks the archive capability): %w", realm, sdk.ErrUnsupported)
	}
	by := map[sdk.Scope]*ScopeCount{}
	after, seen := "", 0
	for {
		if err := ctx.Err(); err != nil {
			return nil, false, err
		}
		page, err := a.Export(ctx, realm, after, sdk.MaxExportPage)
		if err != nil {
			return nil, false, err
		}
		for _, rec := range page.Records {
			sc := by[rec.Scope]
			if sc == nil {
				sc = &ScopeCount{Scope: rec.Scope, ByStatus: map[sdk.Status]int{}}
				by[rec.Scope] = sc
			}
			sc.Total++
			sc.ByStatus[rec.Status]++
		}
		seen += len(page.Records)
		if len(page.Records) == 0 {
			seen += sdk.MaxExportPage // as a full page: see the listing's loop
		}
		if page.Next == "" {
			break
		}
		if seen >= maxScopeScan {
			return sorted(by), true, nil
		}
		after = page.Next
	}
	return sorted(by), false, nil
}

func sorted(by map[sdk.Scope]*ScopeCount) []ScopeCount {
	out := make([]ScopeCount, 0, len(by))
	for _, sc := range by {
		out = append(out, *sc)
	}
	slices.SortFunc(out, func(a, b ScopeCount) int { return strings.Compare(string(a.Scope), string(b.Scope)) })
	return out
}
