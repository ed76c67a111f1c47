package httpapi

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/memhost/memhost/coordinator"
	"github.com/memhost/memhost/coordinator/coordinatortest"
	"github.com/memhost/memhost/sdk"
)

// scopeFormGet answers its records' scopes in another form than they were
// written in, as a provider plugin might: a CHAR column pads them, a
// case-insensitive store answers them folded.
type scopeFormGet struct {
	*coordinatortest.Provider
	form func(sdk.Scope) sdk.Scope
}

func (p scopeFormGet) Get(ctx context.Context, realm string, ids []string) ([]sdk.Record, error) {
	recs, err := p.Provider.Get(ctx, realm, ids)
	for i := range recs {
		recs[i].Scope = p.form(recs[i].Scope)
	}
	return recs, err
}

// TestBoundTokenReadsNoMalformedScope: a record whose stored scope does
// not parse belongs to no scope a bound token reads: the provider's answer
// breaks the protocol (sdk/host refuses it), and were it let through the
// token would be answered it as a missing record (touchScope). Either way
// the token neither reads nor forgets it, however the provider misspelt
// another identity's scope.
func TestBoundTokenReadsNoMalformedScope(t *testing.T) {
	forms := []struct {
		name string
		form func(sdk.Scope) sdk.Scope
	}{
		{"padded", func(s sdk.Scope) sdk.Scope { return s + "   " }},
		{"upper case", func(s sdk.Scope) sdk.Scope { return sdk.Scope(strings.ToUpper(string(s))) }},
		{"no colon", func(s sdk.Scope) sdk.Scope { return sdk.Scope(strings.Replace(string(s), ":", "/", 1)) }},
		{"empty", func(sdk.Scope) sdk.Scope { return "" }},
	}
	const alice = "alice-secret-0123456789"
	tokens := []Token{
		{Name: "alice-app", Secret: alice, Realms: []string{"default"}, Role: RoleApplication, Identities: []string{"alice"}},
	}
	for _, f := range forms {
		t.Run(f.name, func(t *testing.T) {
			p, _, _ := testCoordinator(t, sdk.CapWrite, sdk.CapFetch, sdk.CapForget)
			ids := p.MustAdd("default", sdk.Record{Scope: sdk.IdentityScope("bob"), Kind: sdk.KindFact, Title: "BOB-PRIVATE", Body: "bob only"})
			wrapped := scopeFormGet{p, f.form}
			providers := func(string) (sdk.Provider, error) { return wrapped, nil }
			coord, err := coordinator.New(testConfig(), coordinator.Options{Providers: coordinator.ProvidersFunc(providers)})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { coord.Close(context.Background()) })
			srv := httptest.NewServer(New(Options{Tokens: tokens, Provider: providers, Coordinator: coord}).Handler())
			t.Cleanup(srv.Close)

			status, body := get(t, srv.URL+"/v1/records/"+ids[0]+"?realm=default", alice)
			if (status != 404 && status != 500) || strings.Contains(body, "BOB-PRIVATE") {
				t.Fatalf("GET = %d %s, want 404 or 500 without the record", status, body)
			}
			if status, _ := call(t, srv, "DELETE", "/v1/records/"+ids[0]+"?realm=default", alice, nil); status != 204 && status != 500 {
				t.Fatalf("DELETE = %d, want 204 as for a missing record or 500 for the answer", status)
			}
			if recs, err := p.Get(context.Background(), "default", ids); err != nil || len(recs) != 1 || recs[0].Status != sdk.StatusActive {
				t.Fatalf("bob's record after alice's DELETE: %+v, %v", recs, err)
			}
		})
	}
}
