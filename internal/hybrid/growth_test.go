package hybrid

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/hashicorp/go-hclog"
	"github.com/memhost/memhost/sdk"
)

// TestQueryCacheHoldsNoneOfTheQuery: the query cache outlives the recall,
// so its keys must not share memory with the query. A key of the query's
// clipped text, a cut of a one-word query, kept the whole query: 400 recalls
// of 4 MB took the host from 107 MB to 2.18 GB.
func TestQueryCacheHoldsNoneOfTheQuery(t *testing.T) {
	emb := newEmbedder("m1")
	eng := engine(t, emb, newStore(0), Options{QueryTimeout: time.Hour})
	for _, query := range []string{
		strings.Repeat("apple", 1000), // one word, over the embedder's input
		"apple",                       // under it
	} {
		q := sdk.RecallQuery{Realm: "default", Query: query}
		if reason := eng.PrepareRecall(context.Background(), &q); reason != "" || q.QueryVector == nil {
			t.Fatalf("PrepareRecall: reason %q, vector %v", reason, q.QueryVector)
		}
		// Cached: the same query needs no embed call.
		emb.mu.Lock()
		calls := emb.calls
		emb.mu.Unlock()
		if again := (sdk.RecallQuery{Realm: "default", Query: query}); eng.PrepareRecall(context.Background(), &again) != "" || again.QueryVector == nil {
			t.Fatal("the query again was not answered")
		}
		emb.mu.Lock()
		after := emb.calls
		emb.mu.Unlock()
		if after != calls {
			t.Fatalf("the %d-byte query was embedded again, not answered from the cache", len(query))
		}
		eng.queriesMu.Lock()
		for {
			key, _, ok := eng.queries.RemoveOldest()
			if !ok {
				break
			}
			if name, ok := stringSharing(reflect.ValueOf(key), query); ok {
				t.Errorf("the cache key's %s shares the %d-byte query's memory", name, len(query))
			}
		}
		eng.queriesMu.Unlock()
	}
}

// stringSharing answers the name of a string field of v whose bytes lie
// inside s's.
func stringSharing(v reflect.Value, s string) (string, bool) {
	for i := range v.NumField() {
		f := v.Field(i)
		if f.Kind() != reflect.String {
			continue
		}
		p := f.String()
		if p == "" {
			continue
		}
		pp, ps := uintptr(unsafe.Pointer(unsafe.StringData(p))), uintptr(unsafe.Pointer(unsafe.StringData(s)))
		if pp >= ps && pp < ps+uintptr(len(s)) {
			return v.Type().Field(i).Name, true
		}
	}
	return "", false
}

// TestLapsedRefusalsAreDroppedUnasked: a refused record forgotten is never
// listed again, so its refusal was dropped only when someone asked for the
// status (GET /v1/plugins, a metrics scrape); a host nobody polled kept
// every one. Refusals past their retry now go as new ones come.
func TestLapsedRefusalsAreDroppedUnasked(t *testing.T) {
	eng := engine(t, newEmbedder("m1"), newStore(0), Options{})
	r := eng.realm("default")
	const perRound, rounds = 1000, 10
	for round := range rounds {
		for i := range perRound {
			r.refuse(fmt.Sprintf("r%d-%d", round, i), "m1", errors.New("refused"))
		}
		// The round's records are forgotten, and their retry passes.
		r.mu.Lock()
		for id, f := range r.refused {
			f.at = f.at.Add(-2 * DefaultRefusalRetry)
			r.refused[id] = f
		}
		r.mu.Unlock()
	}
	r.mu.Lock()
	n := len(r.refused)
	r.mu.Unlock()
	if n > 2*perRound {
		t.Fatalf("%d refusals kept after %d rounds of %d lapsed ones, want at most %d", n, rounds, perRound, 2*perRound)
	}
}

// TestRefusalsAreLoggedOnceAMinute: a client writing records the embedder
// refuses wrote one warning per record; a realm now logs refusals at most
// once a minute, the line counting the records refused since.
func TestRefusalsAreLoggedOnceAMinute(t *testing.T) {
	var buf syncBuffer
	eng := engine(t, newEmbedder("m1"), newStore(0), Options{Logger: hclog.New(&hclog.LoggerOptions{Output: &buf, Level: hclog.Warn})})
	r := eng.realm("default")
	lines := func() int { return strings.Count(buf.String(), "the embedder refused or failed records") }
	for i := range 1000 {
		r.refuse(fmt.Sprint("rec", i), "m1", errors.New("input too long"))
	}
	if n := lines(); n != 1 {
		t.Fatalf("1,000 refusals within a minute logged %d lines, want 1", n)
	}
	r.mu.Lock()
	r.refusalLoggedAt = r.refusalLoggedAt.Add(-time.Minute)
	r.mu.Unlock()
	r.refuse("rec-last", "m1", errors.New("input too long"))
	if n := lines(); n != 2 || !strings.Contains(buf.String(), "records=1000") {
		t.Fatalf("a minute later: %d lines, want 2, the second counting the 1,000 refused since the first:\n%s", n, buf.String())
	}
}
