package journal

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/memhost/memhost/sdk"
)

// Remember stores records, all or nothing. A record whose scope already
// holds the same title and body answers the existing id, also when the
// duplicate is earlier in the same batch.
//
// Like every call, it needs no checks of its realm, ids or batch size:
// sdk.Serve validated them before the call got here.
func (p *Provider) Remember(ctx context.Context, realmName string, records []sdk.Record) ([]string, error) {
	now := time.Now()
	prepared := make([]sdk.Record, len(records))
	for i, r := range records {
		if err := r.Prepare(realmName, now); err != nil {
			return nil, fmt.Errorf("journal: record %d: %w", i, err)
		}
		// Usage belongs to the store, never to the caller.
		r.UseCount, r.LastUsedAt = 0, time.Time{}
		prepared[i] = r
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}

	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.ready(); err != nil {
		return nil, err
	}
	rm := p.realms[realmName]
	ids := make([]string, len(prepared))
	var fresh []sdk.Record
	inBatch := map[string]string{} // content key -> id, for duplicates within the batch
	for i, r := range prepared {
		key := contentKey(r.Scope, r.ContentHash)
		if id, ok := inBatch[key]; ok {
			ids[i] = id
			continue
		}
		if rm != nil {
			if id := rm.findContent(r.Scope, r.ContentHash, now); id != "" {
				ids[i] = id
				continue
			}
			if _, taken := rm.docs[r.ID]; taken {
				return nil, fmt.Errorf("journal: record %d: id %q is taken by another record: %w", i, r.ID, sdk.ErrConflict)
			}
		}
		for _, f := range fresh {
			if f.ID == r.ID {
				return nil, fmt.Errorf("journal: record %d: id %q appears twice with different content: %w", i, r.ID, sdk.ErrConflict)
			}
		}
		inBatch[key] = r.ID
		ids[i] = r.ID
		fresh = append(fresh, r)
	}
	if len(fresh) == 0 {
		return ids, nil
	}
	e := &entry{Op: opPut, Realm: realmName, Records: fresh}
	if err := p.j.append(ctx, e); err != nil {
		return nil, err
	}
	apply(p.realms, e)
	return ids, nil
}

// Get answers the records found, of any status, in the order asked.
func (p *Provider) Get(_ context.Context, realmName string, ids []string) ([]sdk.Record, error) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	if err := p.ready(); err != nil {
		return nil, err
	}
	rm := p.realms[realmName]
	out := []sdk.Record{}
	if rm == nil {
		return out, nil
	}
	for _, id := range ids {
		if d, ok := rm.docs[id]; ok {
			out = append(out, cloneRecord(d.rec))
		}
	}
	return out, nil
}

// Forget deletes records; ids that are not there are not an error.
func (p *Provider) Forget(ctx context.Context, realmName string, ids []string) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.ready(); err != nil {
		return 0, err
	}
	rm := p.realms[realmName]
	if rm == nil {
		return 0, nil
	}
	var gone []string
	for _, id := range ids {
		if _, ok := rm.docs[id]; ok && !slices.Contains(gone, id) {
			gone = append(gone, id)
		}
	}
	if len(gone) == 0 {
		return 0, nil
	}
	e := &entry{Op: opForget, Realm: realmName, IDs: gone}
	if err := p.j.append(ctx, e); err != nil {
		return 0, err
	}
	apply(p.realms, e)
	return len(gone), nil
}

// Supersede stores replacement and marks the active record oldID
// superseded, in one journal line.
func (p *Provider) Supersede(ctx context.Context, realmName, oldID string, replacement sdk.Record) (string, error) {
	replacement.Supersedes = oldID
	replacement.Status = sdk.StatusActive
	if err := replacement.Prepare(realmName, time.Now()); err != nil {
		return "", fmt.Errorf("journal: replacement: %w", err)
	}
	replacement.UseCount, replacement.LastUsedAt = 0, time.Time{}
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.ready(); err != nil {
		return "", err
	}
	rm := p.realms[realmName]
	var old *doc
	if rm != nil {
		old = rm.docs[oldID]
	}
	switch {
	case old == nil:
		return "", fmt.Errorf("journal: supersede %s: %w", oldID, sdk.ErrNotFound)
	case old.rec.Status != sdk.StatusActive:
		return "", fmt.Errorf("journal: supersede %s: it is %s, not active: %w", oldID, old.rec.Status, sdk.ErrConflict)
	}
	if _, taken := rm.docs[replacement.ID]; taken {
		return "", fmt.Errorf("journal: replacement id %q is taken: %w", replacement.ID, sdk.ErrConflict)
	}
	e := &entry{Op: opSupersede, Realm: realmName, Old: oldID, Records: []sdk.Record{replacement}}
	if err := p.j.append(ctx, e); err != nil {
		return "", err
	}
	apply(p.realms, e)
	return replacement.ID, nil
}

// cloneRecord copies r so callers never share the stored tag slice.
func cloneRecord(r sdk.Record) sdk.Record {
	r.Tags = append([]string(nil), r.Tags...)
	return r
}
