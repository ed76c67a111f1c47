package llm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/memhost/memhost/internal/testbin"
	"github.com/memhost/memhost/sdk"
	"github.com/memhost/memhost/sdk/conformance"
)

// selFake is an httptest server speaking the chat completions API: each
// request takes the next scripted reply (the last one repeats).
type selFake struct {
	*httptest.Server
	mu       sync.Mutex
	replies  []selReply
	requests []chatRequest
	auth     []string
	// sent counts the requests the compactor made, on its side: the
	// server may never read one the client has already cut.
	sent atomic.Int32
}

// countingTransport counts each request a client sends to its fake.
type countingTransport struct{ f *selFake }

func (c countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	c.f.sent.Add(1)
	return http.DefaultTransport.RoundTrip(r)
}

type selReply struct {
	status  int    // 0 means 200
	content string // the assistant message content
	raw     string // when set, the whole response body instead
	block   bool   // wait until the client gives up
	// compute, when set, answers the content from the prompt (the first
	// user message).
	compute func(prompt string) string
}

func newSelFake(t *testing.T, replies ...selReply) *selFake {
	t.Helper()
	f := &selFake{replies: replies}
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/v1/chat/completions" {
			http.NotFound(w, r)
			return
		}
		var req chatRequest
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		f.mu.Lock()
		f.requests = append(f.requests, req)
		f.auth = append(f.auth, r.Header.Get("Authorization"))
		rep := f.replies[min(len(f.requests), len(f.replies))-1]
		f.mu.Unlock()
		if rep.block {
			<-r.Context().Done()
			return
		}
		if rep.status != 0 {
			http.Error(w, `{"error":{"message":"upstream overloaded"}}`, rep.status)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		if rep.raw != "" {
			fmt.Fprint(w, rep.raw)
			return
		}
		content := rep.content
		if rep.compute != nil && len(req.Messages) > 1 {
			content = rep.compute(req.Messages[1].Content)
		}
		json.NewEncoder(w).Encode(map[string]any{
			"id": "chatcmpl-1", "object": "chat.completion", "model": req.Model,
			"choices": []any{map[string]any{"index": 0, "finish_reason": "stop",
				"message": map[string]any{"role": "assistant", "content": content}}},
		})
	}))
	t.Cleanup(f.Close)
	return f
}

func selConfigured(t *testing.T, f *selFake, extra string) *Compactor {
	t.Helper()
	p := New()
	p.client.Transport = countingTransport{f}
	cfg := fmt.Sprintf(`{"base_url":%q,"model":"test-model"%s}`, f.URL+"/v1", extra)
	if err := p.Configure(context.Background(), json.RawMessage(cfg)); err != nil {
		t.Fatal(err)
	}
	return p
}

var selAlice = sdk.Identity{Realm: "default", ID: "alice"}

// selPrompt is the selection prompt's JSON, as far as the tests read it.
type selPrompt struct {
	Turn       string   `json:"turn"`
	Max        int      `json:"max_records"`
	Suppressed []string `json:"suppressed"`
	Candidates []struct {
		ID string `json:"id"`
	} `json:"candidates"`
}

func selRows(n int) []sdk.ManifestRow {
	out := make([]sdk.ManifestRow, n)
	for i := range out {
		out[i] = sdk.ManifestRow{ID: fmt.Sprintf("r%02d", i), Scope: "identity:alice", Kind: sdk.KindFact,
			Title: fmt.Sprintf("title %d", i), UpdatedAt: time.Now().Add(-time.Duration(i) * 24 * time.Hour)}
	}
	return out
}

func selRequest(n int, suppressed ...string) sdk.SelectRequest {
	return sdk.SelectRequest{Identity: selAlice, Query: "how do we deploy?", Rows: selRows(n), SuppressedIDs: suppressed, Max: 3}
}

func TestSelectAnswers(t *testing.T) {
	tests := []struct {
		name     string
		replies  []selReply
		want     []string
		coverage sdk.Coverage
		calls    int
	}{
		{"plain", []selReply{{content: `{"selected_ids":["r01","r02"],"coverage":"sufficient"}`}}, []string{"r01", "r02"}, sdk.CoverageSufficient, 1},
		{"fenced with prose", []selReply{{content: "Sure:\n```json\n{\"selected_ids\":[\"r03\"],\"coverage\":\"need_deeper_sweep\"}\n```"}},
			[]string{"r03"}, sdk.CoverageNeedDeeperSweep, 1},
		{"unknown, suppressed and repeated ids dropped, max kept",
			[]selReply{{content: `{"selected_ids":["nope","r00","r01","r01","r04","r05","r06"],"coverage":"sufficient"}`}},
			[]string{"r01", "r04", "r05"}, sdk.CoverageSufficient, 1},
		{"empty selection is a verdict", []selReply{{content: `{"selected_ids":[],"coverage":"sufficient"}`}}, []string{}, sdk.CoverageSufficient, 1},
		{"missing coverage means sufficient", []selReply{{content: `{"selected_ids":["r02"]}`}}, []string{"r02"}, sdk.CoverageSufficient, 1},
		{"malformed then repaired", []selReply{{content: `selected: r01`}, {content: `{"selected_ids":["r01"],"coverage":"sufficient"}`}},
			[]string{"r01"}, sdk.CoverageSufficient, 2},
		{"empty then repaired", []selReply{{content: ``}, {content: `{"selected_ids":["r02"],"coverage":"need_deeper_sweep"}`}},
			[]string{"r02"}, sdk.CoverageNeedDeeperSweep, 2},
		{"bad coverage then repaired", []selReply{{content: `{"selected_ids":["r02"],"coverage":"maybe"}`}, {content: `{"selected_ids":["r02"]}`}},
			[]string{"r02"}, sdk.CoverageSufficient, 2},
		{"no choices then repaired", []selReply{{raw: `{"choices":[]}`}, {content: `{"selected_ids":["r03"]}`}}, []string{"r03"}, sdk.CoverageSufficient, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newSelFake(t, tt.replies...)
			sel, err := selConfigured(t, f, "").Select(context.Background(), selRequest(10, "r00"))
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(sel.IDs, tt.want) || sel.Coverage != tt.coverage {
				t.Errorf("Select = %v %s, want %v %s", sel.IDs, sel.Coverage, tt.want, tt.coverage)
			}
			if got := int(f.sent.Load()); got != tt.calls {
				t.Errorf("%d requests, want %d", got, tt.calls)
			}
		})
	}
}

func TestSelectFailures(t *testing.T) {
	tests := []struct {
		name    string
		replies []selReply
		extra   string
		want    error
		calls   int
	}{
		{"malformed twice", []selReply{{content: `no`}, {content: `still no`}}, "", sdk.ErrUnavailable, 2},
		{"empty twice", []selReply{{content: ``}}, "", sdk.ErrUnavailable, 2},
		{"server error is not repaired", []selReply{{status: http.StatusInternalServerError}}, "", sdk.ErrUnavailable, 1},
		{"not the API's JSON", []selReply{{raw: `<html>`}}, "", sdk.ErrUnavailable, 1},
		{"an error answered with 200 is not repaired", []selReply{{raw: `{"error":{"message":"upstream overloaded"}}`}}, "", sdk.ErrUnavailable, 1},
		{"an error that is a string", []selReply{{raw: `{"error":"upstream overloaded"}`}}, "", sdk.ErrUnavailable, 1},
		{"an answer over the read cap", []selReply{{raw: `{"choices":[]}` + strings.Repeat(" ", maxResponseBytes)}}, "", sdk.ErrUnavailable, 1},
		{"slow endpoint hits the timeout", []selReply{{block: true}}, `,"timeout_ms":50`, sdk.ErrDeadline, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newSelFake(t, tt.replies...)
			_, err := selConfigured(t, f, tt.extra).Select(context.Background(), selRequest(5))
			if !errors.Is(err, tt.want) {
				t.Errorf("error %v, want %v", err, tt.want)
			}
			if got := int(f.sent.Load()); got != tt.calls {
				t.Errorf("%d requests, want %d", got, tt.calls)
			}
		})
	}
}

// TestSelectErrorsSayItOnce: a failed selection names the plugin once and
// says what the model answered once, as the host logs it on every turn.
func TestSelectErrorsSayItOnce(t *testing.T) {
	tests := []struct {
		name    string
		replies []selReply
		says    string
	}{
		{"no choices twice", []selReply{{raw: `{"choices":[]}`}}, "no choice with message content"},
		{"a null content twice", []selReply{{raw: `{"choices":[{"message":{"content":null}}]}`}}, "no choice with message content"},
		{"prose twice", []selReply{{content: `I cannot help.`}}, "not the selection JSON"},
		{"server error", []selReply{{status: http.StatusInternalServerError}}, "upstream overloaded"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newSelFake(t, tt.replies...)
			_, err := selConfigured(t, f, "").Select(context.Background(), selRequest(5))
			if err == nil {
				t.Fatal("no error")
			}
			msg := err.Error()
			for _, once := range []string{"llm: ", tt.says} {
				if n := strings.Count(msg, once); n > 1 || once == tt.says && n == 0 {
					t.Errorf("%q says %q %d times, want once", msg, once, n)
				}
			}
			if strings.Contains(msg, "empty answer") {
				t.Errorf("%q adds its own words to what the answer lacked", msg)
			}
		})
	}
}

func TestSelectCallerDeadline(t *testing.T) {
	f := newSelFake(t, selReply{block: true})
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := selConfigured(t, f, "").Select(ctx, selRequest(5)); !errors.Is(err, sdk.ErrDeadline) {
		t.Errorf("error %v, want ErrDeadline", err)
	}
}

func TestPrompt(t *testing.T) {
	t.Setenv("MEMHOST_TEST_LLM_KEY", "sk-test-123")
	f := newSelFake(t, selReply{content: `{"selected_ids":[]}`})
	p := selConfigured(t, f, `,"api_key_env":"MEMHOST_TEST_LLM_KEY","max_rows":15`)
	req := selRequest(20, "r03", "r19")
	if _, err := p.Select(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	if f.auth[0] != "Bearer sk-test-123" {
		t.Errorf("Authorization %q, want the key from the environment", f.auth[0])
	}
	sent := f.requests[0]
	if sent.Model != "test-model" || len(sent.Messages) != 2 || sent.Messages[0].Role != "system" {
		t.Fatalf("request %+v: want the model and a system and a user message", sent)
	}
	var in selPrompt
	if err := json.Unmarshal([]byte(sent.Messages[1].Content), &in); err != nil {
		t.Fatalf("user message is not the prompt JSON: %v", err)
	}
	if in.Turn != req.Query || !slices.Equal(in.Suppressed, []string{"r03", "r19"}) || in.Max != 3 {
		t.Errorf("prompt turn %q suppressed %v max %d", in.Turn, in.Suppressed, in.Max)
	}
	var got []string
	for _, c := range in.Candidates {
		got = append(got, c.ID)
	}
	// Suppressed rows are not offered; max_rows caps the rest.
	var want []string
	for _, r := range req.Rows {
		if r.ID != "r03" && r.ID != "r19" {
			want = append(want, r.ID)
		}
	}
	want = want[:15]
	if slices.Equal(got, want) {
		t.Errorf("candidates %v are in the manifest's order, want them shuffled", got)
	}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("candidates %v, want exactly %v", got, want)
	}
	// One request, one prompt: the shuffle is seeded by the request.
	if _, err := p.Select(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	if f.requests[1].Messages[1].Content != sent.Messages[1].Content {
		t.Error("the same request gave two different prompts")
	}
}

func TestSelectNoCallNeeded(t *testing.T) {
	f := newSelFake(t, selReply{content: `{"selected_ids":["r00"]}`})
	p := selConfigured(t, f, "")
	for name, req := range map[string]sdk.SelectRequest{
		"empty query":    {Identity: selAlice, Query: "  ", Rows: selRows(3)},
		"all suppressed": {Identity: selAlice, Query: "deploy", Rows: selRows(1), SuppressedIDs: []string{"r00"}},
		"no rows":        {Identity: selAlice, Query: "deploy"},
	} {
		sel, err := p.Select(context.Background(), req)
		if err != nil || len(sel.IDs) != 0 {
			t.Errorf("%s: Select = %v, %v; want nothing", name, sel, err)
		}
	}
	if got := f.sent.Load(); got != 0 {
		t.Errorf("%d requests, want none", got)
	}
}

// selectorTarget serves the selector kind against a model that picks the
// first offered candidates and adds a made-up id and the suppressed ones,
// so the kit sees the plugin's filtering, not a well-behaved model.
func selectorTarget(t *testing.T) conformance.Target {
	idRE := regexp.MustCompile(`"id":"([^"]+)"`)
	f := newSelFake(t, selReply{compute: func(prompt string) string {
		var in selPrompt
		if err := json.Unmarshal([]byte(prompt), &in); err != nil {
			return "not json"
		}
		ids := append([]string{"made-up-id"}, in.Suppressed...)
		for _, m := range idRE.FindAllStringSubmatch(prompt, in.Max+2) {
			ids = append(ids, m[1])
		}
		data, _ := json.Marshal(map[string]any{"selected_ids": ids, "coverage": "need_deeper_sweep"})
		return string(data)
	}})
	return conformance.Target{
		Config: func(string) json.RawMessage {
			return json.RawMessage(fmt.Sprintf(`{"base_url":%q,"model":"conformance","max_rows":4000}`, f.URL+"/v1"))
		},
		BadConfigs: []json.RawMessage{json.RawMessage(`{"model":"m"}`), json.RawMessage(`{"base_url":"http://x","model":"m","max_rows":4001}`)},
	}
}

func TestSelectorConformance(t *testing.T) {
	target := selectorTarget(t)
	target.New = func() sdk.Plugin { return New() }
	conformance.RunSelector(t, target)
}

func TestSelectorConformanceBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the plugin binary")
	}
	target := selectorTarget(t)
	target.Binary, _ = testbin.Plugin(t, "llm")
	target.Manifest = conformance.WriteManifest(t, New().Info(), target.Binary)
	conformance.RunSelector(t, target)
}
