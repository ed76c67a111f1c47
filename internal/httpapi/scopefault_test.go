package httpapi

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/memhost/memhost/coordinator"
	"github.com/memhost/memhost/coordinator/coordinatortest"
	"github.com/memhost/memhost/sdk"
)

// scopeBlind ignores the scopes of its recalls and manifests, as a buggy
// provider plugin might.
type scopeBlind struct{ *coordinatortest.Provider }

func (p scopeBlind) Recall(ctx context.Context, q sdk.RecallQuery) ([]sdk.Hit, error) {
	q.Scopes = nil
	return p.Provider.Recall(ctx, q)
}

func (p scopeBlind) Manifest(ctx context.Context, q sdk.ManifestQuery) ([]sdk.ManifestRow, error) {
	q.Scopes = nil
	return p.Provider.Manifest(ctx, q)
}

// tokenServer serves the API over the provider providers answers (a test
// double breaking its contract), behind tokens.
func tokenServer(t *testing.T, providers func(string) (sdk.Provider, error), tokens []Token) *httptest.Server {
	t.Helper()
	coord, err := coordinator.New(testConfig(), coordinator.Options{Providers: coordinator.ProvidersFunc(providers)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { coord.Close(context.Background()) })
	srv := httptest.NewServer(New(Options{Tokens: tokens, Provider: providers, Coordinator: coord}).Handler())
	t.Cleanup(srv.Close)
	return srv
}

// callAs sends method path (with body, when not empty) with secret as the
// bearer token and answers the status and body.
func callAs(t *testing.T, srv *httptest.Server, secret, method, path, body string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+secret)
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(data)
}

// TestRecallAndManifestKeepToTheirScopes: from an outside review. A
// provider that ignores its query's scopes had its answer kept out of a
// turn's injection, a build's, the guide's blocks and memory_recall, but
// POST /v1/recall and POST /v1/manifest passed it on whole: alice's
// token bound to her read bob's private record, body and all. Both now
// keep to the scopes the identity reads, as every other surface does.
func TestRecallAndManifestKeepToTheirScopes(t *testing.T) {
	p := coordinatortest.NewProvider(sdk.CapWrite, sdk.CapFetch, sdk.CapManifest)
	p.MustAdd("default",
		sdk.Record{Scope: sdk.IdentityScope("alice"), Kind: sdk.KindFact, Title: "harbour walk", Body: "alice likes the harbour"},
		sdk.Record{Scope: sdk.IdentityScope("bob"), Kind: sdk.KindFact, Title: "BOB-PRIVATE harbour diagnosis", Body: "bob only"})
	const alice = "alice-secret-0123456789"
	srv := tokenServer(t, func(string) (sdk.Provider, error) { return scopeBlind{p}, nil },
		[]Token{{Name: "alice", Secret: alice, Realms: []string{"default"}, Identities: []string{"alice"}}})
	for _, c := range []struct{ path, body string }{
		{"/v1/recall", `{"identity":{"id":"alice"},"query":"harbour"}`},
		{"/v1/manifest", `{"identity":{"id":"alice"}}`},
		{"/v1/manifest", `{"identity":{"id":"alice"},"tier":"full"}`},
	} {
		code, body := callAs(t, srv, alice, "POST", c.path, c.body)
		if code != 200 || !strings.Contains(body, "harbour walk") {
			t.Fatalf("%s %s = %d %s, want alice's record", c.path, c.body, code, body)
		}
		if strings.Contains(body, "BOB-PRIVATE") || strings.Contains(body, "identity:bob") {
			t.Errorf("%s %s answered bob's record to alice: %s", c.path, c.body, body)
		}
	}
}

// realmBlind answers its recalls from realm "acme" too, as a provider
// serving many realms that ignores its query's realm might.
type realmBlind struct{ *coordinatortest.Provider }

func (p realmBlind) Recall(ctx context.Context, q sdk.RecallQuery) ([]sdk.Hit, error) {
	hits, err := p.Provider.Recall(ctx, q)
	if err != nil {
		return nil, err
	}
	q.Realm = "acme"
	more, err := p.Provider.Recall(ctx, q)
	return append(hits, more...), err
}

// TestRecallKeepsToItsRealm: every realm has a scope "realm" (and an
// identity may have a namesake in another realm), so a provider that
// ignores its query's realm answers another realm's records in scopes
// the identity reads. The envelope leaves them out of a turn; POST
// /v1/recall passed them on to a token of another realm.
func TestRecallKeepsToItsRealm(t *testing.T) {
	p := coordinatortest.NewProvider(sdk.CapWrite, sdk.CapFetch)
	p.MustAdd("default", sdk.Record{Scope: sdk.RealmScope, Kind: sdk.KindFact, Title: "default harbour", Body: "the harbour opens at nine"})
	p.MustAdd("acme", sdk.Record{Scope: sdk.RealmScope, Kind: sdk.KindFact, Title: "ACME-PRIVATE harbour deal", Body: "acme buys the harbour"})
	const secret = "default-secret-0123456789"
	srv := tokenServer(t, func(string) (sdk.Provider, error) { return realmBlind{p}, nil },
		[]Token{{Name: "default", Secret: secret, Realms: []string{"default"}}})
	code, body := callAs(t, srv, secret, "POST", "/v1/recall", `{"identity":{"id":"alice"},"query":"harbour"}`)
	if code != 200 || !strings.Contains(body, "default harbour") {
		t.Fatalf("recall = %d %s, want the default realm's record", code, body)
	}
	if strings.Contains(body, "ACME-PRIVATE") {
		t.Errorf("a token of realm default recalled realm acme's record: %s", body)
	}
}

// realmBlindStore fetches, forgets and exports in realm "acme" too, as a
// provider serving many realms that ignores its calls' realm might.
type realmBlindStore struct{ *coordinatortest.Provider }

func (p realmBlindStore) Get(ctx context.Context, realm string, ids []string) ([]sdk.Record, error) {
	recs, err := p.Provider.Get(ctx, realm, ids)
	if err != nil || len(recs) > 0 {
		return recs, err
	}
	return p.Provider.Get(ctx, "acme", ids)
}

func (p realmBlindStore) Forget(ctx context.Context, realm string, ids []string) (int, error) {
	n, err := p.Provider.Forget(ctx, realm, ids)
	if err != nil {
		return n, err
	}
	m, err := p.Provider.Forget(ctx, "acme", ids)
	return n + m, err
}

func (p realmBlindStore) Export(ctx context.Context, realm, after string, limit int) (sdk.ExportPage, error) {
	page, err := p.Provider.Export(ctx, realm, after, limit)
	if err != nil {
		return page, err
	}
	more, err := p.Provider.Export(ctx, "acme", after, limit)
	page.Records = append(page.Records, more.Records...)
	return page, err
}

// TestRecordsByIDKeepToTheirRealm: a provider that ignores the realm of
// a fetch or an export answers another realm's records; GET
// /v1/records/{id} and the listing passed them on to a token of realm
// default, and a bound token's forget acted on one. A plugin's answer
// over the wire was held to its realm; an in-process one's now is too.
func TestRecordsByIDKeepToTheirRealm(t *testing.T) {
	p := coordinatortest.NewProvider(sdk.CapWrite, sdk.CapFetch, sdk.CapForget, sdk.CapArchive)
	ids := p.MustAdd("acme", sdk.Record{Scope: sdk.IdentityScope("alice"), Kind: sdk.KindFact, Title: "ACME-PRIVATE harbour deal", Body: "acme buys the harbour"})
	const alice, app = "alice-secret-0123456789", "app-secret-0123456789"
	srv := tokenServer(t, func(string) (sdk.Provider, error) { return realmBlindStore{p}, nil }, []Token{
		{Name: "alice", Secret: alice, Realms: []string{"default"}, Role: RoleApplication, Identities: []string{"alice"}},
		{Name: "app", Secret: app, Realms: []string{"default"}, Role: RoleApplication},
	})
	for _, secret := range []string{alice, app} {
		for _, path := range []string{"/v1/records/" + ids[0], "/v1/records", "/v1/scopes"} {
			if code, body := callAs(t, srv, secret, "GET", path, ""); strings.Contains(body, "ACME-PRIVATE") || strings.Contains(body, "acme") {
				t.Errorf("GET %s = %d %s: realm acme's record to a token of realm default", path, code, body)
			}
		}
	}
	// A bound token's forget looks at the record first (an application
	// token's goes straight to the provider, which alone answers for it).
	callAs(t, srv, alice, "DELETE", "/v1/records/"+ids[0], "")
	if recs, _ := p.Get(context.Background(), "acme", ids); len(recs) == 0 {
		t.Errorf("a token of realm default forgot realm acme's record")
	}
}

// TestSearchKeepsToItsRealm: GET /v1/records?q= asks the provider's
// recall, as POST /v1/recall does; an in-process provider that ignores
// its query's realm had its answer passed on whole there, another
// realm's records to a token of realm default.
func TestSearchKeepsToItsRealm(t *testing.T) {
	p := coordinatortest.NewProvider(sdk.CapWrite, sdk.CapFetch)
	p.MustAdd("default", sdk.Record{Scope: sdk.RealmScope, Kind: sdk.KindFact, Title: "default harbour", Body: "the harbour opens at nine"})
	p.MustAdd("acme", sdk.Record{Scope: sdk.RealmScope, Kind: sdk.KindFact, Title: "ACME-PRIVATE harbour deal", Body: "acme buys the harbour"})
	const secret = "default-secret-0123456789"
	srv := tokenServer(t, func(string) (sdk.Provider, error) { return realmBlind{p}, nil },
		[]Token{{Name: "default", Secret: secret, Realms: []string{"default"}, Role: RoleApplication}})
	if code, body := callAs(t, srv, secret, "GET", "/v1/records?q=harbour", ""); strings.Contains(body, "ACME-PRIVATE") {
		t.Errorf("a token of realm default found realm acme's record: %d %s", code, body)
	}
}
