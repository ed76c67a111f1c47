package httpapi

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/memhost/memhost/coordinator/coordinatortest"
	"github.com/memhost/memhost/guide"
	"github.com/memhost/memhost/sdk"
)

// TestUsageIsAnApplicationsOrTheIdentitys: from an outside review. A
// record's use_count and last_used_at count every identity's turns, so an
// agent reading a shared record (mob, operator, realm) learnt when another
// identity's private turn injected it. Only an application sees a shared
// record's usage; an identity-scope record keeps it for every caller, as
// only that identity's turns use it.
func TestUsageIsAnApplicationsOrTheIdentitys(t *testing.T) {
	app := &Token{Name: "app", Role: RoleApplication}
	boundApp := &Token{Name: "alice-app", Role: RoleApplication, Identities: []string{"alice"}}
	agent := &Token{Name: "bot", Role: RoleAgent}
	boundAgent := &Token{Name: "alice", Role: RoleAgent, Identities: []string{"alice"}}
	noRole := &Token{Name: "plain"}
	scopes := []sdk.Scope{sdk.IdentityScope("alice"), sdk.IdentityScope("bob"), sdk.MobScope("team-a"), sdk.OperatorScope("acme"), sdk.RealmScope, "no scope"}
	cases := []struct {
		name  string
		token *Token // nil: a server without tokens, whose caller is the application
		sees  []bool // per scope above
	}{
		{"no tokens", nil, []bool{true, true, true, true, true, true}},
		{"application", app, []bool{true, true, true, true, true, true}},
		{"bound application", boundApp, []bool{true, true, true, true, true, true}},
		{"agent", agent, []bool{true, true, false, false, false, false}},
		{"bound agent", boundAgent, []bool{true, true, false, false, false, false}},
		{"token without role", noRole, []bool{true, true, false, false, false, false}},
	}
	used := time.Date(2026, 12, 6, 0, 11, 58, 871e6, time.UTC)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := caller{token: tc.token}
			var hits []sdk.Hit
			var rows []sdk.ManifestRow
			for _, sc := range scopes {
				hits = append(hits, sdk.Hit{Record: sdk.Record{Scope: sc, UseCount: 3, LastUsedAt: used}, Score: 1})
				rows = append(rows, sdk.ManifestRow{Scope: sc, Rank: 2.5})
			}
			c.ownUsageHits(hits)
			c.ownUsageRows(rows)
			for i, sc := range scopes {
				r := sdk.Record{Scope: sc, UseCount: 3, LastUsedAt: used}
				c.ownUsage(&r)
				want := sdk.Record{Scope: sc}
				if tc.sees[i] {
					want.UseCount, want.LastUsedAt = 3, used
				}
				if r.UseCount != want.UseCount || !r.LastUsedAt.Equal(want.LastUsedAt) {
					t.Errorf("record in %q: use_count %d, last_used_at %v; want %d, %v", sc, r.UseCount, r.LastUsedAt, want.UseCount, want.LastUsedAt)
				}
				if h := hits[i].Record; h.UseCount != want.UseCount || !h.LastUsedAt.Equal(want.LastUsedAt) || hits[i].Score != 1 {
					t.Errorf("hit in %q: use_count %d, last_used_at %v, score %v; want %d, %v, 1", sc, h.UseCount, h.LastUsedAt, hits[i].Score, want.UseCount, want.LastUsedAt)
				}
				if wantRank := map[bool]float64{true: 2.5, false: 0}[tc.sees[i]]; rows[i].Rank != wantRank {
					t.Errorf("manifest row in %q: rank %v, want %v", sc, rows[i].Rank, wantRank)
				}
			}
		})
	}
}

// rankedProvider answers every manifest row ranked, as a provider ranks a
// used record.
type rankedProvider struct{ *coordinatortest.Provider }

func (p rankedProvider) Manifest(ctx context.Context, q sdk.ManifestQuery) ([]sdk.ManifestRow, error) {
	rows, err := p.Provider.Manifest(ctx, q)
	for i := range rows {
		rows[i].Rank = 2.5
	}
	return rows, err
}

// TestUsageOnEveryAgentSurface drives the rule through the routes that
// answer records, hits or manifest rows to an agent: GET
// /v1/records/{id}, POST /v1/recall (hand-encoded) and POST /v1/manifest.
func TestUsageOnEveryAgentSurface(t *testing.T) {
	tokens := []Token{
		{Name: "app", Secret: "app-secret-0123456789", Realms: []string{"default"}, Role: RoleApplication},
		{Name: "alice", Secret: "alice-secret-0123456789", Realms: []string{"default"}, Identities: []string{"alice"}},
	}
	p, _, coord := testCoordinator(t, coordinatortest.AllCapabilities...)
	srv := newServerOver(t, Options{Tokens: tokens, Coordinator: coord,
		Provider: func(string) (sdk.Provider, error) { return rankedProvider{p}, nil }})
	used := time.Date(2026, 12, 6, 0, 11, 58, 871e6, time.UTC)
	shared := p.MustAdd("default", sdk.Record{Scope: sdk.RealmScope, Kind: sdk.KindFact, Title: "quince checklist", Body: "Deploys use the quince checklist.", UseCount: 1, LastUsedAt: used})[0]
	own := p.MustAdd("default", sdk.Record{Scope: sdk.IdentityScope("alice"), Kind: sdk.KindFact, Title: "quince tea", Body: "Alice drinks quince tea.", UseCount: 2, LastUsedAt: used})[0]
	mob := p.MustAdd("default", sdk.Record{Scope: sdk.MobScope("team-a"), Kind: sdk.KindFact, Title: "team quince", Body: "Team A plants quinces.", UseCount: 5, LastUsedAt: used})[0]

	type usage struct {
		UseCount   int64      `json:"use_count"`
		LastUsedAt *time.Time `json:"last_used_at"`
	}
	// want: each record's usage as the caller should see it.
	seen := usage{1, &used}
	for _, tc := range []struct {
		token string
		want  map[string]usage
	}{
		{tokens[0].Secret, map[string]usage{shared: seen, own: {2, &used}, mob: {5, &used}}},
		// alice reads no mob here (no mob resolver): its record is none
		// of her token's to read by id (below).
		{tokens[1].Secret, map[string]usage{shared: {}, own: {2, &used}}},
	} {
		check := func(where, id string, got usage) {
			t.Helper()
			want := tc.want[id]
			if got.UseCount != want.UseCount || (got.LastUsedAt == nil) != (want.LastUsedAt == nil) || (got.LastUsedAt != nil && !got.LastUsedAt.Equal(*want.LastUsedAt)) {
				t.Errorf("token %s, %s of %s: use_count %d, last_used_at %v; want %d, %v", tc.token[:5], where, id, got.UseCount, got.LastUsedAt, want.UseCount, want.LastUsedAt)
			}
		}
		for id := range tc.want {
			var rec usage
			if code := doJSON(t, srv, "GET", "/v1/records/"+id, tc.token, "", &rec); code != 200 {
				t.Fatalf("GET %s = %d", id, code)
			}
			check("GET", id, rec)
		}
		var recalled struct {
			Hits []struct {
				Record struct {
					ID string `json:"id"`
					usage
				} `json:"record"`
			} `json:"hits"`
		}
		if code := doJSON(t, srv, "POST", "/v1/recall", tc.token, `{"identity":{"id":"alice"},"query":"quince"}`, &recalled); code != 200 || len(recalled.Hits) != 2 {
			t.Fatalf("recall = %d %+v, want the realm's and alice's records", code, recalled)
		}
		for _, h := range recalled.Hits {
			check("recall", h.Record.ID, h.Record.usage)
		}
		var manifest struct {
			Rows []struct {
				ID   string  `json:"id"`
				Rank float64 `json:"rank"`
			} `json:"rows"`
		}
		if code := doJSON(t, srv, "POST", "/v1/manifest", tc.token, `{"identity":{"id":"alice"},"tier":"full"}`, &manifest); code != 200 || len(manifest.Rows) != 2 {
			t.Fatalf("manifest = %d %+v", code, manifest)
		}
		for _, r := range manifest.Rows {
			if want := map[bool]float64{true: 2.5, false: 0}[tc.want[r.ID].UseCount != 0]; r.Rank != want {
				t.Errorf("token %s, manifest row %s: rank %v, want %v", tc.token[:5], r.ID, r.Rank, want)
			}
		}
	}
	var gone errorBody
	if code := doJSON(t, srv, "GET", "/v1/records/"+mob, tokens[1].Secret, "", &gone); code != 404 {
		t.Errorf("GET of a mob's record by a token bound to alice, in no mob = %d, want 404", code)
	}
}

// newServerOver serves opts as New does, with a guide over its
// coordinator.
func newServerOver(t *testing.T, opts Options) *httptest.Server {
	t.Helper()
	opts.Guide = guide.NewSessions(opts.Coordinator, guide.SessionsOptions{Size: 16})
	srv := httptest.NewServer(New(opts).Handler())
	t.Cleanup(srv.Close)
	return srv
}

// doJSON sends body with token and decodes the answer into out.
func doJSON(t *testing.T, srv *httptest.Server, method, path, token, body string, out any) int {
	t.Helper()
	req, _ := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	return resp.StatusCode
}
