package markdown

import (
	"cmp"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/memhost/memhost/sdk"
	"github.com/memhost/memhost/sdk/index"
)

// The reference for recall reads the record files themselves (the truth)
// and scores every record of the realm by BM25F written out plainly:
// FTS5's bm25 with the field weights 5, 4, 2, 1 and the thread context
// field at index.ContextWeight, collection statistics over the realm's
// active records (expired ones included, as the engine keeps them), ties
// by seq, higher first, then the lesser id. The files say a record's seq
// only to the millisecond of its update (timeSeq); the order of writes
// within one is the store's to keep, so tests of a live store take the
// seqs from it (refFilesOf), and the tests of seq check that order.

type refDoc struct {
	rec    sdk.Record
	seq    uint64
	fields [][]string // tags, title, description, body, context
}

// refFiles loads every valid record file under root, by realm.
func refFiles(t testing.TB, root string) map[string][]*refDoc {
	t.Helper()
	out := map[string][]*refDoc{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, recordExt) || strings.HasPrefix(d.Name(), ".") {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		parts := strings.Split(filepath.ToSlash(rel), "/")
		var k fileKey
		switch {
		case len(parts) == 3 && parts[1] == string(sdk.ScopeRealm):
			k = fileKey{parts[0], sdk.RealmScope, strings.TrimSuffix(parts[2], recordExt)}
		case len(parts) == 4:
			k = fileKey{parts[0], sdk.Scope(parts[1] + ":" + parts[2]), strings.TrimSuffix(parts[3], recordExt)}
		default:
			return nil
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		fi, err := os.Stat(p)
		if err != nil {
			return err
		}
		r, err := parseRecord(data)
		if err == nil {
			err = adoptFileRecord(&r, k, fi.ModTime())
		}
		if err != nil {
			return nil // skipped by the provider too
		}
		out[k.realm] = append(out[k.realm], &refDoc{rec: r, seq: timeSeq(r.UpdatedAt)})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// refFilesOf is refFiles of tp's root, each record's seq the one tp's
// store holds for it.
func refFilesOf(t testing.TB, tp *testProvider) map[string][]*refDoc {
	t.Helper()
	files := refFiles(t, tp.root)
	tp.st.idx.RLock()
	defer tp.st.idx.RUnlock()
	for realm, docs := range files {
		for _, d := range docs {
			if ri := tp.st.realms[realm]; ri != nil && ri.get(d.rec.ID) != nil {
				d.seq = ri.get(d.rec.ID).seq
			}
		}
	}
	return files
}

// refPlace is a place in a thread of one scope.
type refPlace struct {
	scope  sdk.Scope
	thread string
	seq    int64
}

// refPrepare keeps the active records and cuts their fields, context
// included: a threaded record takes part at its place when it is among
// the index.MaxPlaceDocs least ids there, and its context is the own
// fields of the participants of the places within index.ContextSpan of
// its thread in its scope.
func refPrepare(docs []*refDoc) []*refDoc {
	var active []*refDoc
	at := map[refPlace][]*refDoc{}
	for _, d := range docs {
		if d.rec.Status != sdk.StatusActive {
			continue
		}
		r := &d.rec
		d.fields = [][]string{index.FieldTerms(index.TagText(r.Tags)), index.FieldTerms(r.Title),
			index.FieldTerms(r.Description), index.FieldTerms(r.Body), nil}
		active = append(active, d)
		if r.Thread != nil {
			k := refPlace{r.Scope, r.Thread.ID, r.Thread.Seq}
			at[k] = append(at[k], d)
		}
	}
	participants := func(k refPlace) []*refDoc {
		ds := slices.SortedFunc(slices.Values(at[k]), func(a, b *refDoc) int { return cmp.Compare(a.rec.ID, b.rec.ID) })
		return ds[:min(len(ds), index.MaxPlaceDocs)]
	}
	for _, d := range active {
		th := d.rec.Thread
		if th == nil || !slices.Contains(participants(refPlace{d.rec.Scope, th.ID, th.Seq}), d) {
			continue
		}
		for s := th.Seq - index.ContextSpan; s <= th.Seq+index.ContextSpan; s++ {
			if s == th.Seq {
				continue
			}
			for _, n := range participants(refPlace{d.rec.Scope, th.ID, s}) {
				for _, f := range n.fields[:4] {
					d.fields[4] = append(d.fields[4], f...)
				}
			}
		}
	}
	return active
}

type refHit struct {
	id    string
	score float64
}

// refRecall answers the reference's best hits for q at now.
func refRecall(docs []*refDoc, q sdk.RecallQuery, now time.Time) []refHit {
	active := refPrepare(docs)
	terms := index.QueryTerms(q.Query)
	if len(active) == 0 || len(terms) == 0 {
		return nil
	}
	weights := append(fieldWeights[:], index.ContextWeight)
	const k1, b = 1.2, 0.75
	// The context field (the last) saturates on its own: a term counts at
	// most twice in it, and at most 48 of its terms count in the length.
	ctxField := len(weights) - 1
	dl := func(d *refDoc) int {
		n := 0
		for i, f := range d.fields {
			if i == ctxField {
				n += min(len(f), 48)
			} else {
				n += len(f)
			}
		}
		return n
	}
	total := 0
	for _, d := range active {
		total += dl(d)
	}
	avgdl := float64(total) / float64(len(active))
	freq := func(d *refDoc, term string) float64 {
		f := 0.0
		for i, terms := range d.fields {
			n := 0
			for _, x := range terms {
				if x == term {
					n++
				}
			}
			if i == ctxField {
				n = min(n, 2)
			}
			f += float64(n) * weights[i]
		}
		return f
	}
	idf := map[string]float64{}
	for _, term := range terms {
		n := 0
		for _, d := range active {
			if freq(d, term) > 0 {
				n++
			}
		}
		v := math.Log((float64(len(active)-n) + 0.5) / (float64(n) + 0.5))
		if v <= 0 {
			v = 1e-6
		}
		idf[term] = v
	}
	pass := func(r *sdk.Record) bool {
		if !r.Recallable(now) || slices.Contains(q.ExcludeIDs, r.ID) || len(q.Scopes) > 0 && !slices.Contains(q.Scopes, r.Scope) {
			return false
		}
		for _, tag := range q.Tags {
			if !r.HasTag(tag) {
				return false
			}
		}
		for _, tag := range q.ExcludeTags {
			if r.HasTag(tag) {
				return false
			}
		}
		return true
	}
	type scored struct {
		d     *refDoc
		score float64
	}
	var all []scored
	for _, d := range active {
		if !pass(&d.rec) {
			continue
		}
		score, matched := 0.0, false
		for _, term := range terms {
			f := float64(float32(freq(d, term)))
			if f == 0 {
				continue
			}
			matched = true
			// As FTS5 rounds it: no fused multiply-adds.
			norm := float64(k1 * float64(1-b+float64(b*float64(dl(d)))/avgdl))
			score += float64(idf[term] * (float64(f*(k1+1)) / (f + norm)))
		}
		if matched {
			all = append(all, scored{d, score})
		}
	}
	slices.SortFunc(all, func(x, y scored) int {
		if c := cmp.Compare(y.score, x.score); c != 0 {
			return c
		}
		if c := cmp.Compare(y.d.seq, x.d.seq); c != 0 {
			return c
		}
		return cmp.Compare(x.d.rec.ID, y.d.rec.ID)
	})
	limit := q.Limit
	if limit == 0 {
		limit = sdk.DefaultRecallLimit
	}
	var out []refHit
	for _, s := range all[:min(limit, len(all))] {
		out = append(out, refHit{s.d.rec.ID, s.score})
	}
	return out
}

// sameAsRef reports how hits differ from the reference: the same ids in
// the same order, scores equal to 1e-12 relative.
func sameAsRef(hits []sdk.Hit, want []refHit) error {
	if len(hits) != len(want) {
		return fmt.Errorf("%d hits, the reference %d (%v against %v)", len(hits), len(want), hitIDs(hits), want)
	}
	for k, h := range hits {
		w := want[k]
		if h.Record.ID != w.id || math.Abs(h.Score-w.score) > 1e-12*math.Max(1, math.Abs(w.score)) {
			return fmt.Errorf("hit %d is %s (%v), the reference's %s (%v)", k, h.Record.ID, h.Score, w.id, w.score)
		}
	}
	return nil
}

// sameAsRefUpToTies is sameAsRef for a store whose seqs the test cannot
// read: hits of equal score may come in any order. all is the
// reference's every hit (no limit).
func sameAsRefUpToTies(hits []sdk.Hit, all []refHit, limit int) error {
	if len(hits) != min(limit, len(all)) {
		return fmt.Errorf("%d hits, the reference %d", len(hits), min(limit, len(all)))
	}
	score := map[string]float64{}
	for _, w := range all {
		score[w.id] = w.score
	}
	seen := map[string]bool{}
	for k, h := range hits {
		w := all[k]
		s, ok := score[h.Record.ID]
		if !ok || s != w.score || seen[h.Record.ID] || math.Abs(h.Score-w.score) > 1e-12*math.Max(1, math.Abs(w.score)) {
			return fmt.Errorf("hit %d is %s (%v), the reference ranks %s there (%v)", k, h.Record.ID, h.Score, w.id, w.score)
		}
		seen[h.Record.ID] = true
	}
	return nil
}
