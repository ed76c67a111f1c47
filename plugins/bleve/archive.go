package bleve

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/memhost/memhost/sdk"
	"github.com/memhost/memhost/sdk/usage"
)

var (
	_ sdk.Archiver  = (*Provider)(nil)
	_ sdk.Reindexer = (*Provider)(nil)
)

// Export answers a page of the realm's records, of every status, in id
// order (sdk.Archiver). The catalog lists every id, so the page's ids are
// picked there and their records fetched from the index by id.
func (p *Provider) Export(ctx context.Context, realm, after string, limit int) (sdk.ExportPage, error) {
	done, err := p.begin(realm)
	if err != nil {
		return sdk.ExportPage{}, err
	}
	defer done()
	ri, err := p.realm(realm, false)
	if err != nil || ri == nil {
		return sdk.ExportPage{}, err
	}
	if err := ri.waitCatalog(ctx, "export"); err != nil {
		return sdk.ExportPage{}, err
	}
	ri.cat.mu.RLock()
	ids := make([]string, 0, len(ri.cat.pos))
	for id := range ri.cat.pos {
		if id > after {
			ids = append(ids, id)
		}
	}
	ri.cat.mu.RUnlock()
	slices.Sort(ids)
	var page sdk.ExportPage
	if len(ids) > limit {
		ids = ids[:limit]
		page.Next = ids[limit-1]
	}
	found, err := ri.lookup(ctx, ids)
	if err != nil {
		return sdk.ExportPage{}, err
	}
	for _, id := range ids {
		// An id forgotten between the catalog scan and the fetch is gone.
		if r, ok := found[id]; ok {
			page.Records = append(page.Records, r)
		}
	}
	return page, nil
}

// Import stores full records as given in one durable batch (sdk.Archiver).
// A stored id is skipped, unless the record retires it (sdk.ImportRetires:
// it is then moved to the record's status, and counted imported), and so
// is an active or quarantined record whose content its scope already holds
// live.
func (p *Provider) Import(ctx context.Context, realm string, records []sdk.Record) (sdk.ImportResult, error) {
	done, err := p.begin(realm)
	if err != nil {
		return sdk.ImportResult{}, err
	}
	defer done()
	recs := make([]sdk.Record, len(records))
	for i := range records {
		r := records[i]
		r.Tags = slices.Clone(r.Tags)
		if err := r.PrepareImport(realm); err != nil {
			return sdk.ImportResult{}, fmt.Errorf("bleve: records[%d]: %w", i, err)
		}
		for _, t := range []struct {
			field string
			y     int
		}{{"created_at", r.CreatedAt.Year()}, {"updated_at", r.UpdatedAt.Year()}, {"expires_at", r.ExpiresAt.Year()}, {"last_used_at", r.LastUsedAt.Year()}} {
			if t.y < 1 || t.y > 9999 {
				return sdk.ImportResult{}, &sdk.FieldError{Field: fmt.Sprintf("records[%d].%s", i, t.field), Problem: fmt.Sprintf("year %d is outside 1-9999", t.y), Err: sdk.ErrInvalid}
			}
		}
		recs[i] = r
	}
	if len(recs) == 0 {
		return sdk.ImportResult{}, nil
	}
	ri, err := p.realm(realm, true)
	if err != nil {
		return sdk.ImportResult{}, storageError("", err)
	}
	if err := ri.lockWrites(ctx); err != nil {
		return sdk.ImportResult{}, err
	}
	defer ri.wmu.Unlock()
	var keys, ids []string
	for i := range recs {
		ids = append(ids, recs[i].ID)
		if answersDuplicates(recs[i].Status) {
			keys = append(keys, dedupKey(recs[i].Scope, recs[i].ContentHash))
		}
	}
	known, err := ri.duplicates(ctx, keys)
	if err != nil {
		return sdk.ImportResult{}, err
	}
	taken, err := ri.stored(ctx, ids)
	if err != nil {
		return sdk.ImportResult{}, err
	}
	var res sdk.ImportResult
	var fresh, revived []sdk.Record
	usageKeys := map[string]float64{}
	inBatch := map[string]bool{}
	freshAt := map[string]int{} // a content's holder among fresh
	now := time.Now().UTC()
	var moved []sdk.Record
	for _, r := range recs {
		key := dedupKey(r.Scope, r.ContentHash)
		holder, dup := known[key]
		stored, isTaken := taken[r.ID]
		if isTaken && !inBatch[r.ID] {
			stored.ContentHash = sdk.ContentHash(stored.Title, stored.Body)
			if sdk.ImportRetires(&stored, &r) {
				// A newer export of the record: it was retired since
				// (superseded, tombstoned), and leaves recall here too.
				stored.Status = r.Status
				if r.UpdatedAt.After(stored.UpdatedAt) {
					stored.UpdatedAt = r.UpdatedAt
				}
				if h, ok := known[key]; ok && h.ID == r.ID {
					delete(known, key)
				}
				inBatch[r.ID] = true
				moved = append(moved, stored)
				continue
			}
		}
		if isTaken || inBatch[r.ID] || (answersDuplicates(r.Status) && dup) {
			res.Skipped++
			// Its content is live in the scope already, one copy only. A
			// holder that has expired takes an active record's later
			// expiry, as a write's duplicate does, so the content stays
			// recallable; a quarantined record (a pending proposal)
			// changes nothing: no record becomes recallable before review.
			if !isTaken && !inBatch[r.ID] && r.Status == sdk.StatusActive && dup && expiredBy(holder, now) && !expiredBy(r, now) {
				holder.ExpiresAt, holder.UpdatedAt = r.ExpiresAt, now
				known[key] = holder
				if j, ok := freshAt[key]; ok {
					fresh[j] = holder
				} else {
					revived = append(revived, holder)
				}
			}
			continue
		}
		if answersDuplicates(r.Status) {
			known[key] = r
			freshAt[key] = len(fresh)
		}
		inBatch[r.ID] = true
		if r.UseCount > 0 {
			at := r.LastUsedAt
			if at.IsZero() {
				at = r.UpdatedAt
			}
			// The use history behind the count is not exported: the
			// decayed key is rebuilt as one use at the last one.
			usageKeys[r.ID] = usage.Key(0, false, at)
		}
		fresh = append(fresh, r)
	}
	for id, k := range ri.usageKeys(append(revived, moved...)) {
		usageKeys[id] = k
	}
	if err := ri.write(ctx, append(append(fresh, revived...), moved...), usageKeys, nil); err != nil {
		return sdk.ImportResult{}, err
	}
	res.Imported = len(fresh) + len(moved)
	return res, nil
}

// expiredBy reports whether r had expired by now.
func expiredBy(r sdk.Record, now time.Time) bool {
	return !r.ExpiresAt.IsZero() && !r.ExpiresAt.After(now)
}
