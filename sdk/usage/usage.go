// Package usage is the usage-rank arithmetic providers share, so a working
// set's rank means the same in every provider: a record's key folds in each
// use, decayed by age with a fixed half-life.
package usage

import (
	"cmp"
	"math"
	"slices"
	"time"

	"github.com/memhost/memhost/sdk"
)

// HalfLife is how fast past uses fade from a record's usage rank: a
// use one half-life ago counts 1/2. Providers share it (and the functions
// below) so that a working set's rank means the same in every provider.
const HalfLife = 30 * 24 * time.Hour

// Key folds one more use at time at into a record's usage key, which
// is log2 of the sum over its uses of 2^(t/halfLife). Then
// 2^(key - now/halfLife) is the use count with each use decayed by its
// age, and ordering by key orders by that decayed count at every instant,
// so an index on the key can serve a working set. used is false for a
// record's first use.
func Key(key float64, used bool, at time.Time) float64 { return KeyN(key, used, 1, at) }

// KeyN folds n uses at time at into key at once, as n calls of Key would
// (to rounding): one write for a record a batch used n times.
func KeyN(key float64, used bool, n int64, at time.Time) float64 {
	x := float64(at.UnixMilli()) / float64(HalfLife.Milliseconds())
	if n > 1 {
		x += math.Log2(float64(n))
	}
	if !used {
		return x
	}
	hi, lo := max(key, x), min(key, x)
	return hi + math.Log2(1+math.Exp2(lo-hi))
}

// Rank is the decayed use count at now of a used record with key;
// always > 0, so a used record never reads as unranked (rank 0).
func Rank(key float64, now time.Time) float64 {
	r := math.Exp2(key - float64(now.UnixMilli())/float64(HalfLife.Milliseconds()))
	return max(r, math.SmallestNonzeroFloat64)
}

// MaxWorkingSetK caps a working set's k, so 2k stays a sane number of rows.
const MaxWorkingSetK = 50_000

// WorkingSet assembles the working-set tier of a manifest from a
// provider's rows, the same in every provider: the k used rows (Rank > 0)
// of highest rank, highest first, then the newest never-used rows, newest
// first, filling the list up to 2k rows. used may hold more than k rows
// (each scope's best, say) and is sorted in place; unused is asked for the
// n rows wanted (at least k; never when k is 0). Sorts are stable, so rows
// of equal rank or time keep the order the provider read them in.
func WorkingSet(k int, used []sdk.ManifestRow, unused func(n int) ([]sdk.ManifestRow, error)) ([]sdk.ManifestRow, error) {
	k = min(k, MaxWorkingSetK)
	slices.SortStableFunc(used, func(a, b sdk.ManifestRow) int { return cmp.Compare(b.Rank, a.Rank) })
	rows := used[:min(len(used), k)]
	room := 2*k - len(rows)
	if room <= 0 {
		return rows, nil
	}
	fresh, err := unused(room)
	if err != nil {
		return nil, err
	}
	slices.SortStableFunc(fresh, func(a, b sdk.ManifestRow) int { return b.UpdatedAt.Compare(a.UpdatedAt) })
	return append(rows, fresh[:min(len(fresh), room)]...), nil
}
