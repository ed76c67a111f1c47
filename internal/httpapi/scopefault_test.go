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
	providers := func(string) (sdk.Provider, error) { return scopeBlind{p}, nil }
	coord, err := coordinator.New(testConfig(), coordinator.Options{Providers: coordinator.ProvidersFunc(providers)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { coord.Close(context.Background()) })
	const alice = "alice-secret-0123456789"
	tokens := []Token{{Name: "alice", Secret: alice, Realms: []string{"default"}, Identities: []string{"alice"}}}
	srv := httptest.NewServer(New(Options{Tokens: tokens, Provider: providers, Coordinator: coord}).Handler())
	t.Cleanup(srv.Close)
	for _, c := range []struct{ path, body string }{
		{"/v1/recall", `{"identity":{"id":"alice"},"query":"harbour"}`},
		{"/v1/manifest", `{"identity":{"id":"alice"}}`},
		{"/v1/manifest", `{"identity":{"id":"alice"},"tier":"full"}`},
	} {
		req, _ := http.NewRequest("POST", srv.URL+c.path, strings.NewReader(c.body))
		req.Header.Set("Authorization", "Bearer "+alice)
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.Contains(string(body), "harbour walk") {
			t.Fatalf("%s %s = %d %s, want alice's record", c.path, c.body, resp.StatusCode, body)
		}
		if strings.Contains(string(body), "BOB-PRIVATE") || strings.Contains(string(body), "identity:bob") {
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
	providers := func(string) (sdk.Provider, error) { return realmBlind{p}, nil }
	coord, err := coordinator.New(testConfig(), coordinator.Options{Providers: coordinator.ProvidersFunc(providers)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { coord.Close(context.Background()) })
	const secret = "default-secret-0123456789"
	tokens := []Token{{Name: "default", Secret: secret, Realms: []string{"default"}}}
	srv := httptest.NewServer(New(Options{Tokens: tokens, Provider: providers, Coordinator: coord}).Handler())
	t.Cleanup(srv.Close)
	req, _ := http.NewRequest("POST", srv.URL+"/v1/recall", strings.NewReader(`{"identity":{"id":"alice"},"query":"harbour"}`))
	req.Header.Set("Authorization", "Bearer "+secret)
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), "default harbour") {
		t.Fatalf("recall = %d %s, want the default realm's record", resp.StatusCode, body)
	}
	if strings.Contains(string(body), "ACME-PRIVATE") {
		t.Errorf("a token of realm default recalled realm acme's record: %s", body)
	}
}
