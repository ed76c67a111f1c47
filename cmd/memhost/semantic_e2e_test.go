package main

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/memhost/memhost/internal/pgtest"
)

// conceptEmbeddings is a local server speaking the OpenAI embeddings API
// (the one part no real process here can play): a text's vector counts
// the concepts its words belong to, so texts that share no word can
// share a meaning.
type conceptEmbeddings struct {
	*httptest.Server
	down  atomic.Bool  // answers 503
	hang  atomic.Bool  // answers nothing until the caller gives up
	hung  atomic.Int64 // requests that arrived while hanging
	calls atomic.Int64 // document and query requests
	pad   atomic.Int64 // zeros after the concepts' dimensions
	mu    sync.Mutex
	texts map[string]int // texts embedded, with how often
}

// concepts are the four dimensions.
var concepts = [][]string{
	{"evening", "routine", "night", "bed", "sleep", "read", "book"},
	{"coffee", "espresso", "latte", "beans", "roast"},
	{"car", "tyre", "engine", "garage", "brakes"},
	{"garden", "tomato", "soil", "compost", "seedlings"},
}

func newConceptEmbeddings(t *testing.T) *conceptEmbeddings {
	e := &conceptEmbeddings{texts: map[string]int{}}
	e.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if e.down.Load() {
			http.Error(w, `{"error":{"message":"overloaded"}}`, http.StatusServiceUnavailable)
			return
		}
		if e.hang.Load() {
			e.hung.Add(1)
			// Until the caller gives up, or the test stops hanging (a
			// failed test's Close waits for every handler).
			for e.hang.Load() && r.Context().Err() == nil {
				time.Sleep(5 * time.Millisecond)
			}
			return
		}
		var req struct {
			Input []string `json:"input"`
		}
		if r.URL.Path != "/v1/embeddings" || json.NewDecoder(r.Body).Decode(&req) != nil {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		e.calls.Add(1)
		type item struct {
			Index     int       `json:"index"`
			Embedding []float64 `json:"embedding"`
		}
		out := struct {
			Data []item `json:"data"`
		}{}
		for i, text := range req.Input {
			e.mu.Lock()
			e.texts[text]++
			e.mu.Unlock()
			v := make([]float64, len(concepts))
			for _, word := range strings.FieldsFunc(strings.ToLower(text), func(r rune) bool { return r < 'a' || r > 'z' }) {
				for d, words := range concepts {
					for _, c := range words {
						if word == c {
							v[d]++
						}
					}
				}
			}
			v[0] += 1e-3 // never the zero vector
			v = append(v, make([]float64, e.pad.Load())...)
			out.Data = append(out.Data, item{Index: i, Embedding: v})
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(out)
	}))
	t.Cleanup(e.Close)
	return e
}

func (e *conceptEmbeddings) embedded(text string) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.texts[text]
}

// semanticConfig is a deployment whose default realm the concept
// embeddings server at url embeds. A recall gives the query's embedding
// up to 30 s (query_embed_timeout_ms, within a recall deadline of 60 s,
// of which it takes at most half): a test expecting its first recall to
// rank by meaning must not turn on a loaded machine embedding the query
// within the default 250 ms.
func semanticConfig(url string) string {
	return fmt.Sprintf(`provider "main" {
  plugin = "sqlite"
  config = { path = "memory.db" }
}
embedder "meaning" {
  plugin = "openai"
  config = { base_url = %q, model = "concepts", dimensions = 4 }
}
realm "default" {
  provider               = "main"
  embedder               = "meaning"
  semantic_weight        = 0.5
  query_embed_timeout_ms = 30000
}
coordinator { recall_timeout_ms = 25000 }
`, url+"/v1")
}

// impatientSemanticConfig is semanticConfig with the production query
// budget (250 ms, within the tests' recall deadline), for the tests of a
// hung embedder: each recall that asks it must fall back soon.
func impatientSemanticConfig(url string) string {
	cfg := strings.Replace(semanticConfig(url), "  query_embed_timeout_ms = 30000\n", "", 1)
	return strings.Replace(cfg, "coordinator { recall_timeout_ms = 25000 }\n", "", 1)
}

// startSemantic starts memhost with the default realm embedded by a
// concept embeddings server (semanticConfig); it answers the server, the
// instance, and the config and data paths a restart takes.
func startSemantic(t *testing.T) (*conceptEmbeddings, *instance, string, string) {
	t.Helper()
	return startSemanticWith(t, semanticConfig)
}

// startSemanticWith is startSemantic with the deployment config makes.
func startSemanticWith(t *testing.T, config func(url string) string) (*conceptEmbeddings, *instance, string, string) {
	t.Helper()
	emb := newConceptEmbeddings(t)
	cfgPath, dataDir := writeConfig(t, config(emb.URL))
	m, err := startWithConfig(t, cfgPath, dataDir)
	if err != nil {
		t.Fatal(err)
	}
	return emb, m, cfgPath, dataDir
}

type semanticStatus struct {
	Semantic []struct {
		Realm     string           `json:"realm"`
		Model     string           `json:"model"`
		State     string           `json:"state"`
		Embedded  int64            `json:"embedded"`
		Fallbacks map[string]int64 `json:"fallbacks"`
	} `json:"semantic"`
}

// realmStatus polls /v1/plugins until realm's semantic state satisfies ok.
func realmStatus(t *testing.T, m *instance, realm string, what string, ok func(state string, embedded int64, fallbacks map[string]int64) bool) {
	t.Helper()
	var st semanticStatus
	for deadline := time.Now().Add(60 * time.Second); ; {
		st = semanticStatus{}
		if code := m.do("GET", "/v1/plugins", nil, &st); code == 200 {
			for _, r := range st.Semantic {
				if r.Realm == realm && ok(r.State, r.Embedded, r.Fallbacks) {
					return
				}
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("never %s: %+v\n%s", what, st, m.logs())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestSemanticRecallThroughServe: a realm with an embedder embeds its
// records in the background and recall finds by meaning what shares no
// word with the question; an embedder outage never fails a recall or a
// turn (lexical, with the reason counted); a restart re-embeds nothing,
// and a kill -9 mid-drain loses no acknowledged record or vector.
func TestSemanticRecallThroughServe(t *testing.T) {
	t.Parallel()
	emb, m, cfgPath, dataDir := startSemantic(t)
	const evidence = "I usually read a book before bed"
	ids := remember(t, m,
		map[string]any{"scope": "identity:alice", "kind": "preference", "title": "Wind-down", "body": evidence},
		map[string]any{"scope": "identity:alice", "kind": "fact", "title": "Coffee", "body": "Alice roasts her own espresso beans."},
		map[string]any{"scope": "identity:alice", "kind": "fact", "title": "Car", "body": "The garage replaced the brakes in May."},
	)
	realmStatus(t, m, "default", "3 records embedded", func(state string, n int64, _ map[string]int64) bool { return state == "idle" && n == 3 })
	if emb.embedded("Wind-down\n\n"+evidence) != 1 {
		t.Errorf("the evidence was embedded %d times, want once by its title and body", emb.embedded("Wind-down\n\n"+evidence))
	}

	// No word in common with the evidence: lexical recall has nothing.
	const question = "any tips for my evening routine?"
	hits := recall(t, m, "alice", question)
	if len(hits.Hits) == 0 || hits.Hits[0].Record.ID != ids[0] {
		t.Fatalf("recall %q = %+v, want the wind-down record %s first", question, hits, ids[0])
	}
	// Words still count: a lexical match outranks a semantic neighbour.
	if hits := recall(t, m, "alice", "brakes"); len(hits.Hits) == 0 || hits.Hits[0].Record.ID != ids[2] {
		t.Fatalf("recall brakes = %+v, want the car record %s first", hits, ids[2])
	}
	// Another identity's records stay out of the semantic half too.
	if other := recall(t, m, "bob", question); len(other.Hits) != 0 {
		t.Fatalf("bob recalled alice's records by meaning: %+v", other)
	}

	// The embedder goes down: recall and a turn still answer, lexically,
	// and the fallback is counted.
	emb.down.Store(true)
	if hits := recall(t, m, "alice", "espresso beans"); len(hits.Hits) == 0 || hits.Hits[0].Record.ID != ids[1] {
		t.Fatalf("recall while the embedder is down = %+v, want the coffee record by its words", hits)
	}
	var turn map[string]any
	if code := m.do("POST", "/v1/turns/inject", map[string]any{"identity": map[string]string{"id": "alice"}, "session": "s1", "content": "espresso beans"}, &turn); code != 200 {
		t.Fatalf("a turn while the embedder is down = %d %v", code, turn)
	}
	realmStatus(t, m, "default", "the fallback counted", func(_ string, _ int64, f map[string]int64) bool { return f["embedder_unavailable"] >= 2 })
	// A write meanwhile is acknowledged and waits in the backlog.
	late := remember(t, m, map[string]any{"scope": "identity:alice", "kind": "fact", "title": "Garden", "body": "The tomato seedlings went out in April."})
	realmStatus(t, m, "default", "the backlog failing", func(state string, _ int64, _ map[string]int64) bool { return state == "failing" })
	emb.down.Store(false)
	realmStatus(t, m, "default", "the late record embedded", func(state string, n int64, _ map[string]int64) bool { return state == "idle" && n == 4 })
	if hits := recall(t, m, "alice", "compost soil"); len(hits.Hits) == 0 || hits.Hits[0].Record.ID != late[0] {
		t.Fatalf("recall by meaning after the outage = %+v, want the garden record %s", hits, late[0])
	}

	// A restart finds every vector stored: nothing is embedded again, and
	// the first recall ranks by meaning (the realm gives the fresh
	// embedder process 30 s for the query, not the default 250 ms a
	// loaded machine could miss); only the question's text is embedded.
	m.stop()
	emb.mu.Lock()
	before := maps.Clone(emb.texts)
	emb.mu.Unlock()
	m, err := startWithConfig(t, cfgPath, dataDir)
	if err != nil {
		t.Fatal(err)
	}
	realmStatus(t, m, "default", "idle after the restart", func(state string, n int64, _ map[string]int64) bool { return state == "idle" && n == 0 })
	if hits := recall(t, m, "alice", question); len(hits.Hits) == 0 || hits.Hits[0].Record.ID != ids[0] {
		t.Fatalf("recall %q after a restart = %+v, want the wind-down record %s first\n%s", question, hits, ids[0], m.logs())
	}
	emb.mu.Lock()
	for text, n := range emb.texts {
		if text != question && n != before[text] {
			t.Errorf("%q was embedded %d times after the restart (%d before): stored vectors were embedded again", text, n, before[text])
		}
	}
	emb.mu.Unlock()

	// kill -9 with a backlog: every acknowledged record is embedded after
	// the next start.
	emb.down.Store(true)
	var batch []map[string]any
	for i := range 40 {
		batch = append(batch, map[string]any{"scope": "identity:alice", "kind": "fact", "title": fmt.Sprintf("Roast %d", i), "body": fmt.Sprintf("Batch %d of coffee beans roasted dark.", i)})
	}
	remember(t, m, batch...)
	if err := m.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	m.cmd.Wait()
	emb.down.Store(false)
	m, err = startWithConfig(t, cfgPath, dataDir)
	if err != nil {
		t.Fatal(err)
	}
	realmStatus(t, m, "default", "the 40 records embedded after the kill", func(state string, n int64, _ map[string]int64) bool { return state == "idle" && n == 40 })
}

// TestHungEmbedderIsNotAskedByEveryRecall: an embedding endpoint that
// accepts requests and never answers (its plugin process alive and
// answering pings, so never restarted) cost every recall its whole query
// budget. After a few such recalls the others stay lexical without asking
// it, /v1/plugins says until when, and it is asked again once it can
// answer.
func TestHungEmbedderIsNotAskedByEveryRecall(t *testing.T) {
	t.Parallel()
	emb, m, _, _ := startSemanticWith(t, impatientSemanticConfig)
	ids := remember(t, m,
		map[string]any{"scope": "identity:alice", "kind": "preference", "title": "Wind-down", "body": "I usually read a book before bed"},
		map[string]any{"scope": "identity:alice", "kind": "fact", "title": "Coffee", "body": "Alice roasts her own espresso beans."},
	)
	realmStatus(t, m, "default", "2 records embedded", func(state string, n int64, _ map[string]int64) bool { return state == "idle" && n == 2 })

	emb.hang.Store(true)
	t.Cleanup(func() { emb.hang.Store(false) })
	for i := range 10 {
		// Each text new, so none is answered from the query cache.
		hits := recall(t, m, "alice", fmt.Sprintf("espresso beans %d", i))
		if len(hits.Hits) == 0 || hits.Hits[0].Record.ID != ids[1] {
			t.Fatalf("recall %d while the embedder hangs = %+v, want the coffee record by its words", i, hits)
		}
	}
	if got := emb.hung.Load(); got > 3 {
		t.Errorf("10 recalls asked the hung embedder %d times, want at most 3", got)
	}
	var st struct {
		Semantic []struct {
			Realm       string           `json:"realm"`
			Fallbacks   map[string]int64 `json:"fallbacks"`
			PausedUntil *time.Time       `json:"queries_paused_until"`
		} `json:"semantic"`
	}
	if code := m.do("GET", "/v1/plugins", nil, &st); code != 200 || len(st.Semantic) != 1 || st.Semantic[0].PausedUntil == nil || st.Semantic[0].Fallbacks["embedder_unavailable"] != 10 {
		t.Fatalf("GET /v1/plugins = %d %+v, want 10 fallbacks and queries paused", code, st)
	}

	emb.hang.Store(false)
	eventually(t, "recall by meaning once the embedder answers again", func() bool {
		hits := recall(t, m, "alice", "any tips for my evening routine?")
		return len(hits.Hits) > 0 && hits.Hits[0].Record.ID == ids[0]
	})
}

// TestVectorsOfAnotherLengthNeverFailARecall: an operator who names the
// vectors' model (model_id) and then changes their length leaves vectors
// of the old length stored under the same id. Every recall of the realm
// used to fail (400, and every turn injected nothing); now the provider's
// refusal of the query's vector is a lexical recall, counted as the
// vector_refused fallback.
func TestVectorsOfAnotherLengthNeverFailARecall(t *testing.T) {
	t.Parallel()
	emb := newConceptEmbeddings(t)
	config := func(dims int) string {
		return strings.Replace(semanticConfig(emb.URL), "dimensions = 4", fmt.Sprintf("dimensions = %d, model_id = \"concepts-fixed\"", dims), 1)
	}
	cfgPath, dataDir := writeConfig(t, config(4))
	m, err := startWithConfig(t, cfgPath, dataDir)
	if err != nil {
		t.Fatal(err)
	}
	ids := remember(t, m,
		map[string]any{"scope": "identity:alice", "kind": "fact", "title": "Car", "body": "The garage replaced the brakes in May."},
		map[string]any{"scope": "identity:alice", "kind": "fact", "title": "Coffee", "body": "Alice roasts her own espresso beans."},
	)
	realmStatus(t, m, "default", "2 records embedded", func(state string, n int64, _ map[string]int64) bool { return state == "idle" && n == 2 })
	m.stop()
	emb.pad.Store(4)
	written, err := os.ReadFile(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cfgPath, []byte(strings.Replace(string(written), config(4), config(8), 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	m, err = startWithConfig(t, cfgPath, dataDir)
	if err != nil {
		t.Fatal(err)
	}
	if hits := recall(t, m, "alice", "brakes"); len(hits.Hits) == 0 || hits.Hits[0].Record.ID != ids[0] {
		t.Fatalf("recall brakes = %+v, want the car record %s by its words", hits, ids[0])
	}
	var turn struct {
		Injected []any `json:"injected_context"`
	}
	if code := m.do("POST", "/v1/turns/inject", map[string]any{"identity": map[string]string{"id": "alice"}, "session": "s1", "content": "espresso beans"}, &turn); code != 200 || len(turn.Injected) == 0 {
		t.Fatalf("a turn = %d %+v, want the coffee record injected", code, turn)
	}
	realmStatus(t, m, "default", "the refusals counted", func(_ string, _ int64, f map[string]int64) bool { return f["vector_refused"] >= 2 })
}

// TestSemanticTimeWindowThroughServe: a query naming a time window is
// recalled twice (wide, then inside the window) but its text is embedded
// once, and the window's record leads.
func TestSemanticTimeWindowThroughServe(t *testing.T) {
	t.Parallel()
	emb, m, _, _ := startSemantic(t)
	ids := remember(t, m,
		map[string]any{"scope": "identity:alice", "kind": "fact", "title": "Market roast", "body": "Alice roasted espresso beans at the market.", "occurred_at": "2023-05-27T09:00:00Z"},
		map[string]any{"scope": "identity:alice", "kind": "fact", "title": "Roaster", "body": "Alice buys espresso beans from the roaster.", "occurred_at": "2023-04-01T09:00:00Z"},
		map[string]any{"scope": "identity:alice", "kind": "fact", "title": "Garden", "body": "The tomato seedlings went into the soil.", "occurred_at": "2023-05-27T15:00:00Z"},
	)
	realmStatus(t, m, "default", "3 records embedded", func(state string, n int64, _ map[string]int64) bool { return state == "idle" && n == 3 })
	const question = "which espresso beans did I roast last Saturday"
	var out recallAnswer
	body := map[string]any{"identity": map[string]string{"id": "alice"}, "query": question, "now": "2023-05-30T10:00:00Z"}
	if code := m.do("POST", "/v1/recall", body, &out); code != 200 {
		t.Fatalf("POST /v1/recall = %d\n%s", code, m.logs())
	}
	if len(out.Hits) == 0 || out.Hits[0].Record.ID != ids[0] {
		t.Fatalf("recall %q = %+v, want Saturday's roast %s first", question, out, ids[0])
	}
	if n := emb.embedded(question); n != 1 {
		t.Fatalf("the question was embedded %d times, want once for both recalls", n)
	}
}

// TestSemanticRealmWithoutVectors: a realm naming an embedder on a
// provider that cannot store vectors is said at start and stays lexical.
func TestSemanticRealmWithoutVectors(t *testing.T) {
	t.Parallel()
	emb := newConceptEmbeddings(t)
	m := startMemhost(t, strings.Replace(semanticConfig(emb.URL), `plugin = "sqlite"
  config = { path = "memory.db" }`, `plugin = "bleve"
  config = { dir = "bleve" }`, 1))
	ids := remember(t, m, map[string]any{"scope": "identity:alice", "kind": "fact", "title": "Coffee", "body": "Alice roasts her own espresso beans."})
	if hits := recall(t, m, "alice", "espresso"); len(hits.Hits) != 1 || hits.Hits[0].Record.ID != ids[0] {
		t.Fatalf("lexical recall = %+v", hits)
	}
	if !strings.Contains(m.logs(), "does not store vectors") {
		t.Errorf("no start-up line says the realm stays lexical:\n%s", m.logs())
	}
	if n := emb.calls.Load(); n != 0 {
		t.Errorf("%d embedding calls for a realm that cannot use them", n)
	}
}

// TestSemanticRecallOnPostgres: the same realm on the postgres provider
// embeds its records into PostgreSQL and recalls by meaning through its
// replica. A recall waits read_wait for the replica to apply the vectors
// this host wrote (and one lagging past max_lag answers at once), then
// answers from SQL, which ranks without them; on a machine loaded by the
// whole suite the defaults (200 ms, 2 s) were once too short, so both are
// the longest allowed here.
func TestSemanticRecallOnPostgres(t *testing.T) {
	t.Parallel()
	emb := newConceptEmbeddings(t)
	dsn := pgtest.Shared(t).NewDatabase(t)
	m := startMemhost(t, strings.Replace(semanticConfig(emb.URL), `plugin = "sqlite"
  config = { path = "memory.db" }`, `plugin = "postgres"
  config = { dsn_env = "SEMANTIC_PG_DSN", schema = "semantic", replica = { read_wait = "10s", max_lag = "1m" } }`, 1), "SEMANTIC_PG_DSN="+dsn)
	ids := remember(t, m,
		map[string]any{"scope": "identity:alice", "kind": "preference", "title": "Wind-down", "body": "I usually read a book before bed"},
		map[string]any{"scope": "identity:alice", "kind": "fact", "title": "Car", "body": "The garage replaced the brakes in May."},
	)
	realmStatus(t, m, "default", "2 records embedded", func(state string, n int64, _ map[string]int64) bool { return state == "idle" && n == 2 })
	if hits := recall(t, m, "alice", "any tips for my evening routine?"); len(hits.Hits) == 0 || hits.Hits[0].Record.ID != ids[0] {
		t.Fatalf("recall by meaning on postgres = %+v, want the wind-down record %s first\n%s", hits, ids[0], m.logs())
	}
}

// TestHybridScoreIgnoresTheLimit, through memhost serve on the sqlite
// plugin with an embedder: a record's fused score is the same whether a
// client asks for 20 hits or 40. Past the engine's pool of 20 per half,
// a deeper answer holds records of lower cosine (the garage notes), which
// must not move the scores of the night drives the shallower one holds.
func TestHybridScoreIgnoresTheLimit(t *testing.T) {
	t.Parallel()
	_, m, _, _ := startSemantic(t)
	var recs []map[string]any
	add := func(n int, title, body string) {
		for i := range n {
			recs = append(recs, map[string]any{"scope": "identity:alice", "kind": "fact", "title": fmt.Sprintf("%s %d", title, i), "body": body})
		}
	}
	add(8, "Routine", "Alice keeps an evening routine.") // the query's words and meaning
	add(14, "Drive", "Alice drove her car at night.")    // half its meaning, none of its words
	add(12, "Garage", "The garage fixed the brakes.")    // neither
	remember(t, m, recs...)
	realmStatus(t, m, "default", "34 records embedded", func(state string, n int64, _ map[string]int64) bool { return state == "idle" && n == 34 })
	ask := func(limit int) map[string]float64 {
		t.Helper()
		var out recallAnswer
		body := map[string]any{"identity": map[string]string{"id": "alice"}, "query": "my evening routine", "limit": limit}
		if code := m.do("POST", "/v1/recall", body, &out); code != 200 {
			t.Fatalf("POST /v1/recall = %d\n%s", code, m.logs())
		}
		scores := map[string]float64{}
		for _, h := range out.Hits {
			scores[h.Record.ID] = h.Score
		}
		return scores
	}
	// The realm gives the query's embedding 30 s: the first recall ranks
	// by meaning (a lexical one finds only the 8 routines).
	shallow, deep := ask(20), ask(40)
	if len(shallow) != 20 || len(deep) != 34 {
		t.Fatalf("recall at limits 20 and 40 found %d and %d records, want 20 and 34 (ranking by meaning)\n%s", len(shallow), len(deep), m.logs())
	}
	for id, s := range shallow {
		if d, ok := deep[id]; !ok || d != s {
			t.Errorf("%s scores %v at limit 20 and %v (found %v) at limit 40", id, s, d, ok)
		}
	}
}
