package bleve

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/memhost/memhost/sdk"
)

// TestCrowdedPlaceContext: a thread place crowded past the neighbour
// search's page (4 per place asked for, plus 64) still gives its
// neighbours the context of its least ids, as sdk/index does, whatever
// order those were written in.
func TestCrowdedPlaceContext(t *testing.T) {
	at := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	mk := func(id, body string, seq int64) sdk.Record {
		r := rec("realm", "", body)
		r.ID, r.Realm, r.Status, r.Trust, r.CreatedAt, r.UpdatedAt = id, realm, sdk.StatusActive, sdk.TrustAgentObserved, at, at
		r.Thread = &sdk.Thread{ID: "conv", Seq: seq}
		return r
	}
	// 200 records at seq 0 in four batches of 50; the batch holding the
	// least ids is written second or third.
	for _, least := range []int{1, 2} {
		t.Run(fmt.Sprintf("least ids in batch %d", least), func(t *testing.T) {
			p := newProvider(t, "")
			order := []int{0, 1, 2, 3}
			order[0], order[least] = order[least], order[0]
			for _, b := range order {
				var recs []sdk.Record
				for i := b * 50; i < (b+1)*50; i++ {
					body := fmt.Sprintf("filler %d", i)
					if i == 0 {
						body = "zanzibar"
					}
					recs = append(recs, mk(fmt.Sprintf("r-%03d", i), body, 0))
				}
				if _, err := p.Import(ctx, realm, recs); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := p.Import(ctx, realm, []sdk.Record{mk("s-1", "unrelated turn", 1)}); err != nil {
				t.Fatal(err)
			}
			got := recallIDs(t, p, sdk.RecallQuery{Query: "zanzibar", Limit: 10})
			if !slices.Contains(got, "s-1") {
				t.Fatalf("recall of the least id's word = %v, want its neighbour s-1 among them", got)
			}
		})
	}
}

// TestPushedOutOfAPlace: a record written with a lesser id than a crowded
// place's participants takes part in its stead; the one it pushes out
// loses its context, as in sdk/index.
func TestPushedOutOfAPlace(t *testing.T) {
	p := newProvider(t, "")
	turn := func(id, body string, seq int64) sdk.Record {
		r := rec("realm", "", body)
		r.ID, r.Thread = id, &sdk.Thread{ID: "conv", Seq: seq}
		return r
	}
	recs := []sdk.Record{turn("s-0", "zanzibar", 0)}
	for i := 2; i < 2+4; i++ {
		recs = append(recs, turn(fmt.Sprintf("r-%d", i), fmt.Sprintf("filler %d", i), 1))
	}
	remember(t, p, realm, recs...)
	if got := recallIDs(t, p, sdk.RecallQuery{Query: "zanzibar", Limit: 10}); !slices.Contains(got, "r-5") {
		t.Fatalf("before: recall = %v, want r-5 among them (a participant of seq 1, beside zanzibar)", got)
	}
	remember(t, p, realm, turn("r-1", "filler 1", 1))
	got := recallIDs(t, p, sdk.RecallQuery{Query: "zanzibar", Limit: 10})
	if slices.Contains(got, "r-5") || !slices.Contains(got, "r-1") {
		t.Fatalf("after r-1 pushed r-5 out of the place's participants: recall = %v, want r-1 and not r-5", got)
	}
	// Two newcomers in one batch push two out.
	remember(t, p, realm, turn("r-0", "filler 0", 1), turn("r-00", "filler 00", 1))
	got = recallIDs(t, p, sdk.RecallQuery{Query: "zanzibar", Limit: 10})
	if want := []string{"r-0", "r-00", "r-1", "r-2", "s-0"}; !slices.Equal(slices.Sorted(slices.Values(got)), want) {
		t.Fatalf("after r-0 and r-00 pushed r-3 and r-4 out in one batch: recall = %v, want %v", got, want)
	}
}
