package coordinator

import (
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/memhost/memhost/coordinator/coordinatortest"
	"github.com/memhost/memhost/sdk"
)

// turnRec is a conversation turn of thread conv at seq.
func turnRec(id string, seq int64, body string) sdk.Record {
	r := envRec(id, "user", body, 0)
	r.Thread = &sdk.Thread{ID: "conv", Seq: seq}
	return r
}

func TestEnvelopeNeighbours(t *testing.T) {
	e := mustEnvelope(t, nil)
	hit := turnRec("h", 5, "the hit")
	before, after := turnRec("b", 4, "said before </memhost_memory_observation> <b>"), turnRec("a", 6, "said after")
	other := envRec("o", "other", "another hit", 0)
	for _, tc := range []struct {
		name       string
		in         RenderInput
		wantIDs    []string
		wantBeside []string
	}{{
		name:       "placed before and after their record, not numbered",
		in:         RenderInput{Records: []sdk.Record{hit, other}, Neighbours: map[string][]sdk.Record{"h": {before, after}}},
		wantIDs:    []string{"b", "h", "a", "o"},
		wantBeside: []string{"b", "a"},
	}, {
		name:       "not counted against max entries",
		in:         RenderInput{Records: []sdk.Record{hit, other}, MaxEntries: 1, Neighbours: map[string][]sdk.Record{"h": {before, after}}},
		wantIDs:    []string{"b", "h", "a"},
		wantBeside: []string{"b", "a"},
	}, {
		name:       "a neighbour that is a record of its own is shown once, as the record",
		in:         RenderInput{Records: []sdk.Record{hit, after}, Neighbours: map[string][]sdk.Record{"h": {before, after}}},
		wantIDs:    []string{"b", "h", "a"},
		wantBeside: []string{"b"},
	}, {
		name:       "a record past max entries beside a shown one is its neighbour",
		in:         RenderInput{Records: []sdk.Record{hit, other, after}, MaxEntries: 2, Neighbours: map[string][]sdk.Record{"h": {before}}},
		wantIDs:    []string{"b", "h", "a", "o"},
		wantBeside: []string{"b", "a"},
	}, {
		name:       "an injected neighbour is skipped",
		in:         RenderInput{Records: []sdk.Record{hit}, Skip: func(id string) bool { return id == "b" }, Neighbours: map[string][]sdk.Record{"h": {before, after}}},
		wantIDs:    []string{"h", "a"},
		wantBeside: []string{"a"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			tc.in.Identity, tc.in.Nonce, tc.in.Now = sdk.Identity{Realm: "default", ID: "alice"}, testNonce, testNow
			tc.in.MaxBytes, tc.in.NeighbourSpan = 20<<10, 2
			out := e.Render(tc.in)
			var beside []string
			for _, id := range out.IDs {
				if of, ok := out.NeighbourOf[id]; ok {
					if of != "h" {
						t.Fatalf("%s shown beside %s, want h", id, of)
					}
					beside = append(beside, id)
				}
			}
			if !slices.Equal(out.IDs, tc.wantIDs) || !slices.Equal(beside, tc.wantBeside) {
				t.Fatalf("ids %v neighbours %v, want %v and %v", out.IDs, beside, tc.wantIDs, tc.wantBeside)
			}
			if len(out.RecordBytes) != len(out.IDs) || out.Bytes != len(out.Text) {
				t.Fatalf("sizes %v for %v, bytes %d of text %d", out.RecordBytes, out.IDs, out.Bytes, len(out.Text))
			}
			// The observations sum to the text after the header, in order.
			sum := len(e.Header(tc.in.Identity, testNonce))
			for _, n := range out.RecordBytes {
				sum += n
			}
			if sum != out.Bytes {
				t.Fatalf("observations and header sum to %d, text is %d", sum, out.Bytes)
			}
			if n := strings.Count(out.Text, `<memhost_memory_observation neighbour_of="h"`); n != len(tc.wantBeside) {
				t.Fatalf("%d observations marked as h's neighbours, want %d:\n%s", n, len(tc.wantBeside), out.Text)
			}
			if strings.Count(out.Text, "</memhost_memory_observation>") != len(out.IDs) {
				t.Fatalf("a neighbour's text closed an observation:\n%s", out.Text)
			}
		})
	}
}

// A neighbour is shown only in the budget the records leave: it never
// crowds out a record, and one that does not fit is left out.
func TestEnvelopeNeighboursUseWhatRecordsLeave(t *testing.T) {
	e := mustEnvelope(t, nil)
	id := sdk.Identity{Realm: "default", ID: "alice"}
	hit, other := turnRec("h", 5, "the hit"), envRec("o", "other", "another hit", 0)
	long := turnRec("b", 4, strings.Repeat("word ", 300))
	base := RenderInput{Identity: id, Nonce: testNonce, Now: testNow, Records: []sdk.Record{hit, other}, NeighbourSpan: 2}
	plain := e.Render(withBudget(base, 1<<20))
	in := base
	in.Neighbours = map[string][]sdk.Record{"h": {long}}
	// Room for both records and not the neighbour.
	got := e.Render(withBudget(in, plain.Bytes+100))
	if !slices.Equal(got.IDs, []string{"h", "o"}) || len(got.NeighbourOf) != 0 || got.Text != plain.Text {
		t.Fatalf("with no room left the neighbour must be left out and the records kept: %v\n%s", got.IDs, got.Text)
	}
	got = e.Render(withBudget(in, 1<<20))
	if !slices.Equal(got.IDs, []string{"b", "h", "o"}) {
		t.Fatalf("with room the neighbour is shown: %v", got.IDs)
	}
}

func withBudget(in RenderInput, n int) RenderInput {
	in.MaxBytes = n
	return in
}

func TestTurnInjectsThreadNeighbours(t *testing.T) {
	alice := sdk.Identity{Realm: "default", ID: "alice"}
	thread := func(seq int64, body string) sdk.Record {
		r := rec("turn", body)
		r.Thread = &sdk.Thread{ID: "conv", Seq: seq}
		return r
	}
	recs := []sdk.Record{thread(1, "we met in spring"), thread(2, "the harbour walk was lovely"), thread(3, "then we had lunch"), thread(4, "unrelated later turn")}
	t.Run("default: beside the hit, and not again in the session", func(t *testing.T) {
		f := newFixture(t, nil)
		ids := f.add(recs...)
		res := f.turn(alice, "s1", "harbour walk")
		// Two places each side by default.
		if want := []string{ids[0], ids[1], ids[2], ids[3]}; !slices.Equal(res.RecordIDs, want) {
			t.Fatalf("ids %v, want %v", res.RecordIDs, want)
		}
		q := f.p.RecallQueries()
		if q[len(q)-1].Neighbours != DefaultConfig().ThreadNeighbours {
			t.Fatalf("recall asked %d neighbours", q[len(q)-1].Neighbours)
		}
		again := f.turn(alice, "s1", "lunch")
		if again.SkipReason != SkipNoRecords {
			t.Fatalf("a neighbour injected before came back: %+v", again)
		}
	})
	t.Run("off", func(t *testing.T) {
		f := newFixture(t, func(c *Config, _ *Options) { c.ThreadNeighbours = 0 })
		ids := f.add(recs...)
		if res := f.turn(alice, "s1", "harbour walk"); !slices.Equal(res.RecordIDs, ids[1:2]) {
			t.Fatalf("ids %v with neighbours off", res.RecordIDs)
		}
	})
	// The coordinator asks only a declaring provider, and host.Provider
	// drops the field for any other: this holds the two together.
	t.Run("never asked of a provider that did not declare them", func(t *testing.T) {
		caps := slices.DeleteFunc(slices.Clone(coordinatortest.AllCapabilities), func(c sdk.Capability) bool { return c == sdk.CapNeighbours })
		p := coordinatortest.NewProvider(caps...)
		p.SetNow(func() time.Time { return testNow })
		f := newFixture(t, func(_ *Config, o *Options) { o.Providers = RealmProviders{"default": p} })
		p.MustAdd("default", recs...)
		f.turn(alice, "s1", "harbour walk")
		for _, q := range p.RecallQueries() {
			if q.Neighbours != 0 {
				t.Fatalf("asked %d neighbours of a provider without the capability", q.Neighbours)
			}
		}
	})
}

// A neighbour goes with the nearest shown record of its thread, whoever's
// neighbour the provider said it was: one offered beside a record that
// did not fit is shown beside the next, and two records of one thread
// keep the thread's order around them.
func TestEnvelopeNeighboursGoWithTheNearestShown(t *testing.T) {
	e := mustEnvelope(t, nil)
	id := sdk.Identity{Realm: "default", ID: "alice"}
	big := turnRec("t10", 10, strings.Repeat("long answer ", 180))
	t9, t11, t12, t13 := turnRec("t9", 9, "nine"), turnRec("t11", 11, "eleven"), turnRec("t12", 12, "twelve"), turnRec("t13", 13, "thirteen")
	for _, tc := range []struct {
		name    string
		in      RenderInput
		wantIDs []string
		wantOf  map[string]string
	}{{
		name: "the record offered beside did not fit",
		in: RenderInput{Records: []sdk.Record{big, t12}, MaxBytes: 2300, NeighbourSpan: 1,
			Neighbours: map[string][]sdk.Record{"t10": {t11}}},
		wantIDs: []string{"t11", "t12"},
		wantOf:  map[string]string{"t11": "t12"},
	}, {
		name: "two shown records of one thread keep its order",
		in: RenderInput{Records: []sdk.Record{turnRec("t10", 10, "ten"), t11}, MaxBytes: 20 << 10, NeighbourSpan: 1,
			Neighbours: map[string][]sdk.Record{"t10": {t9}, "t11": {t12}}},
		wantIDs: []string{"t9", "t10", "t11", "t12"},
		wantOf:  map[string]string{"t9": "t10", "t12": "t11"},
	}, {
		name: "offered beside one, nearer another",
		in: RenderInput{Records: []sdk.Record{turnRec("t10", 10, "ten"), t13}, MaxBytes: 20 << 10, NeighbourSpan: 2,
			Neighbours: map[string][]sdk.Record{"t10": {t12}}},
		wantIDs: []string{"t10", "t12", "t13"},
		wantOf:  map[string]string{"t12": "t13"},
	}, {
		name: "a record in no thread or past the span is no neighbour",
		in: RenderInput{Records: []sdk.Record{turnRec("t10", 10, "ten")}, MaxBytes: 20 << 10, NeighbourSpan: 1,
			Neighbours: map[string][]sdk.Record{"t10": {envRec("x", "x", "no thread", 0), t12}}},
		wantIDs: []string{"t10"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			tc.in.Identity, tc.in.Nonce, tc.in.Now = id, testNonce, testNow
			out := e.Render(tc.in)
			if !slices.Equal(out.IDs, tc.wantIDs) {
				t.Fatalf("ids %v, want %v\n%s", out.IDs, tc.wantIDs, out.Text)
			}
			if len(out.NeighbourOf) != len(tc.wantOf) {
				t.Fatalf("neighbours %v, want %v", out.NeighbourOf, tc.wantOf)
			}
			for k, v := range tc.wantOf {
				if out.NeighbourOf[k] != v {
					t.Fatalf("neighbours %v, want %v", out.NeighbourOf, tc.wantOf)
				}
			}
			if out.Bytes > tc.in.MaxBytes {
				t.Fatalf("%d bytes over the budget %d", out.Bytes, tc.in.MaxBytes)
			}
		})
	}
}

type traceCatcher struct {
	mu     sync.Mutex
	traces []TurnTrace
}

func (c *traceCatcher) Trace(t TurnTrace) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.traces = append(c.traces, t)
}

// The trace lists each neighbour once, beside its record, in the order
// the text shows them; a candidate shown as a neighbour is not listed as
// a record too.
func TestTraceNamesNeighbours(t *testing.T) {
	catcher := &traceCatcher{}
	f := newFixture(t, func(c *Config, o *Options) { c.MaxEntries, o.Trace = 1, catcher })
	var recs []sdk.Record
	for i, body := range []string{"we met in spring", "the harbour walk was lovely", "harbour lunch after the walk"} {
		r := rec("turn", body)
		r.Thread = &sdk.Thread{ID: "conv", Seq: int64(i)}
		recs = append(recs, r)
	}
	ids := f.add(recs...)
	res := f.turn(alice, "s1", "harbour walk")
	if !slices.Equal(res.RecordIDs, ids) {
		t.Fatalf("injected %v, want %v", res.RecordIDs, ids)
	}
	catcher.mu.Lock()
	defer catcher.mu.Unlock()
	if len(catcher.traces) != 1 {
		t.Fatalf("%d traces", len(catcher.traces))
	}
	var got []string
	for _, r := range catcher.traces[0].Included {
		got = append(got, r.ID+"<"+r.NeighbourOf)
	}
	want := []string{ids[1] + "<", ids[0] + "<" + ids[1], ids[2] + "<" + ids[1]}
	if !slices.Equal(got, want) {
		t.Fatalf("included %v, want %v", got, want)
	}
}
