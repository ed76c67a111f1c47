package markdown

import (
	"context"
	"fmt"
	"slices"

	"github.com/memhost/memhost/sdk"
)

var _ sdk.Archiver = (*Provider)(nil)

// Export answers a page of the realm's records, of every status, in id
// order (sdk.Archiver).
func (p *Provider) Export(ctx context.Context, realm, after string, limit int) (sdk.ExportPage, error) {
	st, err := p.store(ctx)
	if err != nil {
		return sdk.ExportPage{}, err
	}
	return st.export(realm, after, limit), nil
}

// Import writes full records as given, one file each, all or nothing
// (sdk.Archiver). A stored id is skipped, unless the record retires it
// (sdk.ImportRetires: its file then takes the record's status, and it
// counts imported).
func (p *Provider) Import(ctx context.Context, realm string, records []sdk.Record) (sdk.ImportResult, error) {
	st, err := p.store(ctx)
	if err != nil {
		return sdk.ImportResult{}, err
	}
	res, err := st.importRecords(ctx, realm, records)
	return res, storageError(err)
}

func (s *store) export(realm, after string, limit int) sdk.ExportPage {
	s.refresh()
	s.idx.RLock()
	defer s.idx.RUnlock()
	ri := s.realms[realm]
	if ri == nil {
		return sdk.ExportPage{}
	}
	ids := make([]string, 0, len(ri.byID))
	for id := range ri.byID {
		if id > after {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	var page sdk.ExportPage
	for _, id := range ids[:min(limit, len(ids))] {
		page.Records = append(page.Records, cloneRecord(&ri.get(id).rec))
	}
	if len(ids) > limit {
		page.Next = ids[limit-1]
	}
	return page
}

func (s *store) importRecords(ctx context.Context, realm string, records []sdk.Record) (sdk.ImportResult, error) {
	now := timeNow(s.opts.now)
	prepared := make([]sdk.Record, len(records))
	for i := range records {
		r := records[i]
		r.Tags = slices.Clone(r.Tags)
		err := r.PrepareImport(realm)
		if err == nil {
			err = checkFileTimes(&r)
		}
		if err != nil {
			return sdk.ImportResult{}, fmt.Errorf("markdown: import: records[%d]: %w", i, err)
		}
		prepared[i] = r
	}
	s.refresh()
	s.mu.Lock()
	defer s.mu.Unlock()
	ri := s.realms[realm]
	var res sdk.ImportResult
	var writes []*pendingWrite
	batchIDs := map[string]bool{}
	batchContent := map[contentKey]bool{}
	for i := range prepared {
		r := &prepared[i]
		ck := contentKey{r.Scope, r.ContentHash}
		live := r.Recallable(now)
		skip := batchIDs[r.ID] || (live && batchContent[ck])
		if d := storedDoc(ri, r.ID); d != nil && !batchIDs[r.ID] {
			held := d.rec
			held.ContentHash = sdk.ContentHash(held.Title, held.Body)
			if sdk.ImportRetires(&held, r) {
				// A newer export of the record: it was retired since
				// (superseded, tombstoned), and leaves recall here too.
				marked := cloneRecord(&d.rec)
				marked.Status = r.Status
				if r.UpdatedAt.After(marked.UpdatedAt) {
					marked.UpdatedAt = r.UpdatedAt
				}
				w, err := newPendingWrite(s.root, marked, d)
				if err != nil {
					return sdk.ImportResult{}, fmt.Errorf("markdown: import: records[%d]: %w", i, err)
				}
				writes = append(writes, w)
				batchIDs[r.ID] = true
				continue
			}
		}
		if ri != nil && !skip {
			skip = ri.get(r.ID) != nil
			if live && !skip {
				for _, d := range ri.sameContent(r.Scope, r.ContentHash) {
					skip = skip || d.rec.Recallable(now)
				}
			}
		}
		if skip {
			res.Skipped++
			continue
		}
		w, err := newPendingWrite(s.root, *r, nil)
		if err == nil {
			err = checkFree(w.path)
		}
		if err != nil {
			return sdk.ImportResult{}, fmt.Errorf("markdown: import: records[%d]: %w", i, err)
		}
		writes = append(writes, w)
		batchIDs[r.ID] = true
		if live {
			batchContent[ck] = true
		}
	}
	for _, w := range writes {
		w.fields = recordFields(&w.rec)
	}
	if err := s.writeAll(ctx, writes); err != nil {
		return sdk.ImportResult{}, err
	}
	s.idx.Lock()
	ri = s.realmLocked(realm)
	for _, w := range writes {
		ri.put(w.doc(ri), w.fields)
	}
	s.idx.Unlock()
	if len(writes) > 0 {
		s.noteChange()
	}
	res.Imported = len(writes)
	return res, nil
}

// storedDoc answers the doc of id in ri, or nil, also when ri is nil (a
// realm not written to yet).
func storedDoc(ri *realmIndex, id string) *doc {
	if ri == nil {
		return nil
	}
	return ri.get(id)
}
