package coordinator

import (
	"math"

	"github.com/memhost/memhost/sdk"
)

// threadDecay is what each pick already taken from a thread multiplies
// the next candidate of that thread by when a turn's injection is chosen
// (spreadThreads). Chosen with the candidate pool on the LongMemEval-S
// and LoCoMo development splits (docs/benchmarks.md).
const threadDecay = 0.5

// spreadThreads reorders recall hits, best first, so an injection covers
// the threads that score well instead of crowding into one: greedily, the
// next pick is the hit whose score, times threadDecay for every pick
// already taken from its thread, is highest (ties keep recall's order).
// This is maximal marginal relevance with a thread as the unit of
// redundancy; a thread is its id within its record's scope (an id names
// nothing across scopes). Hits outside any thread are never discounted.
// It is deterministic, and a ranking within one thread is left as it was.
func spreadThreads(hits []sdk.Hit) []sdk.Hit {
	if len(hits) < 3 {
		return hits
	}
	rel := relevance(hits)
	out := make([]sdk.Hit, 0, len(hits))
	taken := make([]bool, len(hits))
	type thread struct{ scope, id string }
	picks := map[thread]int{}
	for range hits {
		best, bestScore := -1, 0.0
		for i := range hits {
			if taken[i] {
				continue
			}
			s := rel[i]
			if t := hits[i].Record.Thread; t != nil {
				s *= math.Pow(threadDecay, float64(picks[thread{string(hits[i].Record.Scope), t.ID}]))
			}
			if best < 0 || s > bestScore {
				best, bestScore = i, s
			}
		}
		taken[best] = true
		if t := hits[best].Record.Thread; t != nil {
			picks[thread{string(hits[best].Record.Scope), t.ID}]++
		}
		out = append(out, hits[best])
	}
	return out
}

// relevance answers the hits' scores when every one is a positive finite
// number (the first-party providers' BM25); otherwise, as a plugin's
// scores need not be, a relevance falling with rank, 1/(rank+1).
func relevance(hits []sdk.Hit) []float64 {
	rel := make([]float64, len(hits))
	for i, h := range hits {
		if !(h.Score > 0) || math.IsInf(h.Score, 0) {
			for j := range rel {
				rel[j] = 1 / float64(j+1)
			}
			return rel
		}
		rel[i] = h.Score
	}
	return rel
}
