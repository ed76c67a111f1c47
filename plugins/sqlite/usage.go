package sqlite

import (
	"cmp"
	"container/heap"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/memhost/memhost/sdk"
	"github.com/memhost/memhost/sdk/usage"
)

// A record's uses live in the usage table (schema step 9), one narrow row
// per used record, with no index beside its key: a turn's marks then
// rewrite a few small rows rather than the records' wide ones and four
// indexes. What those indexes gave, the used records of a scope in rank
// order, is kept in memory here: each active used record's usage key under
// its realm and scope. The table is the truth; the order is rebuilt from
// it at open and follows each committed change.
//
// Supersede and forget take a row out once they commit. The working set
// still reads every candidate back from the database: it skips an expired
// row, which stays (a duplicate write can revive it), and drops one the
// latest commit shows gone (dropGone), should any other path retire rows.
type usageOrder struct {
	mu     sync.Mutex
	realms map[string]map[sdk.Scope]*scopeUses
}

// scopeUses holds a scope's used records as parallel slices, which top
// scans at memory speed, with each row key's place in them.
type scopeUses struct {
	seqs []int64
	keys []float64
	at   map[int64]int
}

// usedRow is a used record as the order knows it.
type usedRow struct {
	seq   int64
	realm string
	scope sdk.Scope
	key   float64
}

func (o *usageOrder) set(rows []usedRow) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.realms == nil {
		o.realms = map[string]map[sdk.Scope]*scopeUses{}
	}
	for _, r := range rows {
		scopes := o.realms[r.realm]
		if scopes == nil {
			scopes = map[sdk.Scope]*scopeUses{}
			o.realms[r.realm] = scopes
		}
		u := scopes[r.scope]
		if u == nil {
			u = &scopeUses{at: map[int64]int{}}
			scopes[r.scope] = u
		}
		if i, ok := u.at[r.seq]; ok {
			u.keys[i] = r.key
			continue
		}
		u.at[r.seq] = len(u.seqs)
		u.seqs, u.keys = append(u.seqs, r.seq), append(u.keys, r.key)
	}
}

func (o *usageOrder) drop(rows []usedRow) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, r := range rows {
		u := o.realms[r.realm][r.scope]
		if u == nil {
			continue
		}
		i, ok := u.at[r.seq]
		if !ok {
			continue
		}
		last := len(u.seqs) - 1
		u.seqs[i], u.keys[i] = u.seqs[last], u.keys[last]
		u.at[u.seqs[i]] = i
		u.seqs, u.keys = u.seqs[:last], u.keys[:last]
		delete(u.at, r.seq)
		if last == 0 {
			delete(o.realms[r.realm], r.scope)
		}
	}
}

// top answers, in rank order (highest key first, then newest row), the
// n used rows of realm after the first skip, in scopes or, with none, in
// every scope of the realm.
func (o *usageOrder) top(realm string, scopes []sdk.Scope, skip, n int) []usedRow {
	o.mu.Lock()
	defer o.mu.Unlock()
	byScope := o.realms[realm]
	if len(scopes) == 0 {
		scopes = slices.Collect(maps.Keys(byScope))
	}
	h := &rankHeap{}
	want := skip + n
	for _, s := range distinct(scopes) {
		u := byScope[s]
		if u == nil {
			continue
		}
		// Newest first: keys mostly grow with time, so the heap fills
		// with the best early and later rows rarely displace one.
		for i := len(u.keys) - 1; i >= 0; i-- {
			if h.Len() == want && !ranksAbove(usedRow{seq: u.seqs[i], key: u.keys[i]}, (*h)[0]) {
				continue
			}
			r := usedRow{seq: u.seqs[i], realm: realm, scope: s, key: u.keys[i]}
			if h.Len() < want {
				heap.Push(h, r)
			} else {
				(*h)[0] = r
				heap.Fix(h, 0)
			}
		}
	}
	out := slices.Clone(*h)
	slices.SortFunc(out, func(a, b usedRow) int {
		if ranksAbove(a, b) {
			return -1
		}
		return 1
	})
	if skip >= len(out) {
		return nil
	}
	return out[skip:]
}

// ranksAbove orders used rows as the working set lists them: by usage key,
// then the newer row first. Rows are distinct, so there are no ties.
func ranksAbove(a, b usedRow) bool {
	if c := cmp.Compare(a.key, b.key); c != 0 {
		return c > 0
	}
	return a.seq > b.seq
}

// rankHeap keeps the lowest-ranked row on top, so the best n remain.
type rankHeap []usedRow

func (h rankHeap) Len() int           { return len(h) }
func (h rankHeap) Less(i, j int) bool { return ranksAbove(h[j], h[i]) }
func (h rankHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *rankHeap) Push(x any)        { *h = append(*h, x.(usedRow)) }
func (h *rankHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// load reads the order of the active used records.
func (o *usageOrder) load(ctx context.Context, db querier) error {
	rows, err := db.QueryContext(ctx, `SELECT u.seq, r.realm, r.scope, u.usage_key
		FROM usage AS u JOIN records AS r ON r.seq = u.seq WHERE r.status = 'active'`)
	if err != nil {
		return fmt.Errorf("read the uses: %w", err)
	}
	defer rows.Close()
	var batch []usedRow
	for rows.Next() {
		var r usedRow
		if err := rows.Scan(&r.seq, &r.realm, &r.scope, &r.key); err != nil {
			return fmt.Errorf("read the uses: %w", err)
		}
		if batch = append(batch, r); len(batch) == 4096 {
			o.set(batch)
			batch = batch[:0]
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("read the uses: %w", err)
	}
	o.set(batch)
	return nil
}

// countUses counts each use's uses of its record at time at; ids not
// there are skipped, and uses lists each id once. The records are looked
// up by id once, then one statement per distinct count (nearly always one:
// a count of 1) adds to their usage rows, the new key computed by
// usage.KeyN inside SQLite (usageKeySQL). The order learns the new keys
// of the active ones once the transaction commits.
func (d *database) countUses(ctx context.Context, realm string, uses []sdk.Use, at time.Time) error {
	err := d.write(ctx, func(tx *sql.Tx, ch *indexChange) error {
		byID, err := d.placeRecords(ctx, tx, realm, uses)
		if err != nil {
			return err
		}
		bySeq := map[int64]placedRecord{}
		byCount := map[int64][]int64{}
		for _, u := range uses {
			if f, ok := byID[u.ID]; ok {
				bySeq[f.seq] = f
				byCount[u.Count] = append(byCount[u.Count], f.seq)
			}
		}
		for _, n := range slices.Sorted(maps.Keys(byCount)) {
			seqs, _ := json.Marshal(byCount[n]) // []int64 always marshals
			// "WHERE true" lets SQLite read the ON CONFLICT clause after a
			// SELECT as the upsert's, not as part of a join.
			rows, err := tx.QueryContext(ctx, `
				INSERT INTO usage (seq, use_count, last_used_ms, usage_key)
					SELECT value, ?2, ?1, `+usageKeySQL+`(0.0, 0, ?1, ?2) FROM json_each(?3) WHERE true
				ON CONFLICT (seq) DO UPDATE SET use_count = min(use_count + ?2, `+strconv.FormatInt(sdk.MaxRecordUseCount, 10)+`),
					usage_key = `+usageKeySQL+`(usage_key, use_count, ?1, ?2), last_used_ms = max(last_used_ms, ?1)
				RETURNING seq, usage_key`,
				at.UnixMilli(), n, string(seqs))
			if err != nil {
				return err
			}
			for rows.Next() {
				var r usedRow
				if err := rows.Scan(&r.seq, &r.key); err != nil {
					rows.Close()
					return err
				}
				if f := bySeq[r.seq]; f.active {
					r.realm, r.scope = realm, f.scope
					ch.used = append(ch.used, r)
				}
			}
			rows.Close()
			if err := rows.Err(); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("sqlite: count uses: %w", err)
	}
	return nil
}

// placedRecord is where a used record is.
type placedRecord struct {
	seq    int64
	scope  sdk.Scope
	active bool
}

// placeRecords finds the records of uses that realm holds. Inside a write
// transaction no other commit can land, so once the index has applied
// every committed change it holds exactly the active records: they are
// placed from it, and only the rest (inactive or unknown ids) are read
// from the records, whose random reads cost half a batch's time at 100k
// records. While changes wait to be applied (a snapshot holds the index),
// every id is read.
func (d *database) placeRecords(ctx context.Context, tx *sql.Tx, realm string, uses []sdk.Use) (map[string]placedRecord, error) {
	byID := make(map[string]placedRecord, len(uses))
	rest := make([]string, 0, len(uses))
	current := d.appliedGen.Load() == d.committedGen.Load()
	for _, u := range uses {
		if current {
			if scope, seq, ok := d.ix.Locate(realm, u.ID); ok {
				byID[u.ID] = placedRecord{seq: int64(seq), scope: sdk.Scope(scope), active: true}
				continue
			}
		}
		rest = append(rest, u.ID)
	}
	if len(rest) == 0 {
		return byID, nil
	}
	idList, _ := json.Marshal(rest) // []string always marshals
	rows, err := tx.QueryContext(ctx, `SELECT id, seq, scope, status = 'active' FROM records
		WHERE realm = ? AND id IN (SELECT value FROM json_each(?))`, realm, string(idList))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var id string
		var f placedRecord
		if err := rows.Scan(&id, &f.seq, &f.scope, &f.active); err != nil {
			return nil, err
		}
		byID[id] = f
	}
	return byID, rows.Err()
}

// usageKeySQL names usage.KeyN as an SQL function of the stored key, the
// use count before these uses, the time in Unix milliseconds and the
// number of uses; every connection registers it (open.go).
const usageKeySQL = "memhost_usage_key"

func usageKeyFunc(key float64, count, atMs, n int64) float64 {
	return usage.KeyN(key, count > 0, n, time.UnixMilli(atMs))
}

// testHookOrderRead, when set (tests only), runs after a working set
// reads the order in memory, before it reads the rows.
var testHookOrderRead func()

// rankedRows answers the k used rows of highest rank among the recallable
// rows of the query's scopes, highest first, read in tx. Candidates come
// from the order, best first, and are read back in rounds; those that
// left recall for good are dropped from the order afterwards.
func (d *database) rankedRows(ctx context.Context, tx *sql.Tx, q sdk.ManifestQuery, k int, now time.Time) ([]sdk.ManifestRow, error) {
	var out []sdk.ManifestRow
	var gone []usedRow
	seen := map[int64]bool{} // a concurrent use may move a row between rounds
	for skip, n := 0, k; len(out) < k; skip, n = skip+n, 2*n {
		cands := d.used.top(q.Realm, q.Scopes, skip, n)
		if testHookOrderRead != nil {
			testHookOrderRead()
		}
		full := len(cands) == n
		cands = slices.DeleteFunc(cands, func(c usedRow) bool {
			dup := seen[c.seq]
			seen[c.seq] = true
			return dup
		})
		rows, left, err := d.readRanked(ctx, tx, q.Realm, cands, now)
		if err != nil {
			return nil, err
		}
		out, gone = append(out, rows...), append(gone, left...)
		if !full {
			break
		}
	}
	d.dropGone(ctx, q.Realm, gone, now)
	return out[:min(len(out), k)], nil
}

// dropGone drops from the order the candidates a working set found gone,
// once they are gone at the latest commit too. The reader's snapshot may
// predate a commit the order already holds (a first use of a record, a
// reused seq), so its verdict alone is not final. Under wmu the order has
// followed every commit, and the write connection reads the latest one;
// while a write holds wmu the rows stay for a later read to drop.
func (d *database) dropGone(ctx context.Context, realm string, gone []usedRow, now time.Time) {
	if len(gone) == 0 || !d.wmu.TryLock() {
		return
	}
	defer d.wmu.Unlock()
	if _, left, err := d.readRanked(ctx, d.w, realm, gone, now); err == nil {
		d.used.drop(left)
	}
}

// readRanked reads cands (in rank order) as manifest rows, in that order,
// keeping the recallable ones; gone are those no longer in recall for good
// (not there, not active, in another realm or scope, without uses).
func (d *database) readRanked(ctx context.Context, tx querier, realm string, cands []usedRow, now time.Time) (rows []sdk.ManifestRow, gone []usedRow, err error) {
	seqs := make([]int64, len(cands))
	for i, c := range cands {
		seqs[i] = c.seq
	}
	list, _ := json.Marshal(seqs) // []int64 always marshals
	res, err := tx.QueryContext(ctx, `SELECT r.seq, r.realm, r.status, r.expires_ms, `+manifestColumns+`
		FROM records AS r JOIN usage AS u ON u.seq = r.seq WHERE r.seq IN (SELECT value FROM json_each(?))`, string(list))
	if err != nil {
		return nil, nil, err
	}
	defer res.Close()
	type read struct {
		row    sdk.ManifestRow
		live   bool // recallable now
		active bool
	}
	bySeq := make(map[int64]read, len(cands))
	for res.Next() {
		var seq, expires int64
		var rowRealm string
		var status sdk.Status
		r, err := scanManifestRow(res, now, &seq, &rowRealm, &status, &expires)
		if err != nil {
			return nil, nil, err
		}
		active := status == sdk.StatusActive && rowRealm == realm
		bySeq[seq] = read{row: r, active: active, live: active && (expires == 0 || expires > now.UnixMilli())}
	}
	if err := res.Err(); err != nil {
		return nil, nil, err
	}
	for _, c := range cands {
		r, ok := bySeq[c.seq]
		switch {
		case !ok || !r.active || r.row.Scope != c.scope:
			gone = append(gone, c)
		case r.live:
			rows = append(rows, r.row)
		}
	}
	return rows, gone, nil
}
