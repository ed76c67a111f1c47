package index

import (
	"container/heap"
	"slices"
)

// placeHead is how many of a thread place's least ids a realm keeps
// sorted (realm.threads): every reader asks for fewer (MaxPlaceDocs+1,
// MaxPlaceReads). The rest of a crowded place wait in a heap, so a flood
// of writes at one place costs each write O(log n), not a copy of the
// place's ids.
const placeHead = 32

// placeRest holds the ids of a crowded place past its head: a min-heap
// whose removed ids leave lazily (gone counts them).
type placeRest struct {
	ids  idHeap
	gone map[string]int
	live int
}

type idHeap []string

func (h idHeap) Len() int           { return len(h) }
func (h idHeap) Less(i, j int) bool { return h[i] < h[j] }
func (h idHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *idHeap) Push(x any)        { *h = append(*h, x.(string)) }
func (h *idHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

func (r *placeRest) push(id string) {
	heap.Push(&r.ids, id)
	r.live++
}

// popMin takes the least live id out, if any.
func (r *placeRest) popMin() (string, bool) {
	for len(r.ids) > 0 {
		id := heap.Pop(&r.ids).(string)
		if r.gone[id] > 0 {
			if r.gone[id]--; r.gone[id] == 0 {
				delete(r.gone, id)
			}
			continue
		}
		r.live--
		return id, true
	}
	return "", false
}

// remove takes id, which the rest holds, out; the heap sheds it later,
// or at once when removed ids outnumber the live ones.
func (r *placeRest) remove(id string) {
	if r.gone == nil {
		r.gone = map[string]int{}
	}
	r.gone[id]++
	r.live--
	if len(r.ids) > 2*r.live+placeHead {
		kept := r.ids[:0]
		for _, x := range r.ids {
			if r.gone[x] > 0 {
				r.gone[x]--
				continue
			}
			kept = append(kept, x)
		}
		clear(r.ids[len(kept):])
		r.ids, r.gone = kept, nil
		heap.Init(&r.ids)
	}
}

// placeAdd puts id at place k, keeping the place's placeHead least ids
// sorted in rm.threads[k] and the rest in rm.crowds[k].
func (rm *realm) placeAdd(k threadKey, id string) {
	ids := rm.threads[k]
	at, _ := slices.BinarySearch(ids, id)
	switch {
	case len(ids) < placeHead:
		rm.threads[k] = slices.Insert(ids, at, id)
	case at == len(ids):
		rm.crowd(k).push(id)
	default:
		// id joins the head and the head's greatest, still less than
		// every id of the rest, moves to the rest.
		last := ids[len(ids)-1]
		copy(ids[at+1:], ids[at:len(ids)-1])
		ids[at] = id
		rm.crowd(k).push(last)
	}
}

// placeRemove takes id, which place k holds, out of it; the rest's least
// id, if any, joins the head.
func (rm *realm) placeRemove(k threadKey, id string) {
	ids := rm.threads[k]
	rest := rm.crowds[k]
	if i, found := slices.BinarySearch(ids, id); found {
		ids = slices.Delete(ids, i, i+1)
		if rest != nil {
			if next, ok := rest.popMin(); ok {
				ids = append(ids, next)
			}
		}
	} else if rest != nil {
		rest.remove(id)
	}
	if rest != nil && rest.live == 0 {
		delete(rm.crowds, k)
	}
	if len(ids) == 0 {
		delete(rm.threads, k)
	} else {
		rm.threads[k] = ids
	}
}

// crowd answers place k's rest, made when it has none yet.
func (rm *realm) crowd(k threadKey) *placeRest {
	r := rm.crowds[k]
	if r == nil {
		r = &placeRest{}
		if rm.crowds == nil {
			rm.crowds = map[threadKey]*placeRest{}
		}
		rm.crowds[k] = r
	}
	return r
}
