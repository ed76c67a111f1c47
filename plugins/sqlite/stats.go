package sqlite

import (
	"context"
	"database/sql"
	"slices"
	"sync"

	"github.com/memhost/memhost/sdk"
)

// maxCachedTerms bounds the document-frequency cache; past it the cache
// starts over (a cold lookup costs one vocabulary read).
const maxCachedTerms = 1 << 17

// maxExactUpdate is the most index changes a commit folds into the cache
// one by one; a bigger commit (a bulk load) empties the cache instead,
// which is cheaper than counting every term of every record.
const maxExactUpdate = 64

// dfCache remembers how many indexed records hold each term a budgeted
// recall has asked about (exact recall needs no frequencies). A lookup in
// records_vocab reads the term's whole doclist, so common terms are worth
// remembering; writes keep cached counts exact.
//
// Readers fill the cache from their own snapshot, which may predate a
// commit whose increments they would then miss. A generation counter,
// odd while a write commits, makes such fills no-ops: a fill is kept only if
// no commit began or ended since the reader looked, before its snapshot.
type dfCache struct {
	mu    sync.Mutex
	gen   uint64
	terms map[string]int64
}

func newDFCache() *dfCache { return &dfCache{terms: map[string]int64{}} }

// lookup answers the cached counts of terms (ok false for a miss) and the
// generation to hand back to fill.
func (c *dfCache) lookup(terms []string, dfs []int64, ok []bool) uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, t := range terms {
		dfs[i], ok[i] = c.terms[t]
	}
	return c.gen
}

// fill stores counts read at generation gen, unless a write has begun or
// committed since.
func (c *dfCache) fill(gen uint64, terms []string, dfs []int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if gen != c.gen || gen%2 == 1 {
		return
	}
	if len(c.terms)+len(terms) > maxCachedTerms {
		clear(c.terms)
	}
	for i, t := range terms {
		c.terms[t] = dfs[i]
	}
}

// beginCommit marks a write as committing.
func (c *dfCache) beginCommit() {
	c.mu.Lock()
	c.gen++
	c.mu.Unlock()
}

// endCommit applies the index changes of a committed write (none when the
// commit failed) and ends the commit.
func (c *dfCache) endCommit(changes []docChange) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen++
	if len(changes) > maxExactUpdate {
		clear(c.terms)
		return
	}
	var counted []string // the cached terms already counted for this doc
	for _, ch := range changes {
		counted = counted[:0]
		for _, col := range ch.doc.colTerms {
			for _, t := range col {
				n, ok := c.terms[t]
				if ok && !slices.Contains(counted, t) {
					counted = append(counted, t)
					c.terms[t] = n + ch.sign
				}
			}
		}
	}
}

// scopeKey names one scope of one realm.
type scopeKey struct {
	realm string
	scope sdk.Scope
}

// scopeCounts counts the indexed (active) records of each scope, so recall
// can tell how much of the index a query's realm and scopes let through.
// It is an estimate for planning, exact while writes are quiet.
type scopeCounts struct {
	mu      sync.Mutex
	byScope map[scopeKey]int64
	byRealm map[string]int64
	total   int64
}

// loadScopeCounts reads the counts kept in scope_totals.
func loadScopeCounts(ctx context.Context, db *sql.DB) (*scopeCounts, error) {
	rows, err := db.QueryContext(ctx, "SELECT realm, scope, docs FROM scope_totals WHERE docs > 0")
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	c := &scopeCounts{byScope: map[scopeKey]int64{}, byRealm: map[string]int64{}}
	for rows.Next() {
		var k scopeKey
		var n int64
		if err := rows.Scan(&k.realm, &k.scope, &n); err != nil {
			return nil, err
		}
		c.add(k, n)
	}
	return c, rows.Err()
}

func (c *scopeCounts) add(k scopeKey, n int64) {
	c.byScope[k] += n
	c.byRealm[k.realm] += n
	c.total += n
	if c.byScope[k] <= 0 {
		delete(c.byScope, k)
	}
	if c.byRealm[k.realm] <= 0 {
		delete(c.byRealm, k.realm)
	}
}

func (c *scopeCounts) apply(delta map[scopeKey]int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, n := range delta {
		c.add(k, n)
	}
}

// share answers the fraction of the index in realm's scopes (all of the
// realm's when scopes is empty).
func (c *scopeCounts) share(realm string, scopes []sdk.Scope) float64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.total <= 0 {
		return 0
	}
	in := c.byRealm[realm]
	if len(scopes) > 0 {
		in = 0
		for _, s := range distinct(scopes) {
			in += c.byScope[scopeKey{realm, s}]
		}
	}
	return float64(in) / float64(c.total)
}
