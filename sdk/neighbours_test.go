package sdk

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	pb "github.com/memhost/memhost/sdk/internal/pluginpb"
	"github.com/memhost/memhost/sdk/internal/wire"
)

// threadStore is a ThreadReader over a fixed set of records. An exact
// store answers the records at the places asked; a sloppy one answers
// every record it holds, whatever was asked, so the filtering
// AttachNeighbours does itself is what a test sees. It answers in the
// reverse of the order it holds them, so the thread order of an answer is
// AttachNeighbours' work too.
type threadStore struct {
	recs   []Record
	sloppy bool
	err    error
	calls  [][]ThreadPlace
}

func (s *threadStore) ReadThread(_ context.Context, realm string, places []ThreadPlace) ([]Record, error) {
	s.calls = append(s.calls, slices.Clone(places))
	if s.err != nil {
		return nil, s.err
	}
	var out []Record
	for i := len(s.recs) - 1; i >= 0; i-- {
		r := s.recs[i]
		if r.Realm != realm {
			continue
		}
		if s.sloppy || r.Thread != nil && slices.Contains(places, ThreadPlace{Scope: r.Scope, Thread: r.Thread.ID, Seq: r.Thread.Seq}) {
			out = append(out, r)
		}
	}
	return out, nil
}

var (
	nbAlice = IdentityScope("alice")
	nbBob   = IdentityScope("bob")
	nbNow   = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	nbDay0  = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
)

// nbRecord is an active record of realm "r" at seq of thread in scope,
// created on day seq after nbDay0.
func nbRecord(id string, scope Scope, thread string, seq int64) Record {
	return Record{ID: id, Realm: "r", Scope: scope, Kind: KindEpisode, Title: "turn " + id, Status: StatusActive,
		Trust: TrustAgentObserved, CreatedAt: nbDay0.AddDate(0, 0, int(seq)), Thread: &Thread{ID: thread, Seq: seq}}
}

// nbThread is alice's thread "t" at seqs 0…8 (ids a0…a8), bob's records
// under the same thread id at seqs 2…6 (b2…b6), and alice's thread "u" at
// seqs 2…6 (u2…u6): every place beside a4 is also held in another scope
// and in another thread. Alice's thread "top" holds the last three seqs
// an int64 can hold (z0…z2).
func nbThread() []Record {
	var recs []Record
	for seq := range int64(9) {
		recs = append(recs, nbRecord(fmt.Sprintf("a%d", seq), nbAlice, "t", seq))
	}
	for seq := int64(2); seq <= 6; seq++ {
		recs = append(recs, nbRecord(fmt.Sprintf("b%d", seq), nbBob, "t", seq), nbRecord(fmt.Sprintf("u%d", seq), nbAlice, "u", seq))
	}
	for i := range int64(3) {
		r := nbRecord(fmt.Sprintf("z%d", i), nbAlice, "top", math.MaxInt64-2+i)
		r.CreatedAt = nbDay0
		recs = append(recs, r)
	}
	return recs
}

func TestAttachNeighbours(t *testing.T) {
	boom := errors.New("store down")
	type edit func(recs map[string]*Record)
	for _, tc := range []struct {
		name   string
		q      RecallQuery // Realm "r" is set
		hits   []string    // ids of nbThread records; "plain" is a hit in no thread
		edit   edit        // changes nbThread's records before the call
		sloppy bool
		err    error
		want   [][]string // per hit, the neighbours' ids in order
		calls  int        // ReadThread calls, -1 for any
	}{
		{name: "span 1", q: RecallQuery{Neighbours: 1}, hits: []string{"a4"}, want: [][]string{{"a3", "a5"}}, calls: 1},
		{name: "span 2", q: RecallQuery{Neighbours: 2}, hits: []string{"a4"}, want: [][]string{{"a2", "a3", "a5", "a6"}}, calls: 1},
		{name: "span 2, sloppy store", q: RecallQuery{Neighbours: 2}, hits: []string{"a4"}, sloppy: true, want: [][]string{{"a2", "a3", "a5", "a6"}}, calls: 1},
		{name: "span over the maximum is the maximum", q: RecallQuery{Neighbours: MaxNeighbours + 3}, hits: []string{"a4"}, sloppy: true, want: [][]string{{"a2", "a3", "a5", "a6"}}, calls: 1},
		{name: "at the thread's start", q: RecallQuery{Neighbours: 2}, hits: []string{"a0"}, want: [][]string{{"a1", "a2"}}, calls: 1},
		{name: "at the thread's end", q: RecallQuery{Neighbours: 2}, hits: []string{"a8"}, want: [][]string{{"a6", "a7"}}, calls: 1},
		{name: "a gap in the thread", q: RecallQuery{Neighbours: 2}, hits: []string{"a4"},
			edit: func(m map[string]*Record) { m["a3"].Thread = nil }, want: [][]string{{"a2", "a5", "a6"}}, calls: 1},
		{name: "another scope's and another thread's records are dropped", q: RecallQuery{Neighbours: 2}, hits: []string{"a4"},
			edit: func(m map[string]*Record) {
				// Take alice's own neighbours out, so only strangers are near.
				for _, id := range []string{"a2", "a3", "a5", "a6"} {
					m[id].Thread.Seq += 100
				}
			}, sloppy: true, want: [][]string{nil}, calls: 1},
		{name: "expired", q: RecallQuery{Neighbours: 1}, hits: []string{"a4"},
			edit: func(m map[string]*Record) { m["a3"].ExpiresAt = nbNow; m["a5"].ExpiresAt = nbNow.Add(time.Minute) }, want: [][]string{{"a5"}}, calls: 1},
		{name: "superseded", q: RecallQuery{Neighbours: 1}, hits: []string{"a4"},
			edit: func(m map[string]*Record) { m["a5"].Status = StatusSuperseded }, want: [][]string{{"a3"}}, calls: 1},
		{name: "quarantined and tombstoned", q: RecallQuery{Neighbours: 2}, hits: []string{"a4"},
			edit: func(m map[string]*Record) { m["a3"].Status = StatusQuarantined; m["a6"].Status = StatusTombstoned },
			want: [][]string{{"a2", "a5"}}, calls: 1},
		{name: "excluded ids", q: RecallQuery{Neighbours: 2, ExcludeIDs: []string{"a2", "a5"}}, hits: []string{"a4"},
			want: [][]string{{"a3", "a6"}}, calls: 1},
		{name: "a hit may be another hit's neighbour", q: RecallQuery{Neighbours: 1}, hits: []string{"a4", "a5"},
			want: [][]string{{"a3", "a5"}, {"a4", "a6"}}, calls: 1},
		{name: "a record beside two hits goes to the first", q: RecallQuery{Neighbours: 1}, hits: []string{"a4", "a2"},
			want: [][]string{{"a3", "a5"}, {"a1"}}, calls: 1},
		{name: "a record beside two hits goes to the first, in answer order", q: RecallQuery{Neighbours: 2}, hits: []string{"a2", "a6"},
			want: [][]string{{"a0", "a1", "a3", "a4"}, {"a5", "a7", "a8"}}, calls: 1},
		{name: "hits of two scopes and two threads", q: RecallQuery{Neighbours: 1}, hits: []string{"b4", "u4", "a4"},
			want: [][]string{{"b3", "b5"}, {"u3", "u5"}, {"a3", "a5"}}, calls: 1},
		{name: "tags", q: RecallQuery{Neighbours: 2, Tags: []string{"red"}}, hits: []string{"a4"},
			edit: func(m map[string]*Record) { m["a2"].Tags = []string{"RED"}; m["a5"].Tags = []string{"red", "x"} },
			want: [][]string{{"a2", "a5"}}, calls: 1},
		{name: "exclude tags", q: RecallQuery{Neighbours: 2, ExcludeTags: []string{"Red"}}, hits: []string{"a4"},
			edit: func(m map[string]*Record) { m["a2"].Tags = []string{"red"}; m["a5"].Tags = []string{"x", "RED"} },
			want: [][]string{{"a3", "a6"}}, calls: 1},
		{name: "since", q: RecallQuery{Neighbours: 2, Since: nbDay0.AddDate(0, 0, 3)}, hits: []string{"a4"},
			want: [][]string{{"a3", "a5", "a6"}}, calls: 1},
		{name: "until is exclusive", q: RecallQuery{Neighbours: 2, Until: nbDay0.AddDate(0, 0, 5)}, hits: []string{"a4"},
			want: [][]string{{"a2", "a3"}}, calls: 1},
		{name: "occurred_at before created_at", q: RecallQuery{Neighbours: 1, Since: nbDay0}, hits: []string{"a4"},
			edit: func(m map[string]*Record) { m["a5"].OccurredAt = nbDay0.AddDate(0, 0, -1) }, want: [][]string{{"a3"}}, calls: 1},
		{name: "thread order, two records at one place ordered by id", q: RecallQuery{Neighbours: 2}, hits: []string{"a4"},
			edit: func(m map[string]*Record) {
				r := nbRecord("a3x", nbAlice, "t", 6)
				m["a3x"] = &r
				r2 := nbRecord("a0x", nbAlice, "t", 6)
				m["a0x"] = &r2
			}, sloppy: true, want: [][]string{{"a2", "a3", "a5", "a0x", "a3x", "a6"}}, calls: 1},
		{name: "at the top of the seq range, span 1", q: RecallQuery{Neighbours: 1}, hits: []string{"z2"}, want: [][]string{{"z1"}}, calls: 1},
		{name: "at the top of the seq range, span 2", q: RecallQuery{Neighbours: 2}, hits: []string{"z2"}, want: [][]string{{"z0", "z1"}}, calls: 1},
		{name: "one below the top of the seq range", q: RecallQuery{Neighbours: 2}, hits: []string{"z1"}, sloppy: true, want: [][]string{{"z0", "z2"}}, calls: 1},
		{name: "a crowded place shows its first records by id", q: RecallQuery{Neighbours: 1}, hits: []string{"a4"},
			edit: func(m map[string]*Record) {
				for i := range MaxPlaceRecords + 2 {
					r := nbRecord(fmt.Sprintf("c%d", i), nbAlice, "t", 3)
					m[r.ID] = &r
				}
			}, want: [][]string{append([]string{"a3", "c0", "c1", "c2", "c3", "c4", "c5"}[:MaxPlaceRecords], "a5")}, calls: 1},
		{name: "a crowded place shows only from its first MaxPlaceReads, however many a store answers", q: RecallQuery{Neighbours: 1, ExcludeIDs: []string{"c00", "c01", "c02", "c03", "c04", "c05", "c06", "c07", "c08", "c09", "c10", "c11", "c12", "c13"}},
			hits: []string{"a4"}, edit: crowdPlace(MaxPlaceReads+4, nil), sloppy: true, want: [][]string{{"a3", "c14", "a5"}}, calls: 1},
		{name: "a crowded place's first MaxPlaceReads are of its active records", q: RecallQuery{Neighbours: 1, ExcludeIDs: []string{"c02", "c03", "c04", "c05", "c06", "c07", "c08", "c09", "c10", "c11", "c12", "c13", "c14", "c15"}},
			hits: []string{"a4"}, edit: crowdPlace(MaxPlaceReads+4, func(r *Record) {
				if r.ID < "c02" {
					r.Status = StatusSuperseded
				}
			}), sloppy: true, want: [][]string{{"a3", "c16", "a5"}}, calls: 1},
		{name: "an expired record counts among a crowded place's first MaxPlaceReads", q: RecallQuery{Neighbours: 1, ExcludeIDs: []string{"c02", "c03", "c04", "c05", "c06", "c07", "c08", "c09", "c10", "c11", "c12", "c13", "c14", "c15"}},
			hits: []string{"a4"}, edit: crowdPlace(MaxPlaceReads+4, func(r *Record) {
				if r.ID < "c02" {
					r.ExpiresAt = nbNow
				}
			}), sloppy: true, want: [][]string{{"a3", "a5"}}, calls: 1},
		{name: "a record in no thread or at a negative seq is dropped", q: RecallQuery{Neighbours: 2}, hits: []string{"a0"},
			edit: func(m map[string]*Record) {
				r := nbRecord("neg", nbAlice, "t", -1)
				m[r.ID] = &r
				m["a5"].Thread = nil
				m["a6"].Thread = nil
			}, sloppy: true, want: [][]string{{"a1", "a2"}}, calls: 1},
		{name: "a record in no thread leaves the order alone", q: RecallQuery{Neighbours: 2}, hits: []string{"a4"},
			edit:   func(m map[string]*Record) { m["a0"].Thread = nil; m["a1"].Thread = nil },
			sloppy: true, want: [][]string{{"a2", "a3", "a5", "a6"}}, calls: 1},
		{name: "neighbours 0 reads nothing", q: RecallQuery{}, hits: []string{"a4"}, want: [][]string{nil}, calls: 0},
		{name: "a hit in no thread gets none", q: RecallQuery{Neighbours: 2}, hits: []string{"plain", "a4"},
			want: [][]string{nil, {"a2", "a3", "a5", "a6"}}, calls: 1},
		{name: "no hit in a thread reads nothing", q: RecallQuery{Neighbours: 2}, hits: []string{"plain"}, want: [][]string{nil}, calls: 0},
		{name: "no hits", q: RecallQuery{Neighbours: 2}, want: [][]string{}, calls: 0},
		{name: "a read error is returned", q: RecallQuery{Neighbours: 1}, hits: []string{"a4"}, err: boom, calls: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			byID := map[string]*Record{}
			base := nbThread()
			for i := range base {
				byID[base[i].ID] = &base[i]
			}
			plain := nbRecord("plain", nbAlice, "", 0)
			plain.Thread = nil
			byID["plain"] = &plain
			if tc.edit != nil {
				tc.edit(byID)
			}
			store := &threadStore{sloppy: tc.sloppy, err: tc.err}
			for _, r := range byID {
				store.recs = append(store.recs, *r)
			}
			slices.SortFunc(store.recs, func(a, b Record) int { return strings.Compare(a.ID, b.ID) })
			hits := make([]Hit, len(tc.hits))
			for i, id := range tc.hits {
				hits[i] = Hit{Record: *byID[id], Score: float64(len(tc.hits) - i)}
			}
			q := tc.q
			q.Realm = "r"
			err := AttachNeighbours(t.Context(), store, q, hits, nbNow)
			if tc.calls >= 0 && len(store.calls) != tc.calls {
				t.Errorf("ReadThread called %d times, want %d", len(store.calls), tc.calls)
			}
			if tc.err != nil {
				if !errors.Is(err, tc.err) {
					t.Fatalf("err = %v, want %v", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for i, h := range hits {
				if h.Record.ID != tc.hits[i] {
					t.Fatalf("hit %d is %s, want %s: the hits must stay as they were", i, h.Record.ID, tc.hits[i])
				}
				var got []string
				for _, n := range h.Neighbours {
					got = append(got, n.ID)
				}
				if !slices.Equal(got, tc.want[i]) {
					t.Errorf("hit %d (%s): neighbours %v, want %v", i, h.Record.ID, got, tc.want[i])
				}
			}
		})
	}
}

// crowdPlace adds n records c00, c01, … at alice's seq 3 of thread t,
// beside a4 and after a3 (also there) by id, each changed by change when
// set.
func crowdPlace(n int, change func(*Record)) func(map[string]*Record) {
	return func(m map[string]*Record) {
		for i := range n {
			r := nbRecord(fmt.Sprintf("c%02d", i), nbAlice, "t", 3)
			if change != nil {
				change(&r)
			}
			m[r.ID] = &r
		}
	}
}

// TestAttachNeighboursAsksThePlaces: one ReadThread call asks each place
// beside each threaded hit once, with the hit's scope and thread, and
// never the hit's own place.
func TestAttachNeighboursAsksThePlaces(t *testing.T) {
	recs := nbThread()
	byID := map[string]Record{}
	for _, r := range recs {
		byID[r.ID] = r
	}
	store := &threadStore{recs: recs}
	hits := []Hit{{Record: byID["a4"]}, {Record: byID["a5"]}, {Record: byID["b3"]}}
	if err := AttachNeighbours(t.Context(), store, RecallQuery{Realm: "r", Neighbours: 1}, hits, nbNow); err != nil {
		t.Fatal(err)
	}
	if len(store.calls) != 1 {
		t.Fatalf("ReadThread called %d times, want 1", len(store.calls))
	}
	want := []ThreadPlace{
		{nbAlice, "t", 3}, {nbAlice, "t", 5}, {nbAlice, "t", 4}, {nbAlice, "t", 6},
		{nbBob, "t", 2}, {nbBob, "t", 4},
	}
	got := store.calls[0]
	if !sameMembers(got, want) {
		t.Fatalf("ReadThread asked %v, want %v (each once, in any order)", got, want)
	}
}

// TestAttachNeighboursAsksNoPlacePastAnEnd: seqs run from 0 to the top of
// int64, and no place past either end is asked (none wraps around).
func TestAttachNeighboursAsksNoPlacePastAnEnd(t *testing.T) {
	recs := nbThread()
	byID := map[string]Record{}
	for _, r := range recs {
		byID[r.ID] = r
	}
	for _, tc := range []struct {
		hit  string
		want []ThreadPlace
	}{
		{"a0", []ThreadPlace{{nbAlice, "t", 1}, {nbAlice, "t", 2}}},
		{"a1", []ThreadPlace{{nbAlice, "t", 0}, {nbAlice, "t", 2}, {nbAlice, "t", 3}}},
		{"z2", []ThreadPlace{{nbAlice, "top", math.MaxInt64 - 2}, {nbAlice, "top", math.MaxInt64 - 1}}},
		{"z1", []ThreadPlace{{nbAlice, "top", math.MaxInt64 - 3}, {nbAlice, "top", math.MaxInt64 - 2}, {nbAlice, "top", math.MaxInt64}}},
	} {
		store := &threadStore{recs: recs}
		if err := AttachNeighbours(t.Context(), store, RecallQuery{Realm: "r", Neighbours: 2}, []Hit{{Record: byID[tc.hit]}}, nbNow); err != nil {
			t.Fatal(err)
		}
		if len(store.calls) != 1 || !sameMembers(store.calls[0], tc.want) {
			t.Errorf("beside %s, ReadThread asked %v, want %v", tc.hit, store.calls, tc.want)
		}
	}
}

// TestAttachNeighboursReplacesWhatTheProviderSet: a hit's Neighbours are
// what AttachNeighbours found, not what the provider's Recall left there.
func TestAttachNeighboursReplacesWhatTheProviderSet(t *testing.T) {
	recs := nbThread()
	store := &threadStore{recs: recs}
	hits := []Hit{{Record: recs[4], Neighbours: []Record{recs[0], recs[8]}}}
	if err := AttachNeighbours(t.Context(), store, RecallQuery{Realm: "r", Neighbours: 1}, hits, nbNow); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, n := range hits[0].Neighbours {
		got = append(got, n.ID)
	}
	if !slices.Equal(got, []string{"a3", "a5"}) {
		t.Fatalf("neighbours %v, want [a3 a5]", got)
	}
}

// sameMembers reports whether a and b hold the same places, each once.
func sameMembers(a, b []ThreadPlace) bool {
	if len(a) != len(b) {
		return false
	}
	for i, p := range a {
		if !slices.Contains(b, p) || slices.Contains(a[:i], p) {
			return false
		}
	}
	return true
}

// TestAttachNeighboursFitsOneMessage: hits in crowded threads of records
// at every size limit would bring more neighbours than one plugin message
// holds, and the whole recall would fail over the limit. Neighbours go to
// the hits in rank order while the answer, as Serve encodes it, fits.
func TestAttachNeighboursFitsOneMessage(t *testing.T) {
	const hitCount = 70 // each with 4 places of 4 records: 1,120 neighbours of about 68 KB
	full := func(id, thread string, seq int64) Record {
		r := nbRecord(id, nbAlice, thread, seq)
		r.ID = id + strings.Repeat("x", MaxIDBytes-len(id))
		r.Thread.ID = thread + strings.Repeat("t", MaxThreadIDBytes-len(thread))
		r.Title, r.Description, r.Body = strings.Repeat("t", MaxTitleBytes), strings.Repeat("d", MaxDescriptionBytes), strings.Repeat("b", MaxBodyBytes)
		for i := range MaxTags {
			r.Tags = append(r.Tags, fmt.Sprintf("%02d", i)+strings.Repeat("g", MaxTagBytes-2))
		}
		r.ContentHash, r.Supersedes = "sha256:"+strings.Repeat("0", 64), strings.Repeat("s", MaxIDBytes)
		r.UpdatedAt, r.OccurredAt, r.ExpiresAt, r.LastUsedAt = r.CreatedAt, r.CreatedAt, nbNow.AddDate(1, 0, 0), r.CreatedAt
		return r
	}
	var recs []Record
	hits := make([]Hit, hitCount)
	for h := range hitCount {
		thread := fmt.Sprintf("h%02d", h)
		hits[h] = Hit{Record: full(thread+"-hit", thread, 10), Score: float64(hitCount - h)}
		for _, seq := range []int64{8, 9, 11, 12} {
			for k := range MaxPlaceRecords {
				recs = append(recs, full(fmt.Sprintf("%s-%d-%d", thread, seq, k), thread, seq))
			}
		}
	}
	if err := AttachNeighbours(t.Context(), &threadStore{recs: recs}, RecallQuery{Realm: "r", Neighbours: 2}, hits, nbNow); err != nil {
		t.Fatal(err)
	}
	answer := &pb.RecallResponse{}
	attached := 0
	for i := range hits {
		h := &pb.Hit{Record: recordToPB(&hits[i].Record), Score: hits[i].Score}
		for j := range hits[i].Neighbours {
			h.Neighbours = append(h.Neighbours, recordToPB(&hits[i].Neighbours[j]))
		}
		answer.Hits = append(answer.Hits, h)
		attached += len(hits[i].Neighbours)
	}
	if size := proto.Size(answer); size > wire.MaxMessageBytes {
		t.Fatalf("the answer is %d bytes, over the message limit of %d", size, wire.MaxMessageBytes)
	}
	if attached == 0 || attached >= len(recs) {
		t.Fatalf("%d of %d neighbours attached; want the ones that fit", attached, len(recs))
	}
	for i := range hits[:hitCount/2] {
		if n := len(hits[i].Neighbours); n != 4*MaxPlaceRecords {
			t.Fatalf("hit %d has %d neighbours; the best hits get theirs first (want %d)", i, n, 4*MaxPlaceRecords)
		}
	}
	if n := len(hits[hitCount-1].Neighbours); n != 0 {
		t.Fatalf("the last hit has %d neighbours past the message limit", n)
	}
}

func TestThreadDistance(t *testing.T) {
	at := func(scope Scope, thread string, seq int64) *Record {
		return &Record{Scope: scope, Thread: &Thread{ID: thread, Seq: seq}}
	}
	alice := IdentityScope("alice")
	for _, c := range []struct {
		what string
		a, b *Record
		d    uint64
		ok   bool
	}{
		{"same place", at(alice, "t", 5), at(alice, "t", 5), 0, true},
		{"before", at(alice, "t", 3), at(alice, "t", 5), 2, true},
		{"after", at(alice, "t", 7), at(alice, "t", 5), 2, true},
		{"the widest, no overflow", at(alice, "t", math.MinInt64), at(alice, "t", math.MaxInt64), math.MaxUint64, true},
		{"another thread", at(alice, "t", 5), at(alice, "u", 5), 0, false},
		{"another scope", at(alice, "t", 5), at(RealmScope, "t", 5), 0, false},
		{"unthreaded", &Record{Scope: alice}, at(alice, "t", 5), 0, false},
	} {
		for _, pair := range [][2]*Record{{c.a, c.b}, {c.b, c.a}} {
			if d, ok := pair[0].ThreadDistance(pair[1]); d != c.d || ok != c.ok {
				t.Errorf("%s: ThreadDistance = %d, %v; want %d, %v", c.what, d, ok, c.d, c.ok)
			}
		}
	}
}
