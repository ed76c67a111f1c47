package proposal

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/memhost/memhost/internal/statedb"
	"github.com/memhost/memhost/plugins/sqlite"
	"github.com/memhost/memhost/sdk"
)

// failingImport refuses every import, as a provider that is down would.
type failingImport struct{ *store }

var errDown = errors.New("provider down")

func (failingImport) Import(context.Context, string, []sdk.Record) (sdk.ImportResult, error) {
	return sdk.ImportResult{}, errDown
}

func newQueue(t *testing.T) *Queue {
	t.Helper()
	_, l := newLedger(t)
	return &Queue{Ledger: l, MaxPending: 10}
}

// newLedger answers a ledger on a state database of the test's own.
func newLedger(t *testing.T) (*statedb.DB, *SQLLedger) {
	t.Helper()
	db, err := statedb.Open(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	l, err := NewSQLLedger(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	return db, l
}

// TestProposeFailureChangesNothing: a proposal whose store call fails, or
// that reuses the id of a pending proposal, leaves the ledger as it was;
// the first proposer keeps its entry.
func TestProposeFailureChangesNothing(t *testing.T) {
	cases := []struct {
		name    string
		failing bool
		id      string
		want    error
	}{
		{"the provider fails, an id of another proposer's proposal", true, "p1", sdk.ErrConflict},
		{"the provider fails, a new id", true, "p2", errDown},
		{"the provider works, an id of another proposer's proposal", false, "p1", sdk.ErrConflict},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			q := newQueue(t)
			s := newStore(allCaps...)
			first := fact("mob:ops", "deploys")
			first.ID = "p1"
			if _, err := q.Propose(ctx, "r", s, []sdk.Record{first}, Proposer{Token: "alice-bot"}); err != nil {
				t.Fatal(err)
			}
			var p sdk.Provider = s
			if tc.failing {
				p = failingImport{s}
			}
			again := fact("mob:ops", "rollbacks")
			again.ID = tc.id
			_, err := q.Propose(ctx, "r", p, []sdk.Record{again}, Proposer{Token: "mallory-bot"})
			if err == nil || tc.want != nil && !errors.Is(err, tc.want) {
				t.Fatalf("second proposal answered %v; want an error (%v)", err, tc.want)
			}
			e, found, err := q.Ledger.Lookup(ctx, "r", "p1")
			if err != nil || !found || e.Proposer != "alice-bot" {
				t.Fatalf("first entry after the failed proposal: %+v, %v, %v; want alice-bot's", e, found, err)
			}
			if _, total, err := q.Ledger.List(ctx, "r", Cursor{}, 10); err != nil || total != 1 {
				t.Fatalf("%d pending after the failed proposal (%v); want 1", total, err)
			}
		})
	}
}

// sqliteProvider is the real SQLite provider in a fresh file.
func sqliteProvider(t *testing.T) *sqlite.Store {
	t.Helper()
	s := sqlite.New()
	cfg, _ := json.Marshal(map[string]string{"path": filepath.Join(t.TempDir(), "memory.db")})
	if err := s.Configure(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// TestProposeHeldContent: a proposal of content its scope holds already,
// in an active record or a pending proposal, is answered with the
// holder's id, as a write of held content is, and notes nothing new: the
// answer names a stored record and the proposer's count is unchanged.
func TestProposeHeldContent(t *testing.T) {
	cases := []struct {
		name   string
		holder string // "active", or the proposer of the pending holder
	}{
		{"an active record", "active"},
		{"another proposer's pending proposal", "alice-bot"},
		{"the proposer's own pending proposal", "mallory-bot"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			q, p := newQueue(t), sqliteProvider(t)
			rec := fact(sdk.MobScope("ops"), "Deploys freeze on Fridays")
			var holder string
			if tc.holder == "active" {
				ids, err := p.Remember(ctx, "r", []sdk.Record{rec})
				if err != nil {
					t.Fatal(err)
				}
				holder = ids[0]
			} else {
				ids, err := q.Propose(ctx, "r", p, []sdk.Record{rec}, Proposer{Token: tc.holder})
				if err != nil {
					t.Fatal(err)
				}
				holder = ids[0]
			}
			_, before, err := q.Ledger.List(ctx, "r", Cursor{}, 10)
			if err != nil {
				t.Fatal(err)
			}
			other := fact(sdk.MobScope("ops"), "Rollbacks need a ticket")
			ids, err := q.Propose(ctx, "r", p, []sdk.Record{rec, other}, Proposer{Token: "mallory-bot"})
			if err != nil {
				t.Fatal(err)
			}
			if len(ids) != 2 || ids[0] != holder {
				t.Fatalf("proposal of held content answered %v; want the holder %s first", ids, holder)
			}
			got, err := p.Get(ctx, "r", ids)
			if err != nil || len(got) != 2 {
				t.Fatalf("the answered ids %v name %d stored records (%v); want 2", ids, len(got), err)
			}
			if _, after, err := q.Ledger.List(ctx, "r", Cursor{}, 10); err != nil || after != before+1 {
				t.Fatalf("%d pending after proposing held content and a new one (%v); want %d", after, err, before+1)
			}
			if tc.holder != "active" {
				if e, found, err := q.Ledger.Lookup(ctx, "r", holder); err != nil || !found || e.Proposer != tc.holder {
					t.Fatalf("the holder's entry: %+v, %v, %v; want %s's", e, found, err, tc.holder)
				}
			}
		})
	}
}

// TestProposeStoredID: a proposal under the id of a stored record is that
// record when it holds the proposal's content, and a conflict otherwise;
// neither stores or counts anything.
func TestProposeStoredID(t *testing.T) {
	cases := []struct {
		name    string
		title   string
		wantErr error
	}{
		{"the same content", "Deploys freeze on Fridays", nil},
		{"other content", "Deploys on Fridays are fine", sdk.ErrConflict},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			q, p := newQueue(t), sqliteProvider(t)
			ids, err := p.Remember(ctx, "r", []sdk.Record{fact(sdk.MobScope("ops"), "Deploys freeze on Fridays")})
			if err != nil {
				t.Fatal(err)
			}
			rec := fact(sdk.MobScope("ops"), tc.title)
			rec.ID = ids[0]
			got, err := q.Propose(ctx, "r", p, []sdk.Record{rec}, Proposer{Token: "mallory-bot"})
			switch {
			case tc.wantErr != nil && !errors.Is(err, tc.wantErr):
				t.Fatalf("Propose = %v, %v; want %v", got, err, tc.wantErr)
			case tc.wantErr == nil && (err != nil || len(got) != 1 || got[0] != ids[0]):
				t.Fatalf("Propose = %v, %v; want the stored record %s", got, err, ids[0])
			}
			if _, total, err := q.Ledger.List(ctx, "r", Cursor{}, 10); err != nil || total != 0 {
				t.Fatalf("%d pending (%v); want none", total, err)
			}
			stored, err := p.Get(ctx, "r", ids)
			if err != nil || len(stored) != 1 || stored[0].Status != sdk.StatusActive || stored[0].Title != "Deploys freeze on Fridays" {
				t.Fatalf("the stored record after the proposal: %+v, %v", stored, err)
			}
		})
	}
}

// TestImportedProposalsAreListed: from an outside review. An export
// carries a pending proposal's record, not the queue's note of it, so
// after an import into another realm or host the proposal was approvable
// by id but listed by no review. The import now notes what the provider
// holds as pending proposals; an import run again keeps the one note, and
// an id the provider holds as something else is not noted.
func TestImportedProposalsAreListed(t *testing.T) {
	from, src := newQueue(t), newStore(allCaps...)
	ids, err := from.Propose(ctx, "a", src, []sdk.Record{fact(sdk.MobScope("ops"), "Deploys")}, Proposer{Token: "alice-bot"})
	if err != nil {
		t.Fatal(err)
	}
	exported := []sdk.Record{src.get(t, ids[0]), fact(sdk.RealmScope, "Holidays")}
	exported[1].ID, exported[1].Status = "active1", sdk.StatusActive

	to, dst := newQueue(t), newStore(allCaps...)
	for range 2 { // an import run twice
		if _, err := dst.Import(ctx, "b", exported); err != nil {
			t.Fatal(err)
		}
		if err := to.NoteImported(ctx, "b", dst, exported); err != nil {
			t.Fatal(err)
		}
	}
	entries, total, err := to.Ledger.List(ctx, "b", Cursor{}, 10)
	if err != nil || total != 1 || len(entries) != 1 || entries[0].ID != ids[0] || entries[0].Proposer != ImportedProposer {
		t.Fatalf("pending after the import: %+v (%d, %v), want the one proposal, noted as imported", entries, total, err)
	}
	pending, _, _, err := to.List(ctx, "b", dst, Cursor{}, 10, nil)
	if err != nil || len(pending) != 1 || pending[0].Record.Title != "Deploys" || pending[0].Proposer != "" || !pending[0].Imported {
		t.Fatalf("the review lists %+v (%v), want the imported proposal, with no proposer", pending, err)
	}

	// The provider already held the id as an active record, and skipped it.
	held := newStore(allCaps...)
	active := exported[0]
	active.Status, active.Tags = sdk.StatusActive, nil
	if _, err := held.Import(ctx, "c", []sdk.Record{active}); err != nil {
		t.Fatal(err)
	}
	other := newQueue(t)
	if err := other.NoteImported(ctx, "c", held, exported[:1]); err != nil {
		t.Fatal(err)
	}
	if _, total, _ := other.Ledger.List(ctx, "c", Cursor{}, 10); total != 0 {
		t.Fatalf("%d pending, want none: the provider holds the id as an active record", total)
	}
}

// TestProposalsGoneFromTheStoreFreeTheBound: from an outside review. A
// pending proposal forgotten without a review (an application's DELETE,
// a provider's purge of an expired one) kept its entry, so its proposer
// stayed at the bound and was refused until a listing happened to page
// over the ghosts. Forgotten drops the entry; a refusal first drops the
// proposer's entries whose records are gone, and asks again.
func TestProposalsGoneFromTheStoreFreeTheBound(t *testing.T) {
	for _, how := range []string{"forgotten through the queue", "gone from the store alone"} {
		t.Run(how, func(t *testing.T) {
			q := newQueue(t)
			q.MaxPending = 2
			s := newStore(allCaps...)
			ids, err := q.Propose(ctx, "r", s, []sdk.Record{fact(sdk.RealmScope, "one"), fact(sdk.RealmScope, "two")}, Proposer{Token: "agent"})
			if err != nil {
				t.Fatal(err)
			}
			s.mu.Lock()
			for _, id := range ids {
				delete(s.records, id)
			}
			s.mu.Unlock()
			// A young entry may be a proposal still being stored: only
			// one older than that is judged by its record.
			q.clock = func() time.Time { return time.Now().Add(ClaimTTL + time.Second) }
			if how == "forgotten through the queue" {
				if err := q.Forgotten(ctx, "r", ids); err != nil {
					t.Fatal(err)
				}
				if _, total, err := q.Ledger.List(ctx, "r", Cursor{}, 10); err != nil || total != 0 {
					t.Fatalf("%d noted after both were forgotten (%v), want none", total, err)
				}
			}
			if _, err := q.Propose(ctx, "r", s, []sdk.Record{fact(sdk.RealmScope, "three"), fact(sdk.RealmScope, "four")}, Proposer{Token: "agent"}); err != nil {
				t.Fatalf("proposals after the pending ones were gone answered %v", err)
			}
			if _, err := q.Propose(ctx, "r", s, []sdk.Record{fact(sdk.RealmScope, "five")}, Proposer{Token: "agent"}); !errors.Is(err, ErrTooMany) {
				t.Fatalf("a proposal past the bound of live ones answered %v, want ErrTooMany", err)
			}
		})
	}
}

// TestImportedProposalsCountAgainstNoAgent: from an outside review.
// Imported proposals were noted under the empty proposer, the name the
// tokenless host's own MCP agent proposes under, so an import filled that
// agent's bound. They are noted under a name no caller has.
func TestImportedProposalsCountAgainstNoAgent(t *testing.T) {
	q, s := newQueue(t), newStore(allCaps...)
	q.MaxPending = 2
	var imported []sdk.Record
	for i := range 3 {
		r := fact(sdk.RealmScope, fmt.Sprintf("imported %d", i), Tag)
		r.ID, r.Status = fmt.Sprintf("imp%d", i), sdk.StatusQuarantined
		imported = append(imported, r)
	}
	if _, err := s.Import(ctx, "r", imported); err != nil {
		t.Fatal(err)
	}
	if err := q.NoteImported(ctx, "r", s, imported); err != nil {
		t.Fatal(err)
	}
	if _, err := q.Propose(ctx, "r", s, []sdk.Record{fact(sdk.RealmScope, "local one"), fact(sdk.RealmScope, "local two")}, Proposer{}); err != nil {
		t.Fatalf("the tokenless agent's proposals beside 3 imported ones answered %v", err)
	}
	listed, total, _, err := q.List(ctx, "r", s, Cursor{}, 10, nil)
	if err != nil || total != 5 || len(listed) != 5 {
		t.Fatalf("listed %d of %d (%v), want 5", len(listed), total, err)
	}
	for _, p := range listed {
		if p.Proposer != "" || p.Imported != strings.HasPrefix(p.ID, "imp") {
			t.Errorf("%s listed with proposer %q, imported %v", p.ID, p.Proposer, p.Imported)
		}
	}
}

// TestListShowsOnlyVisibleProposals: a listing for a caller that may not
// see every scope (a token bound to one identity) leaves the others out
// before the page is cut, so each page is full while more remain and the
// cursor walks every visible one once; the count is of visible ones.
func TestListShowsOnlyVisibleProposals(t *testing.T) {
	q, s := newQueue(t), newStore(allCaps...)
	var recs []sdk.Record
	for i := range 7 {
		scope := sdk.RealmScope
		if i%2 == 0 {
			scope = sdk.IdentityScope("bob") // imports keep records as they were
		}
		r := fact(scope, fmt.Sprintf("p%d", i), Tag)
		r.ID, r.Status, r.CreatedAt = fmt.Sprintf("p%d", i), sdk.StatusQuarantined, time.UnixMilli(int64(1000+i)).UTC()
		recs = append(recs, r)
	}
	if _, err := s.Import(ctx, "r", recs); err != nil {
		t.Fatal(err)
	}
	if err := q.NoteImported(ctx, "r", s, recs); err != nil {
		t.Fatal(err)
	}
	visible := func(r *sdk.Record) bool { return r.Scope != sdk.IdentityScope("bob") }
	var seen []string
	after := Cursor{}
	for page := 0; ; page++ {
		listed, total, next, err := q.List(ctx, "r", s, after, 2, visible)
		if err != nil {
			t.Fatal(err)
		}
		if total != 3 {
			t.Errorf("page %d counts %d pending, want the 3 visible", page, total)
		}
		if next != (Cursor{}) && len(listed) != 2 {
			t.Errorf("page %d holds %d with more to come, want 2", page, len(listed))
		}
		for _, p := range listed {
			seen = append(seen, p.ID)
		}
		if next == (Cursor{}) || page > 5 {
			break
		}
		after = next
	}
	if fmt.Sprint(seen) != "[p1 p3 p5]" {
		t.Errorf("the pages listed %v, want [p1 p3 p5]", seen)
	}
}

// forgetting adds forget to the test store; partway forgets the first id
// asked and then fails, as markdown's forget stops at a file it cannot
// remove.
type forgetting struct {
	*store
	partway bool
}

var errDisk = errors.New("disk: cannot remove")

func (f forgetting) Remember(_ context.Context, _ string, recs []sdk.Record) ([]string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	ids := make([]string, len(recs))
	for i, r := range recs {
		f.records[r.ID] = r
		ids[i] = r.ID
	}
	return ids, nil
}

func (f forgetting) Forget(_ context.Context, _ string, ids []string) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.partway {
		ids = ids[:1]
	}
	for _, id := range ids {
		delete(f.records, id)
	}
	if f.partway {
		return len(ids), errDisk
	}
	return len(ids), nil
}

// proposedAndExported answers a queue whose store holds two pending
// proposals in mob:ops, and an application's export of records of the
// same content.
func proposedAndExported(t *testing.T, caps ...sdk.Capability) (*Queue, *store, []string, []sdk.Record) {
	t.Helper()
	q := newQueue(t)
	s := newStore(caps...)
	ids, err := q.Propose(ctx, "r", s, []sdk.Record{fact("mob:ops", "alpha"), fact("mob:ops", "beta")}, Proposer{Token: "bot"})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	var recs []sdk.Record
	for i, title := range []string{"alpha", "beta"} {
		r := fact("mob:ops", title)
		r.ID, r.Realm, r.Status, r.Trust, r.CreatedAt, r.UpdatedAt = fmt.Sprintf("app%d", i), "r", sdk.StatusActive, sdk.TrustApplication, now, now
		r.ContentHash = sdk.ContentHash(r.Title, r.Body)
		recs = append(recs, r)
	}
	return q, s, ids, recs
}

// TestImportPutsBackWhatAFailedForgetTook: a forget that fails partway
// took some proposals; the import fails and puts every one back (before,
// those it took were lost with no word but the disk's error).
func TestImportPutsBackWhatAFailedForgetTook(t *testing.T) {
	q, s, ids, recs := proposedAndExported(t, sdk.CapArchive, sdk.CapFetch, sdk.CapForget)
	if _, err := q.Import(ctx, "r", forgetting{s, true}, recs); !errors.Is(err, errDisk) {
		t.Fatalf("import = %v, want the forget's failure", err)
	}
	for _, id := range ids {
		if r, ok := s.records[id]; !ok || !IsPending(&r) {
			t.Errorf("proposal %s is not pending in the store after the failed import", id)
		}
	}
}

// TestRestatePutsBackWhatAFailedForgetTook: the same for a write in place
// of proposals.
func TestRestatePutsBackWhatAFailedForgetTook(t *testing.T) {
	_, s, ids, recs := proposedAndExported(t, sdk.CapArchive, sdk.CapFetch, sdk.CapForget, sdk.CapWrite)
	stored := make([]sdk.Record, len(ids))
	for i, id := range ids {
		stored[i] = s.records[id]
	}
	if _, err := Restate(ctx, "r", forgetting{s, true}, recs, stored); !errors.Is(err, errDisk) {
		t.Fatalf("restate = %v, want the forget's failure", err)
	}
	for _, id := range ids {
		if r, ok := s.records[id]; !ok || !IsPending(&r) {
			t.Errorf("proposal %s is not pending in the store after the failed write", id)
		}
	}
}

// TestImportWithoutForget: a provider that cannot forget imports as it
// did before, deciding itself what a proposal's content holds, instead
// of refusing the whole batch for one record an agent proposed.
func TestImportWithoutForget(t *testing.T) {
	q, s, _, recs := proposedAndExported(t, sdk.CapArchive, sdk.CapFetch)
	res, err := q.Import(ctx, "r", s, recs)
	if err != nil || res.Imported != len(recs) {
		t.Fatalf("import = %+v, %v; want the provider's import of both", res, err)
	}
}

// realmBlindRecall answers one record of realm "acme" to every recall, as
// a provider serving many realms that ignores its query's realm might.
type realmBlindRecall struct{ sdk.Provider }

func (p realmBlindRecall) Recall(ctx context.Context, q sdk.RecallQuery) ([]sdk.Hit, error) {
	return []sdk.Hit{{Record: sdk.Record{ID: "acme1", Realm: "acme", Scope: sdk.RealmScope, Kind: sdk.KindFact,
		Title: "Harbour hours", Body: "ACME-PRIVATE", Status: sdk.StatusActive, ContentHash: "acme-content"}, Score: 1}}, nil
}

// TestTargetKeepsToItsRealm: a proposal's target, shown to its reviewer
// whole and superseded on approval, is a record of the proposal's realm;
// a provider that ignores its query's realm had another realm's record
// answered as the target.
func TestTargetKeepsToItsRealm(t *testing.T) {
	p := realmBlindRecall{newStore(sdk.CapWrite, sdk.CapFetch)}
	prop := sdk.Record{ID: "p1", Realm: "default", Scope: sdk.RealmScope, Kind: sdk.KindFact, Title: "Harbour hours", Body: "nine"}
	if got, ok := Target(context.Background(), "default", p, &prop); ok {
		t.Errorf("the target of a proposal of realm default is realm %q's record %q", got.Realm, got.ID)
	}
}

// TestHolderKeepsToItsRealm: the record answered as holding a proposal's
// content (its id returned to the proposer) is one of the proposal's
// realm; a provider that ignores its recall's realm had another realm's
// record's id answered, telling the proposer that realm holds the
// content.
func TestHolderKeepsToItsRealm(t *testing.T) {
	p := realmBlindRecall{newStore(sdk.CapWrite, sdk.CapFetch)}
	hits, _ := p.Recall(context.Background(), sdk.RecallQuery{})
	r := sdk.Record{Realm: "default", Scope: sdk.RealmScope, Kind: sdk.KindFact, Title: "Harbour hours", Body: "nine", ContentHash: hits[0].Record.ContentHash}
	if id, found, err := holder(context.Background(), "default", p, nil, &r, time.Now()); err != nil || found {
		t.Errorf("holder = %q, %v, %v; want none: the only record holding the content is realm acme's", id, found, err)
	}
}

// TestListGoesOnPastReviewedProposals: from an outside review. The next
// page's cursor named the last proposal listed, and the ledger found its
// place by looking that entry up: once a reviewer approved or rejected
// it (the natural thing to do with the page just read), the next page
// was empty and had no next, as if the queue ended there, however many
// were pending after it. The cursor is now the place itself.
func TestListGoesOnPastReviewedProposals(t *testing.T) {
	cases := []struct {
		name     string
		reviewed []string // between the first page and the rest
		want     string   // what the pages after the first list
	}{
		{"nothing reviewed", nil, "[p2 p3 p4 p5]"},
		{"the cursor's own proposal", []string{"p1"}, "[p2 p3 p4 p5]"},
		{"the whole first page", []string{"p0", "p1"}, "[p2 p3 p4 p5]"},
		{"the next page's first", []string{"p2"}, "[p3 p4 p5]"},
		{"the cursor's and the next page's first", []string{"p1", "p2", "p3"}, "[p4 p5]"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			q, s := newQueue(t), newStore(append(allCaps, sdk.CapForget)...)
			p := forgetting{s, false}
			var recs []sdk.Record
			for i := range 6 {
				r := fact(sdk.RealmScope, fmt.Sprintf("p%d", i), Tag)
				// p2 and p3 share a created time: ties go by id.
				r.ID, r.Status, r.CreatedAt = fmt.Sprintf("p%d", i), sdk.StatusQuarantined, time.UnixMilli(int64(1000+i-min(i/3, 1))).UTC()
				recs = append(recs, r)
			}
			if _, err := s.Import(ctx, "r", recs); err != nil {
				t.Fatal(err)
			}
			if err := q.NoteImported(ctx, "r", s, recs); err != nil {
				t.Fatal(err)
			}
			first, _, next, err := q.List(ctx, "r", p, Cursor{}, 2, nil)
			if err != nil || len(first) != 2 || next == (Cursor{}) {
				t.Fatalf("first page: %d listed, next %v, %v", len(first), next, err)
			}
			for _, id := range c.reviewed {
				if err := q.Reject(ctx, "r", id, p, nil); err != nil {
					t.Fatal(err)
				}
			}
			var seen []string
			for page := 0; next != (Cursor{}) && page < 5; page++ {
				listed, _, n, err := q.List(ctx, "r", p, next, 2, nil)
				if err != nil {
					t.Fatal(err)
				}
				for _, p := range listed {
					seen = append(seen, p.ID)
				}
				next = n
			}
			if fmt.Sprint(seen) != c.want {
				t.Errorf("the pages after the first listed %v, want %s", seen, c.want)
			}
		})
	}
}

// TestParseCursor: a listing's next reads back as the same place; what
// no listing answered is refused, whatever its shape.
func TestParseCursor(t *testing.T) {
	for _, c := range []Cursor{{}, {CreatedMS: 1765100000000, ID: "r1a252846bb694e65b3ffc471b14"}, {CreatedMS: 0, ID: "a.b"}} {
		got, err := ParseCursor(c.String())
		if err != nil || got != c {
			t.Errorf("ParseCursor(%q) = %+v, %v; want %+v", c.String(), got, err, c)
		}
	}
	// An imported proposal keeps its record's created time, which may be
	// any a record holds (years 1-9999): before 1970 its place is
	// negative.
	for _, at := range []time.Time{time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(1969, 12, 31, 23, 59, 59, 999e6, time.UTC),
		time.Unix(0, 0), time.Date(9999, 12, 31, 23, 59, 59, 999e6, time.UTC)} {
		c := After(Entry{ID: "r1a252846bb694e65b3ffc471b14", CreatedAt: at})
		if got, err := ParseCursor(c.String()); err != nil || got != c {
			t.Errorf("ParseCursor(%q) of a proposal created %v = %+v, %v; want %+v", c.String(), at, got, err, c)
		}
	}
	for _, bad := range []string{"r1a252846bb694e65b3ffc471b14", "12.", ".r1", "-.r1", "--5.r1", "+5.r1", "5", "99999999999999999999.r1", "12.a/b", "12.~x", "1 2.r1"} {
		if c, err := ParseCursor(bad); err == nil {
			t.Errorf("ParseCursor(%q) = %+v, want a refusal", bad, c)
		}
	}
}
