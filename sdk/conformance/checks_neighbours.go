package conformance

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/memhost/memhost/sdk"
)

// neighboursThread is the thread id of checkNeighbours' records, in
// alice's scope and in bob's.
const neighboursThread = "conformance neighbours"

// neighbourhood is a thread checkNeighbours wrote, each record holding a
// word of its own, and the strangers beside it.
type neighbourhood struct {
	ids   []string // the thread's records, by place
	words []string
	names map[string]string // id to a name for messages
	// strangers are records a neighbour must never be: bob's under the
	// same thread id, alice's of another thread, an expired one of alice's
	// thread.
	strangers []string
	gone      map[string]bool // forgotten or superseded
}

// checkNeighbours: a recall asking for neighbours answers, beside a hit in
// a thread, the records of its scope and thread up to that many places
// before and after it, in thread order: never a record of another scope
// under the same thread id, of another thread, expired, excluded, outside
// the query's tags or time window, forgotten or superseded, a hit, or a
// record already answered beside an earlier hit. Neighbours 0 answers
// none; more than sdk.MaxNeighbours is refused. A thread at the top of the
// seq range has its neighbours as one at its start.
func checkNeighbours(ctx context.Context, e *env) error {
	day := time.Date(2024, 3, 1, 0, 0, 0, 0, time.UTC)
	nb := &neighbourhood{names: map[string]string{}, gone: map[string]bool{}}
	var thread []sdk.Record
	for seq := range 5 {
		r, w := e.record(scopeAlice)
		r.Thread = &sdk.Thread{ID: neighboursThread, Seq: int64(seq)}
		r.OccurredAt = day.AddDate(0, 0, seq)
		if seq == 3 {
			r.Tags = []string{"aside"}
		}
		thread = append(thread, r)
		nb.words = append(nb.words, w)
	}
	ids, err := e.remember(ctx, realmA, thread...)
	if err != nil {
		return err
	}
	nb.ids = ids
	for seq, id := range ids {
		nb.names[id] = fmt.Sprintf("alice's record at seq %d", seq)
	}
	type stranger struct {
		name   string
		scope  sdk.Scope
		thread string
		seq    int64
		expire bool
	}
	for _, s := range []stranger{
		{"bob's record at seq 1 of the same thread id", scopeBob, neighboursThread, 1, false},
		{"bob's record at seq 3 of the same thread id", scopeBob, neighboursThread, 3, false},
		{"alice's record at seq 1 of another thread", scopeAlice, "conformance other thread", 1, false},
		{"alice's record at seq 3 of another thread", scopeAlice, "conformance other thread", 3, false},
		{"alice's expired record at seq 3 of the thread", scopeAlice, neighboursThread, 3, true},
	} {
		r, _ := e.record(s.scope)
		r.Thread = &sdk.Thread{ID: s.thread, Seq: s.seq}
		r.OccurredAt = day.AddDate(0, 0, int(s.seq))
		if s.expire {
			r.ExpiresAt = time.Now().Add(-time.Hour).UTC().Truncate(time.Millisecond)
		}
		sid, err := e.remember(ctx, realmA, r)
		if err != nil {
			return err
		}
		nb.strangers = append(nb.strangers, sid[0])
		nb.names[sid[0]] = s.name
	}

	var p problems
	// Read-only: each query, and the neighbours it must answer beside its
	// only hit (limit 1), the record holding the word.
	type ask struct {
		what   string
		center int
		q      sdk.RecallQuery
		want   []int // seqs
	}
	asks := []ask{
		{"neighbours 1", 2, sdk.RecallQuery{Neighbours: 1}, []int{1, 3}},
		{"neighbours 2", 2, sdk.RecallQuery{Neighbours: 2}, []int{0, 1, 3, 4}},
		{"neighbours 0", 2, sdk.RecallQuery{}, nil},
		{"neighbours 2 at the thread's start", 0, sdk.RecallQuery{Neighbours: 2}, []int{1, 2}},
		{"neighbours 2 at the thread's end", 4, sdk.RecallQuery{Neighbours: 2}, []int{2, 3}},
		{"neighbours 1 in scope alice", 2, sdk.RecallQuery{Neighbours: 1, Scopes: []sdk.Scope{scopeAlice}}, []int{1, 3}},
		{"neighbours 1 in scopes alice and bob", 2, sdk.RecallQuery{Neighbours: 1, Scopes: []sdk.Scope{scopeBob, scopeAlice}}, []int{1, 3}},
		{"neighbours 2 excluding seq 1", 2, sdk.RecallQuery{Neighbours: 2, ExcludeIDs: []string{ids[1]}}, []int{0, 3, 4}},
		{"neighbours 2 without tag aside (seq 3's)", 2, sdk.RecallQuery{Neighbours: 2, ExcludeTags: []string{"ASIDE"}}, []int{0, 1, 4}},
		{"neighbours 2 since seq 1's day", 2, sdk.RecallQuery{Neighbours: 2, Since: day.AddDate(0, 0, 1)}, []int{1, 3, 4}},
		{"neighbours 2 until seq 3's day", 2, sdk.RecallQuery{Neighbours: 2, Until: day.AddDate(0, 0, 3)}, []int{0, 1}},
	}
	for _, a := range asks {
		if err := nb.expect(ctx, e, &p, a.what, a.center, a.q, a.want); err != nil {
			return err
		}
	}
	// Every hit of a word, not only the best: whatever thread context a
	// provider adds finds, each record is answered once among the
	// neighbours, beside the first hit it is near (a hit may be one).
	if err := nb.expectAll(ctx, e, &p, 2, 2); err != nil {
		return err
	}
	_, err = e.p.Recall(ctx, sdk.RecallQuery{Realm: realmA, Query: nb.words[2], Neighbours: sdk.MaxNeighbours + 1})
	p.add(wantErr(fmt.Sprintf("Recall with neighbours %d", sdk.MaxNeighbours+1), err, sdk.ErrInvalid))
	if err := neighboursAtTheTop(ctx, e, &p); err != nil {
		return err
	}

	// A superseded and a forgotten neighbour are no longer answered.
	if e.has(sdk.CapSupersede) {
		repl, _ := e.record(scopeAlice)
		if _, err := e.p.Supersede(ctx, realmA, ids[3], repl); err != nil {
			return fmt.Errorf("Supersede(%s): %w", nb.names[ids[3]], err)
		}
		nb.gone[ids[3]] = true
		for _, span := range []int{1, 2} {
			if err := nb.expect(ctx, e, &p, fmt.Sprintf("neighbours %d after seq 3 was superseded", span), 2,
				sdk.RecallQuery{Neighbours: span}, nb.around(2, span)); err != nil {
				return err
			}
		}
	}
	if e.has(sdk.CapForget) {
		if n, err := e.p.Forget(ctx, realmA, []string{ids[1]}); err != nil || n != 1 {
			return fmt.Errorf("Forget(%s) removed %d, %v; want 1", nb.names[ids[1]], n, err)
		}
		nb.gone[ids[1]] = true
		for _, span := range []int{1, 2} {
			if err := nb.expect(ctx, e, &p, fmt.Sprintf("neighbours %d after seq 1 was forgotten", span), 2,
				sdk.RecallQuery{Neighbours: span}, nb.around(2, span)); err != nil {
				return err
			}
		}
		if err := nb.expectAll(ctx, e, &p, 2, 2); err != nil {
			return err
		}
	}
	return p.err()
}

// around answers the places of the thread within span of center, but
// center itself and the records gone.
func (nb *neighbourhood) around(center, span int) []int {
	var seqs []int
	for s := max(center-span, 0); s <= min(center+span, len(nb.ids)-1); s++ {
		if s != center && !nb.gone[nb.ids[s]] {
			seqs = append(seqs, s)
		}
	}
	return seqs
}

// recall runs q for the word of the thread's record at place center and
// checks what every answer with neighbours must satisfy.
func (nb *neighbourhood) recall(ctx context.Context, e *env, p *problems, what string, center int, q sdk.RecallQuery) ([]sdk.Hit, error) {
	q.Realm, q.Query = realmA, nb.words[center]
	hits, err := e.recall(ctx, q)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	now := time.Now()
	seen := map[string]bool{}
	for i, h := range hits {
		for j, n := range h.Neighbours {
			at := fmt.Sprintf("Recall(%q) with %s: neighbour %d (%s) of hit %d (%s)", q.Query, what, j, nb.name(n.ID), i, nb.name(h.Record.ID))
			switch {
			case slices.Contains(nb.strangers, n.ID):
				p.addf("%s is no neighbour: only records of the hit's own scope and thread, recallable, are", at)
			case n.Realm != q.Realm || n.Scope != h.Record.Scope:
				p.addf("%s is of realm %q, scope %q; the hit's are %q, %q", at, n.Realm, n.Scope, h.Record.Realm, h.Record.Scope)
			case h.Record.Thread == nil || n.Thread == nil || n.Thread.ID != h.Record.Thread.ID:
				p.addf("%s is in thread %+v, the hit in %+v", at, n.Thread, h.Record.Thread)
			case n.Thread.Seq < 0 || h.Record.Thread.Seq < 0 || n.Thread.Seq == h.Record.Thread.Seq ||
				// Both seqs are at least 0 here: no difference overflows.
				max(n.Thread.Seq-h.Record.Thread.Seq, h.Record.Thread.Seq-n.Thread.Seq) > int64(q.Neighbours):
				p.addf("%s is at seq %d, the hit at %d: not within %d places of it", at, n.Thread.Seq, h.Record.Thread.Seq, q.Neighbours)
			case !n.Recallable(now):
				p.addf("%s is not recallable (status %q, expires %v)", at, n.Status, n.ExpiresAt)
			case slices.Contains(q.ExcludeIDs, n.ID):
				p.addf("%s was excluded", at)
			case seen[n.ID]:
				p.addf("%s is already another hit's neighbour", at)
			case j > 0 && h.Neighbours[j-1].Thread != nil && h.Neighbours[j-1].Thread.Seq > n.Thread.Seq:
				p.addf("%s follows one at seq %d: neighbours come in thread order", at, h.Neighbours[j-1].Thread.Seq)
			}
			seen[n.ID] = true
		}
	}
	return hits, nil
}

// expect recalls the word of the thread's record at place center (limit
// 1, so it is the only hit) and checks that its neighbours are the
// records at places want, in that order.
func (nb *neighbourhood) expect(ctx context.Context, e *env, p *problems, what string, center int, q sdk.RecallQuery, want []int) error {
	q.Limit = 1
	hits, err := nb.recall(ctx, e, p, what, center, q)
	if err != nil {
		return err
	}
	if len(hits) != 1 || hits[0].Record.ID != nb.ids[center] {
		return fmt.Errorf("Recall(%q, limit 1) with %s answered %v, want %s, the one record holding the word in its own text",
			nb.words[center], what, nb.nameAll(hitIDs(hits)), nb.name(nb.ids[center]))
	}
	wantIDs := make([]string, len(want))
	for i, s := range want {
		wantIDs[i] = nb.ids[s]
	}
	if got := recordIDs(hits[0].Neighbours); !slices.Equal(got, wantIDs) {
		p.addf("Recall(%q, limit 1) with %s: the neighbours of %s are %v, want %v in thread order",
			nb.words[center], what, nb.name(nb.ids[center]), nb.nameAll(got), nb.nameAll(wantIDs))
	}
	return nil
}

// expectAll recalls the word of the thread's record at place center with
// every hit and checks each hit's neighbours against what its place and
// the earlier hits' neighbours leave it (another hit may be one).
func (nb *neighbourhood) expectAll(ctx context.Context, e *env, p *problems, center, span int) error {
	what := fmt.Sprintf("neighbours %d and every hit", span)
	hits, err := nb.recall(ctx, e, p, what, center, sdk.RecallQuery{Neighbours: span, Limit: listLimit})
	if err != nil {
		return err
	}
	taken := map[string]bool{}
	for i, h := range hits {
		k := slices.Index(nb.ids, h.Record.ID)
		if k < 0 {
			continue
		}
		var want []string
		for _, s := range nb.around(k, span) {
			if id := nb.ids[s]; !taken[id] {
				want = append(want, id)
				taken[id] = true
			}
		}
		if got := recordIDs(h.Neighbours); !slices.Equal(got, want) {
			p.addf("Recall(%q) with %s: the neighbours of hit %d (%s) are %v, want %v: each record of the thread within %d places, in thread order, each once among the neighbours (beside the first hit it is near)",
				nb.words[center], what, i, nb.name(h.Record.ID), nb.nameAll(got), nb.nameAll(want), span)
		}
	}
	return nil
}

func (nb *neighbourhood) name(id string) string {
	if n, ok := nb.names[id]; ok {
		return n
	}
	return "record " + id
}

func (nb *neighbourhood) nameAll(ids []string) []string {
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = nb.name(id)
	}
	return out
}

// neighboursAtTheTop: a thread at the last three seqs an int64 holds has
// its neighbours, none past the end (a place past it wraps to a negative
// seq where arithmetic overflows). A plugin that refuses such seqs
// (checkThreadEdges holds it to refusing them all) is not asked.
func neighboursAtTheTop(ctx context.Context, e *env, p *problems) error {
	nb := &neighbourhood{names: map[string]string{}, gone: map[string]bool{}}
	var recs []sdk.Record
	for i := range 3 {
		r, w := e.record(scopeTeam)
		r.Thread = &sdk.Thread{ID: neighboursThread + " at the top", Seq: math.MaxInt64 - 2 + int64(i)}
		recs = append(recs, r)
		nb.words = append(nb.words, w)
	}
	ids, err := e.p.Remember(ctx, realmA, recs)
	if errors.Is(err, sdk.ErrInvalid) {
		return nil
	}
	if err != nil || len(ids) != len(recs) {
		return fmt.Errorf("Remember of %d records at the top of the seq range: %d ids, %v", len(recs), len(ids), err)
	}
	nb.ids = ids
	for i, id := range ids {
		nb.names[id] = fmt.Sprintf("the team's record at seq MaxInt64-%d", 2-i)
	}
	for _, a := range []struct {
		center, span int
		want         []int
	}{{2, 1, []int{1}}, {2, 2, []int{0, 1}}, {1, 1, []int{0, 2}}, {0, 2, []int{1, 2}}} {
		what := fmt.Sprintf("neighbours %d at the top of the seq range", a.span)
		if err := nb.expect(ctx, e, p, what, a.center, sdk.RecallQuery{Neighbours: a.span}, a.want); err != nil {
			return err
		}
	}
	return nil
}

// checkCrowdedPlace: beside a hit, a thread place holding more records
// than sdk.MaxPlaceReads shows only from its first sdk.MaxPlaceReads by
// id (byte order), the first sdk.MaxPlaceRecords of those the recall may
// show: anyone writing to a scope can crowd a place, and every recall
// beside it must stay a bounded read. Excluding all but the last two of
// the first MaxPlaceReads leaves those two, not the records past them.
// The crowd's ids alternate upper and lower case letters, so a store
// ordering them by a collation that folds case picks other ones.
func checkCrowdedPlace(ctx context.Context, e *env) error {
	const thread = "conformance crowded place"
	center, word := e.record(scopeAlice)
	center.Thread = &sdk.Thread{ID: thread, Seq: 0}
	recs := []sdk.Record{center}
	for i := range sdk.MaxPlaceReads + 3 {
		r, _ := e.record(scopeAlice)
		r.Thread = &sdk.Thread{ID: thread, Seq: 1}
		letter := rune('a' + i)
		if i%2 == 0 {
			letter = rune('A' + i)
		}
		r.ID = fmt.Sprintf("conformance-crowd-%c", letter)
		recs = append(recs, r)
	}
	ids, err := e.remember(ctx, realmA, recs...)
	if err != nil {
		return err
	}
	crowd := slices.Clone(ids[1:])
	slices.Sort(crowd)
	first := crowd[:sdk.MaxPlaceReads]
	var p problems
	for _, a := range []struct {
		what    string
		exclude []string
		want    []string
	}{
		{"nothing excluded", nil, first[:sdk.MaxPlaceRecords]},
		{"all but the last two of the place's first MaxPlaceReads excluded", first[:len(first)-2], first[len(first)-2:]},
	} {
		q := sdk.RecallQuery{Realm: realmA, Query: word, Limit: 1, Neighbours: 1, ExcludeIDs: a.exclude}
		hits, err := e.recall(ctx, q)
		if err != nil {
			return fmt.Errorf("Recall(%q) with %s: %w", word, a.what, err)
		}
		if len(hits) != 1 || hits[0].Record.ID != ids[0] {
			return fmt.Errorf("Recall(%q, limit 1) with %s answered %v, want %s, the one record holding the word in its own text", word, a.what, hitIDs(hits), ids[0])
		}
		if got := recordIDs(hits[0].Neighbours); !slices.Equal(got, a.want) {
			p.addf("Recall(%q, limit 1, neighbours 1) with %s: the neighbours at the crowded place (%d records) are %v, want %v: its first %d by id that the recall may show, among its first %d",
				word, a.what, len(crowd), got, a.want, sdk.MaxPlaceRecords, sdk.MaxPlaceReads)
		}
	}
	return p.err()
}
