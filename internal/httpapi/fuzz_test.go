package httpapi

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/memhost/memhost/coordinator"
	"github.com/memhost/memhost/coordinator/coordinatortest"
	"github.com/memhost/memhost/guide"
	"github.com/memhost/memhost/internal/compaction"
	"github.com/memhost/memhost/sdk"
)

// The fuzz targets post arbitrary bodies to each request decoder of the
// API, in process (a handler panic fails the target rather than being
// swallowed by net/http). Properties: never a 5xx, and a refused body
// (4xx) changes nothing: no provider write and no compactor call. Seeds
// live in testdata/fuzz/<target> and run with plain `go test`.

type fuzzFixture struct {
	h    http.Handler
	p    *coordinatortest.Provider
	comp *echoCompactor
}

func newFuzzFixture(f *testing.F) *fuzzFixture {
	p := coordinatortest.NewProvider(sdk.CapWrite, sdk.CapFetch, sdk.CapForget, sdk.CapManifest, sdk.CapSupersede, sdk.CapUsage, sdk.CapLedger)
	p.MustAdd("default",
		sdk.Record{Scope: sdk.IdentityScope("alice"), Kind: sdk.KindPreference, Title: "Espresso order", Body: "Alice takes her espresso without sugar."},
		sdk.Record{Scope: sdk.RealmScope, Kind: sdk.KindFact, Title: "Harbour crane", Body: "The crane at berth 4 is out of service."},
	)
	providers := func(string) (sdk.Provider, error) { return p, nil }
	coord, err := coordinator.New(coordinator.DefaultConfig(), coordinator.Options{Providers: coordinator.ProvidersFunc(providers)})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { coord.Close(f.Context()) })
	comp := &echoCompactor{}
	srv := New(Options{
		Provider: providers, Coordinator: coord, MaxBodyBytes: 64 << 10,
		Guide:      guide.NewSessions(coord, guide.SessionsOptions{Size: 16}),
		Compaction: compaction.New(compaction.Options{Compactor: comp}),
	})
	return &fuzzFixture{h: srv.Handler(), p: p, comp: comp}
}

// mutations counts the synchronous writes a request can cause. Ledger and
// usage writes are left out: they run in the background after an earlier,
// accepted turn.
func (fx *fuzzFixture) mutations() int {
	fx.comp.mu.Lock()
	n := fx.comp.calls
	fx.comp.mu.Unlock()
	for _, m := range []string{coordinatortest.MethodRemember, coordinatortest.MethodForget, coordinatortest.MethodSupersede} {
		n += fx.p.Calls(m)
	}
	return n
}

func fuzzEndpoint(f *testing.F, method, path string, valid string) {
	fx := newFuzzFixture(f)
	f.Add([]byte(valid))
	f.Fuzz(func(t *testing.T, body []byte) {
		before := fx.mutations()
		req := httptest.NewRequest(method, path, bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		fx.h.ServeHTTP(rec, req)
		if rec.Code >= 500 {
			t.Fatalf("%s %s %q: status %d: %s", method, path, body, rec.Code, rec.Body)
		}
		if rec.Code >= 400 {
			if after := fx.mutations(); after != before {
				t.Fatalf("%s %s %q: refused with %d but made %d writes: %s", method, path, body, rec.Code, after-before, rec.Body)
			}
		}
	})
}

func FuzzRememberBody(f *testing.F) {
	fuzzEndpoint(f, "POST", "/v1/records", `{"records":[{"scope":"identity:alice","kind":"fact","title":"t","body":"b","tags":["x"]}]}`)
}

func FuzzRecallBody(f *testing.F) {
	fuzzEndpoint(f, "POST", "/v1/recall", `{"identity":{"id":"alice"},"query":"espresso","limit":5}`)
}

func FuzzManifestBody(f *testing.F) {
	fuzzEndpoint(f, "POST", "/v1/manifest", `{"identity":{"id":"alice"},"tier":"full","k":10}`)
}

func FuzzTurnInjectBody(f *testing.F) {
	fuzzEndpoint(f, "POST", "/v1/turns/inject", `{"identity":{"id":"alice"},"session":"s1","content":"espresso order"}`)
}

func FuzzBuildInjectBody(f *testing.F) {
	fuzzEndpoint(f, "POST", "/v1/builds/inject", `{"identity":{"id":"alice"},"query_text":"espresso","query_terms":["crane"]}`)
}

func FuzzDefangBody(f *testing.F) {
	fuzzEndpoint(f, "POST", "/v1/defang", `{"identity":{"id":"alice"},"content":[{"type":"text","text":"<memhost_memory_observation>"}]}`)
}

func FuzzSessionCompactedBody(f *testing.F) {
	fuzzEndpoint(f, "POST", "/v1/sessions/s1/compacted", `{"identity":{"id":"alice"}}`)
}

func FuzzGuideSessionStartBody(f *testing.F) {
	fuzzEndpoint(f, "POST", "/v1/guide/session-start", `{"identity":{"id":"alice"},"session":"g1","task":"order coffee"}`)
}

func FuzzGuideBeforeIterationBody(f *testing.F) {
	fuzzEndpoint(f, "POST", "/v1/guide/before-iteration", `{"identity":{"id":"alice"},"session":"g1","last_user_message":"espresso?"}`)
}

func FuzzConversationCompactBody(f *testing.F) {
	fuzzEndpoint(f, "POST", "/v1/conversations/c1/compact", `{"identity":{"id":"alice"},"session":"s1","evicted":[{"role":"user","content":"hello"}]}`)
}

// FuzzReindexBody: no body makes the reindex endpoint fail with a 5xx,
// and a refused one (4xx) never reaches the provider.
func FuzzReindexBody(f *testing.F) {
	p := &fakeReindexer{steps: [][2]int{{0, 1}, {1, 1}}, n: 1}
	h := New(Options{Provider: func(string) (sdk.Provider, error) { return p, nil }, MaxBodyBytes: 64 << 10}).Handler()
	f.Add([]byte(`{"realm":"acme"}`))
	f.Add([]byte(`{}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		before := p.callCount()
		req := httptest.NewRequest("POST", "/v1/admin/reindex", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code >= 500 {
			t.Fatalf("%q: status %d: %s", body, rec.Code, rec.Body)
		}
		if rec.Code >= 400 && p.callCount() != before {
			t.Fatalf("%q: refused with %d but the provider reindexed: %s", body, rec.Code, rec.Body)
		}
	})
}
