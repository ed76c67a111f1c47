package conformance

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"

	"github.com/memhost/memhost/sdk"
)

// The reindex checks run for a provider that declares sdk.CapReindex: a
// rebuilt index answers what the old one did, a canceled rebuild leaves
// the provider serving, and a realm's rebuild leaves every other realm's
// records as they were.

// reindexFixture is what the reindex checks write: records spread over
// scopes in realm A and a few in realm B, each with a word of its own.
type reindexFixture struct {
	words map[string][]string // realm -> the words of its records
	ids   map[string]string   // word -> id
}

func writeReindexFixture(ctx context.Context, e *env) (*reindexFixture, error) {
	fx := &reindexFixture{words: map[string][]string{}, ids: map[string]string{}}
	scopes := []sdk.Scope{scopeAlice, scopeBob, scopeTeam, sdk.RealmScope}
	for realm, n := range map[string]int{realmA: 24, realmB: 6} {
		var recs []sdk.Record
		var words []string
		for i := range n {
			r, w := e.record(scopes[i%len(scopes)])
			r.Tags = []string{fmt.Sprintf("shelf-%d", i%3)}
			recs = append(recs, r)
			words = append(words, w)
		}
		ids, err := e.remember(ctx, realm, recs...)
		if err != nil {
			return nil, err
		}
		for i, w := range words {
			fx.ids[w] = ids[i]
		}
		fx.words[realm] = words
	}
	return fx, nil
}

// answers is what recall answers per query of a realm.
type answers map[string][]sdk.Hit

// recallAll asks, in each realm, for every record's word and for the word
// all records share.
func (fx *reindexFixture) recallAll(ctx context.Context, e *env) (map[string]answers, error) {
	out := map[string]answers{}
	for realm, words := range fx.words {
		a := answers{}
		for _, q := range append([]string{commonWord}, words...) {
			hits, err := e.recall(ctx, sdk.RecallQuery{Realm: realm, Query: q, Limit: listLimit})
			if err != nil {
				return nil, err
			}
			a[q] = hits
		}
		out[realm] = a
	}
	return out, nil
}

// sameAnswers reports how after differs from before: a word's query must
// answer the same records in the same order with the same scores (to a
// rounding), the shared word's the same set of records.
func sameAnswers(how string, before, after map[string]answers) error {
	var p problems
	for realm, qs := range before {
		for q, want := range qs {
			got := after[realm][q]
			if q == commonWord {
				if !sameSet(hitIDs(got), hitIDs(want)) {
					p.addf("%s: Recall(%s, %q) answered %v, before it %v", how, realm, q, hitIDs(got), hitIDs(want))
				}
				continue
			}
			if !slices.Equal(hitIDs(got), hitIDs(want)) {
				p.addf("%s: Recall(%s, %q) answered %v, before it %v", how, realm, q, hitIDs(got), hitIDs(want))
				continue
			}
			for i := range got {
				if d := math.Abs(got[i].Score - want[i].Score); d > 1e-9*math.Max(1, math.Abs(want[i].Score)) {
					p.addf("%s: Recall(%s, %q) scored %s %v, before it %v", how, realm, q, got[i].Record.ID, got[i].Score, want[i].Score)
				}
			}
		}
	}
	return p.err()
}

// progressLog records a reindex's progress reports.
type progressLog struct {
	mu    sync.Mutex
	calls [][2]int
}

func (l *progressLog) report(done, total int) {
	l.mu.Lock()
	l.calls = append(l.calls, [2]int{done, total})
	l.mu.Unlock()
}

// check says what is wrong with the reports of a reindex that answered n:
// counts never go back, done never passes total, and the last says n of n.
func (l *progressLog) check(what string, n int) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.calls) == 0 {
		return fmt.Errorf("%s reported no progress; want at least the final count", what)
	}
	for i, c := range l.calls {
		if c[0] < 0 || c[0] > c[1] || (i > 0 && c[0] < l.calls[i-1][0]) {
			return fmt.Errorf("%s reported progress %v: done must not go back or pass total", what, l.calls)
		}
	}
	if last := l.calls[len(l.calls)-1]; last != [2]int{n, n} {
		return fmt.Errorf("%s answered %d records but last reported %d of %d", what, n, last[0], last[1])
	}
	return nil
}

// checkReindex: a reindex of a realm answers its record count, reports
// progress, and leaves every answer of every realm as it was; the rebuilt
// index takes new writes and forgets; a reindex of every realm counts
// them all; a bad realm is refused.
func checkReindex(ctx context.Context, e *env) error {
	fx, err := writeReindexFixture(ctx, e)
	if err != nil {
		return err
	}
	before, err := fx.recallAll(ctx, e)
	if err != nil {
		return err
	}
	var p problems
	for _, tc := range []struct {
		realm string
		want  int
	}{
		{realmA, len(fx.words[realmA])},
		{realmB, len(fx.words[realmB])},
		{"", len(fx.words[realmA]) + len(fx.words[realmB])},
		{"conformance-empty", 0},
	} {
		var log progressLog
		what := fmt.Sprintf("Reindex(%q)", tc.realm)
		n, err := e.p.Reindex(ctx, tc.realm, log.report)
		if err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		if n != tc.want {
			p.addf("%s answered %d records, want %d (the realm's records, and no other realm's)", what, n, tc.want)
		}
		p.add(log.check(what, n))
		after, err := fx.recallAll(ctx, e)
		if err != nil {
			return err
		}
		p.add(sameAnswers("after "+what, before, after))
	}
	if _, err := e.p.Reindex(ctx, "not a realm!", nil); !errors.Is(err, sdk.ErrInvalid) {
		p.add(wantErr(`Reindex("not a realm!")`, err, sdk.ErrInvalid))
	}

	// The rebuilt index is the live one: it takes a new record, and (with
	// forget) drops a forgotten one.
	rec, w := e.record(scopeAlice)
	ids, err := e.remember(ctx, realmA, rec)
	if err != nil {
		return err
	}
	if got, err := e.recallIDs(ctx, realmA, w); err != nil || !slices.Equal(got, ids) {
		p.addf("a record written after the reindex: Recall(%q) answered %v, %v; want %v", w, got, err, ids)
	}
	if e.has(sdk.CapForget) {
		gone := fx.words[realmA][0]
		if _, err := e.p.Forget(ctx, realmA, []string{fx.ids[gone]}); err != nil {
			return fmt.Errorf("Forget after the reindex: %w", err)
		}
		if got, err := e.recallIDs(ctx, realmA, gone); err != nil || len(got) != 0 {
			p.addf("a record forgotten after the reindex: Recall(%q) answered %v, %v; want nothing", gone, got, err)
		}
	}
	return p.err()
}

// checkReindexCanceled: a reindex whose caller gives up part-way fails or
// finishes, and either way the provider goes on answering as before, and
// the next reindex runs.
func checkReindexCanceled(ctx context.Context, e *env) error {
	fx, err := writeReindexFixture(ctx, e)
	if err != nil {
		return err
	}
	before, err := fx.recallAll(ctx, e)
	if err != nil {
		return err
	}
	var p problems
	// Canceled at once, and at the first progress report.
	now, cancelNow := context.WithCancel(ctx)
	cancelNow()
	if n, err := e.p.Reindex(now, realmA, nil); err == nil && n != len(fx.words[realmA]) {
		p.addf("a canceled Reindex(%s) succeeded with %d records, want %d or an error", realmA, n, len(fx.words[realmA]))
	}
	mid, cancelMid := context.WithCancel(ctx)
	defer cancelMid()
	if n, err := e.p.Reindex(mid, "", func(int, int) { cancelMid() }); err == nil && n != len(fx.words[realmA])+len(fx.words[realmB]) {
		p.addf("a Reindex canceled part-way succeeded with %d records", n)
	}
	after, err := fx.recallAll(ctx, e)
	if err != nil {
		return fmt.Errorf("after a canceled reindex: %w", err)
	}
	p.add(sameAnswers("after a canceled reindex", before, after))
	if n, err := e.p.Reindex(ctx, realmA, nil); err != nil || n != len(fx.words[realmA]) {
		p.addf("Reindex(%s) after a canceled one answered %d, %v; want %d records", realmA, n, err, len(fx.words[realmA]))
	}
	return p.err()
}
