package bleve

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/memhost/memhost/sdk"
	"github.com/memhost/memhost/sdk/kvprovider"
)

// mapStore keeps kvprovider's records in memory: the reference provider
// the bleve provider's ranking is compared with.
type mapStore struct{ recs map[kvprovider.Key]sdk.Record }

func (s *mapStore) Load(context.Context) ([]sdk.Record, error) { return nil, nil }

func (s *mapStore) Put(_ context.Context, recs []sdk.Record) error {
	for _, r := range recs {
		s.recs[kvprovider.Key{Realm: r.Realm, ID: r.ID}] = r
	}
	return nil
}

func (s *mapStore) Delete(_ context.Context, keys []kvprovider.Key) error {
	for _, k := range keys {
		delete(s.recs, k)
	}
	return nil
}

func newReference(t testing.TB) *kvprovider.Provider {
	t.Helper()
	p := kvprovider.New(kvprovider.Options{
		Info: sdk.Info{Name: "reference", Version: "0"},
		Open: func(context.Context, json.RawMessage) (kvprovider.Store, error) {
			return &mapStore{recs: map[kvprovider.Key]sdk.Record{}}, nil
		},
	})
	if err := p.Configure(ctx, json.RawMessage(`{}`)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// TestRankingMatchesIndex: bleve ranks as sdk/index does (through
// kvprovider, the SDK's reference provider), hit for hit and score for
// score, on conversations: many identities of one realm, each turn a
// record of its thread, so thread context and realm-wide statistics
// count as they do in the bench's LongMemEval and LoCoMo runs, beside
// shared records with tags and descriptions, some of both forgotten.
func TestRankingMatchesIndex(t *testing.T) {
	bl := newProvider(t, "")
	ref := newReference(t)
	c := newCorpus(7)
	const identities, threads, turns = 6, 8, 25
	var batch []sdk.Record
	flush := func() {
		if len(batch) == 0 {
			return
		}
		a := remember(t, bl, realm, batch...)
		b, err := ref.Remember(ctx, realm, batch)
		if err != nil {
			t.Fatal(err)
		}
		for i := range a {
			if a[i] != b[i] {
				t.Fatalf("record %d: bleve id %s, reference id %s", i, a[i], b[i])
			}
		}
		batch = batch[:0]
	}
	for id := range identities {
		for th := range threads {
			for seq := range turns {
				r := sdk.Record{
					ID:    fmt.Sprintf("r-%d-%d-%d", id, th, seq),
					Scope: sdk.IdentityScope(fmt.Sprintf("user%d", id)), Kind: sdk.KindEpisode,
					Title:  fmt.Sprintf("turn %d", seq),
					Body:   c.text(3, 120),
					Thread: &sdk.Thread{ID: fmt.Sprintf("s%d-%d", id, th), Seq: int64(seq)},
				}
				batch = append(batch, r)
				if len(batch) == 100 {
					flush()
				}
			}
		}
		flush()
	}
	// Shared records with every field, then forgets: statistics count
	// only what is left.
	for range 100 {
		batch = append(batch, c.record())
	}
	for i := range batch {
		batch[i].ID = fmt.Sprintf("shared-%03d", i)
	}
	flush()
	var gone []string
	for id := range identities {
		for th := range threads {
			gone = append(gone, fmt.Sprintf("r-%d-%d-%d", id, th, (id+th)%turns))
		}
	}
	for i := 0; i < 100; i += 7 {
		gone = append(gone, fmt.Sprintf("shared-%03d", i))
	}
	if _, err := bl.Forget(ctx, realm, gone); err != nil {
		t.Fatal(err)
	}
	if _, err := ref.Forget(ctx, realm, gone); err != nil {
		t.Fatal(err)
	}
	checked := 0
	for i, text := range queries(200) {
		q := sdk.RecallQuery{Realm: realm, Query: text, Limit: 11,
			Scopes: []sdk.Scope{sdk.IdentityScope(fmt.Sprintf("user%d", i%identities)), sdk.RealmScope}}
		got, err := bl.Recall(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		want, err := ref.Recall(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(want) {
			t.Fatalf("query %q: bleve %d hits, reference %d", text, len(got), len(want))
		}
		for j := range min(len(want), 10) {
			// Providers break exact ties each by its own insertion order,
			// so an id is compared only where its score is alone (the
			// eleventh hit shows a tie at the tenth).
			tied := (j > 0 && want[j-1].Score == want[j].Score) || (j+1 < len(want) && want[j+1].Score == want[j].Score)
			if (!tied && got[j].Record.ID != want[j].Record.ID) || math.Abs(got[j].Score-want[j].Score) > 1e-9*math.Abs(want[j].Score) {
				t.Fatalf("query %q hit %d: bleve %s (%v), reference %s (%v)", text, j, got[j].Record.ID, got[j].Score, want[j].Record.ID, want[j].Score)
			}
		}
		checked += len(want)
	}
	if checked == 0 {
		t.Fatal("no query found anything")
	}
}

// TestIDFStaysFinite: a term counted in more records than the catalog
// holds yet (a batch the snapshot has and the count trails) still
// weighs a finite, positive amount.
func TestIDFStaysFinite(t *testing.T) {
	for _, c := range []struct{ docs, hits int64 }{{10, 12}, {10, 10}, {1, 1}, {0, 3}, {1000, 1}} {
		if v := idf(c.docs, c.hits); math.IsNaN(v) || math.IsInf(v, 0) || v <= 0 {
			t.Errorf("idf(%d, %d) = %v, want a finite positive weight", c.docs, c.hits, v)
		}
	}
}

// FuzzRecallMatchesReference: for any query text and tag filter, bleve
// answers the records sdk/index answers (through kvprovider), each with
// its score, over records whose text and tags are hard to cut and fold:
// accents composed and not, case-fold orbits, ligatures, full-width
// letters, CJK.
func FuzzRecallMatchesReference(f *testing.F) {
	texts := []string{"Café au LAIT", "cafe\u0301 latte", "İstanbul ıstanbul", "ǅemal Ǆ ǆ", "straße STRASSE", "咖啡 我喜欢咖啡",
		"ﬁle ﬀ office", "Ｆｕｌｌ－ｗｉｄｔｈ full", "don't stop it's", "hiking hikes hiked", "walrus body text", "\u212a kelvin K",
		"ς σ Σ ΣΊΣΥΦΟΣ", "deploy到生产 deploy", "a 7077 9 x", "\xff\xfe walrus"}
	bl := newProvider(f, "")
	ref := newReference(f)
	var recs []sdk.Record
	for i, text := range texts {
		recs = append(recs, sdk.Record{ID: fmt.Sprintf("r%02d", i), Scope: sdk.RealmScope, Kind: sdk.KindFact,
			Title: strings.ToValidUTF8(text, ""), Body: strings.ToValidUTF8(texts[(i+1)%len(texts)], ""),
			Tags: []string{strings.Fields(strings.ToValidUTF8(text, "x"))[0]}})
	}
	remember(f, bl, realm, recs...)
	if _, err := ref.Remember(ctx, realm, recs); err != nil {
		f.Fatal(err)
	}
	for _, text := range texts {
		f.Add(text, "")
		f.Add(text, strings.Fields(text)[0])
	}
	f.Fuzz(func(t *testing.T, query, tag string) {
		q := sdk.RecallQuery{Realm: realm, Query: query, Limit: 50}
		if tag != "" {
			q.Tags = []string{tag}
		}
		got, gotErr := bl.Recall(ctx, q)
		want, wantErr := ref.Recall(ctx, q)
		if (gotErr == nil) != (wantErr == nil) {
			t.Fatalf("Recall(%q, tag %q): bleve error %v, reference error %v", query, tag, gotErr, wantErr)
		}
		scores := map[string]float64{}
		for _, h := range want {
			scores[h.Record.ID] = h.Score
		}
		if len(got) != len(want) {
			t.Fatalf("Recall(%q, tag %q): bleve %d hits, reference %d", query, tag, len(got), len(want))
		}
		for _, h := range got {
			w, ok := scores[h.Record.ID]
			if !ok || math.Abs(h.Score-w) > 1e-9*math.Abs(w) {
				t.Fatalf("Recall(%q, tag %q): bleve hit %s (%v), reference %v (found %v)", query, tag, h.Record.ID, h.Score, w, ok)
			}
		}
	})
}
