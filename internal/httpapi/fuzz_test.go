package httpapi

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
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
	arch *fuzzArchiver
	comp *echoCompactor
}

// fuzzArchiver adds the archive capability to the test provider: Export
// answers an empty page, and Import counts its calls and re-checks what
// reaches it, failing (a 5xx) on a record the API should have refused.
type fuzzArchiver struct {
	*coordinatortest.Provider
	mu      sync.Mutex
	imports int
}

func (a *fuzzArchiver) Export(context.Context, string, string, int) (sdk.ExportPage, error) {
	return sdk.ExportPage{}, nil
}

func (a *fuzzArchiver) Import(_ context.Context, realm string, records []sdk.Record) (sdk.ImportResult, error) {
	a.mu.Lock()
	a.imports++
	a.mu.Unlock()
	for i := range records {
		if err := records[i].PrepareImport(realm); err != nil {
			return sdk.ImportResult{}, fmt.Errorf("import got unchecked record %d: %v", i, err)
		}
	}
	return sdk.ImportResult{Imported: len(records)}, nil
}

func newFuzzFixture(f *testing.F) *fuzzFixture {
	p := coordinatortest.NewProvider(sdk.CapWrite, sdk.CapFetch, sdk.CapForget, sdk.CapManifest, sdk.CapSupersede, sdk.CapUsage, sdk.CapLedger, sdk.CapArchive)
	p.MustAdd("default",
		sdk.Record{Scope: sdk.IdentityScope("alice"), Kind: sdk.KindPreference, Title: "Espresso order", Body: "Alice takes her espresso without sugar."},
		sdk.Record{Scope: sdk.RealmScope, Kind: sdk.KindFact, Title: "Harbour crane", Body: "The crane at berth 4 is out of service."},
	)
	arch := &fuzzArchiver{Provider: p}
	providers := func(string) (sdk.Provider, error) { return arch, nil }
	coord, err := coordinator.New(testConfig(), coordinator.Options{Providers: coordinator.ProvidersFunc(providers)})
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
	return &fuzzFixture{h: srv.Handler(), p: p, arch: arch, comp: comp}
}

// mutations counts the synchronous writes a request can cause. Ledger and
// usage writes are left out: they run in the background after an earlier,
// accepted turn.
func (fx *fuzzFixture) mutations() int {
	fx.comp.mu.Lock()
	n := fx.comp.calls
	fx.comp.mu.Unlock()
	fx.arch.mu.Lock()
	n += fx.arch.imports
	fx.arch.mu.Unlock()
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

func FuzzExportBody(f *testing.F) {
	fuzzEndpoint(f, "POST", "/v1/export", `{"realm":"default","after":"r19b7ca98c889ae80fe313a75c53","limit":100}`)
}

func FuzzImportBody(f *testing.F) {
	fuzzEndpoint(f, "POST", "/v1/import", `{"realm":"default","records":[`+importSeedRecord+`]}`)
}

// importSeedRecord is a record as export writes it.
const importSeedRecord = `{"id":"r19b7ca98c889ae80fe313a75c53","realm":"default","scope":"identity:alice","kind":"fact","title":"Espresso order","body":"No sugar.","tags":["coffee"],"trust":"agent_observed","status":"active","created_at":"2026-01-02T03:04:05Z","updated_at":"2026-01-02T03:04:05Z","content_hash":"e76c4a896bebfafe08c7cbd97eda39f4abb1a2bae59d2edda6cb6014a1410a5d","use_count":0}`
