package httpapi

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/memhost/memhost/coordinator"
	"github.com/memhost/memhost/coordinator/coordinatortest"
	"github.com/memhost/memhost/internal/mcpserver"
	"github.com/memhost/memhost/sdk"
)

// TestAFloodingTokenIsBounded: from an outside review. Nothing bounded
// one token's requests in flight: 200 concurrent recalls from one tenant
// queued at the shared provider in front of another tenant's, which
// answered 504. A token's requests beyond its max_in_flight, on /v1 and
// /mcp alike, are now refused at once with 429 and a Retry-After, and
// another token's requests are served meanwhile.
func TestAFloodingTokenIsBounded(t *testing.T) {
	p := coordinatortest.NewProvider(coordinatortest.AllCapabilities...)
	p.MustAdd("quiet", sdk.Record{Scope: sdk.IdentityScope("bob"), Kind: sdk.KindFact, Title: "harbour walk", Body: "bob likes the harbour"})
	held, release := make(chan struct{}, 8), make(chan struct{})
	p.SetHook(coordinatortest.MethodRecall, func(ctx context.Context, req any) error {
		if q, ok := req.(sdk.RecallQuery); ok && q.Realm == "flood" {
			held <- struct{}{}
			select {
			case <-release:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return nil
	})
	providers := func(string) (sdk.Provider, error) { return p, nil }
	coord, err := coordinator.New(testConfig(), coordinator.Options{Providers: coordinator.ProvidersFunc(providers)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { coord.Close(context.Background()) })
	const flood, quiet = "flood-secret-0123456789", "quiet-secret-0123456789"
	srv := httptest.NewServer(New(Options{Provider: providers, Coordinator: coord,
		Tokens: []Token{
			{Name: "flood", Secret: flood, Realms: []string{"flood"}, MaxInFlight: 2},
			{Name: "quiet", Secret: quiet, Realms: []string{"quiet"}},
		},
		MCP: func(bind func(http.Header) (mcpserver.Caller, error)) http.Handler {
			return mcpserver.Handler(mcpserver.Options{Provider: providers, Coordinator: coord, Bind: bind})
		}}).Handler())
	t.Cleanup(srv.Close)
	recall := func(secret, realm string) (int, string, http.Header) {
		body := `{"identity":{"realm":"` + realm + `","id":"bob"},"query":"harbour"}`
		req, _ := http.NewRequest("POST", srv.URL+"/v1/recall", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+secret)
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Error(err)
			return 0, "", nil
		}
		defer resp.Body.Close()
		data, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(data), resp.Header
	}
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			if code, body, _ := recall(flood, "flood"); code != 200 {
				t.Errorf("a held recall answered %d %s once released", code, body)
			}
		})
	}
	<-held
	<-held // the flooding token's bound is taken

	code, body, header := recall(flood, "flood")
	if code != http.StatusTooManyRequests || !strings.Contains(body, `"code":"too_many_requests"`) || header.Get("Retry-After") == "" {
		t.Errorf("a third recall of a token bounded at 2 = %d %s (Retry-After %q), want 429 too_many_requests with Retry-After", code, body, header.Get("Retry-After"))
	}
	if !strings.Contains(body, "max_in_flight") {
		t.Errorf("the refusal %s does not name the setting", body)
	}
	// The code says the class; the message says the problem once.
	if strings.Contains(body, "too many requests in flight") {
		t.Errorf("the refusal %s repeats its code in the message", body)
	}
	mcp := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"memory_recall","arguments":{"query":"harbour"}}}`
	req, _ := http.NewRequest("POST", srv.URL+"/mcp?identity=bob&realm=flood", strings.NewReader(mcp))
	for k, v := range map[string]string{"Authorization": "Bearer " + flood, "Content-Type": "application/json", "Accept": "application/json, text/event-stream"} {
		req.Header.Set(k, v)
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	data, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusTooManyRequests || !strings.Contains(string(data), "too_many_requests") {
		t.Errorf("/mcp beside two held recalls = %d %s, want 429 too_many_requests", resp.StatusCode, data)
	}

	if code, body, _ := recall(quiet, "quiet"); code != 200 || !strings.Contains(body, "harbour walk") {
		t.Errorf("another token's recall during the flood = %d %s, want its record", code, body)
	}
	close(release)
	wg.Wait()
	if code, body, _ := recall(flood, "flood"); code != 200 {
		t.Errorf("the flooding token's recall once its requests were answered = %d %s, want 200", code, body)
	}
}

// TestAnMCPBatchCountsEachCall: from an outside review. The SDK runs a
// batch's calls at once, but a batch took one of its token's max_in_flight
// however many calls it carried: a token bounded at 4 ran 4 batches of 16,
// 64 recalls at once against the shared provider. Each request of a batch
// now counts against the bound.
func TestAnMCPBatchCountsEachCall(t *testing.T) {
	p := coordinatortest.NewProvider(coordinatortest.AllCapabilities...)
	p.MustAdd("flood", sdk.Record{Scope: sdk.IdentityScope("bob"), Kind: sdk.KindFact, Title: "harbour walk", Body: "bob likes the harbour"})
	held, release := make(chan struct{}, 32), make(chan struct{})
	p.SetHook(coordinatortest.MethodRecall, func(ctx context.Context, req any) error {
		held <- struct{}{}
		select {
		case <-release:
		case <-ctx.Done():
			return ctx.Err()
		}
		return nil
	})
	providers := func(string) (sdk.Provider, error) { return p, nil }
	coord, err := coordinator.New(testConfig(), coordinator.Options{Providers: coordinator.ProvidersFunc(providers)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { coord.Close(context.Background()) })
	const flood = "flood-secret-0123456789"
	srv := httptest.NewServer(New(Options{Provider: providers, Coordinator: coord,
		Tokens: []Token{{Name: "flood", Secret: flood, Realms: []string{"flood"}, MaxInFlight: 4}},
		MCP: func(bind func(http.Header) (mcpserver.Caller, error)) http.Handler {
			return mcpserver.Handler(mcpserver.Options{Provider: providers, Coordinator: coord, Bind: bind})
		}}).Handler())
	t.Cleanup(srv.Close)
	batch := func(n int) (int, string) {
		var calls []string
		for i := range n {
			calls = append(calls, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"memory_recall","arguments":{"query":"harbour"}}}`, i+1))
		}
		req, _ := http.NewRequest("POST", srv.URL+"/mcp?identity=bob&realm=flood", strings.NewReader("["+strings.Join(calls, ",")+"]"))
		for k, v := range map[string]string{"Authorization": "Bearer " + flood, "Content-Type": "application/json", "Accept": "application/json, text/event-stream"} {
			req.Header.Set(k, v)
		}
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Error(err)
			return 0, ""
		}
		defer resp.Body.Close()
		data, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(data)
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		if code, body := batch(3); code != http.StatusOK {
			t.Errorf("a batch of 3 under a bound of 4 = %d %s, want 200", code, body)
		}
	})
	for range 3 {
		<-held
	}
	// Three of the four are taken: a batch of two is one too many.
	if code, body := batch(2); code != http.StatusTooManyRequests || !strings.Contains(body, "too_many_requests") {
		t.Errorf("a batch of 2 beside 3 held calls of a token bounded at 4 = %d %s, want 429 too_many_requests", code, body)
	}
	close(release)
	wg.Wait()
	if code, body := batch(4); code != http.StatusOK {
		t.Errorf("a batch of 4 once the others were answered = %d %s, want 200", code, body)
	}
	// A batch over the bound can never be served: it is refused as the
	// client's mistake, not with a Retry-After that has it sent again.
	if code, body := batch(5); code != http.StatusBadRequest || !strings.Contains(body, "max_in_flight of 4") || strings.Contains(body, "too_many_requests") {
		t.Errorf("a batch of 5 for a token bounded at 4 = %d %s, want 400 naming max_in_flight", code, body)
	}
}
