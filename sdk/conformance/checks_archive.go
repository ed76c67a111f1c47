package conformance

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/memhost/memhost/sdk"
)

// realmArchive is written by the archive check only, so its export holds
// exactly what the check imported.
const realmArchive = "conformance-archive"

// archiveRecords are full records as an export would carry them: fixed ids
// and millisecond times (one at the Unix epoch), every status, usage
// counters set.
func archiveRecords(e *env) []sdk.Record {
	base := time.Date(2025, 3, 4, 5, 6, 7, 8_000_000, time.UTC)
	statuses := []sdk.Status{sdk.StatusActive, sdk.StatusSuperseded, sdk.StatusQuarantined, sdk.StatusActive, sdk.StatusTombstoned}
	out := make([]sdk.Record, len(statuses))
	for i, st := range statuses {
		r, _ := e.record(scopeAlice)
		r.ID = fmt.Sprintf("conformance-archive-%02d", i)
		r.Realm = realmArchive
		r.Trust = sdk.TrustApplication
		r.Status = st
		r.Tags = []string{"archived"}
		r.CreatedAt = base.Add(time.Duration(i) * time.Hour)
		r.UpdatedAt = r.CreatedAt.Add(time.Minute)
		if i == 3 {
			r.UseCount, r.LastUsedAt = 7, r.UpdatedAt.Add(time.Second)
			r.Supersedes = "conformance-archive-01"
		}
		if i%2 == 0 {
			r.OccurredAt = base.AddDate(-1, 0, -i)
			r.Thread = &sdk.Thread{ID: "archived conversation", Seq: int64(i)}
		}
		if i == 4 {
			// The Unix epoch is a time like any other, though 0 is none
			// on the wire and in a store's column.
			epoch := time.Unix(0, 0).UTC()
			r.CreatedAt, r.UpdatedAt, r.OccurredAt = epoch, epoch, epoch
		}
		r.ContentHash = sdk.ContentHash(r.Title, r.Body)
		out[i] = r
	}
	return out
}

// checkArchive: imported records come back from Export exactly, in id order,
// page by page; a repeated import stores nothing; a batch with one bad
// record stores nothing.
func checkArchive(ctx context.Context, e *env) error {
	recs := archiveRecords(e)
	res, err := e.p.Import(ctx, realmArchive, recs)
	if err != nil {
		return fmt.Errorf("Import(%d records): %w", len(recs), err)
	}
	var p problems
	if res.Imported != len(recs) || res.Skipped != 0 {
		p.addf("Import of %d new records answered %+v; want all imported", len(recs), res)
	}
	again, err := e.p.Import(ctx, realmArchive, recs)
	if err != nil || again.Imported != 0 || again.Skipped != len(recs) {
		p.addf("repeated Import answered %+v, %v; want all skipped", again, err)
	}
	dup := recs[0]
	dup.ID = "conformance-archive-dup"
	if res, err := e.p.Import(ctx, realmArchive, []sdk.Record{dup}); err != nil || res.Skipped != 1 {
		p.addf("Import of a new id with a stored scope and content hash answered %+v, %v; want it skipped", res, err)
	}
	good, _ := e.record(scopeAlice)
	good.ID, good.Realm, good.Trust, good.Status = "conformance-archive-new", realmArchive, sdk.TrustApplication, sdk.StatusActive
	good.CreatedAt, good.UpdatedAt = recs[0].CreatedAt, recs[0].UpdatedAt
	bad := good
	bad.ID, bad.Title, bad.Body = "conformance-archive-bad", "Bad", "bad"
	bad.ContentHash = "not-the-hash"
	if _, err := e.p.Import(ctx, realmArchive, []sdk.Record{good, bad}); err == nil {
		p.addf("Import of a batch holding a record with a wrong content hash succeeded; want an error")
	}

	var got []sdk.Record
	after, pages := "", 0
	for {
		page, err := e.p.Export(ctx, realmArchive, after, 2)
		if err != nil {
			return fmt.Errorf("Export(after %q): %w", after, err)
		}
		if len(page.Records) > 2 {
			p.addf("Export with limit 2 answered %d records", len(page.Records))
		}
		got = append(got, page.Records...)
		pages++
		if page.Next == "" || pages > len(recs)+2 {
			break
		}
		after = page.Next
	}
	if !slices.IsSortedFunc(got, func(a, b sdk.Record) int { return strings.Compare(a.ID, b.ID) }) {
		p.addf("Export answered records out of id order")
	}
	if len(got) != len(recs) {
		p.addf("Export answered %d records, want the %d imported (a rejected batch must store nothing)", len(got), len(recs))
	}
	for i := range min(len(got), len(recs)) {
		if !reflect.DeepEqual(got[i], recs[i]) {
			p.addf("exported record %d differs from the imported one:\n got %+v\nwant %+v", i, got[i], recs[i])
		}
	}
	if page, err := e.p.Export(ctx, realmA, "", 0); err != nil {
		p.addf("Export of another realm: %v", err)
	} else {
		for _, r := range page.Records {
			if r.Realm != realmA {
				p.addf("Export of %s answered a record of realm %q", realmA, r.Realm)
			}
		}
	}
	return p.err()
}

// checkUseCountCeiling: an import of a record used more than
// MaxRecordUseCount times is refused, and counting uses on a record at
// the ceiling keeps it there. A count that wrapped negative (bleve) or
// turned SQLite's integer into a float broke the realm's export and every
// identity's recall after the record's next use.
func checkUseCountCeiling(ctx context.Context, e *env) error {
	r, _ := e.record(scopeAlice)
	r.ID, r.Realm, r.Trust, r.Status = "conformance-use-ceiling", realmA, sdk.TrustApplication, sdk.StatusActive
	r.CreatedAt = time.Date(2025, 3, 4, 5, 6, 7, 0, time.UTC)
	r.UpdatedAt = r.CreatedAt
	over := r
	over.UseCount = sdk.MaxRecordUseCount + 1
	var p problems
	p.add(wantErr("Import of a record with use_count over MaxRecordUseCount", importErr(e.p.Import(ctx, realmA, []sdk.Record{over})), sdk.ErrInvalid))
	r.UseCount = sdk.MaxRecordUseCount - 1
	if _, err := e.p.Import(ctx, realmA, []sdk.Record{r}); err != nil {
		return fmt.Errorf("Import of a record with use_count MaxRecordUseCount-1: %w", err)
	}
	for range 2 {
		if err := e.p.CountUses(ctx, realmA, []sdk.Use{{ID: r.ID, Count: sdk.MaxUseCount}}, r.UpdatedAt); err != nil {
			return fmt.Errorf("CountUses on a record near the ceiling: %w", err)
		}
	}
	got, err := e.p.Get(ctx, realmA, []string{r.ID})
	if err != nil || len(got) != 1 {
		return fmt.Errorf("Get after counting uses: %d records, %w", len(got), err)
	}
	if got[0].UseCount != sdk.MaxRecordUseCount {
		p.addf("use_count after counting past the ceiling = %d; want MaxRecordUseCount (%d)", got[0].UseCount, int64(sdk.MaxRecordUseCount))
	}
	return p.err()
}

// proposalTag marks a pending proposal, as the host stores an agent's
// write to a shared scope (quarantined, with this tag).
const proposalTag = "memhost:proposal"

// checkProposalRevivesNothing: an imported pending proposal whose content
// an expired active record of its scope holds (in an earlier import or
// the same one) leaves that record as it was, expired and unrecalled:
// the proposal is skipped or stored beside it, never reviving it, so no
// agent makes a shared record recallable before review. Three providers
// revived it, taking the proposal's expiry as an active duplicate's.
func checkProposalRevivesNothing(ctx context.Context, e *env) error {
	var p problems
	now := time.Now()
	at := now.Add(-48 * time.Hour).Truncate(time.Millisecond)
	expired := now.Add(-time.Hour).Truncate(time.Millisecond)
	for _, sameBatch := range []bool{false, true} {
		r, w := e.record(sdk.RealmScope)
		r.Realm, r.Trust, r.CreatedAt, r.UpdatedAt = realmA, sdk.TrustAgentObserved, at, at
		r.ContentHash = sdk.ContentHash(r.Title, r.Body)
		holder, proposal := r, r
		holder.ID, holder.Status, holder.ExpiresAt = "conformance-expired-"+w, sdk.StatusActive, expired
		proposal.ID, proposal.Status, proposal.Tags = "conformance-proposal-"+w, sdk.StatusQuarantined, []string{proposalTag}
		batches := [][]sdk.Record{{holder}, {proposal}}
		if sameBatch {
			batches = [][]sdk.Record{{holder, proposal}}
		}
		for _, b := range batches {
			if _, err := e.p.Import(ctx, realmA, b); err != nil {
				return fmt.Errorf("Import of an expired record and a pending proposal of its content (same batch: %v): %w", sameBatch, err)
			}
		}
		got, err := e.p.Get(ctx, realmA, []string{holder.ID})
		if err != nil || len(got) != 1 {
			return fmt.Errorf("Get of the expired record after the proposal's import: %d records, %w", len(got), err)
		}
		if g := got[0]; g.Status != sdk.StatusActive || !g.ExpiresAt.Equal(expired) || !g.UpdatedAt.Equal(at) {
			p.addf("after the import of a pending proposal of its content (same batch: %v) the expired record is %s, expires %v, updated %v; want it unchanged (active, %v, %v)",
				sameBatch, g.Status, g.ExpiresAt, g.UpdatedAt, expired, at)
		}
		ids, err := e.recallIDs(ctx, realmA, w, sdk.RealmScope)
		if err != nil {
			return err
		}
		if len(ids) != 0 {
			p.addf("recall of the expired record's word after a pending proposal of its content (same batch: %v) answered %v; want nothing before review", sameBatch, ids)
		}
	}
	return p.err()
}

// importErr keeps Import's error alone.
func importErr(_ sdk.ImportResult, err error) error { return err }

// checkImportRetires: an import of a stored record with its content and
// scope but a later status (sdk.ImportRetires: a newer export of a record
// superseded or tombstoned since) moves the stored record to that status,
// counted imported, and out of recall, while its successor is imported
// active; an older status (an older export) moves nothing back. Stores
// skipped every stored id, leaving the old record recallable beside its
// successor.
func checkImportRetires(ctx context.Context, e *env) error {
	at := time.Date(2025, 6, 7, 8, 9, 10, 0, time.UTC)
	cases := []struct {
		stored, imported, want sdk.Status
		successor              bool
	}{
		{sdk.StatusActive, sdk.StatusSuperseded, sdk.StatusSuperseded, true},
		{sdk.StatusActive, sdk.StatusTombstoned, sdk.StatusTombstoned, false},
		{sdk.StatusSuperseded, sdk.StatusTombstoned, sdk.StatusTombstoned, false},
		{sdk.StatusSuperseded, sdk.StatusActive, sdk.StatusSuperseded, false},
		{sdk.StatusTombstoned, sdk.StatusActive, sdk.StatusTombstoned, false},
		{sdk.StatusTombstoned, sdk.StatusSuperseded, sdk.StatusTombstoned, false},
	}
	var p problems
	for _, c := range cases {
		r, w := e.record(sdk.RealmScope)
		r.ID, r.Realm, r.Trust, r.CreatedAt, r.UpdatedAt = "conformance-retire-"+w, realmA, sdk.TrustApplication, at, at
		r.ContentHash = sdk.ContentHash(r.Title, r.Body)
		old := r
		old.Status = c.stored
		if _, err := e.p.Import(ctx, realmA, []sdk.Record{old}); err != nil {
			return fmt.Errorf("Import of a %s record: %w", c.stored, err)
		}
		newer := r
		newer.Status, newer.UpdatedAt = c.imported, at.Add(time.Hour)
		batch := []sdk.Record{newer}
		var succ sdk.Record
		if c.successor {
			succ, _ = e.record(sdk.RealmScope)
			succ.Body += " " + w
			succ.ID, succ.Realm, succ.Trust, succ.Status = "conformance-successor-"+w, realmA, sdk.TrustApplication, sdk.StatusActive
			succ.CreatedAt, succ.UpdatedAt, succ.Supersedes = newer.UpdatedAt, newer.UpdatedAt, r.ID
			succ.ContentHash = sdk.ContentHash(succ.Title, succ.Body)
			batch = append([]sdk.Record{succ}, batch...)
		}
		res, err := e.p.Import(ctx, realmA, batch)
		if err != nil {
			return fmt.Errorf("Import of the %s record again, %s: %w", c.stored, c.imported, err)
		}
		moves := c.want != c.stored
		want := sdk.ImportResult{Imported: len(batch), Skipped: 0}
		if !moves {
			want = sdk.ImportResult{Imported: len(batch) - 1, Skipped: 1}
		}
		if res != want {
			p.addf("Import of a stored %s record again, %s, answered %+v; want %+v", c.stored, c.imported, res, want)
		}
		got, err := e.p.Get(ctx, realmA, []string{r.ID})
		if err != nil || len(got) != 1 {
			return fmt.Errorf("Get of the record imported %s, then %s: %d records, %w", c.stored, c.imported, len(got), err)
		}
		if got[0].Status != c.want {
			p.addf("a stored %s record imported again %s is %s; want %s", c.stored, c.imported, got[0].Status, c.want)
		}
		ids, err := e.recallIDs(ctx, realmA, w, sdk.RealmScope)
		if err != nil {
			return err
		}
		var wantIDs []string
		if c.successor {
			wantIDs = []string{succ.ID}
		}
		if !slices.Equal(ids, wantIDs) {
			p.addf("recall after a stored %s record was imported again %s answered %v; want %v", c.stored, c.imported, ids, wantIDs)
		}
	}
	return p.err()
}
