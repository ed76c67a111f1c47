package sqlite

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/memhost/memhost/sdk"
)

// FuzzRecallMatchesFTS5: for any query text and tag filter, recall
// answers what FTS5's bm25 answers over the same records (fts5Ref),
// over records whose text and tags are hard to cut and fold: accents
// composed and not, case-fold orbits, ligatures, full-width letters, CJK.
func FuzzRecallMatchesFTS5(f *testing.F) {
	texts := []string{"Café au LAIT", "cafe\u0301 latte", "İstanbul ıstanbul", "ǅemal Ǆ ǆ", "straße STRASSE", "咖啡 我喜欢咖啡",
		"ﬁle ﬀ office", "Ｆｕｌｌ－ｗｉｄｔｈ full", "don't stop it's", "hiking hikes hiked", "walrus body text", "\u212a kelvin K",
		"ς σ Σ ΣΊΣΥΦΟΣ", "deploy到生产 deploy", "a 7077 9 x", "NEAR(a b) OR title:x"}
	s, clk := open(f, nil)
	var recs []sdk.Record
	for i, text := range texts {
		recs = append(recs, rec(sdk.RealmScope, text, texts[(i+1)%len(texts)], strings.Fields(text)[0]))
	}
	mustRemember(f, s, "default", recs...)
	ref := fts5Ref(f, s, "default")
	for _, text := range texts {
		f.Add(text, "")
		f.Add(text, strings.Fields(text)[0])
	}
	f.Fuzz(func(t *testing.T, query, tag string) {
		q := sdk.RecallQuery{Realm: "default", Query: query, Limit: 50}
		if tag != "" {
			q.Tags = []string{tag}
		}
		got, err := s.Recall(context.Background(), q)
		if err != nil {
			if !errors.Is(err, sdk.ErrInvalid) {
				t.Fatalf("Recall(%q, tag %q): %v", query, tag, err)
			}
			return
		}
		if err := sameAsRef(got, refRecall(t, ref, q, clk.now().UnixMilli())); err != nil {
			t.Fatalf("Recall(%q, tag %q): %v", query, tag, err)
		}
	})
}
