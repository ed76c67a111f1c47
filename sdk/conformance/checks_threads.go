package conformance

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/memhost/memhost/sdk"
)

// threadEdgePlaces is how many places of a thread checkThreadEdges fills
// at each end of the seq range: more than twice a provider's context
// reach either side, so every sum a provider forms around a place near
// the top of the range is tried.
const threadEdgePlaces = 9

// threadEdge is one thread of checkThreadEdges, filled from seq first.
type threadEdge struct {
	scope  sdk.Scope
	thread string
	first  int64
	ids    []string // by place; "" when not stored
}

// checkThreadEdges: a thread's seq may be any int64 from 0, and places at
// the top of that range behave as places at its start. Records written
// there one by one, forgotten and written again are stored, read back
// and recalled exactly as their twins at seqs 0…8: each query finds the
// same places at both ends. Neighbour arithmetic that overflows loops
// forever (the call never answers) or loses a record's neighbours. A
// plugin that cannot hold such a seq exactly (a language whose numbers
// are doubles) must refuse every one of them with sdk.ErrInvalid, storing
// nothing, rather than store another.
func checkThreadEdges(ctx context.Context, e *env) error {
	low := &threadEdge{scope: scopeAlice, thread: "edge low", first: 0}
	high := &threadEdge{scope: scopeBob, thread: "edge high", first: math.MaxInt64 - threadEdgePlaces + 1}
	edges := []*threadEdge{low, high}
	words := make([]string, threadEdgePlaces)
	recs := make([]sdk.Record, threadEdgePlaces)
	for i := range recs {
		recs[i], words[i] = e.record("")
	}
	write := func(ed *threadEdge, i int) error {
		r := recs[i]
		r.Scope, r.Thread = ed.scope, &sdk.Thread{ID: ed.thread, Seq: ed.first + int64(i)}
		ids, err := e.p.Remember(ctx, realmA, []sdk.Record{r})
		if err != nil {
			return fmt.Errorf("Remember of a record at seq %d of a thread: %w", r.Thread.Seq, err)
		}
		if len(ids) != 1 {
			return fmt.Errorf("Remember of a record at seq %d of a thread answered %d ids", r.Thread.Seq, len(ids))
		}
		ed.ids[i] = ids[0]
		return nil
	}
	// Out of order, so places are filled beside and between neighbours.
	order := []int{4, 0, 8, 2, 6, 1, 7, 3, 5}
	for _, ed := range edges {
		ed.ids = make([]string, threadEdgePlaces)
		for n, i := range order {
			err := write(ed, i)
			if ed == high && n == 0 && errors.Is(err, sdk.ErrInvalid) {
				return refusesThreadEdge(ctx, e, high, order, func(i int) error { return write(high, i) }, words)
			}
			if err != nil {
				return err
			}
		}
	}
	var p problems
	// compare recalls each word at both ends and compares the places found.
	compare := func(when string) error {
		for i, w := range words {
			var found [2][]int
			for j, ed := range edges {
				ids, err := e.recallIDs(ctx, realmA, w, ed.scope)
				if err != nil {
					return err
				}
				for _, id := range ids {
					if k := slices.Index(ed.ids, id); k >= 0 {
						found[j] = append(found[j], k)
					}
				}
				slices.Sort(found[j])
				if ed.ids[i] != "" && !slices.Contains(found[j], i) {
					p.addf("%s: Recall(%q) did not find its own record at seq %d", when, w, ed.first+int64(i))
				}
			}
			if !slices.Equal(found[0], found[1]) {
				p.addf("%s: Recall(%q) found places %v of a thread at seqs 0…%d but places %v of its twin at seqs %d…%d; both ends must behave alike",
					when, w, found[0], threadEdgePlaces-1, found[1], high.first, int64(math.MaxInt64))
			}
		}
		return nil
	}
	if err := compare("after writing"); err != nil {
		return err
	}
	if e.has(sdk.CapFetch) {
		got, err := e.p.Get(ctx, realmA, high.ids)
		if err != nil {
			return fmt.Errorf("Get of records near the top of the seq range: %w", err)
		}
		for _, r := range got {
			if k := slices.Index(high.ids, r.ID); k < 0 || r.Thread == nil || *r.Thread != (sdk.Thread{ID: high.thread, Seq: high.first + int64(k)}) {
				p.addf("record %s read back with thread %+v, want seq %d of %q", r.ID, r.Thread, high.first+int64(k), high.thread)
			}
		}
	}
	if !e.has(sdk.CapForget) {
		return p.err()
	}
	// Places emptied and filled again re-index their neighbours.
	for _, i := range []int{threadEdgePlaces - 1, threadEdgePlaces - 3, 4} {
		for _, ed := range edges {
			if n, err := e.p.Forget(ctx, realmA, []string{ed.ids[i]}); err != nil || n != 1 {
				return fmt.Errorf("Forget of the record at seq %d of a thread removed %d, %v; want 1", ed.first+int64(i), n, err)
			}
			ed.ids[i] = ""
		}
	}
	if err := compare("after forgetting places"); err != nil {
		return err
	}
	for _, i := range []int{threadEdgePlaces - 3, threadEdgePlaces - 1} {
		for _, ed := range edges {
			if err := write(ed, i); err != nil {
				return err
			}
		}
	}
	if err := compare("after writing places again"); err != nil {
		return err
	}
	return p.err()
}

// refusesThreadEdge checks a plugin that refused a seq near the top of the
// range: it refuses every one, and stores none.
func refusesThreadEdge(ctx context.Context, e *env, high *threadEdge, order []int, write func(int) error, words []string) error {
	var p problems
	for _, i := range order {
		p.add(wantErr(fmt.Sprintf("Remember of a record at seq %d of a thread, after one there was refused", high.first+int64(i)), write(i), sdk.ErrInvalid))
	}
	for _, w := range words {
		ids, err := e.recallIDs(ctx, realmA, w, high.scope)
		if err != nil {
			return err
		}
		if len(ids) > 0 {
			p.addf("a refused record near the top of the seq range was stored: Recall(%q) found %v", w, ids)
		}
	}
	return p.err()
}

// threadTwin is one record of checkThreadScopes: its place in realm A,
// and its thread in realm B.
type threadTwin struct {
	name   string
	scope  sdk.Scope
	thread string
	seq    int64
	alone  string
}

// checkThreadScopes: thread context joins records of one realm, one scope
// and one thread id only. Bob's record sits at seq 0 of thread "conv" in
// his scope and alice's at seq 1 of the same thread id in hers (with one
// more of hers at seq 2). Recall must not find her record by bob's words,
// nor his by hers: otherwise a writer probes another scope's conversation
// word by word by writing beside it. Every record scores as its twin in
// realm B, where bob's record is in a thread of its own.
func checkThreadScopes(ctx context.Context, e *env) error {
	twins := []threadTwin{
		{"bob's record at seq 0", scopeBob, "conv", 0, "conv of bob alone"},
		{"alice's record at seq 1", scopeAlice, "conv", 1, "conv"},
		{"alice's record at seq 2", scopeAlice, "conv", 2, "conv"},
	}
	words := make([]string, len(twins))
	which := map[string]int{} // realm and id to twin
	for i, tw := range twins {
		r, w := e.record(tw.scope)
		words[i] = w
		for _, realm := range []string{realmA, realmB} {
			r.Thread = &sdk.Thread{ID: tw.thread, Seq: tw.seq}
			if realm == realmB {
				r.Thread.ID = tw.alone
			}
			ids, err := e.remember(ctx, realm, r)
			if err != nil {
				return err
			}
			which[realm+"\x00"+ids[0]] = i
		}
	}
	var p problems
	for i, w := range words {
		for _, scopes := range [][]sdk.Scope{nil, {scopeAlice}, {scopeBob}} {
			var scores [2]map[int]float64
			for j, realm := range []string{realmA, realmB} {
				hits, err := e.recall(ctx, sdk.RecallQuery{Realm: realm, Query: w, Scopes: scopes, Limit: listLimit})
				if err != nil {
					return err
				}
				scores[j] = map[int]float64{}
				for _, h := range hits {
					if k, ok := which[realm+"\x00"+h.Record.ID]; ok {
						scores[j][k] = h.Score
					}
				}
			}
			for k, s := range scores[0] {
				want, ok := scores[1][k]
				switch {
				case !ok && twins[k].scope != twins[i].scope:
					p.addf("Recall(%q, scopes %v) found %s of thread %q in scope %s through the words of %s in scope %s; thread context must not join another scope's records under the same thread id",
						w, scopes, twins[k].name, twins[k].thread, twins[k].scope, twins[i].name, twins[i].scope)
				case !ok:
					p.addf("Recall(%q, scopes %v) found %s, which the same records with no shared thread id do not", w, scopes, twins[k].name)
				case math.Abs(s-want) > 1e-9*math.Abs(want):
					p.addf("Recall(%q, scopes %v) scores %s %v; with no shared thread id it scores %v", w, scopes, twins[k].name, s, want)
				}
			}
			for k := range scores[1] {
				if _, ok := scores[0][k]; !ok {
					p.addf("Recall(%q, scopes %v) lacks %s, which the same records with no shared thread id answer", w, scopes, twins[k].name)
				}
			}
		}
	}
	return p.err()
}
