package sdk

import (
	"cmp"
	"context"
	"math"
	"slices"
	"time"

	"github.com/memhost/memhost/sdk/internal/wire"
)

// MaxPlaceRecords bounds the records of one thread place shown as
// neighbours; the first by id are shown.
const MaxPlaceRecords = 4

// MaxPlaceReads bounds the records of one thread place a ThreadReader
// answers: the place's active records first by id (byte order). Anyone
// who may write to a scope can crowd one of its places; the bound keeps
// every recall beside it a bounded read. It leaves room for records the
// recall cannot show (expired, excluded, of other tags or times) ahead of
// the MaxPlaceRecords it shows.
const MaxPlaceReads = 16

// AttachNeighbours sets each threaded hit's Neighbours to the records
// beside it in its scope and thread, up to q.Neighbours places before and
// after its own, read from r in one call. A neighbour is shown only where
// the recall itself could show it: active and unexpired at now, in the
// hit's realm and scope, passing q's tags and time window, not among
// q.ExcludeIDs. Each record is attached once, to the first hit it
// neighbours, and each hit's neighbours are in thread order. Another hit
// may be a hit's neighbour: the host may show fewer hits than it asked
// for (a budget, a re-ranking), and a hit it drops is then still shown
// beside the one it keeps. Neighbours go to the hits in rank order while
// the answer still fits one plugin message: a neighbour that would not fit
// is left out (without the bound, a recall of large records in crowded
// threads would fail whole, over the message limit). When the read fails
// the hits keep no neighbours and the error is answered. Serve calls it
// for a provider that declared CapNeighbours.
func AttachNeighbours(ctx context.Context, r ThreadReader, q RecallQuery, hits []Hit, now time.Time) error {
	for i := range hits {
		hits[i].Neighbours = nil // only what is attached here is answered
	}
	span := min(q.Neighbours, MaxNeighbours)
	if span <= 0 {
		return nil
	}
	var places []ThreadPlace
	asked := map[ThreadPlace]bool{}
	for i := range hits {
		t := hits[i].Record.Thread
		if t == nil {
			continue
		}
		for d := -int64(span); d <= int64(span); d++ {
			// Seqs run from 0 to the top of int64: no place past either end.
			if d == 0 || (d < 0 && t.Seq < -d) || (d > 0 && t.Seq > math.MaxInt64-d) {
				continue
			}
			p := ThreadPlace{Scope: hits[i].Record.Scope, Thread: t.ID, Seq: t.Seq + d}
			if !asked[p] {
				asked[p] = true
				places = append(places, p)
			}
		}
	}
	if len(places) == 0 {
		return nil
	}
	recs, err := r.ReadThread(ctx, q.Realm, places)
	if err != nil {
		return err // the hits hold none: they were cleared above
	}
	shown := make(map[string]bool, len(q.ExcludeIDs))
	for _, id := range q.ExcludeIDs {
		shown[id] = true
	}
	recs = slices.DeleteFunc(recs, func(r Record) bool {
		return r.Realm != q.Realm || r.Thread == nil || r.Thread.Seq < 0 || r.Status != StatusActive
	})
	slices.SortFunc(recs, func(a, b Record) int {
		return cmp.Or(cmp.Compare(a.Thread.ID, b.Thread.ID), cmp.Compare(a.Scope, b.Scope),
			cmp.Compare(a.Thread.Seq, b.Thread.Seq), cmp.Compare(a.ID, b.ID))
	})
	// A place's first MaxPlaceReads, as a ThreadReader answers them (one
	// that answers more is held to it, so every provider shows the same).
	recs = keepPerPlace(recs, MaxPlaceReads)
	// What the recall could not show goes next, so a place's cap counts
	// only records it could.
	recs = slices.DeleteFunc(recs, func(r Record) bool {
		return shown[r.ID] || !r.Recallable(now) || !q.InWindow(r.When()) || !passesTags(&r, q.Tags, q.ExcludeTags)
	})
	// A crowded place shows its first MaxPlaceRecords, as thread context
	// ranks with only the first few of one.
	recs = keepPerPlace(recs, MaxPlaceRecords)
	room := wire.MaxMessageBytes
	for i := range hits {
		room -= messageBytes(&hits[i].Record)
	}
	for i := range hits {
		h := &hits[i]
		t := h.Record.Thread
		if t == nil {
			continue
		}
		for _, n := range recs {
			d, near := n.ThreadDistance(&h.Record)
			if !near || shown[n.ID] || t.Seq < 0 || d == 0 || d > uint64(span) {
				continue
			}
			size := messageBytes(&n)
			if size > room {
				continue
			}
			room -= size
			shown[n.ID] = true
			h.Neighbours = append(h.Neighbours, n)
		}
	}
	return nil
}

// keepPerPlace keeps the first n records of each place of recs, which are
// sorted by place.
func keepPerPlace(recs []Record, n int) []Record {
	perPlace := map[ThreadPlace]int{}
	return slices.DeleteFunc(recs, func(r Record) bool {
		p := ThreadPlace{Scope: r.Scope, Thread: r.Thread.ID, Seq: r.Thread.Seq}
		perPlace[p]++
		return perPlace[p] > n
	})
}

// messageBytes bounds r's size in a plugin message, as
// wire.MaxMessageBytes counts a record.
func messageBytes(r *Record) int {
	n := len(r.Title) + len(r.Description) + len(r.Body) + wire.RecordFramingBytes
	for _, t := range r.Tags {
		n += len(t)
	}
	return n
}

// passesTags reports whether r carries every tag of want and none of
// unwanted (case-folded, as recall compares them).
func passesTags(r *Record, want, unwanted []string) bool {
	for _, t := range want {
		if !r.HasTag(t) {
			return false
		}
	}
	for _, t := range unwanted {
		if r.HasTag(t) {
			return false
		}
	}
	return true
}
