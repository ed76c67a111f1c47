package usage

import (
	"math"
	"testing"
	"time"
)

// TestKeyNFoldsRepeatedUses: n uses folded at once rank as n calls of Key
// at the same time, for a first use and for a record used before; one use
// is Key's bit for bit.
func TestKeyNFoldsRepeatedUses(t *testing.T) {
	at := time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)
	before := Key(0, false, at.Add(-2*HalfLife))
	for _, tc := range []struct {
		name string
		key  float64
		used bool
	}{{"first use", 0, false}, {"used before", before, true}} {
		for _, n := range []int64{1, 2, 3, 17, 1000} {
			want, used := tc.key, tc.used
			for range n {
				want, used = Key(want, used, at), true
			}
			got := KeyN(tc.key, tc.used, n, at)
			if n == 1 && got != want {
				t.Errorf("%s: KeyN of one use = %v, Key = %v; want the same bits", tc.name, got, want)
			}
			if r, w := Rank(got, at), Rank(want, at); math.Abs(r-w) > 1e-9*w {
				t.Errorf("%s, %d uses: rank %v, want %v", tc.name, n, r, w)
			}
		}
	}
}
