package hybrid

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/memhost/memhost/sdk"
)

// slowEmbedder answers each embedding delay after it is asked, or fails
// when its context ends first (a remote endpoint that is slow, not down).
type slowEmbedder struct {
	delay time.Duration
	calls atomic.Int64
}

func (s *slowEmbedder) EmbedderInfo(context.Context) (sdk.EmbedderInfo, error) {
	return sdk.EmbedderInfo{Model: "m1", Dimensions: 4, MaxBatch: 3, MaxInputBytes: 64}, nil
}

func (s *slowEmbedder) Embed(ctx context.Context, req sdk.EmbedRequest) ([][]float32, error) {
	s.calls.Add(1)
	select {
	case <-time.After(s.delay):
	case <-ctx.Done():
		return nil, fmt.Errorf("embed: %w", sdk.ErrDeadline)
	}
	out := make([][]float32, len(req.Texts))
	for i, t := range req.Texts {
		out[i] = vectorOf(t, 4)
	}
	return out, nil
}

// TestARealmsOwnQueryTimeout: a realm's QueryTimeout, not the engine's,
// bounds embedding its queries: an embedder slower than the default but
// within the realm's timeout gives the recall a vector, one slower than
// the realm's falls back when that timeout passes. A realm without one
// has the engine's.
//
// Each case runs in a bubble (testing/synctest): time passes only while
// every goroutine waits, so the embedder's delay and the timeouts, not a
// loaded machine's scheduling, decide the outcome and how long it took.
func TestARealmsOwnQueryTimeout(t *testing.T) {
	for _, tc := range []struct {
		name       string
		engine     time.Duration // Options.QueryTimeout; 0: the default
		realm      time.Duration // Realm.QueryTimeout; 0: the engine's
		delay      time.Duration // how long the embedder takes
		wantVector bool
		wantTook   time.Duration
	}{
		{name: "the default bounds a realm without its own", delay: time.Second, wantTook: DefaultQueryTimeout},
		{name: "the engine's option bounds a realm without its own", engine: 2 * time.Second, delay: time.Second, wantVector: true, wantTook: time.Second},
		{name: "the realm's outlasts a slow embedder", realm: 2 * time.Second, delay: time.Second, wantVector: true, wantTook: time.Second},
		{name: "the realm's over the engine's", engine: 100 * time.Millisecond, realm: 2 * time.Second, delay: time.Second, wantVector: true, wantTook: time.Second},
		{name: "the realm's runs out", realm: 2 * time.Second, delay: 3 * time.Second, wantTook: 2 * time.Second},
		{name: "the realm's under the engine's", engine: time.Hour, realm: 500 * time.Millisecond, delay: time.Second, wantTook: 500 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				emb, store := &slowEmbedder{delay: tc.delay}, newStore(0)
				eng, err := New([]Realm{{Name: "default", Embedder: emb, Vectors: store, Records: store, QueryTimeout: tc.realm}}, Options{QueryTimeout: tc.engine})
				if err != nil {
					t.Fatal(err)
				}
				start := time.Now()
				q := sdk.RecallQuery{Realm: "default", Query: "evening routine"}
				reason := eng.PrepareRecall(context.Background(), &q)
				if took := time.Since(start); took != tc.wantTook {
					t.Errorf("PrepareRecall took %s, want %s", took, tc.wantTook)
				}
				if tc.wantVector {
					if reason != "" || q.QueryVector == nil {
						t.Errorf("reason %q, vector %v; want the query's vector", reason, q.QueryVector)
					}
				} else if reason != ReasonEmbedderUnavailable || q.QueryVector != nil {
					t.Errorf("reason %q, vector %v; want %q and no vector", reason, q.QueryVector, ReasonEmbedderUnavailable)
				}
			})
		})
	}
}

// TestARealmsQueryTimeoutDecidesWhoFailed: a query that used the realm's
// whole timeout counts against the embedder (QueryFailures of them pause
// queries), and one cut short by the caller's deadline does not, though
// its budget equals the engine's Options.QueryTimeout: the breaker
// compares with the realm's timeout.
func TestARealmsQueryTimeoutDecidesWhoFailed(t *testing.T) {
	hung := 10 * time.Hour
	recall := func(eng *Engine, i int, deadline time.Duration) {
		ctx := context.Background()
		if deadline > 0 {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, deadline)
			defer cancel()
		}
		q := sdk.RecallQuery{Realm: "default", Query: fmt.Sprintf("query %d", i)}
		if reason := eng.PrepareRecall(ctx, &q); reason != ReasonEmbedderUnavailable {
			t.Fatalf("recall %d: reason %q, want %q", i, reason, ReasonEmbedderUnavailable)
		}
	}
	newEngine := func(t *testing.T, emb sdk.Embedder, engine, realm time.Duration) *Engine {
		store := newStore(0)
		eng, err := New([]Realm{{Name: "default", Embedder: emb, Vectors: store, Records: store, QueryTimeout: realm}},
			Options{QueryTimeout: engine, QueryPause: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		return eng
	}

	t.Run("the realm's whole timeout is the embedder's failure", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			emb := &slowEmbedder{delay: hung}
			eng := newEngine(t, emb, 0, 2*time.Second)
			for i := range 5 {
				recall(eng, i, 0)
			}
			if got := emb.calls.Load(); got != QueryFailures {
				t.Fatalf("5 recalls asked the hung embedder %d times, want %d (then a pause)", got, QueryFailures)
			}
			if eng.Status()[0].QueriesPausedUntil == nil {
				t.Fatal("no pause after the embedder used up the realm's timeout three times")
			}
		})
	})

	t.Run("a caller's deadline under the realm's timeout is not", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			emb := &slowEmbedder{delay: hung}
			// Half of the caller's 2 s is 1 s, the engine's option, but
			// far under the realm's hour.
			eng := newEngine(t, emb, time.Second, time.Hour)
			for i := range 5 {
				recall(eng, i, 2*time.Second)
			}
			if got := emb.calls.Load(); got != 5 {
				t.Fatalf("5 recalls under their callers' short deadlines asked %d times, want 5 (no pause)", got)
			}
			if st := eng.Status()[0]; st.QueriesPausedUntil != nil {
				t.Fatalf("status %+v: the callers' deadlines paused queries", st)
			}
		})
	})
}

// TestAnUnlistedRealmsQueryTimeout: the setup Unlisted answers carries
// the realm's timeout too (a realm without a block has the default
// realm's).
func TestAnUnlistedRealmsQueryTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		emb, store := &slowEmbedder{delay: time.Second}, newStore(0)
		eng, err := New(nil, Options{Unlisted: func(name string) (Realm, bool) {
			return Realm{Name: name, Embedder: emb, Vectors: store, Records: store, QueryTimeout: 2 * time.Second}, true
		}})
		if err != nil {
			t.Fatal(err)
		}
		q := sdk.RecallQuery{Realm: "acme", Query: "evening routine"}
		if reason := eng.PrepareRecall(context.Background(), &q); reason != "" || q.QueryVector == nil {
			t.Fatalf("reason %q, vector %v; want the query's vector within the realm's 2 s", reason, q.QueryVector)
		}
	})
}

// TestAHungEmbedderPausesUnderTheDefaultDeadlines: with the production
// pair (a recall deadline of 500 ms, twice the 250 ms query timeout) the
// time a recall spends before it embeds its query (composing its scopes)
// leaves the query a hair under the realm's timeout. That is not the
// caller cutting it short: a hung embedder used to be asked by every
// recall, each paying its whole query budget, and never paused.
func TestAHungEmbedderPausesUnderTheDefaultDeadlines(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		emb := &slowEmbedder{delay: 10 * time.Hour}
		store := newStore(0)
		eng, err := New([]Realm{{Name: "default", Embedder: emb, Vectors: store, Records: store}}, Options{QueryPause: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		for i := range 5 {
			ctx, cancel := context.WithTimeout(context.Background(), 2*DefaultQueryTimeout)
			time.Sleep(time.Millisecond) // the recall's work before its query
			q := sdk.RecallQuery{Realm: "default", Query: fmt.Sprintf("query %d", i)}
			if reason := eng.PrepareRecall(ctx, &q); reason != ReasonEmbedderUnavailable {
				t.Fatalf("recall %d: reason %q, want %q", i, reason, ReasonEmbedderUnavailable)
			}
			cancel()
		}
		if got := emb.calls.Load(); got != QueryFailures {
			t.Fatalf("5 recalls asked the hung embedder %d times, want %d (then a pause)", got, QueryFailures)
		}
	})
}
