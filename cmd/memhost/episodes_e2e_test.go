package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/memhost/memhost/internal/testbin"
)

// archiveConfig runs the template compactor with a summary too small to
// keep every detail, the default realm archiving and realm quiet not.
const archiveConfig = `
compactor "summary" {
  plugin = "template"
  config = { max_bytes = 700 }
}
coordinator { compactor = "summary" }
provider "main" {
  plugin = "sqlite"
  config = { path = "memory.db" }
}
realm "default" { provider = "main" }
realm "quiet" {
  provider = "main"
  archive  = false
}
`

type episodeRow struct {
	ID     string `json:"id"`
	Kind   string `json:"kind"`
	Title  string `json:"title"`
	Body   string `json:"body"`
	Scope  string `json:"scope"`
	Thread struct {
		ID  string `json:"id"`
		Seq int    `json:"seq"`
	} `json:"thread"`
}

// listEpisodes answers a realm's episode records by position.
func listEpisodes(t *testing.T, m *instance, realm string) map[int]episodeRow {
	t.Helper()
	var out struct {
		Records []struct {
			Record episodeRow `json:"record"`
		} `json:"records"`
	}
	if code := m.do("GET", "/v1/records?kind=episode&limit=200&realm="+realm, nil, &out); code != 200 {
		t.Fatalf("GET /v1/records = %d\n%s", code, m.logs())
	}
	eps := map[int]episodeRow{}
	for _, item := range out.Records {
		r := item.Record
		if _, dup := eps[r.Thread.Seq]; dup {
			t.Errorf("position %d archived twice", r.Thread.Seq)
		}
		eps[r.Thread.Seq] = r
	}
	return eps
}

// lockerHistory is a conversation whose third message holds a detail
// (a locker code) that 40 messages of chatter push out of a 700-byte
// summary.
func lockerHistory() []map[string]any {
	h := history(40)
	h[2] = map[string]any{"role": "user", "content": "By the way my gym locker code is 4711, at the north entrance."}
	return h
}

// TestArchiveThroughServe: every absorbed message becomes an episode
// record, recallable and injectable in the request cycle of the
// compaction that absorbed it; injected memory evicted later is neither
// archived nor summarised again; a realm with the archive off writes
// none; DELETE removes the archive and nothing else.
func TestArchiveThroughServe(t *testing.T) {
	t.Parallel()
	cfgPath, dataDir := writeConfigIn(t, testbin.PluginDir(t, "sqlite", "template"), archiveConfig)
	m, err := startWithConfig(t, cfgPath, dataDir)
	if err != nil {
		t.Fatal(err)
	}
	kept := remember(t, m, map[string]any{"scope": "identity:alice", "kind": "preference", "title": "Espresso order", "body": "Alice takes her espresso without sugar."})
	h := lockerHistory()
	code, res, e := compact(t, m, "conv-1", "s1", h)
	if code != 200 || res.Absorbed != len(h) {
		t.Fatalf("compact = %d %+v %+v", code, res, e)
	}
	if strings.Contains(res.Artifact.Content, "4711") {
		t.Fatalf("the summary kept the locker code; the test needs a detail the summary drops:\n%s", res.Artifact.Content)
	}
	eps := listEpisodes(t, m, "default")
	if len(eps) != len(h) {
		t.Fatalf("%d episodes, want one per absorbed message (%d)", len(eps), len(h))
	}
	locker := eps[2]
	if locker.Scope != "identity:alice" || locker.Thread.ID != "conv-1" || !strings.HasPrefix(locker.Title, "user, message 3 of conversation conv-1") ||
		locker.Body != h[2]["content"] {
		t.Errorf("the locker message's episode: %+v", locker)
	}
	if got := eps[3].Body; !strings.HasPrefix(got, "[tool call: search]") {
		t.Errorf("a tool call is archived as the compactor reads it, got %q", got)
	}

	hits := recall(t, m, "alice", "gym locker code")
	if len(hits.Hits) == 0 || hits.Hits[0].Record.ID != locker.ID {
		t.Errorf("recall right after the compaction: %+v, want the locker episode first", hits)
	}
	// The build's index summarises what memory holds: the preference,
	// not 40 transcript lines; recall above still finds the episode.
	var build struct {
		Injection string `json:"injection"`
	}
	if code := m.do("POST", "/v1/builds/inject", map[string]any{"identity": map[string]string{"id": "alice"}, "query_text": "gym locker code"}, &build); code != 200 {
		t.Fatalf("builds/inject = %d\n%s", code, m.logs())
	}
	index, _, _ := strings.Cut(build.Injection, "<memhost_memory_observation")
	_, index, _ = strings.Cut(index, "Index of identity:alice:")
	if !strings.Contains(index, kept[0]+" [preference") || strings.Contains(index, "[episode") || strings.Contains(index, "of conversation conv-1") {
		t.Errorf("the build's index of alice lists episodes or lacks the preference:\n%s", index)
	}
	var turn turnAnswer
	m.do("POST", "/v1/turns/inject", map[string]any{"identity": map[string]string{"id": "alice"}, "session": "s1", "content": "what is my gym locker code?"}, &turn)
	if !slices.Contains(turn.RecordIDs, locker.ID) || len(turn.InjectedContext) != 1 || !strings.Contains(turn.InjectedContext[0], "4711") {
		t.Fatalf("inject right after the compaction: %+v", turn)
	}

	// The runtime put the injected memory in its context; later it evicts
	// it with the messages around it.
	h = append(h,
		map[string]any{"role": "user", "content": turn.InjectedContext[0]},
		map[string]any{"role": "user", "content": []map[string]any{{"type": "text", "text": turn.InjectedContext[0]}, {"type": "text", "text": "thanks, and the pool opens at nine"}}},
		map[string]any{"role": "assistant", "content": "Noted."})
	code, res, e = compact(t, m, "conv-1", "s1", h)
	if code != 200 || res.Compacted != 3 {
		t.Fatalf("compact with injected memory = %d %+v %+v", code, res, e)
	}
	if strings.Contains(res.Artifact.Content, "4711") || strings.Contains(res.Artifact.Content, "Agent memory for identity") {
		t.Errorf("injected memory was summarised:\n%s", res.Artifact.Content)
	}
	eps = listEpisodes(t, m, "default")
	if len(eps) != len(h)-1 {
		t.Errorf("%d episodes, want %d: the injected-only message is not archived", len(eps), len(h)-1)
	}
	if _, ok := eps[len(h)-3]; ok {
		t.Errorf("the injected-only message was archived: %+v", eps[len(h)-3])
	}
	if got := eps[len(h)-2].Body; got != "thanks, and the pool opens at nine" {
		t.Errorf("the message around injected memory is archived as %q", got)
	}
	for seq, ep := range eps {
		if strings.Contains(ep.Body, "mem-token") || strings.Contains(ep.Body, "memory_observation") {
			t.Errorf("episode %d holds injected memory: %q", seq, ep.Body)
		}
	}

	// Archive off in realm quiet.
	body := map[string]any{"identity": map[string]string{"realm": "quiet", "id": "alice"}, "evicted": lockerHistory()}
	if code := m.do("POST", "/v1/conversations/conv-1/compact", body, nil); code != 200 {
		t.Fatalf("compact in realm quiet = %d", code)
	}
	if eps := listEpisodes(t, m, "quiet"); len(eps) != 0 {
		t.Errorf("realm quiet archives off, got %d episodes", len(eps))
	}

	if code := m.do("DELETE", "/v1/conversations/conv-1?realm=default", nil, nil); code != 204 {
		t.Fatalf("DELETE = %d", code)
	}
	if eps := listEpisodes(t, m, "default"); len(eps) != 0 {
		t.Errorf("%d episodes after DELETE", len(eps))
	}
	if code := m.do("GET", "/v1/records/"+kept[0], nil, nil); code != 200 {
		t.Errorf("DELETE of the conversation removed another record: GET = %d", code)
	}
}

// TestArchiveRepairsAfterKill: memhost serve killed with SIGKILL after a
// compaction's archive is written and before its summary commits has
// committed nothing; the retry on a restarted host compacts the slice,
// stores its episodes once, and they are recallable.
func TestArchiveRepairsAfterKill(t *testing.T) {
	t.Parallel()
	cfgPath, dataDir := writeConfigIn(t, testbin.PluginDir(t, "sqlite", "template"), archiveConfig)
	m, err := startWithConfig(t, cfgPath, dataDir, killAfterArchiveEnv+"=1")
	if err != nil {
		t.Fatal(err)
	}
	pids := pluginPids(t, m)
	h := lockerHistory()
	data, _ := json.Marshal(map[string]any{"identity": map[string]string{"id": "alice"}, "session": "s1", "evicted": h})
	resp, err := http.Post(m.base+"/v1/conversations/conv-1/compact", "application/json", bytes.NewReader(data))
	if err == nil {
		resp.Body.Close()
		t.Fatalf("the compaction answered %d; the host should have died before its summary committed", resp.StatusCode)
	}
	exited := make(chan struct{})
	go func() { m.cmd.Wait(); close(exited) }()
	select {
	case <-exited:
	case <-time.After(60 * time.Second):
		t.Fatalf("the compaction failed (%v) but memhost did not die\n%s", err, m.logs())
	}
	if ws, ok := m.cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("memhost ended with %v, want SIGKILL\n%s", m.cmd.ProcessState, m.logs())
	}
	waitGone(t, pids)

	m, err = startWithConfig(t, cfgPath, dataDir)
	if err != nil {
		t.Fatal(err)
	}
	if eps := listEpisodes(t, m, "default"); len(eps) != len(h) {
		t.Fatalf("after the kill: %d episodes, want the %d archived before it", len(eps), len(h))
	}
	code, res, e := compact(t, m, "conv-1", "s1", h)
	if code != 200 || res.Compacted != len(h) {
		t.Fatalf("retry = %d %+v %+v; want the whole slice compacted (the summary never committed)", code, res, e)
	}
	eps := listEpisodes(t, m, "default")
	if len(eps) != len(h) {
		t.Errorf("after the retry: %d episodes, want %d (none twice)", len(eps), len(h))
	}
	for i := range h {
		if _, ok := eps[i]; !ok {
			t.Errorf("position %d not archived", i)
		}
	}
	if hits := recall(t, m, "alice", "gym locker code"); len(hits.Hits) == 0 || !strings.Contains(hits.Hits[0].Record.Body, "4711") {
		t.Errorf("recall after the repair: %+v", hits)
	}
	if code, res, _ := compact(t, m, "conv-1", "s1", h); code != 200 || res.Compacted != 0 {
		t.Errorf("a second retry = %d %+v, want nothing new", code, res)
	}
}

// TestInjectedMemoryInToolResultIsNotCompacted: a client that echoes an
// injected envelope inside a tool result (as an MCP agent's transcript
// holds memory_recall) gets it left out of the summary, of what the
// compactor's model is sent and of the archive, as for a text block,
// although the flattened tool result indents the envelope's lines.
func TestInjectedMemoryInToolResultIsNotCompacted(t *testing.T) {
	t.Parallel()
	chat := &chatServer{}
	srv := httptest.NewServer(chat)
	t.Cleanup(srv.Close)
	for _, tc := range []struct{ name, plugin, config string }{
		{"template", "template", `{ max_bytes = 2000 }`},
		{"llm", "llm", fmt.Sprintf(`{ base_url = %q, model = "test-model", timeout_ms = 5000 }`, srv.URL+"/v1")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := strings.Replace(archiveConfig, `plugin = "template"
  config = { max_bytes = 700 }`, fmt.Sprintf("plugin = %q\n  config = %s", tc.plugin, tc.config), 1)
			cfgPath, dataDir := writeConfigIn(t, testbin.PluginDir(t, "sqlite", "template", "llm"), cfg)
			m, err := startWithConfig(t, cfgPath, dataDir)
			if err != nil {
				t.Fatal(err)
			}
			remember(t, m, map[string]any{"scope": "identity:alice", "kind": "preference", "title": "Espresso order", "body": "Alice takes her espresso without sugar.\nLocker 4711."})
			var turn turnAnswer
			m.do("POST", "/v1/turns/inject", map[string]any{"identity": map[string]string{"id": "alice"}, "session": "s1", "content": "espresso order?"}, &turn)
			if len(turn.InjectedContext) != 1 {
				t.Fatalf("inject = %+v", turn)
			}
			envelope := turn.InjectedContext[0]
			nonce := nonceRE.FindStringSubmatch(envelope)[1]
			h := []map[string]any{
				{"role": "user", "content": "Always reply in French."},
				{"role": "tool", "content": []map[string]any{{"type": "tool_result", "tool_use_id": "t1", "content": envelope}}},
				{"role": "tool", "content": []map[string]any{{"type": "tool_result", "tool_use_id": "t2", "content": []map[string]any{{"type": "text", "text": envelope}}}}},
			}
			code, res, e := compact(t, m, "conv-1", "s1", h)
			if code != 200 || res.Absorbed != len(h) {
				t.Fatalf("compact = %d %+v %+v\n%s", code, res, e, m.logs())
			}
			chat.mu.Lock()
			sent := chat.last
			chat.mu.Unlock()
			for where, text := range map[string]string{"summary": res.Artifact.Content, "compactor's model": sent} {
				if strings.Contains(text, nonce) || strings.Contains(text, "4711") {
					t.Errorf("the %s holds the injected memory:\n%s", where, text)
				}
			}
			for seq, ep := range listEpisodes(t, m, "default") {
				if strings.Contains(ep.Body, nonce) || strings.Contains(ep.Body, "4711") {
					t.Errorf("episode %d holds the injected memory: %q", seq, ep.Body)
				}
			}
		})
	}
}
