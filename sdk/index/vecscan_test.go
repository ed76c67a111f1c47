package index

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestDotsI8: the assembly (every kernel this processor runs) answers the
// Go loop's sums, at the extremes of both types too.
func TestDotsI8(t *testing.T) {
	for name, kernel := range dotsI8Kernels() {
		t.Run(name, func(t *testing.T) { testDotsI8(t, kernel) })
	}
	// An empty query (no kernel takes it) scores every copy 0.
	out := []int32{7, 7}
	dotsI8(nil, nil, out)
	if out[0] != 0 || out[1] != 0 {
		t.Fatalf("an empty query's dots = %v, want zeros", out)
	}
}

func testDotsI8(t *testing.T, dotsI8 func([]int8, []int16, []int32)) {
	rng := rand.New(rand.NewPCG(5, 6))
	for _, pad := range []int{16, 32, 112, 384, 1024} {
		for n := range 10 {
			codes, q := make([]int8, n*pad), make([]int16, pad)
			for i := range codes {
				codes[i] = int8(rng.IntN(255) - 127)
			}
			for i := range q {
				q[i] = int16(rng.IntN(65535) - 32767)
			}
			if n == 3 { // the largest magnitudes, either sign
				for i := range pad {
					codes[2*pad+i], q[i] = -127, 16383
				}
			}
			got, want := make([]int32, n), make([]int32, n)
			dotsI8(codes, q, got)
			dotsI8Go(codes, q, want)
			if !slices.Equal(got, want) {
				t.Fatalf("pad %d, %d copies: %v, want %v", pad, n, got, want)
			}
		}
	}
}

// TestScanMatchesBruteForce: the exact path's top under a query's
// filters (scopes, tags, expiry, excluded ids) is brute force's over
// every vector, hits and scores alike, through puts, re-puts that move a
// document to another scope, deletes, dropped and replaced vectors,
// documents sharing one vector (ties at the cut), with and without a
// graph beside it; and it scores fewer vectors than pass the filters.
func TestScanMatchesBruteForce(t *testing.T) {
	if testing.Short() {
		t.Skip("scans against brute force over generated vectors, single-goroutine; the plain run checks it")
	}
	for _, tc := range []struct {
		name      string
		dims      int
		threshold int
	}{
		{"no graph", 24, 1 << 30},
		{"a graph, scopes listing fewer than the threshold", 20, 2000},
		{"100 dimensions", 100, 1 << 30},
	} {
		t.Run(tc.name, func(t *testing.T) {
			withThreshold(t, tc.threshold)
			rng := rand.New(rand.NewPCG(uint64(tc.dims), 8))
			vec := func() []float32 {
				v := make([]float32, tc.dims)
				for i := range v {
					v[i] = float32(rng.NormFloat64())
				}
				return v
			}
			shared := vec()
			ix, _ := New(Options{Weights: []float64{1}})
			scopes := []string{"realm", "identity:a", "identity:b", "identity:c", "identity:d"}
			put := func(i int) {
				id := fmt.Sprintf("d%05d", i%3000) // ids past 3000 are re-puts
				d := Doc{ID: id, Realm: "r", Scope: scopes[rng.IntN(len(scopes))], Tags: []string{fmt.Sprint("t", rng.IntN(3))}, Fields: [][]string{{"w"}}}
				if rng.IntN(9) == 0 {
					d.ExpiresMs = 500
				}
				if err := ix.Put(d); err != nil {
					t.Fatal(err)
				}
				if i >= 3000 && rng.IntN(2) == 0 {
					return // a re-put keeps its vector
				}
				v := vec()
				if rng.IntN(10) == 0 {
					v = shared
				}
				if _, err := ix.PutVector("r", id, "m", v); err != nil {
					t.Fatal(err)
				}
			}
			for i := range 4200 {
				put(i)
				switch id := fmt.Sprintf("d%05d", rng.IntN(3000)); {
				case i%17 == 0:
					ix.Delete("r", id)
				case i%23 == 0:
					ix.DeleteVector("r", id)
				}
			}
			if tc.threshold < 1<<30 && graphOf(ix) == nil {
				t.Fatal("no graph")
			}
			check := func(queries int) {
				t.Helper()
				checkVectorLists(t, ix)
				scanned, passing := 0, 0
				for k := range queries {
					q := Query{Realm: "r", Model: "m", Vector: vec(), NowMs: 1000, Limit: 10}
					if k%5 == 0 {
						q.Vector = shared
					}
					switch k % 4 {
					case 0:
						q.Scopes = []string{scopes[1+k%4], "realm"}
					case 1:
						q.Scopes, q.Tags = []string{scopes[1+k%4]}, []string{"t1"}
					case 2:
						q.Scopes, q.ExcludeTags = []string{"identity:b", "realm"}, []string{"t0"}
					case 3:
						q.Scopes = []string{"identity:c"}
						for range 30 {
							q.ExcludeIDs = append(q.ExcludeIDs, fmt.Sprintf("d%05d", rng.IntN(3000)))
						}
					}
					depth := []int{1, 10, FusionDepth, 700}[k%4]
					got, want, n, pass := scanAndBrute(ix, q, depth)
					if !slices.Equal(got, want) {
						t.Fatalf("query %d (depth %d):\n got %v\nwant %v", k, depth, got, want)
					}
					scanned, passing = scanned+n, passing+pass
				}
				if scanned*2 > passing {
					t.Errorf("the scan scored %d vectors of %d passing the filters", scanned, passing)
				}
				t.Logf("scored %d of %d passing vectors", scanned, passing)
			}
			check(300)
			// Deleting most documents rebuilds the set: its lists are made
			// again from the live vectors and their documents' scopes.
			before := len(ix.realms["r"].models["m"].owner)
			for i := range 3000 {
				if i%4 != 0 {
					ix.Delete("r", fmt.Sprintf("d%05d", i))
				}
			}
			if s := ix.realms["r"].models["m"]; len(s.owner) >= before/2 {
				t.Fatalf("not rebuilt: %d slots (%d before) for %d vectors", len(s.owner), before, s.n)
			}
			check(100)
		})
	}
}

// checkVectorLists fails t unless every list entry of every vector set
// in ix names its slot's document when it is the entry that counts, and
// no document otherwise: a scan trusts the entry's number without
// looking the slot up.
func checkVectorLists(t *testing.T, ix *Index) {
	t.Helper()
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	for name, rm := range ix.realms {
		for model, s := range rm.models {
			for id, l := range s.byScope {
				for e, slot := range l.slots {
					want := uint32(noDoc)
					if s.listed[slot] == uint32(id) && s.entry[slot] == uint32(e) {
						want = s.owner[slot]
					}
					if l.nos[e] != want {
						t.Fatalf("realm %q, model %q, scope %d, entry %d (slot %d): document %d, want %d", name, model, id, e, slot, l.nos[e], want)
					}
				}
			}
		}
	}
}

// scanAndBrute answers q's vector top of depth from semanticTop, which
// must take its exact path, and from every vector passing q's filters,
// with how many documents each scored.
func scanAndBrute(ix *Index, q Query, depth int) (got, want []Hit, scanned, passing int) {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	rm := ix.realms[q.Realm]
	ms := rm.models[q.Model]
	qv, _ := normalize(q.Vector)
	f, ok := newFilter(rm, &q)
	if !ok {
		panic("nothing passes")
	}
	excluded := map[string]bool{}
	for _, id := range q.ExcludeIDs {
		excluded[id] = true
	}
	sc := ix.getScratch(len(rm.ids))
	defer ix.putScratch(sc)
	docs, cos, approx := semanticTop(rm, ms, qv, &f, excluded, sc, depth)
	if approx {
		panic("the graph answered")
	}
	// Each document once: a list entry left behind by a move to another
	// scope the query reads too must not count.
	if distinct := len(slices.Compact(slices.Sorted(slices.Values(docs)))); distinct != len(docs) {
		panic(fmt.Sprintf("the scan answered %d documents, %d of them distinct", len(docs), distinct))
	}
	got = top(rm, sc, docs, cos, depth)
	var all []uint32
	var allCos []float64
	for no, dv := range rm.vec {
		if dv != nil && dv.set == ms && f.pass(uint32(no)) && !excluded[rm.ids[no]] {
			all, allCos = append(all, uint32(no)), append(allCos, dotGo(qv, dv.v))
		}
	}
	return got, top(rm, sc, all, allCos, depth), len(docs), len(all)
}

// TestScanBoundsHold: a cosine as dot computes it lies within the bounds
// the scan takes from a vector's int8 copy, also for vectors whose every
// component rounds by almost half a step and queries leaning the way of
// every rounding (where the bound is nearly reached).
func TestScanBoundsHold(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	closest := math.Inf(1) // the least slack seen, relative to the bound
	for _, dims := range []int{1, 3, 16, 100, 384, 1000} {
		for k := range 200 {
			w := make([]float32, dims)
			for i := range w {
				w[i] = float32(rng.IntN(253)-126) + 0.4999
				if rng.IntN(2) == 0 {
					w[i] = -w[i]
				}
			}
			w[rng.IntN(dims)] = 127
			if k%2 == 1 { // an ordinary vector
				for i := range w {
					w[i] = float32(rng.NormFloat64())
				}
			}
			v, _ := normalize(w)
			var l scopeList
			l.add(0, v)
			q := make([]float32, dims)
			for i := range q {
				err := float64(v[i]) - float64(l.scales[0])*float64(l.codes[i])
				q[i] = float32(math.Copysign(math.Abs(float64(v[i]))+0.01, err))
				if k%4 == 2 {
					q[i] = float32(rng.NormFloat64())
				}
			}
			qv, ok := normalize(q)
			if !ok {
				continue
			}
			var ss scanScratch
			bq := ss.quantise(qv)
			sums := make([]int32, 1)
			dotsI8(l.codes, bq.d, sums)
			est, err := bq.bounds(l.scales[0], sums[0])
			cos := dot(qv, v)
			if cos < est-err || cos > est+err {
				t.Fatalf("%d dimensions, vector %d: cosine %v outside %v ± %v", dims, k, cos, est, err)
			}
			closest = min(closest, (err-math.Abs(cos-est))/err)
		}
	}
	// The adversarial vectors come near the bound: it is not loose
	// enough to hide a bound computed too small.
	if closest > 0.05 {
		t.Errorf("the least slack was %.3f of the bound", closest)
	}
	t.Logf("least slack %.4f of the bound", closest)
}
