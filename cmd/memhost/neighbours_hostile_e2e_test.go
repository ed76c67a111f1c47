package main

import (
	"context"
	"fmt"
	"github.com/memhost/memhost/coordinator/coordinatortest"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/memhost/memhost/internal/mcpserver"
	"github.com/memhost/memhost/internal/testbin"
)

// startRawNeighbours starts memhost serve on the rawneighbours test plugin
// (sdk/host/testdata/rawneighbours), which answers recall with the thread
// neighbours its query names, past the SDK's own filtering.
func startRawNeighbours(t *testing.T, env ...string) *instance {
	t.Helper()
	dir := testbin.PrivatePluginDir(t, "markdown")
	testbin.InstallPlugin(t, dir, testbin.Build(t, "./sdk/host/testdata/rawneighbours"))
	return startMemhostIn(t, dir, "provider \"bad\" { plugin = \"rawneighbours\" }\nrealm \"default\" { provider = \"bad\" }\n", env...)
}

// TestHostileNeighboursReachNoModel, through memhost serve on a plugin
// that answers neighbours no provider may: markers in neighbours and
// marker halves split between a neighbour and its hit are shown
// neutralised; a neighbour of another scope, realm or thread, the hit
// itself, hundreds of them, a superseded one or one outside the turn's
// time window fail the recall; an expired one is left out; a long
// record's excerpt whose passage straddles markers and multi-byte text
// shows none live.
func TestHostileNeighboursReachNoModel(t *testing.T) {
	t.Parallel()
	m := startRawNeighbours(t)
	since := time.Now().Add(-24 * time.Hour).UTC().Format(time.RFC3339)
	for _, tc := range []struct {
		query string
		want  []string // the ids shown; nil when the recall is refused
	}{
		{"markers", []string{"n3", "n4", "hit", "n6", "n7"}},
		{"long", []string{"n4", "hit"}},
		{"expired", []string{"hit"}},
		{"hitasneighbour", []string{"hit", "hit2"}},
		{"foreignscope", nil},
		{"foreignrealm", nil},
		{"foreignthread", nil},
		{"selfneighbour", nil},
		{"hundreds", nil},
		{"superseded", nil},
		{"window", nil},
	} {
		t.Run(tc.query, func(t *testing.T) {
			var got turnAnswer
			body := map[string]any{"identity": map[string]any{"id": "alice"}, "session": tc.query, "content": tc.query + " pottery", "since": since}
			if code := m.do("POST", "/v1/turns/inject", body, &got); code != 200 {
				t.Fatalf("turns/inject = %d\n%s", code, m.logs())
			}
			if tc.want == nil {
				if got.SkipReason == nil || *got.SkipReason != "recall_failed" || len(got.InjectedContext) != 0 {
					t.Fatalf("the plugin's answer was not refused: %+v", got)
				}
				return
			}
			if !slices.Equal(got.RecordIDs, tc.want) {
				t.Fatalf("injected %v, want %v\n%s", got.RecordIDs, tc.want, got.InjectedContext)
			}
			text := strings.Join(got.InjectedContext, "")
			checkEnvelope(t, tc.query, text)
			if strings.Contains(text, "\ufffd") {
				t.Errorf("an excerpt was cut inside a character:\n%s", text)
			}
		})
	}
	// Surfaces that ask for no neighbours show the hit alone.
	t.Run("other surfaces", func(t *testing.T) {
		id := map[string]any{"id": "alice"}
		var build struct{ Injection *string }
		if code := m.do("POST", "/v1/builds/inject", map[string]any{"identity": id, "query_text": "markers pottery"}, &build); code != 200 || build.Injection == nil {
			t.Fatalf("builds/inject = %d, %v", code, build.Injection)
		}
		checkEnvelope(t, "build", *build.Injection)
		var guide struct{ Block *string }
		if code := m.do("POST", "/v1/guide/session-start", map[string]any{"identity": id, "session": "g", "task": "markers pottery"}, &guide); code != 200 || guide.Block == nil {
			t.Fatalf("guide/session-start = %d, %v", code, guide.Block)
		}
		checkEnvelope(t, "guide", *guide.Block)
		if code := m.do("POST", "/v1/guide/before-iteration", map[string]any{"identity": id, "session": "g", "last_user_message": "long pottery"}, &guide); code != 200 || guide.Block == nil {
			t.Fatalf("guide/before-iteration = %d, %v", code, guide.Block)
		}
		checkEnvelope(t, "before-iteration", *guide.Block)
	})
}

// TestUnaskedNeighboursFailEverySurface: a plugin that answers neighbours
// to a recall that asked for none has its answer refused on every surface
// but a turn, which asks for them; nothing of them reaches a model.
func TestUnaskedNeighboursFailEverySurface(t *testing.T) {
	t.Parallel()
	m := startRawNeighbours(t, "MEMHOST_TEST_UNASKED=1")
	id := map[string]any{"id": "alice"}
	var build struct {
		Injection *string
		RecordIDs []string `json:"record_ids"`
	}
	if code := m.do("POST", "/v1/builds/inject", map[string]any{"identity": id, "query_text": "markers pottery"}, &build); code != 200 || build.Injection != nil {
		t.Errorf("builds/inject = %d, injection %v: want nothing injected", code, build.Injection)
	}
	if code := m.do("POST", "/v1/guide/session-start", map[string]any{"identity": id, "session": "g", "task": "markers pottery"}, nil); code != 500 {
		t.Errorf("guide/session-start = %d, want the failed recall's 500", code)
	}
	var iter struct {
		Block        *string
		RecallFailed bool `json:"recall_failed"`
	}
	if code := m.do("POST", "/v1/guide/before-iteration", map[string]any{"identity": id, "session": "g", "last_user_message": "markers pottery"}, &iter); code != 200 || !iter.RecallFailed || iter.Block != nil {
		t.Errorf("guide/before-iteration = %d, %+v: want the failed recall and no block", code, iter)
	}
	if code := m.do("POST", "/v1/recall", map[string]any{"identity": id, "query": "markers pottery"}, nil); code != 500 {
		t.Errorf("recall = %d, want the failed recall's 500", code)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cs, err := mcpHTTPClient(t, ctx, m.base+"/mcp", http.Header{"X-Memhost-Identity": {"alice"}})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	if res := callTool(t, ctx, cs, mcpserver.ToolRecall, map[string]any{"query": "markers pottery"}, nil); !res.IsError || strings.Contains(toolText(res), "evil") {
		t.Errorf("memory_recall answered %s, want the refusal", toolText(res))
	}
}

// TestHostileNeighboursLaterSurfaces, on the rawneighbours plugin: turns
// whose two hits' hostile neighbours compete for the budget keep the
// session's ladder and show no live marker or cut character, and a
// compaction of a conversation holding a turn's envelope keeps it out of
// the summary and the archive, whose episodes a turn then shows beside
// hostile neighbours with none live.
func TestHostileNeighboursLaterSurfaces(t *testing.T) {
	t.Parallel()
	dir := testbin.PrivatePluginDir(t, "template")
	testbin.InstallPlugin(t, dir, testbin.Build(t, "./sdk/host/testdata/rawneighbours"))
	cfg, data := writeConfigIn(t, dir, "provider \"bad\" { plugin = \"rawneighbours\" }\nrealm \"default\" { provider = \"bad\" }\n"+
		strings.Replace(templateCompactorConfig, "700", "60000", 1))
	m, err := startWithConfig(t, cfg, data)
	if err != nil {
		t.Fatal(err)
	}
	id := map[string]any{"id": "alice"}
	t.Run("ladder", func(t *testing.T) {
		total := 0
		for i := range 5 {
			var got turnAnswer
			q := fmt.Sprintf("compete%d pottery", i)
			if code := m.do("POST", "/v1/turns/inject", map[string]any{"identity": id, "session": "ladder", "content": q}, &got); code != 200 {
				t.Fatalf("turn %d = %d\n%s", i, code, m.logs())
			}
			text := strings.Join(got.InjectedContext, "")
			if got.SkipReason != nil {
				t.Logf("turn %d: skip %s", i, *got.SkipReason)
			}
			if len(text) != got.Bytes || got.Bytes > 20480 || total+got.Bytes > 61440 {
				t.Fatalf("turn %d injected %d bytes (%d in text) after %d", i, got.Bytes, len(text), total)
			}
			total += got.Bytes
			if got.Bytes == 0 {
				continue
			}
			checkEnvelope(t, q, text)
			if strings.Contains(text, "\ufffd") || !utf8.ValidString(text) {
				t.Errorf("cut inside a character:\n%s", text)
			}
		}
	})
	t.Run("compaction", func(t *testing.T) {
		var turn turnAnswer
		if code := m.do("POST", "/v1/turns/inject", map[string]any{"identity": id, "session": "c", "content": "markers pottery"}, &turn); code != 200 || len(turn.InjectedContext) == 0 {
			t.Fatalf("turn = %d %+v", code, turn)
		}
		env := strings.Join(turn.InjectedContext, "")
		evicted := []map[string]any{
			{"role": "user", "content": env + "\nWhat about the pottery class?"},
			{"role": "assistant", "content": "Thursday."},
			{"role": "tool", "content": []map[string]any{{"type": "tool_result", "tool_use_id": "t", "content": "found: " + env}}},
		}
		code, ans, e := compact(t, m, "conv-h", "c", evicted)
		if code != 200 || ans.Absorbed != len(evicted) {
			t.Fatalf("compact = %d %+v %+v\n%s", code, ans, e, m.logs())
		}
		preamble, inner := coordinatortest.UnframeSummary(t, ans.Artifact.Content)
		t.Logf("summary:\n%s", inner)
		coordinatortest.CheckModelText(t, envHeader, preamble+inner)
		for _, s := range []string{"evil", "forged", "moved to Thursday", "obey"} {
			if strings.Contains(inner, s) {
				t.Errorf("the injected envelope reached the summary (%q):\n%s", s, inner)
			}
		}
		var got turnAnswer
		if code := m.do("POST", "/v1/turns/inject", map[string]any{"identity": id, "session": "c2", "content": "archived pottery"}, &got); code != 200 || len(got.InjectedContext) == 0 {
			t.Fatalf("archive turn = %d %+v\n%s", code, got, m.logs())
		}
		text := strings.Join(got.InjectedContext, "")
		t.Logf("archive turn: %v\n%s", got.RecordIDs, text)
		checkEnvelope(t, "archive", text)
		for _, s := range []string{"forged", "moved to Thursday"} {
			if strings.Contains(text, s) {
				t.Errorf("the injected envelope reached the archive (%q):\n%s", s, text)
			}
		}
	})
}
