package openai

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/memhost/memhost/sdk"
	"github.com/memhost/memhost/sdk/endpoint"
	"github.com/memhost/memhost/sdk/host"
)

// fakeEmbeddings speaks the embeddings API. Each input's vector comes
// from a hash of its text, so answers are checkable. mode picks how it
// misbehaves: "" answers well; slow never answers before the client
// gives up; shuffled answers the entries out of order; wrongdim, malformed,
// nodata, short, noindex, dupindex, badindex and null answer broken JSON
// shapes;
// failN answers the first failN requests with failCode (and retryAfter).
type fakeEmbeddings struct {
	mu         sync.Mutex
	dims       int
	mode       string
	failN      int
	failCode   int
	retryAfter string
	requests   []embeddingsRequest
	headers    []http.Header
	paths      []string
}

func (f *fakeEmbeddings) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var req embeddingsRequest
	err := json.NewDecoder(r.Body).Decode(&req)
	f.mu.Lock()
	f.requests = append(f.requests, req)
	f.headers = append(f.headers, r.Header.Clone())
	f.paths = append(f.paths, r.URL.Path)
	mode, dims := f.mode, f.dims
	fail := len(f.requests) <= f.failN
	f.mu.Unlock()
	if err != nil {
		http.Error(w, `{"error":{"message":"bad json"}}`, http.StatusBadRequest)
		return
	}
	if fail {
		if f.retryAfter != "" {
			w.Header().Set("Retry-After", f.retryAfter)
		}
		http.Error(w, `{"error":{"message":"try later"}}`, f.failCode)
		return
	}
	type entry struct {
		Object    string    `json:"object"`
		Index     int       `json:"index"`
		Embedding []float32 `json:"embedding"`
	}
	data := make([]entry, len(req.Input))
	for i, text := range req.Input {
		d := dims
		if mode == "wrongdim" && i == len(req.Input)-1 {
			d++
		}
		data[i] = entry{Object: "embedding", Index: i, Embedding: hashVector(text, d)}
	}
	switch mode {
	case "slow":
		<-r.Context().Done()
		return
	case "shuffled":
		slices.Reverse(data)
	case "malformed":
		w.Write([]byte(`{"data":[{"index":0,"embedding":[0.1,`))
		return
	case "nodata":
		w.Write([]byte(`{"object":"list","model":"m"}`))
		return
	case "short":
		data = data[1:]
	case "noindex":
		w.Write([]byte(`{"data":[{"embedding":[1,2,3,4]}]}`))
		return
	case "dupindex":
		data[len(data)-1].Index = 0
	case "badindex":
		data[0].Index = len(data)
	case "null":
		// What JSON.stringify makes of a NaN component.
		w.Write([]byte(`{"data":[{"index":0,"embedding":[null,0.5,0.5,0.5]}]}`))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{"object": "list", "data": data, "model": req.Model})
}

func hashVector(text string, dims int) []float32 {
	h := fnv.New64a()
	h.Write([]byte(text))
	r := rand.New(rand.NewPCG(h.Sum64(), 7))
	v := make([]float32, dims)
	for i := range v {
		v[i] = float32(r.NormFloat64())
	}
	return v
}

func (f *fakeEmbeddings) set(mode string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.mode = mode
}

func (f *fakeEmbeddings) failFirst(n, code int, retryAfter string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.failN, f.failCode, f.retryAfter, f.requests = n, code, retryAfter, nil
}

func (f *fakeEmbeddings) calls() []embeddingsRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.requests)
}

func newFake(t *testing.T) (*fakeEmbeddings, *httptest.Server) {
	f := &fakeEmbeddings{dims: 4}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	return f, srv
}

// configured answers an embedder on cfg whose retry waits are recorded in
// *waits rather than waited.
func configured(t *testing.T, cfg string, env map[string]string, waits *[]time.Duration) *Embedder {
	t.Helper()
	e := New()
	e.log = slog.New(slog.DiscardHandler)
	e.lookupEnv = func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	var mu sync.Mutex
	e.sleep = func(ctx context.Context, d time.Duration) error {
		mu.Lock()
		if waits != nil {
			*waits = append(*waits, d)
		}
		mu.Unlock()
		return ctx.Err()
	}
	if err := e.Configure(t.Context(), json.RawMessage(cfg)); err != nil {
		t.Fatal(err)
	}
	return e
}

func docs(texts ...string) sdk.EmbedRequest {
	return sdk.EmbedRequest{Purpose: sdk.EmbedDocument, Texts: texts}
}

func TestEmbedAgainstTheEndpoint(t *testing.T) {
	f, srv := newFake(t)
	e := configured(t, fmt.Sprintf(`{"base_url": %q, "model": "tiny", "dimensions": 4, "api_key_env": "KEY",
		"query_prefix": "search_query: ", "document_prefix": "search_document: ", "request_batch": 2, "parallel": 2}`, srv.URL+"/v1/"),
		map[string]string{"KEY": " sk-test "}, nil)
	ctx := t.Context()
	texts := []string{"one", "two", "three", "four", "five"}
	vecs, err := e.Embed(ctx, docs(texts...))
	if err != nil {
		t.Fatal(err)
	}
	for i, text := range texts {
		if want := hashVector("search_document: "+text, 4); !slices.Equal(vecs[i], want) {
			t.Errorf("vector %d = %v, want the document-prefixed text's %v", i, vecs[i], want)
		}
	}
	calls := f.calls()
	if len(calls) != 3 {
		t.Fatalf("%d requests for 5 texts in batches of 2, want 3", len(calls))
	}
	var sent []string
	for i, c := range calls {
		if len(c.Input) > 2 || c.Model != "tiny" || c.Dimensions != 0 {
			t.Errorf("request %d: %+v", i, c)
		}
		sent = append(sent, c.Input...)
		if got := f.headers[i].Get("Authorization"); got != "Bearer sk-test" {
			t.Errorf("request %d: Authorization %q", i, got)
		}
		if f.paths[i] != "/v1/embeddings" {
			t.Errorf("request %d: path %s", i, f.paths[i])
		}
	}
	slices.Sort(sent)
	if want := []string{"search_document: five", "search_document: four", "search_document: one", "search_document: three", "search_document: two"}; !slices.Equal(sent, want) {
		t.Errorf("sent %v", sent)
	}
	q, err := e.Embed(ctx, sdk.EmbedRequest{Purpose: sdk.EmbedQuery, Texts: []string{"one"}})
	if err != nil || !slices.Equal(q[0], hashVector("search_query: one", 4)) {
		t.Errorf("query vector %v, %v: want the query-prefixed text's", q, err)
	}
}

func TestEmbedderInfoFollowsTheConfig(t *testing.T) {
	_, srv := newFake(t)
	base := fmt.Sprintf(`"base_url": %q, "model": "text-embedding-3-small", "dimensions": 4`, srv.URL)
	info := func(extra string) sdk.EmbedderInfo {
		i, err := configured(t, "{"+base+extra+"}", nil, nil).EmbedderInfo(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		return i
	}
	plain := info("")
	if want := (sdk.EmbedderInfo{Model: "text-embedding-3-small/4", Dimensions: 4, MaxBatch: sdk.MaxEmbedBatch, MaxInputBytes: DefaultMaxInputBytes}); plain != want {
		t.Errorf("info %+v, want %+v", plain, want)
	}
	prefixed := info(`, "query_prefix": "query: "`)
	other := info(`, "document_prefix": "query: "`)
	if prefixed.Model == plain.Model || other.Model == prefixed.Model {
		t.Errorf("prefixes change the vectors but not the model id: %q, %q, %q", plain.Model, prefixed.Model, other.Model)
	}
	if got := info(`, "model_id": "mine", "max_input_bytes": 100, "deterministic": true`); got.Model != "mine" || got.MaxInputBytes != 100 || !got.Deterministic {
		t.Errorf("info %+v", got)
	}
}

// TestPrefixStaysWithinMaxInputBytes: max_input_bytes bounds what the
// endpoint is sent, prefix included. The plugin declared the whole of it
// to the host, which cut texts to it, and then put the prefix before
// them: an endpoint at that limit refused every long record.
func TestPrefixStaysWithinMaxInputBytes(t *testing.T) {
	for _, tc := range []struct {
		name, prefixes string
		declared       int
	}{
		{"no prefix", ``, 64},
		{"document prefix", `, "document_prefix": "search_document: "`, 64 - len("search_document: ")},
		{"query prefix longer", `, "document_prefix": "d: ", "query_prefix": "search_query: "`, 64 - len("search_query: ")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, srv := newFake(t)
			e := configured(t, fmt.Sprintf(`{"base_url": %q, "model": "tiny", "dimensions": 4, "max_input_bytes": 64%s}`, srv.URL+"/v1/", tc.prefixes), nil, nil)
			info, err := e.EmbedderInfo(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			if info.MaxInputBytes != tc.declared {
				t.Errorf("declared max_input_bytes %d, want %d", info.MaxInputBytes, tc.declared)
			}
			text := strings.Repeat("é", info.MaxInputBytes/2) // the most the host sends
			for _, purpose := range []sdk.EmbedPurpose{sdk.EmbedDocument, sdk.EmbedQuery} {
				if _, err := e.Embed(t.Context(), sdk.EmbedRequest{Purpose: purpose, Texts: []string{text}}); err != nil {
					t.Fatal(err)
				}
			}
			for _, c := range f.calls() {
				if got := len(c.Input[0]); got > 64 {
					t.Errorf("the endpoint was sent %d bytes; max_input_bytes is 64", got)
				}
			}
		})
	}
}

func TestSendDimensions(t *testing.T) {
	f, srv := newFake(t)
	e := configured(t, fmt.Sprintf(`{"base_url": %q, "model": "m", "dimensions": 4, "send_dimensions": true}`, srv.URL), nil, nil)
	if _, err := e.Embed(t.Context(), docs("a")); err != nil {
		t.Fatal(err)
	}
	if c := f.calls(); c[0].Dimensions != 4 {
		t.Errorf("request %+v, want dimensions 4 sent", c[0])
	}
}

func TestBrokenAnswers(t *testing.T) {
	f, srv := newFake(t)
	e := configured(t, fmt.Sprintf(`{"base_url": %q, "model": "m", "dimensions": 4, "max_retries": 0}`, srv.URL), nil, nil)
	for _, tc := range []struct{ mode, want string }{
		{"wrongdim", "the model answered 5 dimensions, the config says 4"},
		{"malformed", "malformed JSON"},
		{"nodata", "no data"},
		{"short", "2 embeddings for 3 texts"},
		{"dupindex", "index 0 twice"},
		{"badindex", "index 3, outside 0..2"},
		{"noindex", "no index"},
		{"null", "null value"},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			f.set(tc.mode)
			texts := []string{"a", "b", "c"}
			if tc.mode == "noindex" || tc.mode == "null" {
				texts = texts[:1]
			}
			_, err := e.Embed(t.Context(), docs(texts...))
			if err == nil || !strings.Contains(err.Error(), tc.want) || !errors.Is(err, sdk.ErrUnavailable) {
				t.Errorf("error %v, want an unavailable one saying %q", err, tc.want)
			}
		})
	}
	t.Run("shuffled", func(t *testing.T) {
		f.set("shuffled")
		vecs, err := e.Embed(t.Context(), docs("a", "b", "c"))
		if err != nil {
			t.Fatal(err)
		}
		for i, text := range []string{"a", "b", "c"} {
			if !slices.Equal(vecs[i], hashVector(text, 4)) {
				t.Errorf("vector %d is not text %q's: entries out of order were not put back by index", i, text)
			}
		}
	})
}

func TestRetries(t *testing.T) {
	f, srv := newFake(t)
	cfg := fmt.Sprintf(`{"base_url": %q, "model": "m", "dimensions": 4, "max_retries": 3, "retry_base_ms": 100}`, srv.URL)
	for _, tc := range []struct {
		name       string
		failN      int
		code       int
		retryAfter string
		wantErr    error // nil = succeeds
		wantCalls  int
		wantWaits  []time.Duration // exact waits; nil = check the backoff bounds
	}{
		{name: "429 then ok", failN: 2, code: 429, wantCalls: 3},
		{name: "503 then ok", failN: 3, code: 503, wantCalls: 4},
		{name: "408 then ok", failN: 1, code: 408, wantCalls: 2},
		{name: "Retry-After seconds", failN: 1, code: 429, retryAfter: "2", wantCalls: 2, wantWaits: []time.Duration{2 * time.Second}},
		{name: "Retry-After capped", failN: 1, code: 429, retryAfter: "3600", wantCalls: 2, wantWaits: []time.Duration{MaxBackoff}},
		{name: "500 past the retries", failN: 10, code: 500, wantErr: sdk.ErrUnavailable, wantCalls: 4},
		{name: "401 not retried", failN: 1, code: 401, wantErr: sdk.ErrPermission, wantCalls: 1},
		{name: "400 not retried", failN: 1, code: 400, wantErr: sdk.ErrInvalid, wantCalls: 1},
		{name: "422 not retried", failN: 1, code: 422, wantErr: sdk.ErrInvalid, wantCalls: 1},
		// A model still loading (404) or a gateway's 424 says nothing of
		// the texts: an outage, so the host's backlog waits and asks again
		// rather than leaving the records without vectors.
		{name: "404 is an outage", failN: 1, code: 404, wantErr: sdk.ErrUnavailable, wantCalls: 1},
		{name: "424 is an outage", failN: 1, code: 424, wantErr: sdk.ErrUnavailable, wantCalls: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var waits []time.Duration
			e := configured(t, cfg, nil, &waits)
			f.failFirst(tc.failN, tc.code, tc.retryAfter)
			_, err := e.Embed(t.Context(), docs("a"))
			switch {
			case tc.wantErr == nil && err != nil:
				t.Fatalf("Embed: %v", err)
			case tc.wantErr != nil && !errors.Is(err, tc.wantErr):
				t.Fatalf("Embed: %v, want %v", err, tc.wantErr)
			}
			if got := len(f.calls()); got != tc.wantCalls {
				t.Errorf("%d requests, want %d", got, tc.wantCalls)
			}
			if len(waits) != tc.wantCalls-1 {
				t.Fatalf("waits %v for %d requests", waits, tc.wantCalls)
			}
			if tc.wantWaits != nil {
				if !slices.Equal(waits, tc.wantWaits) {
					t.Errorf("waits %v, want %v", waits, tc.wantWaits)
				}
				return
			}
			for i, w := range waits {
				// Attempt i waits half to all of 100ms doubled i times.
				full := 100 * time.Millisecond << i
				if w < full/2 || w > full {
					t.Errorf("wait %d = %s, outside %s..%s", i, w, full/2, full)
				}
			}
		})
	}
}

func TestRetryAfter(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, tc := range []struct {
		v    string
		want time.Duration
	}{
		{"", 0},
		{"0", 0},
		{"-3", 0},
		{"1.5", 1500 * time.Millisecond},
		{"99999", MaxBackoff},
		{now.Add(3 * time.Second).Format(http.TimeFormat), 3 * time.Second},
		{now.Add(-time.Hour).Format(http.TimeFormat), 0},
		{"soon", 0},
	} {
		if got := retryAfter(tc.v, now); got != tc.want {
			t.Errorf("retryAfter(%q) = %s, want %s", tc.v, got, tc.want)
		}
	}
}

// TestDeadlines: the call's deadline ends a slow request and is not
// retried past; a wait the deadline cannot cover is not started; a slow
// attempt within the call is cut at timeout_ms and retried.
func TestDeadlines(t *testing.T) {
	f, srv := newFake(t)
	t.Run("slow answer past the call's deadline", func(t *testing.T) {
		f.set("slow")
		defer f.set("")
		e := configured(t, fmt.Sprintf(`{"base_url": %q, "model": "m", "dimensions": 4}`, srv.URL), nil, nil)
		ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
		defer cancel()
		_, err := e.Embed(ctx, docs("a"))
		if !errors.Is(err, sdk.ErrDeadline) || strings.Count(err.Error(), "deadline") > 1 {
			t.Fatalf("Embed: %v, want a deadline error, said once", err)
		}
	})
	t.Run("a wait past the deadline is not started", func(t *testing.T) {
		var waits []time.Duration
		e := configured(t, fmt.Sprintf(`{"base_url": %q, "model": "m", "dimensions": 4}`, srv.URL), nil, &waits)
		f.failFirst(1, 429, "10")
		defer f.failFirst(0, 0, "")
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		defer cancel()
		_, err := e.Embed(ctx, docs("a"))
		if !errors.Is(err, sdk.ErrUnavailable) || !strings.Contains(err.Error(), "would pass the call's deadline") || len(waits) != 0 {
			t.Fatalf("Embed: %v after waits %v", err, waits)
		}
	})
	t.Run("a slow attempt is cut and retried", func(t *testing.T) {
		f.set("slow")
		defer f.set("")
		var waits []time.Duration
		e := configured(t, fmt.Sprintf(`{"base_url": %q, "model": "m", "dimensions": 4, "timeout_ms": 50, "max_retries": 2}`, srv.URL), nil, &waits)
		f.failFirst(0, 0, "")
		_, err := e.Embed(t.Context(), docs("a"))
		if !errors.Is(err, sdk.ErrUnavailable) || !strings.Contains(err.Error(), "gave no answer within 50ms") {
			t.Fatalf("Embed: %v", err)
		}
		// Counted on the client's side: the fake server records a request
		// only once its handler has read it, which a loaded machine may
		// not reach before the 50 ms cut the attempt.
		if len(waits) != 2 || !strings.Contains(err.Error(), "(after 3 attempts)") || len(f.calls()) > 3 {
			t.Errorf("Embed: %v after waits %v and %d requests seen, want 3 attempts", err, waits, len(f.calls()))
		}
	})
	t.Run("expired before the call", func(t *testing.T) {
		e := configured(t, fmt.Sprintf(`{"base_url": %q, "model": "m", "dimensions": 4}`, srv.URL), nil, nil)
		f.failFirst(0, 0, "")
		ctx, cancel := context.WithDeadline(t.Context(), time.Now().Add(-time.Second))
		defer cancel()
		if _, err := e.Embed(ctx, docs("a")); !errors.Is(err, sdk.ErrDeadline) || strings.Count(err.Error(), "deadline") > 1 {
			t.Fatalf("Embed: %v, want a deadline error, said once", err)
		}
		if n := len(f.calls()); n != 0 {
			t.Errorf("%d requests made past the deadline", n)
		}
	})
}

// TestFirstFailureStopsTheRest: a failing batch fails the call and the
// batches not yet sent are not sent.
func TestFirstFailureStopsTheRest(t *testing.T) {
	f, srv := newFake(t)
	e := configured(t, fmt.Sprintf(`{"base_url": %q, "model": "m", "dimensions": 4, "request_batch": 1, "parallel": 1, "max_retries": 0}`, srv.URL), nil, nil)
	f.failFirst(1, 401, "")
	_, err := e.Embed(t.Context(), docs("a", "b", "c", "d"))
	if !errors.Is(err, sdk.ErrPermission) {
		t.Fatalf("Embed: %v", err)
	}
	if n := len(f.calls()); n != 1 {
		t.Errorf("%d requests after the first failed, want 1", n)
	}
}

func TestConfigRefusals(t *testing.T) {
	url := "http://localhost:1"
	for _, tc := range []struct{ cfg, field string }{
		{`{"model": "m", "dimensions": 4}`, "base_url"},
		{`{"base_url": "ftp://x", "model": "m", "dimensions": 4}`, "base_url"},
		{fmt.Sprintf(`{"base_url": %q, "model": "m", "dimensions": 4, "extra": 1}`, url), ""},
		{fmt.Sprintf(`{"base_url": "%s?x=1", "model": "m", "dimensions": 4}`, url), "base_url"},
		{`{"base_url": "https://user:sk-secret@example.com/v1", "model": "m", "dimensions": 4}`, "base_url"},
		// A gateway's key in the query (?key=), or credentials in a URL
		// that does not parse, are not quoted back either.
		{`{"base_url": "https://gw.example.com/v1?key=sk-in-query", "model": "m", "dimensions": 4}`, "base_url"},
		{`{"base_url": "https://user:sk-secret@example.com:port/v1", "model": "m", "dimensions": 4}`, "base_url"},
		{`{"base_url": "ftp://user:sk-secret@example.com/v1", "model": "m", "dimensions": 4}`, "base_url"},
		{fmt.Sprintf(`{"base_url": %q, "model": "m\u0001", "dimensions": 4}`, url), "model"},
		{fmt.Sprintf(`{"base_url": %q, "model": " ", "dimensions": 4}`, url), "model"},
		{fmt.Sprintf(`{"base_url": %q, "model": "m"}`, url), "dimensions"},
		{fmt.Sprintf(`{"base_url": %q, "model": "m", "dimensions": 9000}`, url), "dimensions"},
		{fmt.Sprintf(`{"base_url": %q, "model": "m", "dimensions": 4, "request_batch": 0}`, url), "request_batch"},
		{fmt.Sprintf(`{"base_url": %q, "model": "m", "dimensions": 4, "parallel": 17}`, url), "parallel"},
		{fmt.Sprintf(`{"base_url": %q, "model": "m", "dimensions": 4, "max_input_bytes": 70000}`, url), "max_input_bytes"},
		{fmt.Sprintf(`{"base_url": %q, "model": "m", "dimensions": 4, "max_input_bytes": 7, "query_prefix": "query: "}`, url), "max_input_bytes"},
		{fmt.Sprintf(`{"base_url": %q, "model": "m", "dimensions": 4, "timeout_ms": 0}`, url), "timeout_ms"},
		{fmt.Sprintf(`{"base_url": %q, "model": "m", "dimensions": 4, "max_retries": 11}`, url), "max_retries"},
		{fmt.Sprintf(`{"base_url": %q, "model": "m", "dimensions": 4, "retry_base_ms": 0}`, url), "retry_base_ms"},
		{fmt.Sprintf(`{"base_url": %q, "model": "m", "dimensions": 4, "model_id": "a\nb"}`, url), "model_id"},
		// Providers store a vector's model id only as printable ASCII
		// without spaces, of at most 200 bytes.
		{fmt.Sprintf(`{"base_url": %q, "model": "m", "dimensions": 4, "model_id": "my model"}`, url), "model_id"},
		{fmt.Sprintf(`{"base_url": %q, "model": "m", "dimensions": 4, "model_id": "modèle"}`, url), "model_id"},
		{fmt.Sprintf(`{"base_url": %q, "model": "nomic embed text", "dimensions": 4}`, url), "model"},
		{fmt.Sprintf(`{"base_url": %q, "model": %q, "dimensions": 4}`, url, strings.Repeat("m", 199)), "model"},
		{fmt.Sprintf(`{"base_url": %q, "model": "m", "dimensions": 4, "api_key_env": "UNSET_KEY"}`, url), "api_key_env"},
		{fmt.Sprintf(`{"base_url": %q, "model": "m", "dimensions": 4, "api_key_env": "sk-live-pasted"}`, url), "api_key_env"},
	} {
		e := New()
		e.lookupEnv = func(string) (string, bool) { return "", false }
		err := e.Configure(t.Context(), json.RawMessage(tc.cfg))
		var fe *sdk.FieldError
		switch {
		case !errors.Is(err, sdk.ErrInvalid):
			t.Errorf("config %s: %v, want invalid", tc.cfg, err)
		case tc.field != "" && (!errors.As(err, &fe) || fe.Field != tc.field):
			t.Errorf("config %s: %v, want field %s", tc.cfg, err, tc.field)
		case strings.Contains(err.Error(), "sk-"):
			t.Errorf("config %s: the error shows a key: %v", tc.cfg, err)
		}
	}
	if _, err := New().Embed(t.Context(), docs("a")); !errors.Is(err, ErrNotConfigured) {
		t.Errorf("Embed before Configure: %v", err)
	}
}

// TestParallelBound: one call's requests are at most parallel in flight.
// The server holds each request until another is in flight too (or a
// while passes), so an unbounded client would pile all of them up.
func TestParallelBound(t *testing.T) {
	var (
		mu       sync.Mutex
		inflight int
		most     int
		arrived  = sync.NewCond(&mu)
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req embeddingsRequest
		json.NewDecoder(r.Body).Decode(&req)
		mu.Lock()
		inflight++
		most = max(most, inflight)
		arrived.Broadcast()
		deadline := time.Now().Add(300 * time.Millisecond)
		for inflight < 2 && time.Now().Before(deadline) {
			go func() { time.Sleep(10 * time.Millisecond); arrived.Broadcast() }()
			arrived.Wait()
		}
		mu.Unlock()
		// Held a little longer, so a client with no bound sends more meanwhile.
		time.Sleep(20 * time.Millisecond)
		mu.Lock()
		inflight--
		mu.Unlock()
		data := make([]map[string]any, len(req.Input))
		for i, text := range req.Input {
			data[i] = map[string]any{"index": i, "embedding": hashVector(text, 4)}
		}
		json.NewEncoder(w).Encode(map[string]any{"data": data})
	}))
	t.Cleanup(srv.Close)
	e := configured(t, fmt.Sprintf(`{"base_url": %q, "model": "m", "dimensions": 4, "request_batch": 1, "parallel": 2}`, srv.URL), nil, nil)
	texts := []string{"a", "b", "c", "d", "e", "f", "g", "h"}
	vecs, err := e.Embed(t.Context(), docs(texts...))
	if err != nil {
		t.Fatal(err)
	}
	for i, text := range texts {
		if !slices.Equal(vecs[i], hashVector(text, 4)) {
			t.Errorf("vector %d is not text %q's", i, text)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if most > 2 {
		t.Errorf("%d requests in flight at once, parallel is 2", most)
	}
}

// TestSchemaMatchesConfig: the published schema and the decoded struct
// name the same keys, so neither refuses what the other takes.
func TestSchemaMatchesConfig(t *testing.T) {
	var schema struct {
		Properties map[string]json.RawMessage `json:"properties"`
		Required   []string                   `json:"required"`
	}
	if err := json.Unmarshal([]byte(configSchema), &schema); err != nil {
		t.Fatal(err)
	}
	var inSchema, inStruct []string
	for k := range schema.Properties {
		inSchema = append(inSchema, k)
	}
	typ := reflect.TypeFor[Config]()
	for i := range typ.NumField() {
		inStruct = append(inStruct, strings.Split(typ.Field(i).Tag.Get("json"), ",")[0])
	}
	slices.Sort(inSchema)
	slices.Sort(inStruct)
	if !slices.Equal(inSchema, inStruct) {
		t.Errorf("schema keys %v, Config keys %v", inSchema, inStruct)
	}
	for _, k := range schema.Required {
		if !slices.Contains(inStruct, k) {
			t.Errorf("schema requires %q, which Config lacks", k)
		}
	}
}

// TestRetryIsLogged: each retry is a warning line naming the endpoint and
// the attempt, never the key.
func TestRetryIsLogged(t *testing.T) {
	f, srv := newFake(t)
	e := configured(t, fmt.Sprintf(`{"base_url": %q, "model": "m", "dimensions": 4, "api_key_env": "KEY"}`, srv.URL), map[string]string{"KEY": "sk-very-secret"}, nil)
	var buf bytes.Buffer
	e.log = slog.New(slog.NewJSONHandler(&buf, nil))
	f.failFirst(1, 429, "")
	if _, err := e.Embed(t.Context(), docs("a")); err != nil {
		t.Fatal(err)
	}
	line := buf.String()
	for _, want := range []string{`"level":"WARN"`, `"msg":"embeddings request retried"`, `"attempt":2`, srv.URL + `/embeddings`, "HTTP 429"} {
		if !strings.Contains(line, want) {
			t.Errorf("log %s lacks %s", line, want)
		}
	}
	if strings.Contains(line, "sk-very-secret") {
		t.Errorf("the log shows the key: %s", line)
	}
}

// TestRetryWarningsAreRateLimited: an endpoint that keeps answering 429
// writes the first retry's warning and then at most one a minute, which
// counts the retries since the last line; a line per retry flooded the
// log (over a hundred a minute from one idle realm's backlog).
func TestRetryWarningsAreRateLimited(t *testing.T) {
	for _, tc := range []struct {
		name string
		at   []time.Duration // when each retry happens
		want []int           // the retries each line counts
	}{
		{name: "one retry", at: []time.Duration{0}, want: []int{1}},
		{name: "retries within a minute", at: []time.Duration{0, time.Second, 30 * time.Second, 59 * time.Second}, want: []int{1}},
		{name: "a minute on counts the unlogged", at: []time.Duration{0, time.Second, 2 * time.Second, time.Minute}, want: []int{1, 3}},
		{name: "each minute once", at: []time.Duration{0, time.Minute, 2 * time.Minute, 2*time.Minute + time.Second}, want: []int{1, 1, 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, srv := newFake(t)
			e := configured(t, fmt.Sprintf(`{"base_url": %q, "model": "m", "dimensions": 4}`, srv.URL), nil, nil)
			var buf bytes.Buffer
			e.log = slog.New(slog.NewJSONHandler(&buf, nil))
			start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
			for _, at := range tc.at {
				e.now = func() time.Time { return start.Add(at) }
				f.failFirst(1, 429, "")
				if _, err := e.Embed(t.Context(), docs("a")); err != nil {
					t.Fatal(err)
				}
			}
			var got []int
			for line := range strings.Lines(buf.String()) {
				var rec struct {
					Msg     string `json:"msg"`
					Retries int    `json:"retries"`
				}
				if err := json.Unmarshal([]byte(line), &rec); err != nil {
					t.Fatalf("log line %q: %v", line, err)
				}
				if rec.Msg == "embeddings request retried" {
					got = append(got, rec.Retries)
				}
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("retry lines counting %v, want %v\n%s", got, tc.want, buf.String())
			}
		})
	}
}

// TestRefusedKeyThroughTheHost: the host names a refused key as
// config.<key>, once.
func TestRefusedKeyThroughTheHost(t *testing.T) {
	conn, err := host.ServeInProcess(t.Context(), New(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	err = conn.Configure(t.Context(), json.RawMessage(`{"base_url": "http://localhost:1", "model": "m", "dimensions": 0}`))
	var fe *sdk.FieldError
	if !errors.As(err, &fe) || fe.Field != "config.dimensions" {
		t.Fatalf("Configure: %v, want a refusal of config.dimensions", err)
	}
}

// TestErrorsNeverCarryTheKey: an endpoint that echoes the key it was sent
// (gateways do: "Incorrect API key provided: sk-...") must not put it in
// the plugin's errors, which the host logs and shows in its status; nor
// any long part of it, as an excerpt cut inside the key would hold.
func TestErrorsNeverCarryTheKey(t *testing.T) {
	const key = "sk-live-abcdef0123456789"
	for _, tc := range []struct {
		name   string
		status int
		body   func(bearer string) string
		want   error
	}{
		{"refused key echoed", 401, func(k string) string {
			return `{"error":{"message":"Incorrect API key provided: ` + k + `"}}`
		}, sdk.ErrPermission},
		{"key echoed in a plain error page", 502, func(k string) string { return "upstream refused Bearer " + k }, sdk.ErrUnavailable},
		{"key cut by the excerpt", 400, func(k string) string { return strings.Repeat("x", 190) + k }, sdk.ErrInvalid},
		{"key in an answer without data", 200, func(k string) string { return `{"error":{"message":"bad key ` + k + `"}}` }, sdk.ErrUnavailable},
		{"key in malformed JSON", 200, func(k string) string { return `{"data":[` + k }, sdk.ErrUnavailable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(tc.status)
				w.Write([]byte(tc.body(strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer "))))
			}))
			defer srv.Close()
			var logs bytes.Buffer
			e := configured(t, `{"base_url":"`+srv.URL+`","model":"m","dimensions":4,"api_key_env":"K","max_retries":1}`, map[string]string{"K": key}, nil)
			e.log = slog.New(slog.NewTextHandler(&logs, nil))
			_, err := e.Embed(t.Context(), docs("x"))
			if !errors.Is(err, tc.want) {
				t.Fatalf("error %v, want %v", err, tc.want)
			}
			for _, text := range []string{err.Error(), logs.String()} {
				for i := 0; i+endpoint.MinRedacted <= len(key); i++ {
					if strings.Contains(text, key[i:i+endpoint.MinRedacted]) {
						t.Fatalf("%q holds %q of the key", text, key[i:i+endpoint.MinRedacted])
					}
				}
			}
			if !strings.Contains(err.Error(), "[redacted]") {
				t.Errorf("error %v does not say what was left out", err)
			}
		})
	}
}

// TestRedirectsAreNotFollowed: a redirect would send the texts to a host
// the operator never configured, and Go keeps the Authorization header
// when only the port changes, or from https to http. A 3xx is an outage
// naming where it points.
func TestRedirectsAreNotFollowed(t *testing.T) {
	var reached atomic.Int32
	var gotAuth atomic.Value
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reached.Add(1)
		gotAuth.Store(r.Header.Get("Authorization"))
		w.Write([]byte(`{"data":[{"index":0,"embedding":[1,2,3,4]}]}`))
	}))
	defer other.Close()
	for _, tc := range []struct {
		name string
		code int
		to   string // where the redirect points
		tls  bool
	}{
		{"307 to another host", http.StatusTemporaryRedirect, strings.Replace(other.URL, "127.0.0.1", "localhost", 1), false},
		{"308 to another port", http.StatusPermanentRedirect, other.URL, false},
		{"https to plain http", http.StatusPermanentRedirect, other.URL, true},
		{"302 after a POST", http.StatusFound, other.URL, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reached.Store(0)
			h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				http.Redirect(w, r, tc.to+"/v1/embeddings?x=1", tc.code)
			})
			srv := httptest.NewUnstartedServer(h)
			if tc.tls {
				srv.StartTLS()
			} else {
				srv.Start()
			}
			defer srv.Close()
			e := configured(t, `{"base_url":"`+srv.URL+`/v1","model":"m","dimensions":4,"api_key_env":"K"}`, map[string]string{"K": "sk-secret-key"}, nil)
			// The test server's certificate, with the plugin's own client.
			e.client.Transport = srv.Client().Transport
			_, err := e.Embed(t.Context(), docs("tenant private text"))
			if n := reached.Load(); n != 0 {
				t.Fatalf("the redirect was followed (%d requests at %s, Authorization %q)", n, tc.to, gotAuth.Load())
			}
			if !errors.Is(err, sdk.ErrUnavailable) || !strings.Contains(err.Error(), tc.to) || strings.Contains(err.Error(), "x=1") || strings.Contains(err.Error(), "sk-secret") {
				t.Errorf("error %v, want an outage naming %s only by its host", err, tc.to)
			}
		})
	}
}

// TestErrorExcerptIsCutOnACharacter: the excerpt of an error page is cut
// at 200 bytes, never inside a character.
func TestErrorExcerptIsCutOnACharacter(t *testing.T) {
	for _, char := range []string{"é", "€", "😀"} {
		for pad := range 4 {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(http.StatusBadRequest)
				w.Write([]byte(`{"error":{"message":"` + strings.Repeat("a", pad) + strings.Repeat(char, 150) + `"}}`))
			}))
			e := configured(t, `{"base_url":"`+srv.URL+`","model":"m","dimensions":4}`, nil, nil)
			_, err := e.Embed(t.Context(), docs("x"))
			srv.Close()
			if err == nil || !utf8.ValidString(err.Error()) {
				t.Errorf("%q after %d bytes: error %q is not valid UTF-8", char, pad, err)
			}
		}
	}
}

// TestMalformedAnswersNameNoGoTypes: an answer of the wrong JSON shape (a
// base64 embedding, a number past float32, a string index, an object for
// data) is described in the API's terms; the decoder's words ("Go struct
// field ... of type []float32") reach /v1/plugins and the log otherwise.
func TestMalformedAnswersNameNoGoTypes(t *testing.T) {
	for _, tc := range []struct{ body, want string }{
		{`{"data":[{"index":0,"embedding":"AAAAAAAAgD8="}]}`, "data.embedding is string, where an array belongs"},
		{`{"data":[{"index":0,"embedding":[1e39,1]}]}`, "data.embedding is number 1e39, where a number within single precision's range belongs"},
		{`{"data":[{"index":"0","embedding":[1,1]}]}`, "data.index is string, where a whole number belongs"},
		{`{"data":{"index":0}}`, "data is object, where an array belongs"},
		{`["data"]`, "the answer is array, where an object belongs"},
	} {
		_, err := decode([]byte(tc.body), 1, 2)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one saying %q", tc.body, err, tc.want)
		}
		for _, goWord := range []string{"Go ", "float32", "[]", "struct", "*int", "openai."} {
			if err != nil && strings.Contains(err.Error(), goWord) {
				t.Errorf("%s: error %q names a Go type (%q)", tc.body, err, goWord)
			}
		}
	}
}

// TestUnreachableEndpointIsNamedOnce: a refused connection says the
// endpoint once, not again in the transport's "Post <url>".
func TestUnreachableEndpointIsNamedOnce(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	srv.Close()
	e := configured(t, `{"base_url":"`+srv.URL+`","model":"m","dimensions":4,"max_retries":0}`, nil, nil)
	_, err := e.Embed(t.Context(), docs("x"))
	if !errors.Is(err, sdk.ErrUnavailable) || strings.Count(err.Error(), srv.URL) != 1 || strings.Contains(err.Error(), "Post") {
		t.Errorf("error %v, want an outage naming %s once", err, srv.URL)
	}
}

// TestKeyThatNoHeaderCarries: a key holding a control character (a line
// break inside a pasted secret) is refused at Configure, naming its
// variable and not the key: sent, it failed every request with Go's
// "invalid header field value", each retried as if the endpoint were
// down, while the instance showed ready.
func TestKeyThatNoHeaderCarries(t *testing.T) {
	_, srv := newFake(t)
	cfg := fmt.Sprintf(`{"base_url": %q, "model": "m", "dimensions": 4, "api_key_env": "KEY"}`, srv.URL)
	for _, tc := range []struct {
		name, key string
		ok        bool
	}{
		{"a line break inside", "sk-first-half\nsecond-half", false},
		{"a carriage return inside", "sk-first-half\rsecond-half", false},
		{"a NUL", "sk-secret\x00key", false},
		{"DEL", "sk-secret\x7fkey", false},
		{"a trailing line break, trimmed", "sk-secret-key\n", true},
		{"a plain key", "sk-secret-key", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := New()
			e.lookupEnv = func(k string) (string, bool) { return tc.key, k == "KEY" }
			err := e.Configure(t.Context(), json.RawMessage(cfg))
			if tc.ok {
				if err != nil {
					t.Fatalf("Configure: %v", err)
				}
				return
			}
			var fe *sdk.FieldError
			if !errors.Is(err, sdk.ErrInvalid) || !errors.As(err, &fe) || fe.Field != "api_key_env" {
				t.Fatalf("Configure: %v, want api_key_env invalid", err)
			}
			if strings.Contains(err.Error(), "secret") || strings.Contains(err.Error(), "half") {
				t.Errorf("the error shows the key: %v", err)
			}
		})
	}
}
