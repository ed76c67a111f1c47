package kvprovider

import (
	"context"
	"slices"
	"time"

	"github.com/memhost/memhost/sdk"
	"github.com/memhost/memhost/sdk/index"
)

// Remember stores records, all or nothing. A record whose scope already
// holds the same title and body answers the existing id, also when the
// duplicate is earlier in the same batch.
func (p *Provider) Remember(ctx context.Context, realmName string, records []sdk.Record) ([]string, error) {
	if err := sdk.ValidateRealm(realmName); err != nil {
		return nil, err
	}
	if len(records) > sdk.MaxBatch {
		return nil, p.errorf("%d records in one call, the limit is %d: %w", len(records), sdk.MaxBatch, sdk.ErrTooLarge)
	}
	now := time.Now()
	prepared := make([]sdk.Record, len(records))
	for i, r := range records {
		r.Tags = slices.Clone(r.Tags)
		if err := r.Prepare(realmName, now); err != nil {
			return nil, p.errorf("record %d: %w", i, err)
		}
		// Usage belongs to the store, never to the caller.
		r.UseCount, r.LastUsedAt = 0, time.Time{}
		prepared[i] = r
	}
	// Cut the terms before the lock and the deadline's check: they are
	// most of a write's work, and a write whose deadline passes meanwhile
	// is refused before it commits instead of landing after its caller
	// was told it failed.
	docs := docsOf(prepared)
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.ready(ctx); err != nil {
		return nil, err
	}
	rm := p.realms[realmName]
	ids := make([]string, len(prepared))
	var fresh []sdk.Record
	var freshDocs []index.Doc
	inBatch := map[string]string{} // content key -> id
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
			if _, taken := rm.recs[r.ID]; taken {
				return nil, p.errorf("record %d: id %q is taken by another record: %w", i, r.ID, sdk.ErrConflict)
			}
		}
		if slices.ContainsFunc(fresh, func(f sdk.Record) bool { return f.ID == r.ID }) {
			return nil, p.errorf("record %d: id %q appears twice with different content: %w", i, r.ID, sdk.ErrConflict)
		}
		inBatch[key] = r.ID
		ids[i] = r.ID
		fresh = append(fresh, r)
		freshDocs = append(freshDocs, docs[i])
	}
	if len(fresh) == 0 {
		return ids, nil
	}
	if err := p.put(ctx, realmName, fresh, freshDocs); err != nil {
		return nil, err
	}
	return ids, nil
}

// put stores records durably, then applies them to memory, indexing
// docs[i] as recs[i]; docs is nil when only their usage changed.
func (p *Provider) put(ctx context.Context, realmName string, recs []sdk.Record, docs []index.Doc) error {
	if err := p.store.Put(ctx, recs); err != nil {
		return p.errorf("store: %w", err)
	}
	rm := p.realms[realmName]
	if rm == nil {
		rm = &realm{recs: map[string]*sdk.Record{}, content: map[string][]string{}}
		p.realms[realmName] = rm
	}
	for i := range recs {
		r := cloneRecord(&recs[i]) // the Store may keep recs and their tags
		var doc *index.Doc
		if docs != nil {
			doc = &docs[i]
		}
		if err := apply(p.ix, rm, &r, doc); err != nil {
			// Stored but not indexed: a bug, not a caller's mistake.
			return p.errorf("index record %s: %w", r.ID, err)
		}
	}
	return nil
}

// checkIDs validates ids asked for by Get, Forget and MarkUsed.
func (p *Provider) checkIDs(ids []string) error {
	if len(ids) > sdk.MaxBatch {
		return p.errorf("%d ids in one call, the limit is %d: %w", len(ids), sdk.MaxBatch, sdk.ErrTooLarge)
	}
	for _, id := range ids {
		if err := sdk.ValidateID(id); err != nil {
			return err
		}
	}
	return nil
}

// Forget deletes records; ids that are not there are not an error.
func (p *Provider) Forget(ctx context.Context, realmName string, ids []string) (int, error) {
	if err := sdk.ValidateRealm(realmName); err != nil {
		return 0, err
	}
	if err := p.checkIDs(ids); err != nil {
		return 0, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.ready(ctx); err != nil {
		return 0, err
	}
	rm := p.realms[realmName]
	if rm == nil {
		return 0, nil
	}
	var gone []Key
	for _, id := range ids {
		k := Key{Realm: realmName, ID: id}
		if _, ok := rm.recs[id]; ok && !slices.Contains(gone, k) {
			gone = append(gone, k)
		}
	}
	if len(gone) == 0 {
		return 0, nil
	}
	if err := p.store.Delete(ctx, gone); err != nil {
		return 0, p.errorf("store: %w", err)
	}
	for _, k := range gone {
		unapply(p.ix, rm, k.ID)
	}
	return len(gone), nil
}

// Supersede stores replacement and marks the active record oldID
// superseded, in one Store.Put.
func (p *Provider) Supersede(ctx context.Context, realmName, oldID string, replacement sdk.Record) (string, error) {
	if err := sdk.ValidateRealm(realmName); err != nil {
		return "", err
	}
	if err := sdk.ValidateID(oldID); err != nil {
		return "", err
	}
	now := time.Now()
	replacement.Tags = slices.Clone(replacement.Tags)
	replacement.Supersedes, replacement.Status = oldID, sdk.StatusActive
	if err := replacement.Prepare(realmName, now); err != nil {
		return "", p.errorf("replacement: %w", err)
	}
	replacement.UseCount, replacement.LastUsedAt = 0, time.Time{}
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.ready(ctx); err != nil {
		return "", err
	}
	var old *sdk.Record
	if rm := p.realms[realmName]; rm != nil {
		old = rm.recs[oldID]
		if _, taken := rm.recs[replacement.ID]; taken {
			return "", p.errorf("replacement id %q is taken: %w", replacement.ID, sdk.ErrConflict)
		}
	}
	switch {
	case old == nil:
		return "", p.errorf("supersede %s: %w", oldID, sdk.ErrNotFound)
	case old.Status != sdk.StatusActive:
		return "", p.errorf("supersede %s: it is %s, not active: %w", oldID, old.Status, sdk.ErrConflict)
	}
	retired := cloneRecord(old)
	retired.Status, retired.UpdatedAt = sdk.StatusSuperseded, now.UTC()
	pair := []sdk.Record{replacement, retired}
	if err := p.put(ctx, realmName, pair, docsOf(pair)); err != nil {
		return "", err
	}
	return replacement.ID, nil
}

// MarkUsed counts one use of each record found, at at; an id listed twice
// counts once.
func (p *Provider) MarkUsed(ctx context.Context, realmName string, ids []string, at time.Time) error {
	if err := p.checkIDs(ids); err != nil {
		return err
	}
	return p.countUses(ctx, realmName, sdk.OneUseEach(ids), at)
}

// CountUses counts each use's count of uses of its record, if found, at at.
func (p *Provider) CountUses(ctx context.Context, realmName string, uses []sdk.Use, at time.Time) error {
	if err := sdk.ValidateUses("uses", uses); err != nil {
		return err
	}
	return p.countUses(ctx, realmName, uses, at)
}

// countUses applies uses, which list each id once.
func (p *Provider) countUses(ctx context.Context, realmName string, uses []sdk.Use, at time.Time) error {
	if err := sdk.ValidateRealm(realmName); err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.ready(ctx); err != nil {
		return err
	}
	rm := p.realms[realmName]
	if rm == nil {
		return nil
	}
	var used []sdk.Record
	for _, u := range uses {
		r := rm.recs[u.ID]
		if r == nil {
			continue
		}
		c := cloneRecord(r)
		c.UseCount = min(c.UseCount+u.Count, sdk.MaxRecordUseCount)
		if at.After(c.LastUsedAt) {
			c.LastUsedAt = at.UTC()
		}
		used = append(used, c)
	}
	if len(used) == 0 {
		return nil
	}
	return p.put(ctx, realmName, used, nil)
}

// WriteLedger hands valid entries to the Store's ledger.
func (p *Provider) WriteLedger(ctx context.Context, entries []sdk.LedgerEntry) error {
	for i, e := range entries {
		if err := sdk.ValidateRealm(e.Realm); err != nil {
			return p.errorf("entry %d: %w", i, err)
		}
		if err := sdk.ValidateID(e.RecordID); err != nil {
			return p.errorf("entry %d: %w", i, err)
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.ready(ctx); err != nil {
		return err
	}
	ls, ok := p.store.(LedgerStore)
	if !ok || !p.opts.Ledger {
		return p.errorf("the store keeps no ledger: %w", sdk.ErrUnsupported)
	}
	if len(entries) == 0 {
		return nil
	}
	if err := ls.AppendLedger(ctx, entries); err != nil {
		return p.errorf("ledger: %w", err)
	}
	return nil
}
