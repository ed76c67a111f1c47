package hybrid

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/memhost/memhost/sdk"
)

// fakeEmbedder makes a deterministic vector per text. Its behaviour is
// switched by the test while a backlog runs.
type fakeEmbedder struct {
	mu      sync.Mutex
	model   string
	dims    int
	batch   int
	maxIn   int
	fail    error           // every call fails with it
	failOn  string          // Embed fails, unavailable, for a batch holding a text containing it
	nanOn   string          // a text containing it is answered a NaN vector
	down    bool            // Embed fails, unavailable (EmbedderInfo answers)
	refuse  string          // a text containing it is refused as invalid
	zero    string          // a text containing it is answered the zero vector
	block   bool            // calls wait for their context
	wrongN  bool            // answers one vector too few
	wrongD  bool            // answers vectors one dimension short
	calls   int             // Embed calls
	biggest int             // the largest batch seen
	seen    map[string]bool // texts embedded as documents
}

func newEmbedder(model string) *fakeEmbedder {
	return &fakeEmbedder{model: model, dims: 4, batch: 3, maxIn: 64, seen: map[string]bool{}}
}

func (f *fakeEmbedder) EmbedderInfo(context.Context) (sdk.EmbedderInfo, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fail != nil {
		return sdk.EmbedderInfo{}, f.fail
	}
	return sdk.EmbedderInfo{Model: f.model, Dimensions: f.dims, MaxBatch: f.batch, MaxInputBytes: f.maxIn, Deterministic: true}, nil
}

func (f *fakeEmbedder) Embed(ctx context.Context, req sdk.EmbedRequest) ([][]float32, error) {
	f.mu.Lock()
	f.calls++
	f.biggest = max(f.biggest, len(req.Texts))
	fail, block, refuse, zero, wrongN, wrongD, dims := f.fail, f.block, f.refuse, f.zero, f.wrongN, f.wrongD, f.dims
	failOn, nanOn, down := f.failOn, f.nanOn, f.down
	f.mu.Unlock()
	if block {
		<-ctx.Done()
		return nil, fmt.Errorf("embed: %w", sdk.ErrDeadline)
	}
	if fail != nil {
		return nil, fail
	}
	if down {
		return nil, fmt.Errorf("connection refused: %w", sdk.ErrUnavailable)
	}
	for _, t := range req.Texts {
		if failOn != "" && strings.Contains(t, failOn) {
			// llama.cpp's answer to a text over its physical batch.
			return nil, fmt.Errorf("HTTP 500: input is too large to process: %w", sdk.ErrUnavailable)
		}
	}
	if len(req.Texts) > f.batch {
		return nil, fmt.Errorf("%d texts over the batch of %d: %w", len(req.Texts), f.batch, sdk.ErrInvalid)
	}
	out := make([][]float32, 0, len(req.Texts))
	for _, t := range req.Texts {
		if len(t) > f.maxIn {
			return nil, fmt.Errorf("text of %d bytes: %w", len(t), sdk.ErrInvalid)
		}
		if refuse != "" && strings.Contains(t, refuse) {
			return nil, fmt.Errorf("refused: %w", sdk.ErrInvalid)
		}
		if req.Purpose == sdk.EmbedDocument {
			f.mu.Lock()
			f.seen[t] = true
			f.mu.Unlock()
		}
		if wrongD {
			out = append(out, vectorOf(t, dims-1))
		} else if nanOn != "" && strings.Contains(t, nanOn) {
			out = append(out, []float32{float32(math.NaN()), 0, 0, 0}[:dims])
		} else if zero != "" && strings.Contains(t, zero) {
			out = append(out, make([]float32, dims))
		} else {
			out = append(out, vectorOf(t, dims))
		}
	}
	if wrongN {
		out = out[:len(out)-1]
	}
	return out, nil
}

func (f *fakeEmbedder) set(fn func(*fakeEmbedder)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fn(f)
}

func vectorOf(text string, dims int) []float32 {
	h := fnv.New64a()
	h.Write([]byte(text))
	s := h.Sum64()
	v := make([]float32, dims)
	for i := range v {
		v[i] = float32((s>>(8*i))&0xff) / 255
	}
	return v
}

// fakeStore is a provider's records and vectors in memory.
type fakeStore struct {
	mu      sync.Mutex
	records map[string]sdk.Record
	vectors map[string]sdk.RecordVector
	failPut error
	onGet   func() // called by Get, outside the lock
	// onMissing is called by MissingVectors, outside the lock.
	onMissing func()
	skip      string // a record whose vector is never kept
	missings  int    // MissingVectors calls
	gets      int    // Get calls
}

func newStore(n int) *fakeStore {
	s := &fakeStore{records: map[string]sdk.Record{}, vectors: map[string]sdk.RecordVector{}}
	for i := range n {
		s.add(fmt.Sprintf("r%03d", i), fmt.Sprintf("title %d", i), fmt.Sprintf("body of record %d", i))
	}
	return s
}

func (s *fakeStore) add(id, title, body string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.records[id] = sdk.Record{ID: id, Title: title, Body: body}
}

func (s *fakeStore) PutVectors(_ context.Context, _ string, vecs []sdk.RecordVector) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.failPut != nil {
		return s.failPut
	}
	// The provider's server adapter refuses a batch holding any vector
	// or model id out of shape, as a real provider does.
	for i, v := range vecs {
		if err := sdk.ValidateVectorModel(fmt.Sprintf("vectors[%d].model", i), v.Model); err != nil {
			return err
		}
		if err := sdk.ValidateVector(fmt.Sprintf("vectors[%d].vector", i), v.Vector); err != nil {
			return err
		}
	}
	for _, v := range vecs {
		// A vector made from text the record no longer holds is skipped,
		// as sdk.VectorStore asks.
		if r, ok := s.records[v.ID]; ok && v.ID != s.skip && (v.ContentHash == "" || v.ContentHash == sdk.ContentHash(r.Title, r.Body)) {
			s.vectors[v.ID] = v
		}
	}
	return nil
}

func (s *fakeStore) MissingVectors(_ context.Context, _, model, after string, limit int) ([]string, error) {
	if err := sdk.ValidateVectorModel("model", model); err != nil {
		return nil, err
	}
	s.mu.Lock()
	onMissing := s.onMissing
	s.mu.Unlock()
	if onMissing != nil {
		onMissing()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.missings++
	var ids []string
	for id := range s.records {
		if v, ok := s.vectors[id]; (!ok || v.Model != model) && id > after {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	return ids[:min(limit, len(ids))], nil
}

func (s *fakeStore) Get(_ context.Context, _ string, ids []string) ([]sdk.Record, error) {
	s.mu.Lock()
	onGet := s.onGet
	s.mu.Unlock()
	if onGet != nil {
		onGet()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.gets++
	var out []sdk.Record
	for _, id := range ids {
		if r, ok := s.records[id]; ok {
			out = append(out, r)
		}
	}
	return out, nil
}

// withModel counts the records whose vector the model made.
func (s *fakeStore) withModel(model string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, v := range s.vectors {
		if v.Model == model {
			n++
		}
	}
	return n
}

func engine(t *testing.T, e sdk.Embedder, s *fakeStore, opts Options) *Engine {
	t.Helper()
	opts.Poll = cmpOr(opts.Poll, 5*time.Millisecond)
	opts.MaxBackoff = cmpOr(opts.MaxBackoff, 20*time.Millisecond)
	opts.Batch = max(opts.Batch, 7)
	eng, err := New([]Realm{{Name: "default", Embedder: e, Vectors: s, Records: s, Fusion: sdk.Fusion{Lexical: 0.6, Semantic: 0.4}}}, opts)
	if err != nil {
		t.Fatal(err)
	}
	return eng
}

func cmpOr(a, b time.Duration) time.Duration {
	if a != 0 {
		return a
	}
	return b
}

// running starts eng's backlogs until the test ends.
func running(t *testing.T, eng *Engine) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { eng.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
}

// eventually polls cond for up to 20 s (a wait, not a speed assertion).
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatalf("never: %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func TestBacklogDrainsEveryRecordInBatches(t *testing.T) {
	emb, store := newEmbedder("m1"), newStore(40)
	eng := engine(t, emb, store, Options{})
	running(t, eng)
	eventually(t, "40 records embedded", func() bool { return store.withModel("m1") == 40 })
	eventually(t, "the backlog idle", func() bool { return eng.Status()[0].State == StateIdle })
	st := eng.Status()[0]
	if st.Embedded != 40 || st.Model != "m1" || st.LastError != "" {
		t.Errorf("status %+v, want 40 embedded by m1 and no error", st)
	}
	emb.mu.Lock()
	biggest := emb.biggest
	emb.mu.Unlock()
	if biggest > 3 {
		t.Errorf("a call carried %d texts, over the declared batch of 3", biggest)
	}
	for id, v := range store.vectors {
		r := store.records[id]
		if want := vectorOf(r.Title+"\n\n"+r.Body, 4); fmt.Sprint(v.Vector) != fmt.Sprint(want) {
			t.Fatalf("record %s carries %v, want the embedding of its title and body %v", id, v.Vector, want)
		}
	}

	// A record written later is embedded at the next look; a kick makes
	// it now.
	store.add("r999", "late", "written after the drain")
	eng.Written("default")
	eventually(t, "the late record embedded", func() bool { return store.withModel("m1") == 41 })
}

// TestRecordChangedWhileEmbeddedIsEmbeddedAgain: a record edited after
// the backlog read it and before its vector was stored (a hand edit, or a
// forget and an import reusing its id) gets the vector of its new text;
// the old text's vector, put without its content hash, was kept for good.
func TestRecordChangedWhileEmbeddedIsEmbeddedAgain(t *testing.T) {
	store := newStore(0)
	store.add("r1", "otter", "lives by the river")
	var edited atomic.Bool
	emb := &hookedEmbedder{newEmbedder("m1"), func(req sdk.EmbedRequest) {
		if req.Purpose == sdk.EmbedDocument && edited.CompareAndSwap(false, true) {
			store.add("r1", "otter", "moved to the sea")
		}
	}}
	eng := engine(t, emb, store, Options{})
	running(t, eng)
	want := fmt.Sprint(vectorOf("otter\n\nmoved to the sea", 4))
	eventually(t, "the edited record carries its new text's vector", func() bool {
		store.mu.Lock()
		defer store.mu.Unlock()
		v, ok := store.vectors["r1"]
		return ok && fmt.Sprint(v.Vector) == want
	})
}

// TestAVectorNotKeptIsNotEmbeddedAgainAndAgain: a provider that skips a
// record's vector every time (the record's content hash there is not the
// one of the text the host read) leaves the record in the backlog; the
// realm refuses it after one more try instead of embedding it pass after
// pass without a pause.
func TestAVectorNotKeptIsNotEmbeddedAgainAndAgain(t *testing.T) {
	emb, store := newEmbedder("m1"), newStore(5)
	store.add("r1x", "stuck", "its vector is never kept")
	store.mu.Lock()
	store.skip = "r1x"
	store.mu.Unlock()
	eng := engine(t, emb, store, Options{})
	running(t, eng)
	eventually(t, "the backlog idle with the other records embedded", func() bool {
		return eng.Status()[0].State == StateIdle && store.withModel("m1") == 5
	})
	emb.mu.Lock()
	before := emb.calls
	emb.mu.Unlock()
	// Three polls list the record (waited for, not slept for).
	var polls atomic.Int64
	store.mu.Lock()
	store.onMissing = func() { polls.Add(1) }
	store.mu.Unlock()
	eventually(t, "three polls", func() bool { return polls.Load() >= 3 })
	emb.mu.Lock()
	after := emb.calls
	emb.mu.Unlock()
	if after != before {
		t.Errorf("the embedder was asked %d more times for a record whose vector is never kept", after-before)
	}
}

// hookedEmbedder is a fakeEmbedder that calls before ahead of each Embed.
type hookedEmbedder struct {
	*fakeEmbedder
	before func(sdk.EmbedRequest)
}

func (h *hookedEmbedder) Embed(ctx context.Context, req sdk.EmbedRequest) ([][]float32, error) {
	h.before(req)
	return h.fakeEmbedder.Embed(ctx, req)
}

func TestModelChangeReembedsEverything(t *testing.T) {
	emb, store := newEmbedder("m1"), newStore(20)
	eng := engine(t, emb, store, Options{})
	running(t, eng)
	eventually(t, "20 records embedded by m1", func() bool { return store.withModel("m1") == 20 })
	emb.set(func(f *fakeEmbedder) { f.model = "m2" })
	eventually(t, "20 records embedded by m2", func() bool { return store.withModel("m2") == 20 })
	if st := eng.Status()[0]; st.Model != "m2" {
		t.Errorf("status model %q, want m2", st.Model)
	}
}

func TestBacklogSurvivesAnOutage(t *testing.T) {
	for _, tc := range []struct {
		name   string
		break_ func(*fakeEmbedder, *fakeStore)
		mend   func(*fakeEmbedder, *fakeStore)
	}{
		{"embedder down", func(f *fakeEmbedder, _ *fakeStore) { f.fail = fmt.Errorf("down: %w", sdk.ErrUnavailable) }, func(f *fakeEmbedder, _ *fakeStore) { f.fail = nil }},
		{"wrong count", func(f *fakeEmbedder, _ *fakeStore) { f.wrongN = true }, func(f *fakeEmbedder, _ *fakeStore) { f.wrongN = false }},
		{"wrong dimensions", func(f *fakeEmbedder, _ *fakeStore) { f.wrongD = true }, func(f *fakeEmbedder, _ *fakeStore) { f.wrongD = false }},
		{"provider refuses vectors", func(_ *fakeEmbedder, s *fakeStore) { s.failPut = fmt.Errorf("disk full: %w", sdk.ErrUnavailable) }, func(_ *fakeEmbedder, s *fakeStore) { s.failPut = nil }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			emb, store := newEmbedder("m1"), newStore(15)
			emb.set(func(f *fakeEmbedder) { store.mu.Lock(); tc.break_(f, store); store.mu.Unlock() })
			eng := engine(t, emb, store, Options{})
			running(t, eng)
			eventually(t, "the backlog failing", func() bool { return eng.Status()[0].State == StateFailing })
			if st := eng.Status()[0]; st.LastError == "" || store.withModel("m1") != 0 {
				t.Errorf("while broken: status %+v, %d vectors stored; want the error and none stored", st, store.withModel("m1"))
			}
			emb.set(func(f *fakeEmbedder) { store.mu.Lock(); tc.mend(f, store); store.mu.Unlock() })
			eventually(t, "every record embedded after the outage", func() bool { return store.withModel("m1") == 15 })
			eventually(t, "the backlog idle", func() bool { return eng.Status()[0].State == StateIdle })
		})
	}
}

func TestARefusedRecordDoesNotHoldUpTheRealm(t *testing.T) {
	emb, store := newEmbedder("m1"), newStore(10)
	store.add("r004", "poison", "the embedder refuses this one")
	emb.set(func(f *fakeEmbedder) { f.refuse = "poison" })
	eng := engine(t, emb, store, Options{})
	running(t, eng)
	eventually(t, "the other 9 embedded", func() bool { return store.withModel("m1") == 9 })
	eventually(t, "the backlog idle", func() bool { return eng.Status()[0].State == StateIdle })
	if _, ok := store.vectors["r004"]; ok {
		t.Error("the refused record got a vector")
	}
}

func TestLongRecordsAreClippedNotRefused(t *testing.T) {
	emb, store := newEmbedder("m1"), newStore(0)
	store.add("long", "ééé", strings.Repeat("é", 200)) // 2-byte characters over the 64-byte input limit
	eng := engine(t, emb, store, Options{})
	running(t, eng)
	eventually(t, "the long record embedded", func() bool { return store.withModel("m1") == 1 })
	for text := range emb.seen {
		if len(text) > 64 || !strings.HasPrefix("ééé\n\n"+strings.Repeat("é", 200), text) {
			t.Errorf("embedded %q (%d bytes), want a prefix of at most 64 bytes on a character boundary", text, len(text))
		}
	}
}

func TestPrepareRecall(t *testing.T) {
	base := func() sdk.RecallQuery { return sdk.RecallQuery{Realm: "default", Query: "evening routine"} }
	for _, tc := range []struct {
		name       string
		query      func() sdk.RecallQuery
		embedder   func(*fakeEmbedder)
		deadline   time.Duration // 0: none
		wantReason string
		wantVector bool
	}{
		{name: "embeds the query", query: base, wantVector: true},
		{name: "another realm stays lexical", query: func() sdk.RecallQuery { q := base(); q.Realm = "other"; return q }},
		{name: "an empty query stays lexical", query: func() sdk.RecallQuery { q := base(); q.Query = ""; return q }},
		{name: "embedder down", query: base, embedder: func(f *fakeEmbedder) { f.fail = sdk.ErrUnavailable }, wantReason: ReasonEmbedderUnavailable},
		{name: "embedder slow", query: base, embedder: func(f *fakeEmbedder) { f.block = true }, deadline: time.Second, wantReason: ReasonEmbedderUnavailable},
		{name: "wrong dimensions", query: base, embedder: func(f *fakeEmbedder) { f.wrongD = true }, wantReason: ReasonEmbedderUnavailable},
		{name: "no answer", query: base, embedder: func(f *fakeEmbedder) { f.wrongN = true }, wantReason: ReasonEmbedderUnavailable},
		{name: "deadline spent", query: base, deadline: -time.Second, wantReason: ReasonNoTime},
		// A provider refuses a zero query vector, and a model id that is
		// not printable ASCII: handing either on fails the recall.
		{name: "zero vector", query: base, embedder: func(f *fakeEmbedder) { f.zero = "evening" }, wantReason: ReasonNoQueryMeaning},
		{name: "model id the provider refuses", query: base, embedder: func(f *fakeEmbedder) { f.model = "my model" }, wantReason: ReasonEmbedderUnavailable},
	} {
		// In a bubble (testing/synctest): the slow embedder's case has its
		// deadline pass while the embedder holds the query, however long a
		// loaded machine takes to reach it (with real time, a second lost
		// there left no time to ask: no_time instead).
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				emb := newEmbedder("m1")
				if tc.embedder != nil {
					emb.set(tc.embedder)
				}
				eng := engine(t, emb, newStore(0), Options{QueryTimeout: time.Hour}) // the recall's deadline rules
				ctx := context.Background()
				if tc.deadline != 0 {
					var cancel context.CancelFunc
					ctx, cancel = context.WithTimeout(ctx, tc.deadline)
					defer cancel()
				}
				q := tc.query()
				reason := eng.PrepareRecall(ctx, &q)
				if reason != tc.wantReason {
					t.Errorf("reason %q, want %q", reason, tc.wantReason)
				}
				if got := q.QueryVector != nil; got != tc.wantVector {
					t.Fatalf("query vector %v, want one: %v", q.QueryVector, tc.wantVector)
				}
				if tc.wantVector {
					if fmt.Sprint(q.QueryVector) != fmt.Sprint(vectorOf("evening routine", 4)) || q.VectorModel != "m1" || q.Fusion != (sdk.Fusion{Lexical: 0.6, Semantic: 0.4}) {
						t.Errorf("query %+v, want the query's vector by m1 with the realm's fusion", q)
					}
				}
				if tc.wantReason != "" {
					if got := eng.Status()[0].Fallbacks[tc.wantReason]; got != 1 {
						t.Errorf("fallbacks[%s] = %d, want 1", tc.wantReason, got)
					}
				}
			})
		})
	}
}

// TestPrepareRecallOutOfTimeUsesTheCache: with no time left to ask the
// embedder, a query it embedded moments ago (a deeper recall of the same
// text) still gets its vector; another text falls back.
func TestPrepareRecallOutOfTimeUsesTheCache(t *testing.T) {
	eng := engine(t, newEmbedder("m1"), newStore(0), Options{QueryTimeout: time.Hour})
	q := sdk.RecallQuery{Realm: "default", Query: "evening routine"}
	if reason := eng.PrepareRecall(context.Background(), &q); reason != "" || q.QueryVector == nil {
		t.Fatalf("first recall: reason %q, vector %v", reason, q.QueryVector)
	}
	ctx, cancel := context.WithTimeout(context.Background(), -time.Second)
	defer cancel()
	again := sdk.RecallQuery{Realm: "default", Query: "evening routine", Limit: 20}
	if reason := eng.PrepareRecall(ctx, &again); reason != "" || fmt.Sprint(again.QueryVector) != fmt.Sprint(q.QueryVector) || again.VectorModel != "m1" || again.Fusion != q.Fusion {
		t.Fatalf("out of time, the cached query: reason %q, query %+v", reason, again)
	}
	other := sdk.RecallQuery{Realm: "default", Query: "morning routine"}
	if reason := eng.PrepareRecall(ctx, &other); reason != ReasonNoTime || other.QueryVector != nil {
		t.Fatalf("out of time, a new text: reason %q, vector %v", reason, other.QueryVector)
	}
}

func TestFallbackLogsOncePerMinute(t *testing.T) {
	var buf bytes.Buffer
	emb := newEmbedder("m1")
	emb.set(func(f *fakeEmbedder) { f.fail = errors.New("connection refused") })
	eng := engine(t, emb, newStore(0), Options{Logger: hclog.New(&hclog.LoggerOptions{Output: &buf, Level: hclog.Warn})})
	for range 5 {
		q := sdk.RecallQuery{Realm: "default", Query: "anything"}
		eng.PrepareRecall(context.Background(), &q)
	}
	if n := strings.Count(buf.String(), "recall stays lexical"); n != 1 {
		t.Errorf("%d log lines for 5 fallbacks, want 1:\n%s", n, buf.String())
	}
	if got := eng.Status()[0].Fallbacks[ReasonEmbedderUnavailable]; got != 5 {
		t.Errorf("counted %d fallbacks, want 5", got)
	}
}

func TestNewRefusesABadSetup(t *testing.T) {
	emb, store := newEmbedder("m1"), newStore(0)
	good := Realm{Name: "a", Embedder: emb, Vectors: store, Records: store}
	for _, tc := range []struct {
		name   string
		realms []Realm
		want   string
	}{
		{"no name", []Realm{{Embedder: emb, Vectors: store, Records: store}}, "no name"},
		{"no embedder", []Realm{{Name: "a", Vectors: store, Records: store}}, "needs an embedder"},
		{"no vectors", []Realm{{Name: "a", Embedder: emb, Records: store}}, "stores vectors"},
		{"negative weight", []Realm{{Name: "a", Embedder: emb, Vectors: store, Records: store, Fusion: sdk.Fusion{Semantic: -1}}}, "negative"},
		{"negative query timeout", []Realm{{Name: "a", Embedder: emb, Vectors: store, Records: store, QueryTimeout: -time.Second}}, "query timeout -1s is negative"},
		{"twice", []Realm{good, good}, "twice"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(tc.realms, Options{})
			if !errors.Is(err, sdk.ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("New = %v, want sdk.ErrInvalid saying %q", err, tc.want)
			}
		})
	}
}

func TestClip(t *testing.T) {
	for _, tc := range []struct {
		s    string
		n    int
		want string
	}{
		{"hello", 0, "hello"},
		{"hello", 10, "hello"},
		{"hello", 3, "hel"},
		{"héllo", 2, "h"}, // é is 2 bytes at 1..2
		{"héllo", 3, "hé"},
		{"日本語", 4, "日"},
	} {
		if got := clip(tc.s, tc.n); got != tc.want {
			t.Errorf("clip(%q, %d) = %q, want %q", tc.s, tc.n, got, tc.want)
		}
	}
}

func TestEmbedRefusesNonFinite(t *testing.T) {
	e := embedderFunc(func(context.Context, sdk.EmbedRequest) ([][]float32, error) {
		return [][]float32{{0, float32(math.Inf(1)), 0, 0}}, nil
	})
	_, err := embed(context.Background(), e, sdk.EmbedderInfo{Model: "m", Dimensions: 4, MaxBatch: 1}, sdk.EmbedQuery, []string{"x"})
	if !errors.Is(err, errBadAnswer) {
		t.Errorf("embed with an infinite value = %v, want a bad answer", err)
	}
	nan := embedderFunc(func(context.Context, sdk.EmbedRequest) ([][]float32, error) {
		return [][]float32{{float32(math.NaN()), 0, 0, 0}}, nil
	})
	if _, err := embed(context.Background(), nan, sdk.EmbedderInfo{Model: "m", Dimensions: 4, MaxBatch: 1}, sdk.EmbedQuery, []string{"x"}); !errors.Is(err, errBadAnswer) {
		t.Errorf("embed with NaN = %v, want a bad answer", err)
	}
}

type embedderFunc func(context.Context, sdk.EmbedRequest) ([][]float32, error)

func (f embedderFunc) EmbedderInfo(context.Context) (sdk.EmbedderInfo, error) {
	return sdk.EmbedderInfo{Model: "m", Dimensions: 4, MaxBatch: 1}, nil
}
func (f embedderFunc) Embed(ctx context.Context, r sdk.EmbedRequest) ([][]float32, error) {
	return f(ctx, r)
}

// TestUnlistedRealmsStartOnFirstUse: a realm without a block (served as
// the default realm is) gets its backlog at its first write or recall,
// up to MaxRealms of them.
func TestUnlistedRealmsStartOnFirstUse(t *testing.T) {
	emb := newEmbedder("m1")
	stores := map[string]*fakeStore{"acme": newStore(5), "globex": newStore(5), "initech": newStore(5)}
	// The query's budget is not what this test is about: the default
	// 250 ms, spent on two goroutines' scheduling under the race detector
	// on a loaded machine, would make the recall lexical.
	eng, err := New(nil, Options{Poll: 5 * time.Millisecond, QueryTimeout: time.Hour, MaxRealms: 2, Unlisted: func(name string) (Realm, bool) {
		s, ok := stores[name]
		return Realm{Name: name, Embedder: emb, Vectors: s, Records: s}, ok
	}})
	if err != nil {
		t.Fatal(err)
	}
	running(t, eng)
	if len(eng.Status()) != 0 {
		t.Fatalf("status before any use: %+v", eng.Status())
	}
	eng.Written("acme")
	q := sdk.RecallQuery{Realm: "globex", Query: "anything"}
	if reason := eng.PrepareRecall(context.Background(), &q); reason != "" || q.QueryVector == nil {
		t.Fatalf("recall in an unlisted realm: reason %q, vector %v", reason, q.QueryVector)
	}
	eventually(t, "both realms embedded", func() bool { return stores["acme"].withModel("m1") == 5 && stores["globex"].withModel("m1") == 5 })
	// Past MaxRealms a realm stays lexical; a realm Unlisted refuses too.
	for _, name := range []string{"initech", "unknown"} {
		q := sdk.RecallQuery{Realm: name, Query: "anything"}
		if reason := eng.PrepareRecall(context.Background(), &q); reason != "" || q.QueryVector != nil {
			t.Errorf("recall in %s: reason %q, vector %v; want plain lexical", name, reason, q.QueryVector)
		}
	}
	if n := len(eng.Status()); n != 2 {
		t.Errorf("%d realms running, want 2", n)
	}
}

// TestFirstUsesWhileRunEnds: requests still served while the host stops
// use realms for the first time as Run ends; none may start a backlog
// beside Run's wait for the others (the WaitGroup panicked, taking the
// host down mid-shutdown, and the race detector saw it).
func TestFirstUsesWhileRunEnds(t *testing.T) {
	emb := newEmbedder("m1")
	for round := range 50 {
		eng, err := New(nil, Options{Poll: 5 * time.Millisecond, QueryTimeout: time.Hour, Unlisted: func(name string) (Realm, bool) {
			s := newStore(1)
			return Realm{Name: name, Embedder: emb, Vectors: s, Records: s}, true
		}})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		ran := make(chan struct{})
		go func() { eng.Run(ctx); close(ran) }()
		used := make(chan struct{})
		go func() {
			defer close(used)
			for i := range 200 {
				eng.Written(fmt.Sprint("r", round, "-", i))
			}
		}()
		time.Sleep(time.Duration(round%5) * 100 * time.Microsecond)
		cancel()
		<-ran
		<-used
	}
}

func TestWaitDrained(t *testing.T) {
	emb, store := newEmbedder("m1"), newStore(30)
	store.add("r900", "poison", "refused")
	emb.set(func(f *fakeEmbedder) { f.refuse = "poison" })
	eng := engine(t, emb, store, Options{Poll: time.Hour}) // only the kick wakes it
	running(t, eng)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := eng.WaitDrained(ctx, "default"); err != nil {
		t.Fatal(err)
	}
	if n := store.withModel("m1"); n != 30 {
		t.Errorf("drained with %d of 30 records embedded", n)
	}
	if err := eng.WaitDrained(ctx, "lexical-realm"); err != nil {
		t.Errorf("a realm without an embedder: %v", err)
	}
}

// TestPrepareRecallEmbedsAQueryOnce: a turn that recalls twice with one
// text (a query naming a time window asks inside the window too) asks the
// embedder once; another text, or a new model, asks again, and each query
// gets its own copy of the vector.
func TestPrepareRecallEmbedsAQueryOnce(t *testing.T) {
	emb := newEmbedder("m1")
	eng := engine(t, emb, newStore(0), Options{QueryTimeout: time.Hour})
	calls := func() int {
		emb.mu.Lock()
		defer emb.mu.Unlock()
		return emb.calls
	}
	prepare := func(text string) sdk.RecallQuery {
		t.Helper()
		q := sdk.RecallQuery{Realm: "default", Query: text}
		if reason := eng.PrepareRecall(context.Background(), &q); reason != "" || q.QueryVector == nil {
			t.Fatalf("PrepareRecall(%q): reason %q, vector %v", text, reason, q.QueryVector)
		}
		return q
	}
	first, second := prepare("what did I do last Saturday"), prepare("what did I do last Saturday")
	if n := calls(); n != 1 {
		t.Fatalf("%d embed calls for one text twice, want 1", n)
	}
	if fmt.Sprint(second.QueryVector) != fmt.Sprint(first.QueryVector) || second.VectorModel != "m1" {
		t.Fatalf("the second recall got %v by %q, want the first's vector by m1", second.QueryVector, second.VectorModel)
	}
	first.QueryVector[0] += 1
	if again := prepare("what did I do last Saturday"); fmt.Sprint(again.QueryVector) == fmt.Sprint(first.QueryVector) {
		t.Fatal("a query's vector is shared with the next query's")
	}
	prepare("evening routine")
	if n := calls(); n != 2 {
		t.Fatalf("%d embed calls after another text, want 2", n)
	}
	emb.set(func(f *fakeEmbedder) { f.model = "m2" })
	eng.realm("default").forgetInfo()
	if q := prepare("evening routine"); q.VectorModel != "m2" || calls() != 3 {
		t.Fatalf("after a model change: model %q after %d calls, want m2 after 3", q.VectorModel, calls())
	}
	eng.ForgetQueries()
	if prepare("evening routine"); calls() != 4 {
		t.Fatalf("%d embed calls after ForgetQueries, want 4: the text was served from the dropped cache", calls())
	}
	var none *Engine
	none.ForgetQueries() // a host without an embedder
}

// TestRefusedRecordsAreLeftBehind: a record the embedder refuses, or
// answers the zero vector for (which no provider stores), stays without a
// vector and is not asked again, whether it shares its page with others
// or is alone in it; the rest of the realm is embedded and the backlog
// goes idle rather than failing forever.
func TestRefusedRecordsAreLeftBehind(t *testing.T) {
	for _, tc := range []struct {
		name   string
		others int    // well-formed records r000...
		bad    string // the bad record's id
		set    func(*fakeEmbedder)
		want   int // records embedded
	}{
		{"refused alone", 0, "p1", func(f *fakeEmbedder) { f.refuse = "poison" }, 0},
		{"refused alone in the last page", 7, "r999", func(f *fakeEmbedder) { f.refuse = "poison" }, 7},
		{"zero vector alone", 0, "p1", func(f *fakeEmbedder) { f.zero = "poison" }, 0},
		{"zero vector among others", 5, "r002", func(f *fakeEmbedder) { f.zero = "poison" }, 4}, // replaces a good one
	} {
		t.Run(tc.name, func(t *testing.T) {
			emb, store := newEmbedder("m1"), newStore(tc.others)
			store.add(tc.bad, "poison", "the embedder cannot use this one")
			emb.set(tc.set)
			want := tc.want
			eng := engine(t, emb, store, Options{})
			running(t, eng)
			eventually(t, "the backlog idle with the good records embedded", func() bool {
				return eng.Status()[0].State == StateIdle && store.withModel("m1") == want
			})
			store.mu.Lock()
			_, got := store.vectors[tc.bad]
			store.mu.Unlock()
			if got {
				t.Error("the bad record got a vector")
			}
			// The idle realm's polls list the bad record again; the status
			// must not show the realm draining while they do (it did, and
			// a status read then saw it so).
			var states []string
			var statesMu sync.Mutex
			store.mu.Lock()
			store.onMissing = func() {
				statesMu.Lock()
				defer statesMu.Unlock()
				states = append(states, eng.Status()[0].State)
			}
			store.mu.Unlock()
			emb.mu.Lock()
			before := emb.calls
			emb.mu.Unlock()
			// Three polls list the bad record (waited for, not slept for: a
			// slow machine may run none in a fixed time).
			eventually(t, "three polls of the idle realm", func() bool {
				statesMu.Lock()
				defer statesMu.Unlock()
				return len(states) >= 3
			})
			statesMu.Lock()
			for _, s := range states {
				if s != StateIdle {
					t.Errorf("a poll of the idle realm showed it %s", s)
					break
				}
			}
			statesMu.Unlock()
			emb.mu.Lock()
			after := emb.calls
			emb.mu.Unlock()
			if after != before {
				t.Errorf("the embedder was asked %d more times after the backlog went idle", after-before)
			}
			if st := eng.Status()[0]; st.State != StateIdle || st.LastError != "" {
				t.Errorf("status %+v, want idle without an error", st)
			}
		})
	}
}

// TestRefusedRecordsAreNotPolledHot: a realm whose records the embedder
// refused (an endpoint answering 400 to every text) polled them every
// second for as long as they stayed refused, reading every one of them
// each time: the pages of refused records reset the idle poll's wait,
// which never grew past Poll, and a pass read the records before leaving
// the refused ones out. Now the wait grows as for an idle realm (up to 64
// polls), and a refused record is not read to be skipped. In a bubble
// (testing/synctest): ten minutes pass at once.
func TestRefusedRecordsAreNotPolledHot(t *testing.T) {
	for _, tc := range []struct {
		name    string
		records int
		refuse  string // the embedder refuses the texts holding it
		// maxPasses bounds the backlog's passes over the ten minutes (a
		// pass lists the backlog's pages, then one more); a poll a second
		// made 600.
		maxPasses int
		maxGets   int // Get calls: the first pass's pages
	}{
		{name: "every record refused", records: 20, refuse: "body", maxPasses: 20, maxGets: 3},
		{name: "nothing missing", records: 0, maxPasses: 20, maxGets: 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				emb, store := newEmbedder("m1"), newStore(tc.records)
				emb.set(func(f *fakeEmbedder) { f.refuse = tc.refuse })
				eng, err := New([]Realm{{Name: "default", Embedder: emb, Vectors: store, Records: store}},
					Options{Batch: 7, Poll: time.Second, RefusalRetry: time.Hour})
				if err != nil {
					t.Fatal(err)
				}
				ctx, cancel := context.WithCancel(t.Context())
				done := make(chan struct{})
				go func() { eng.Run(ctx); close(done) }()
				time.Sleep(10 * time.Minute)
				cancel()
				<-done
				pages := (tc.records + 6) / 7
				store.mu.Lock()
				passes, gets := store.missings/(pages+1), store.gets
				store.mu.Unlock()
				if passes > tc.maxPasses {
					t.Errorf("%d passes over the backlog in ten minutes, want at most %d", passes, tc.maxPasses)
				}
				if gets > tc.maxGets {
					t.Errorf("%d reads of records, want at most %d (the first pass's)", gets, tc.maxGets)
				}
				if st := eng.Status()[0]; st.Refused != tc.records {
					t.Errorf("%d records refused, want %d", st.Refused, tc.records)
				}
			})
		})
	}
}

// lateEmbedder answers each call a moment before its context's deadline,
// as an embedder does whose page takes all but the last of the step's time.
type lateEmbedder struct{ *fakeEmbedder }

func (l lateEmbedder) Embed(ctx context.Context, req sdk.EmbedRequest) ([][]float32, error) {
	if dl, ok := ctx.Deadline(); ok {
		time.Sleep(time.Until(dl) - time.Microsecond)
	}
	return l.fakeEmbedder.Embed(ctx, req)
}

// roundTripStore is a fakeStore whose put takes a round trip's time, failing
// when its context ends first, as a plugin call does.
type roundTripStore struct{ *fakeStore }

func (s roundTripStore) PutVectors(ctx context.Context, realm string, vecs []sdk.RecordVector) error {
	time.Sleep(time.Millisecond)
	if err := ctx.Err(); err != nil {
		return err
	}
	return s.fakeStore.PutVectors(ctx, realm, vecs)
}

// TestVectorsMadeLateInAStepAreStored: vectors the embedder answered just
// before the step's deadline were put under what was left of it, too
// little for the put's round trip: the step failed ("put vectors: ...
// deadline had passed before the call began", seen against a slow
// endpoint) and the vectors were thrown away, to be made again. In a
// bubble (testing/synctest), so the answer comes exactly that late.
func TestVectorsMadeLateInAStepAreStored(t *testing.T) {
	for _, tc := range []struct {
		name    string
		records int
	}{
		{name: "one page", records: 3},
		{name: "two pages", records: 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				emb, store := newEmbedder("m1"), newStore(tc.records)
				emb.set(func(f *fakeEmbedder) { f.batch = 16 })
				rs := roundTripStore{store}
				eng, err := New([]Realm{{Name: "default", Embedder: lateEmbedder{emb}, Vectors: rs, Records: rs}},
					Options{Batch: 7, CallTimeout: time.Second})
				if err != nil {
					t.Fatal(err)
				}
				ctx, cancel := context.WithCancel(t.Context())
				done := make(chan struct{})
				go func() { eng.Run(ctx); close(done) }()
				for i := 0; store.withModel("m1") < tc.records; i++ {
					if st := eng.Status()[0]; st.State == StateFailing || i == 100 {
						t.Fatalf("%d of %d records embedded, state %s: %s", store.withModel("m1"), tc.records, st.State, st.LastError)
					}
					time.Sleep(100 * time.Millisecond)
				}
				cancel()
				<-done
			})
		})
	}
}

// TestAFailingRecordDoesNotStallTheRealm: a record the embedder fails on
// every time (a 500 for a text over llama.cpp's batch, a NaN or a short
// answer for it), while it embeds the others, held its realm's whole
// backlog: the page was retried forever, nothing after it embedded, and
// the chunks of the page that did embed were thrown away. Now those are
// kept, the page is embedded one record at a time (at once for a bad
// answer, after a few failed steps otherwise), and the record that still
// fails is left behind as a refused one, asked again later.
func TestAFailingRecordDoesNotStallTheRealm(t *testing.T) {
	for _, tc := range []struct {
		name   string
		others int    // well-formed records r000...
		bad    string // the failing record's id
		set    func(*fakeEmbedder)
		want   int // records embedded
		// keeps: while the page first fails, its chunks before the bad
		// record's are stored
		keeps int
	}{
		{"a 500 for one text", 20, "r005", func(f *fakeEmbedder) { f.failOn = "poison" }, 19, 3},
		{"a NaN for one text", 20, "r005", func(f *fakeEmbedder) { f.nanOn = "poison" }, 19, 0},
		{"a 500 for one text first in the realm", 10, "a00", func(f *fakeEmbedder) { f.failOn = "poison" }, 10, 0},
		// Alone in its page: told from an outage by a text embedded before.
		{"a 500 for one text alone in the last page", 7, "r999", func(f *fakeEmbedder) { f.failOn = "poison" }, 7, 0},
		{"a NaN for one text alone in the last page", 7, "r999", func(f *fakeEmbedder) { f.nanOn = "poison" }, 7, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			emb, store := newEmbedder("m1"), newStore(tc.others)
			store.add(tc.bad, "poison", "the embedder fails on this one every time")
			emb.set(tc.set)
			eng := engine(t, emb, store, Options{})
			// What the first failed step kept is read by the retry's read
			// of the page, the first read while the realm fails, before
			// the retry embeds anything. Read once the realm showed
			// failing, it was a later retry's for a test late by the
			// retries' backoff (past the split, 5 stored, want 3).
			var keptMu sync.Mutex
			kept := -1
			store.onGet = func() {
				if eng.Status()[0].State != StateFailing {
					return
				}
				keptMu.Lock()
				defer keptMu.Unlock()
				if kept < 0 {
					kept = store.withModel("m1")
				}
			}
			running(t, eng)
			if tc.keeps > 0 {
				eventually(t, "the failed page read again", func() bool {
					keptMu.Lock()
					defer keptMu.Unlock()
					return kept >= 0
				})
				keptMu.Lock()
				if kept != tc.keeps {
					t.Errorf("%d records stored after the page failed, want the %d of its chunks before the bad record", kept, tc.keeps)
				}
				keptMu.Unlock()
			}
			eventually(t, "the other records embedded, the backlog idle", func() bool {
				st := eng.Status()[0]
				return store.withModel("m1") == tc.want && st.State == StateIdle && st.Refused == 1
			})
			store.mu.Lock()
			_, got := store.vectors[tc.bad]
			store.mu.Unlock()
			if got {
				t.Error("the failing record got a vector")
			}
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			if err := eng.WaitDrained(ctx, "default"); err != nil {
				t.Error(err)
			}
		})
	}
}

// TestAnOutageRefusesNothing: an embedder that fails every text, once it
// has embedded some, is down: the backlog waits it out, one record at a
// time or not, and refuses no record for it.
func TestAnOutageRefusesNothing(t *testing.T) {
	for _, tc := range []struct {
		name string
		set  func(f *fakeEmbedder, on bool)
	}{
		{"unavailable", func(f *fakeEmbedder, on bool) { f.down = on }},
		{"wrong count", func(f *fakeEmbedder, on bool) { f.wrongN = on }},
		{"NaN for every text", func(f *fakeEmbedder, on bool) {
			f.nanOn = ""
			if on {
				f.nanOn = " " // every record's text has a space
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			emb, store := newEmbedder("m1"), newStore(7) // one page
			eng := engine(t, emb, store, Options{})
			running(t, eng)
			eventually(t, "the first page embedded", func() bool { return store.withModel("m1") == 7 })
			emb.set(func(f *fakeEmbedder) { tc.set(f, true) })
			for i := range 30 {
				store.add(fmt.Sprintf("s%03d", i), "later", fmt.Sprintf("written during the outage %d", i))
			}
			eng.Written("default")
			eventually(t, "the backlog failing", func() bool { return eng.Status()[0].State == StateFailing })
			// Each retry reads its page: the realm must show failing then
			// too (it showed draining until the retry failed).
			seen := map[string]bool{}
			var seenMu sync.Mutex
			store.mu.Lock()
			store.onGet = func() {
				seenMu.Lock()
				defer seenMu.Unlock()
				seen[eng.Status()[0].State] = true
			}
			store.mu.Unlock()
			emb.mu.Lock()
			before := emb.calls
			emb.mu.Unlock()
			eventually(t, "steps past the split", func() bool {
				emb.mu.Lock()
				defer emb.mu.Unlock()
				return emb.calls > before+4*splitAfter
			})
			if st := eng.Status()[0]; st.Refused != 0 || st.State != StateFailing {
				t.Fatalf("during the outage: %+v, want failing with nothing refused", st)
			}
			store.mu.Lock()
			store.onGet = nil
			store.mu.Unlock()
			seenMu.Lock()
			if len(seen) != 1 || !seen[StateFailing] {
				t.Errorf("retries during the outage showed states %v, want failing only", seen)
			}
			seenMu.Unlock()
			emb.set(func(f *fakeEmbedder) { tc.set(f, false) })
			eventually(t, "every record embedded after the outage", func() bool { return store.withModel("m1") == 37 })
			eventually(t, "the backlog idle", func() bool { return eng.Status()[0].State == StateIdle })
		})
	}
}

// TestAFailingRecordAloneAfterARestartIsRefused: the realm's other
// records were embedded by an earlier run, so after a restart its
// backlog is only the record the embedder always fails on. The check
// that the embedder still works asked the last text it embedded, which
// this process had none of, so the record was never refused: the realm
// stayed failing, and WaitDrained waited for ever. A neutral probe text
// stands in for it.
func TestAFailingRecordAloneAfterARestartIsRefused(t *testing.T) {
	emb, store := newEmbedder("m1"), newStore(7)
	{
		eng := engine(t, emb, store, Options{})
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { eng.Run(ctx); close(done) }()
		eventually(t, "the first run embeds every record", func() bool { return store.withModel("m1") == 7 })
		cancel()
		<-done
	}
	store.add("r999", "poison", "the embedder fails on this one every time")
	emb.set(func(f *fakeEmbedder) { f.failOn = "poison" })
	eng := engine(t, emb, store, Options{})
	running(t, eng)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := eng.WaitDrained(ctx, "default"); err != nil {
		t.Fatalf("%v; status %+v", err, eng.Status()[0])
	}
	eventually(t, "the record refused, the backlog idle", func() bool {
		st := eng.Status()[0]
		return st.State == StateIdle && st.Refused == 1
	})
}

// flakyEmbedder fails the Embed calls fail picks (by their number from
// 1) as unavailable, whatever their texts: a partial outage.
type flakyEmbedder struct {
	*fakeEmbedder
	fail func(n int64) bool
	n    atomic.Int64
}

func (f *flakyEmbedder) Embed(ctx context.Context, req sdk.EmbedRequest) ([][]float32, error) {
	if f.fail(f.n.Add(1)) {
		return nil, fmt.Errorf("HTTP 502 bad gateway: %w", sdk.ErrUnavailable)
	}
	return f.fakeEmbedder.Embed(ctx, req)
}

// TestAPartialOutageRefusesNothing: an endpoint failing some calls,
// whatever their texts, had a record refused whenever its call failed
// and the next succeeded, once the page was embedded one record at a
// time; those well-formed records then stayed lexical for RefusalRetry.
// A record is now asked again at once, and refused only when it fails
// so in several steps in a row.
func TestAPartialOutageRefusesNothing(t *testing.T) {
	for _, tc := range []struct {
		name string
		fail func(n int64) bool
	}{
		{"every other call (one replica of two down)", func(n int64) bool { return n%2 == 0 }},
		{"one call in three (one replica of three down)", func(n int64) bool { return n%3 == 0 }},
		{"two calls in three", func(n int64) bool { return n%3 != 0 }},
		{"half the calls at random", func() func(int64) bool {
			rng := rand.New(rand.NewPCG(1, 2)) // only the backlog's goroutine calls
			return func(int64) bool { return rng.IntN(2) == 0 }
		}()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			inner, store := newEmbedder("m1"), newStore(40)
			eng := engine(t, &flakyEmbedder{fakeEmbedder: inner, fail: tc.fail}, store, Options{})
			running(t, eng)
			eventually(t, "every record embedded, the backlog idle, or a refusal", func() bool {
				st := eng.Status()[0]
				return st.Refused > 0 || store.withModel("m1") == 40 && st.State == StateIdle
			})
			if st := eng.Status()[0]; st.Refused != 0 {
				t.Errorf("%+v: %d well-formed records refused during a partial outage", st, st.Refused)
			}
		})
	}
}

// TestBacklogFailureWarnsOncePerEpisode: a failing backlog warned at each
// retry, since each step sets its state to draining before it embeds; it
// warns once until a step succeeds again.
func TestBacklogFailureWarnsOncePerEpisode(t *testing.T) {
	var buf syncBuffer
	emb, store := newEmbedder("m1"), newStore(5)
	emb.set(func(f *fakeEmbedder) { f.down = true })
	eng := engine(t, emb, store, Options{Logger: hclog.New(&hclog.LoggerOptions{Output: &buf, Level: hclog.Warn})})
	running(t, eng)
	episode := func() {
		eventually(t, "several failed steps", func() bool {
			emb.mu.Lock()
			defer emb.mu.Unlock()
			return emb.calls > 20
		})
		emb.set(func(f *fakeEmbedder) { f.down = false; f.calls = 0 })
	}
	episode()
	eventually(t, "every record embedded", func() bool { return store.withModel("m1") == 5 })
	if n := strings.Count(buf.String(), "embedding backlog step failed"); n != 1 {
		t.Fatalf("%d warnings for one failure episode, want 1:\n%s", n, buf.String())
	}
	emb.set(func(f *fakeEmbedder) { f.down = true })
	store.add("r100", "later", "written during the second outage")
	eng.Written("default")
	episode()
	eventually(t, "the later record embedded", func() bool { return store.withModel("m1") == 6 })
	if n := strings.Count(buf.String(), "embedding backlog step failed"); n != 2 {
		t.Errorf("%d warnings for two failure episodes, want 2:\n%s", n, buf.String())
	}
}

// syncBuffer is a bytes.Buffer safe for a logger and a test at once.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestWaitDrainedLooksPastRefusedRecords: a first page of refused records
// does not make a realm drained while records after it have no vector.
func TestWaitDrainedLooksPastRefusedRecords(t *testing.T) {
	emb, store := newEmbedder("m1"), newStore(0)
	for i := range 7 { // one full page (the batch is 7), sorted first
		store.add(fmt.Sprintf("a%02d", i), "poison", "refused")
	}
	for i := range 5 {
		store.add(fmt.Sprintf("b%02d", i), "good", fmt.Sprintf("record %d", i))
	}
	emb.set(func(f *fakeEmbedder) { f.refuse = "poison" })
	store.mu.Lock()
	store.failPut = fmt.Errorf("disk full: %w", sdk.ErrUnavailable) // the good records cannot be stored yet
	store.mu.Unlock()
	eng := engine(t, emb, store, Options{})
	running(t, eng)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if err := eng.WaitDrained(ctx, "default"); err == nil {
		t.Fatalf("drained with %d of 5 records embedded", store.withModel("m1"))
	}
	store.mu.Lock()
	store.failPut = nil
	store.mu.Unlock()
	ctx, cancel = context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := eng.WaitDrained(ctx, "default"); err != nil {
		t.Fatal(err)
	}
	if n := store.withModel("m1"); n != 5 {
		t.Errorf("drained with %d of 5 records embedded", n)
	}
}

// deafEmbedder does not heed its context: each call waits for release
// (or a long while) before it answers, well-formed.
type deafEmbedder struct {
	infoWait, embedWait bool
	release             chan struct{}
}

func (d *deafEmbedder) wait(on bool) {
	if on {
		select {
		case <-d.release:
		case <-time.After(10 * time.Second):
		}
	}
}

func (d *deafEmbedder) EmbedderInfo(context.Context) (sdk.EmbedderInfo, error) {
	d.wait(d.infoWait)
	return sdk.EmbedderInfo{Model: "m1", Dimensions: 4, MaxBatch: 3, MaxInputBytes: 64}, nil
}

func (d *deafEmbedder) Embed(_ context.Context, req sdk.EmbedRequest) ([][]float32, error) {
	d.wait(d.embedWait)
	out := make([][]float32, len(req.Texts))
	for i, t := range req.Texts {
		out[i] = vectorOf(t, 4)
	}
	return out, nil
}

// TestPrepareRecallKeepsToItsBudget: an embedder that does not heed the
// recall's deadline (it hangs, or answers after it) does not hold the
// recall past its budget; the recall stays lexical.
func TestPrepareRecallKeepsToItsBudget(t *testing.T) {
	for _, tc := range []struct {
		name     string
		embedder *deafEmbedder
	}{
		{"info hangs", &deafEmbedder{infoWait: true}},
		{"embed hangs", &deafEmbedder{embedWait: true}},
	} {
		// In a bubble (testing/synctest) time passes only while every
		// goroutine waits: the recall's budget, not a loaded machine's
		// scheduling, decides how long it took (it failed CI-like runs as
		// "took 2.09s" of wall time).
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				tc.embedder.release = make(chan struct{})
				defer close(tc.embedder.release)
				const budget = 100 * time.Millisecond
				eng, err := New([]Realm{{Name: "default", Embedder: tc.embedder, Vectors: newStore(0), Records: newStore(0)}}, Options{QueryTimeout: budget})
				if err != nil {
					t.Fatal(err)
				}
				start := time.Now()
				q := sdk.RecallQuery{Realm: "default", Query: "evening routine"}
				reason := eng.PrepareRecall(context.Background(), &q)
				if took := time.Since(start); took > budget {
					t.Errorf("PrepareRecall took %s with a query budget of %s", took, budget)
				}
				if reason != ReasonEmbedderUnavailable || q.QueryVector != nil {
					t.Errorf("reason %q, vector %v; want %q and no vector", reason, q.QueryVector, ReasonEmbedderUnavailable)
				}
			})
		})
	}
}

// restartedEmbedder is a supervised embedder whose process is replaced by
// one making another model after EmbedderInfo was read: it says, with
// each answer, which model made it (ModelEmbedder).
type restartedEmbedder struct {
	*fakeEmbedder
	answering string // the model the live process makes
}

func (r *restartedEmbedder) EmbedModel(ctx context.Context, req sdk.EmbedRequest) ([][]float32, string, error) {
	vecs, err := r.Embed(ctx, req)
	r.mu.Lock()
	defer r.mu.Unlock()
	return vecs, r.answering, err
}

// TestModelChangedUnderRecall: a query vector made by another model than
// the one read is not handed on under the old id (a provider would
// compare it with the old model's vectors, or refuse its dimensions and
// fail the recall): that recall stays lexical, and the next one reads
// the new model and labels its vector with it.
func TestModelChangedUnderRecall(t *testing.T) {
	emb := &restartedEmbedder{fakeEmbedder: newEmbedder("m1"), answering: "m1"}
	eng, err := New([]Realm{{Name: "default", Embedder: emb, Vectors: newStore(0), Records: newStore(0)}}, Options{QueryTimeout: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	q := sdk.RecallQuery{Realm: "default", Query: "evening routine"}
	if reason := eng.PrepareRecall(ctx, &q); reason != "" || q.VectorModel != "m1" {
		t.Fatalf("before the restart: reason %q, model %q; want a vector of m1", reason, q.VectorModel)
	}
	// The process restarts making m2; the engine still holds m1's info.
	emb.set(func(f *fakeEmbedder) { f.model = "m2" })
	emb.mu.Lock()
	emb.answering = "m2"
	emb.mu.Unlock()
	q = sdk.RecallQuery{Realm: "default", Query: "a query not embedded yet"}
	if reason := eng.PrepareRecall(ctx, &q); reason != ReasonEmbedderUnavailable || q.QueryVector != nil {
		t.Fatalf("the answer of m2 read as m1's: reason %q, model %q", reason, q.VectorModel)
	}
	q = sdk.RecallQuery{Realm: "default", Query: "a query not embedded yet"}
	if reason := eng.PrepareRecall(ctx, &q); reason != "" || q.VectorModel != "m2" {
		t.Fatalf("after the change: reason %q, model %q; want a vector of m2", reason, q.VectorModel)
	}
}

// TestARefusalIsAskedAgain: an embedder's refusal may be its endpoint's
// passing trouble (a model still loading answers 404), not the text's.
// Refused records were never asked again until the host restarted, while
// the realm read "idle"; now they are asked again after RefusalRetry, and
// the status counts them meanwhile.
func TestARefusalIsAskedAgain(t *testing.T) {
	emb, store := newEmbedder("m1"), newStore(5)
	emb.set(func(f *fakeEmbedder) { f.refuse = "r" })
	eng := engine(t, emb, store, Options{RefusalRetry: 300 * time.Millisecond, Poll: 20 * time.Millisecond})
	running(t, eng)
	eventually(t, "the refusals counted", func() bool { st := eng.Status()[0]; return st.State == StateIdle && st.Refused == 5 })
	if n := store.withModel("m1"); n != 0 {
		t.Fatalf("%d refused records got vectors", n)
	}
	emb.set(func(f *fakeEmbedder) { f.refuse = "" })
	eventually(t, "the refused records embedded once asked again", func() bool { return store.withModel("m1") == 5 })
	eventually(t, "no refusal left", func() bool { return eng.Status()[0].Refused == 0 })
}

// TestHungEmbedderPausesQueries: an embedder that takes every query's
// whole budget without answering (its process alive, so never
// restarted) cost each recall that budget. After QueryFailures such
// recalls, the others stay lexical at once until the pause ends; a
// backlog page the embedder embeds, or a probe it answers, ends the
// pause.
//
// Each case runs in a bubble (testing/synctest): time passes only while
// every goroutine waits, so a query budget or a caller's deadline passes
// while the embedder holds the query, never before the recall reaches it,
// and a pause ends for the recalls sent together after it all at once.
// On a loaded machine, with real time, a 20 ms budget ran out before
// the query reached the embedder ("asked the hung embedder 2 times, want
// 3"), a caller's deadline left no time to ask it ("asked 4 times, want
// 5"), and a recall late to start could find the probe's pause over.
func TestHungEmbedderPausesQueries(t *testing.T) {
	var queries atomic.Int64
	recallOnce := func(eng *Engine) sdk.RecallQuery {
		// A text of its own: one recalled before is answered from the
		// cache, without asking the embedder.
		q := sdk.RecallQuery{Realm: "default", Query: fmt.Sprintf("query %d", queries.Add(1))}
		eng.PrepareRecall(context.Background(), &q)
		return q
	}
	bubble := func(name string, f func(t *testing.T)) {
		t.Run(name, func(t *testing.T) { synctest.Test(t, f) })
	}
	calls := func(emb *fakeEmbedder) int {
		emb.mu.Lock()
		defer emb.mu.Unlock()
		return emb.calls
	}

	bubble("a backlog page ends the pause", func(t *testing.T) {
		emb, store := newEmbedder("m1"), newStore(0)
		emb.set(func(f *fakeEmbedder) { f.block = true })
		eng := engine(t, emb, store, Options{QueryTimeout: 20 * time.Millisecond, QueryPause: time.Hour})
		for range 10 {
			if q := recallOnce(eng); q.QueryVector != nil {
				t.Fatal("a hung embedder gave a vector")
			}
		}
		if got := calls(emb); got != QueryFailures {
			t.Fatalf("10 recalls asked the hung embedder %d times, want %d", got, QueryFailures)
		}
		st := eng.Status()[0]
		if st.Fallbacks[ReasonEmbedderUnavailable] != 10 || st.QueriesPausedUntil == nil || time.Until(*st.QueriesPausedUntil) < 50*time.Minute {
			t.Fatalf("status %+v, want 10 fallbacks and queries paused for about an hour", st)
		}
		// The embedder recovers; the pause holds until the backlog embeds a
		// page, which shows it answers.
		emb.set(func(f *fakeEmbedder) { f.block = false })
		if q := recallOnce(eng); q.QueryVector != nil || calls(emb) != QueryFailures {
			t.Fatalf("a recall during the pause asked the embedder (%d calls)", calls(emb))
		}
		store.add("r1", "Wind-down", "I read before bed")
		running(t, eng)
		eng.Written("default")
		eventually(t, "the record embedded", func() bool { return store.withModel("m1") == 1 })
		eventually(t, "the pause over", func() bool { return eng.Status()[0].QueriesPausedUntil == nil })
		if q := recallOnce(eng); q.QueryVector == nil {
			t.Fatal("after the backlog embedded a page, a recall stayed lexical")
		}
	})

	bubble("one probe after the pause", func(t *testing.T) {
		emb := newEmbedder("m1")
		emb.set(func(f *fakeEmbedder) { f.block = true })
		eng := engine(t, emb, newStore(0), Options{QueryTimeout: 20 * time.Millisecond, QueryPause: 30 * time.Millisecond})
		for range QueryFailures {
			recallOnce(eng)
		}
		first := eng.Status()[0].QueriesPausedUntil
		if first == nil {
			t.Fatalf("no pause after %d failures", QueryFailures)
		}
		time.Sleep(time.Until(*first))
		// Recalls arriving together after the pause: one probes, the
		// others do not wait for it.
		var wg sync.WaitGroup
		for range 6 {
			wg.Add(1)
			go func() { defer wg.Done(); recallOnce(eng) }()
		}
		wg.Wait()
		if got := calls(emb); got != QueryFailures+1 {
			t.Fatalf("after the pause, 6 recalls asked %d times, want one probe (%d calls)", got-QueryFailures, QueryFailures+1)
		}
		second := eng.Status()[0].QueriesPausedUntil
		if second == nil || !second.After(*first) {
			t.Fatalf("a failed probe left the pause until %v (first until %v), want a longer one", second, first)
		}
		emb.set(func(f *fakeEmbedder) { f.block = false })
		eventually(t, "a probe answered", func() bool { return recallOnce(eng).QueryVector != nil })
		if st := eng.Status()[0]; st.QueriesPausedUntil != nil {
			t.Fatalf("status %+v after the embedder answered, want no pause", st)
		}
	})

	bubble("the caller's short deadline is not the embedder's failure", func(t *testing.T) {
		emb := newEmbedder("m1")
		emb.set(func(f *fakeEmbedder) { f.block = true })
		eng := engine(t, emb, newStore(0), Options{QueryTimeout: time.Hour})
		for range 5 {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
			q := sdk.RecallQuery{Realm: "default", Query: "evening routine"}
			eng.PrepareRecall(ctx, &q)
			cancel()
		}
		if got := calls(emb); got != 5 {
			t.Fatalf("5 recalls under their callers' short deadlines asked %d times, want 5 (no pause)", got)
		}
	})

	bubble("a refused text is an answer", func(t *testing.T) {
		emb := newEmbedder("m1")
		emb.set(func(f *fakeEmbedder) { f.refuse = "query" })
		eng := engine(t, emb, newStore(0), Options{QueryTimeout: time.Second})
		for range 5 {
			recallOnce(eng)
		}
		if got := calls(emb); got != 5 {
			t.Fatalf("5 recalls the embedder refused asked %d times, want 5 (no pause)", got)
		}
	})
}

// TestStaleFailureIsNotTheProbe: from a review of the breaker. A query
// asked before the pause began that fails while the probe is out was
// taken for the probe: the pause doubled and a second probe went out
// beside the first.
func TestStaleFailureIsNotTheProbe(t *testing.T) {
	eng := engine(t, newEmbedder("m1"), newStore(0), Options{QueryTimeout: time.Second, QueryPause: time.Millisecond})
	r := eng.realm("default")
	down := fmt.Errorf("embed: %w", sdk.ErrUnavailable)
	for range QueryFailures {
		r.asked(down, true, false)
	}
	time.Sleep(2 * time.Millisecond) // past the pause
	if ask, probe := r.mayAsk(); !ask || !probe {
		t.Fatalf("after the pause: ask %v, probe %v; want the probe", ask, probe)
	}
	until := r.status().QueriesPausedUntil
	r.asked(down, true, false) // a query asked before the pause, failing now
	if ask, _ := r.mayAsk(); ask {
		t.Fatal("a second query asked the embedder while the probe was out")
	}
	if now := r.status().QueriesPausedUntil; now == nil || !now.Equal(*until) {
		t.Fatalf("a stale failure moved the pause from %v to %v", until, now)
	}
	r.asked(down, true, true) // the probe fails
	if st := r.status(); st.QueriesPausedUntil == nil || !st.QueriesPausedUntil.After(*until) {
		t.Fatalf("the probe's failure left the pause until %v, want a later end", st.QueriesPausedUntil)
	}
}

// ignoresTheCursor answers MissingVectors from the start whatever the
// cursor, as a faulty in-process provider might.
type ignoresTheCursor struct{ *fakeStore }

func (s ignoresTheCursor) MissingVectors(ctx context.Context, realm, model, _ string, limit int) ([]string, error) {
	return s.fakeStore.MissingVectors(ctx, realm, model, "", limit)
}

// TestACursorThatDoesNotMoveFails: a provider whose MissingVectors
// ignores the cursor answered the same page at every step; with a record
// on it whose vector is never kept, the backlog asked again at once,
// forever, and showed draining. The step now fails (and backs off), saying
// why.
func TestACursorThatDoesNotMoveFails(t *testing.T) {
	emb, store := newEmbedder("m1"), newStore(0)
	store.add("r1x", "stuck", "its vector is never kept")
	store.skip = "r1x"
	s := ignoresTheCursor{store}
	eng, err := New([]Realm{{Name: "default", Embedder: emb, Vectors: s, Records: s}},
		Options{Poll: 5 * time.Millisecond, MaxBackoff: 20 * time.Millisecond, Batch: 7})
	if err != nil {
		t.Fatal(err)
	}
	running(t, eng)
	eventually(t, "the realm failing on the cursor", func() bool {
		st := eng.Status()[0]
		return st.State == StateFailing && strings.Contains(st.LastError, "not after the cursor")
	})
}

// TestFirstRetryAfterIdleIsShort: the backoff after a failed step starts
// short however long the realm had been idle; the idle poll's wait is
// not a failure's, and a failing backlog does not heed writes' kicks.
func TestFirstRetryAfterIdleIsShort(t *testing.T) {
	emb, store := newEmbedder("m1"), newStore(1)
	eng := engine(t, emb, store, Options{Poll: 25 * time.Millisecond, MaxBackoff: 10 * time.Second})
	running(t, eng)
	eventually(t, "the first record embedded", func() bool { return store.withModel("m1") == 1 })
	// The idle poll's wait grows to 64 polls (1.6 s) in about 3 s.
	time.Sleep(3500 * time.Millisecond)
	emb.set(func(f *fakeEmbedder) { f.down = true })
	store.add("r100", "later", "written after a long idle")
	eng.Written("default")
	eventually(t, "the backlog failing", func() bool { return eng.Status()[0].State == StateFailing })
	emb.set(func(f *fakeEmbedder) { f.down = false })
	mended := time.Now()
	eventually(t, "the later record embedded", func() bool { return store.withModel("m1") == 2 })
	// Before the fix the retry waited the idle wait doubled (3.2 s); the
	// margin below it is for a busy machine, not a speed target.
	if took := time.Since(mended); took > 2500*time.Millisecond {
		t.Errorf("the record was embedded %s after the embedder came back; the first retry should come within the shortest backoff (100 ms)", took.Round(time.Millisecond))
	}
}
