package coordinator

import (
	"fmt"
	"slices"
	"testing"

	"github.com/memhost/memhost/sdk"
)

// TestLongSessionSelectorSkipsOldInjections: a session that injected more
// records than one plugin call may name as suppressed (sdk.MaxBatch) sends
// a selector its newest ones only; rows of the older ones are not offered
// to it either, or it picks records the host then drops and the turn
// injects nothing (selector_empty) although fresh records match.
func TestLongSessionSelectorSkipsOldInjections(t *testing.T) {
	sel := &recordingSelector{pick: func(req sdk.SelectRequest) (sdk.Selection, error) {
		var out []string
		for _, r := range req.Rows {
			if len(out) < req.Max && !slices.Contains(req.SuppressedIDs, r.ID) {
				out = append(out, r.ID)
			}
		}
		return sdk.Selection{IDs: out, Coverage: sdk.CoverageSufficient}, nil
	}}
	f := newFixture(t, func(c *Config, o *Options) {
		o.Selector = sel
		c.MaxEntries, c.SelectorFallback = 100, false
		c.Budgets.TurnBytes, c.Budgets.SessionBytes = 1<<20, 1<<30
	})
	recs := make([]sdk.Record, 1400)
	for i := range recs {
		recs[i] = rec("fig", fmt.Sprintf("fig number %d", i))
	}
	f.add(recs...)
	seen := map[string]bool{}
	for turn := 0; len(seen) <= 1200; turn++ {
		res := f.turn(alice, "long", "fig")
		if len(res.RecordIDs) == 0 {
			t.Fatalf("turn %d, after %d records injected: %q, %d fresh records match", turn, len(seen), res.SkipReason, len(recs)-len(seen))
		}
		for _, id := range res.RecordIDs {
			if seen[id] {
				t.Fatalf("turn %d: %s injected twice", turn, id)
			}
			seen[id] = true
		}
	}
}
