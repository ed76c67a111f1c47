package kvprovider

import (
	"context"
	"slices"
	"time"

	"github.com/memhost/memhost/sdk"
	"github.com/memhost/memhost/sdk/index"
)

// Export answers a page of the realm's records in id order (sdk.Archiver).
func (p *Provider) Export(ctx context.Context, realmName, after string, limit int) (sdk.ExportPage, error) {
	if err := sdk.ValidateRealm(realmName); err != nil {
		return sdk.ExportPage{}, err
	}
	limit = min(max(limit, 1), sdk.MaxExportPage)
	p.mu.RLock()
	defer p.mu.RUnlock()
	if err := p.ready(ctx); err != nil {
		return sdk.ExportPage{}, err
	}
	rm := p.realms[realmName]
	if rm == nil {
		return sdk.ExportPage{}, nil
	}
	// Sorting every id per page is O(n log n) a page; fine for the sizes
	// this provider is made for, and it needs no second structure.
	ids := make([]string, 0, len(rm.recs))
	for id := range rm.recs {
		if id > after {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	var page sdk.ExportPage
	for _, id := range ids[:min(limit, len(ids))] {
		page.Records = append(page.Records, cloneRecord(rm.recs[id]))
	}
	if len(ids) > limit {
		page.Next = ids[limit-1]
	}
	return page, nil
}

// Import stores full records as given, all or nothing (sdk.Archiver). A
// stored id is skipped, unless the record retires it (sdk.ImportRetires:
// it then takes the record's status, and counts imported).
func (p *Provider) Import(ctx context.Context, realmName string, records []sdk.Record) (sdk.ImportResult, error) {
	if err := sdk.ValidateRealm(realmName); err != nil {
		return sdk.ImportResult{}, err
	}
	if len(records) > sdk.MaxBatch {
		return sdk.ImportResult{}, p.errorf("%d records in one call, the limit is %d: %w", len(records), sdk.MaxBatch, sdk.ErrTooLarge)
	}
	prepared := make([]sdk.Record, len(records))
	for i, r := range records {
		r.Tags = slices.Clone(r.Tags)
		if err := r.PrepareImport(realmName); err != nil {
			return sdk.ImportResult{}, p.errorf("record %d: %w", i, err)
		}
		prepared[i] = r
	}
	docs := docsOf(prepared) // before the lock and the deadline's check, as Remember
	now := time.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.ready(ctx); err != nil {
		return sdk.ImportResult{}, err
	}
	rm := p.realms[realmName]
	var res sdk.ImportResult
	var fresh []sdk.Record
	var freshDocs []index.Doc
	seen := map[string]bool{}
	inBatch := map[string]bool{} // content keys of recallable fresh records
	for i, r := range prepared {
		key := contentKey(r.Scope, r.ContentHash)
		recallable := r.Recallable(now)
		if old := storedRecord(rm, r.ID); old != nil && !seen[r.ID] {
			held := cloneRecord(old)
			held.ContentHash = sdk.ContentHash(held.Title, held.Body)
			if sdk.ImportRetires(&held, &r) {
				// A newer export of the record: it was retired since
				// (superseded, tombstoned), and leaves recall here too.
				held.Status = r.Status
				if r.UpdatedAt.After(held.UpdatedAt) {
					held.UpdatedAt = r.UpdatedAt
				}
				seen[r.ID] = true
				fresh = append(fresh, held)
				freshDocs = append(freshDocs, docsOf([]sdk.Record{held})[0])
				continue
			}
		}
		switch {
		case seen[r.ID], rm != nil && rm.recs[r.ID] != nil,
			recallable && inBatch[key],
			recallable && rm != nil && rm.findContent(r.Scope, r.ContentHash, now) != "":
			res.Skipped++
			continue
		}
		seen[r.ID] = true
		if recallable {
			inBatch[key] = true
		}
		fresh = append(fresh, r)
		freshDocs = append(freshDocs, docs[i])
	}
	if len(fresh) == 0 {
		return res, nil
	}
	if err := p.put(ctx, realmName, fresh, freshDocs); err != nil {
		return sdk.ImportResult{}, err
	}
	res.Imported = len(fresh)
	return res, nil
}

// storedRecord answers the record of id in rm, or nil, also when rm is nil.
func storedRecord(rm *realm, id string) *sdk.Record {
	if rm == nil {
		return nil
	}
	return rm.recs[id]
}
