package httpapi

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/memhost/memhost/coordinator"
	"github.com/memhost/memhost/coordinator/coordinatortest"
	"github.com/memhost/memhost/guide"
	"github.com/memhost/memhost/internal/compaction"
	"github.com/memhost/memhost/sdk"
)

// bodilessRoutes are the POST routes that read no body.
var bodilessRoutes = map[string]bool{
	"POST /v1/records/{id}/approve": true,
	"POST /v1/records/{id}/reject":  true,
}

// Every route that reads a body refuses a body that is not a JSON object:
// null would decode into the zero request and act on the default realm.
// The routes come from the server itself, so a new one is checked too.
func TestEveryBodyIsAnObject(t *testing.T) {
	p := coordinatortest.NewProvider(sdk.CapWrite, sdk.CapFetch, sdk.CapForget, sdk.CapManifest, sdk.CapArchive)
	arch := &fuzzArchiver{Provider: p}
	providers := func(string) (sdk.Provider, error) { return arch, nil }
	coord, err := coordinator.New(testConfig(), coordinator.Options{Providers: coordinator.ProvidersFunc(providers)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { coord.Close(t.Context()) })
	s := New(Options{
		Provider: providers, Coordinator: coord,
		Guide:      guide.NewSessions(coord, guide.SessionsOptions{Size: 16}),
		Compaction: compaction.New(compaction.Options{Compactor: &echoCompactor{}}),
	})
	srv := httptest.NewServer(s.Handler())
	t.Cleanup(srv.Close)
	checked := 0
	for _, route := range s.Routes() {
		method, path, _ := strings.Cut(route, " ")
		if method != http.MethodPost || bodilessRoutes[route] || !strings.HasPrefix(path, "/v1/") {
			continue
		}
		path = strings.NewReplacer("{id}", "r1", "{key}", "s1").Replace(path)
		for _, body := range []string{"null", " null ", "[]", `"realm"`, "7"} {
			status, e := call(t, srv, method, path, "", []byte(body))
			if status != http.StatusBadRequest || e.Error.Code != "invalid_argument" || !strings.Contains(e.Error.Message, "must be a JSON object") {
				t.Errorf("%s with body %s = %d %+v, want 400 invalid_argument: must be a JSON object", route, body, status, e)
			}
		}
		checked++
	}
	if checked < 12 {
		t.Fatalf("checked %d routes; the route list is not what this test expects", checked)
	}
	if n := p.Calls(coordinatortest.MethodRemember) + arch.imports; n != 0 {
		t.Fatalf("refused bodies caused %d writes", n)
	}
}
