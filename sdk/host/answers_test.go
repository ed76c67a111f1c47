package host_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/memhost/memhost/sdk"
	"github.com/memhost/memhost/sdk/host"
)

// liar is a provider and selector that answers whatever its fields say,
// whatever it was asked: a plugin that breaks the protocol.
type liar struct {
	hits      []sdk.Hit
	records   []sdk.Record
	ids       []string
	rows      []sdk.ManifestRow
	count     int
	next      string
	selection []string
}

func (l *liar) Info() sdk.Info {
	return sdk.Info{Name: "liar", Version: "0.1.0", Kinds: []sdk.PluginKind{sdk.KindProvider, sdk.KindSelector}, Protocols: []int{1},
		Capabilities: sdk.Capabilities{sdk.CapWrite, sdk.CapFetch, sdk.CapForget, sdk.CapManifest, sdk.CapSupersede, sdk.CapArchive, sdk.CapVectors, sdk.CapNeighbours}}
}
func (l *liar) Configure(context.Context, json.RawMessage) error { return nil }
func (l *liar) Recall(context.Context, sdk.RecallQuery) ([]sdk.Hit, error) {
	return l.hits, nil
}
func (l *liar) Remember(context.Context, string, []sdk.Record) ([]string, error) { return l.ids, nil }
func (l *liar) Get(context.Context, string, []string) ([]sdk.Record, error)      { return l.records, nil }
func (l *liar) Forget(context.Context, string, []string) (int, error)            { return l.count, nil }
func (l *liar) Manifest(context.Context, sdk.ManifestQuery) ([]sdk.ManifestRow, error) {
	return l.rows, nil
}
func (l *liar) Supersede(context.Context, string, string, sdk.Record) (string, error) {
	return l.next, nil
}
func (l *liar) Export(context.Context, string, string, int) (sdk.ExportPage, error) {
	return sdk.ExportPage{Records: l.records, Next: l.next}, nil
}
func (l *liar) Import(context.Context, string, []sdk.Record) (sdk.ImportResult, error) {
	return sdk.ImportResult{Imported: l.count}, nil
}
func (l *liar) PutVectors(context.Context, string, []sdk.RecordVector) error { return nil }
func (l *liar) MissingVectors(context.Context, string, string, string, int) ([]string, error) {
	return l.ids, nil
}
func (l *liar) ReadThread(context.Context, string, []sdk.ThreadPlace) ([]sdk.Record, error) {
	return l.records, nil
}
func (l *liar) Select(context.Context, sdk.SelectRequest) (sdk.Selection, error) {
	return sdk.Selection{IDs: l.selection}, nil
}

// rec is an active record of realm "a" in scope.
func rec(id string, scope sdk.Scope) sdk.Record {
	return sdk.Record{ID: id, Realm: "a", Scope: scope, Kind: sdk.KindFact, Title: "t " + id, Status: sdk.StatusActive, Trust: sdk.TrustAgentObserved}
}

func hit(id string, scope sdk.Scope, score float64) sdk.Hit {
	return sdk.Hit{Record: rec(id, scope), Score: score}
}

func hits(n int) []sdk.Hit {
	out := make([]sdk.Hit, n)
	for i := range out {
		out[i] = hit(fmt.Sprintf("r%d", i), sdk.RealmScope, 1)
	}
	return out
}

// A plugin's answer that breaks the protocol never reaches the host's
// callers: records of another realm or of a scope not asked, more than
// the limit, repeats, excluded or inactive records, scores that are no
// number, ids that are not ids, counts that cannot be. The host refuses
// the whole answer with ErrBadAnswer, naming no other tenant's values.
func TestAnswersOutOfContractAreRefused(t *testing.T) {
	l := &liar{}
	conn, err := host.ServeInProcess(t.Context(), l, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	p, err := conn.Provider()
	if err != nil {
		t.Fatal(err)
	}
	sel, err := conn.Selector()
	if err != nil {
		t.Fatal(err)
	}
	w, _ := p.Writer()
	g, _ := p.Getter()
	f, _ := p.Forgetter()
	m, _ := p.Lister()
	su, _ := p.Superseder()
	ar, _ := p.Archiver()
	vs, _ := p.VectorStore()
	ctx := t.Context()
	mine := sdk.IdentityScope("me")
	theirs := sdk.IdentityScope("someone-else")
	other := rec("x", sdk.RealmScope)
	other.Realm = "tenant-b"
	recall := func(q sdk.RecallQuery) func() error {
		return func() error { q.Realm = "a"; _, err := p.Recall(ctx, q); return err }
	}
	get := func() error { _, err := g.Get(ctx, "a", []string{"r1", "r2"}); return err }
	manifest := func(q sdk.ManifestQuery) func() error {
		return func() error { q.Realm = "a"; _, err := m.Manifest(ctx, q); return err }
	}
	exportAfter := func(after string) func() error {
		return func() error { _, err := ar.Export(ctx, "a", after, 2); return err }
	}
	export := exportAfter("")
	missing := func(after string, limit int) func() error {
		return func() error { _, err := vs.MissingVectors(ctx, "a", "m", after, limit); return err }
	}
	selectIDs := func() error {
		_, err := sel.Select(ctx, sdk.SelectRequest{Identity: sdk.Identity{Realm: "a", ID: "me"}, Max: 2,
			Rows: []sdk.ManifestRow{{ID: "r1", Scope: mine}, {ID: "r2", Scope: mine}, {ID: "r3", Scope: mine}}, SuppressedIDs: []string{"r3"}})
		return err
	}
	remember := func(n int) func() error {
		return func() error {
			recs := make([]sdk.Record, n)
			for i := range recs {
				recs[i] = sdk.Record{Scope: sdk.RealmScope, Kind: sdk.KindFact, Title: "same"}
			}
			_, err := w.Remember(ctx, "a", recs)
			return err
		}
	}
	// Over the protocol's message limit, which no answer within the
	// record limits reaches.
	huge := strings.Repeat("x", 70<<20)
	hugeHit := hit("r1", mine, 1)
	hugeHit.Record.Body = huge
	notActive := hit("r1", sdk.RealmScope, 1)
	notActive.Record.Status = sdk.StatusSuperseded
	foreignHit := sdk.Hit{Record: other, Score: 1}
	threadHit := hit("r1", mine, 1)
	threadHit.Record.Thread = &sdk.Thread{ID: "t", Seq: 1}
	beside := rec("r0", mine)
	beside.Thread = &sdk.Thread{ID: "t", Seq: 0}
	at := func(id string, when time.Time) sdk.Hit {
		h := hit(id, mine, 1)
		h.Record.OccurredAt = when
		return h
	}
	// Records over the limits every stored record keeps (review 65).
	shaped := func(change func(*sdk.Record)) sdk.Hit {
		h := hit("r1", mine, 1)
		change(&h.Record)
		return h
	}
	longBody := shaped(func(r *sdk.Record) { r.Body = strings.Repeat("b", sdk.MaxBodyBytes+1) })
	farFuture := shaped(func(r *sdk.Record) { r.CreatedAt = time.Date(12000, 1, 1, 0, 0, 0, 0, time.UTC) })
	manyTags := shaped(func(r *sdk.Record) { r.Tags = make([]string, sdk.MaxTags+1) })
	negativeUses := shaped(func(r *sdk.Record) { r.UseCount = -1 })
	longNeighbour := beside
	longNeighbour.Title = strings.Repeat("t", sdk.MaxTitleBytes+1)
	y2023 := sdk.RecallQuery{Since: time.Date(2023, 1, 1, 0, 0, 0, 0, time.UTC), Until: time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)}
	epoch := time.Unix(0, 0).UTC()
	cases := []struct {
		name   string
		answer liar
		call   func() error
		// ok: the answer keeps the protocol and must pass.
		ok bool
	}{
		{"recall within the contract", liar{hits: []sdk.Hit{hit("r1", mine, 2), hit("r2", mine, -1)}}, recall(sdk.RecallQuery{Scopes: []sdk.Scope{mine}}), true},
		{"recall with neighbours within the contract", liar{hits: []sdk.Hit{threadHit}, records: []sdk.Record{beside}}, recall(sdk.RecallQuery{Scopes: []sdk.Scope{mine}, Neighbours: 1}), true},
		{"recall of another realm", liar{hits: []sdk.Hit{hit("r1", sdk.RealmScope, 1), foreignHit}}, recall(sdk.RecallQuery{}), false},
		{"recall of a scope not asked", liar{hits: []sdk.Hit{hit("r1", theirs, 1)}}, recall(sdk.RecallQuery{Scopes: []sdk.Scope{mine}}), false},
		{"recall over the limit", liar{hits: hits(3)}, recall(sdk.RecallQuery{Limit: 2}), false},
		{"recall over the default limit", liar{hits: hits(sdk.DefaultRecallLimit + 1)}, recall(sdk.RecallQuery{}), false},
		{"recall at the default limit", liar{hits: hits(sdk.DefaultRecallLimit)}, recall(sdk.RecallQuery{}), true},
		{"recall repeating a record", liar{hits: []sdk.Hit{hit("r1", mine, 2), hit("r1", mine, 1)}}, recall(sdk.RecallQuery{}), false},
		{"recall repeating a record in a long answer", liar{hits: append(hits(40), hit("r7", sdk.RealmScope, 0))}, recall(sdk.RecallQuery{Limit: 100}), false},
		{"recall of an excluded record", liar{hits: []sdk.Hit{hit("r1", mine, 1)}}, recall(sdk.RecallQuery{ExcludeIDs: []string{"r1"}}), false},
		{"recall inside the window", liar{hits: []sdk.Hit{at("r1", time.Date(2023, 5, 1, 0, 0, 0, 0, time.UTC)), at("r2", y2023.Since)}}, recall(y2023), true},
		{"recall outside the window (a plugin ignoring it)", liar{hits: []sdk.Hit{at("r1", time.Date(2020, 5, 1, 0, 0, 0, 0, time.UTC))}}, recall(y2023), false},
		{"recall at the window's end", liar{hits: []sdk.Hit{at("r1", y2023.Until)}}, recall(y2023), false},
		// Stores keep the epoch as the millisecond before it.
		{"recall of the epoch since the epoch", liar{hits: []sdk.Hit{at("r1", epoch.Add(-time.Millisecond))}}, recall(sdk.RecallQuery{Since: epoch}), true},
		{"recall of the epoch until the epoch", liar{hits: []sdk.Hit{at("r1", epoch.Add(-time.Millisecond))}}, recall(sdk.RecallQuery{Until: epoch}), false},
		{"recall of a superseded record", liar{hits: []sdk.Hit{notActive}}, recall(sdk.RecallQuery{}), false},
		{"recall with a NaN score", liar{hits: []sdk.Hit{hit("r1", mine, math.NaN())}}, recall(sdk.RecallQuery{}), false},
		{"recall with an infinite score", liar{hits: []sdk.Hit{hit("r1", mine, math.Inf(1))}}, recall(sdk.RecallQuery{}), false},
		{"recall of an unsafe id", liar{hits: []sdk.Hit{hit("../r1", mine, 1)}}, recall(sdk.RecallQuery{}), false},
		{"recall of no id", liar{hits: []sdk.Hit{hit("", mine, 1)}}, recall(sdk.RecallQuery{}), false},
		{"recall answer over the message limit", liar{hits: []sdk.Hit{hugeHit}}, recall(sdk.RecallQuery{}), false},
		{"manifest chunk over the message limit", liar{rows: []sdk.ManifestRow{{ID: "r1", Scope: mine, Title: huge}}}, manifest(sdk.ManifestQuery{Tier: sdk.TierFull}), false},
		{"get within the contract", liar{records: []sdk.Record{rec("r2", mine)}}, get, true},
		{"recall of a body over the record limit", liar{hits: []sdk.Hit{longBody}}, recall(sdk.RecallQuery{}), false},
		{"recall of a time past year 9999", liar{hits: []sdk.Hit{farFuture}}, recall(sdk.RecallQuery{}), false},
		{"recall of too many tags", liar{hits: []sdk.Hit{manyTags}}, recall(sdk.RecallQuery{}), false},
		{"recall of a negative use count", liar{hits: []sdk.Hit{negativeUses}}, recall(sdk.RecallQuery{}), false},
		{"recall of a neighbour with a title over the limit", liar{hits: []sdk.Hit{threadHit}, records: []sdk.Record{longNeighbour}}, recall(sdk.RecallQuery{Scopes: []sdk.Scope{mine}, Neighbours: 1}), false},
		{"get of a body over the record limit", liar{records: []sdk.Record{longBody.Record}}, get, false},
		// A stored scope answered in another form (padded as a CHAR
		// column does, case-folded, empty) belongs to no identity the
		// host's checks can name, and a bound token read another
		// identity's record through it.
		{"get of a padded scope", liar{records: []sdk.Record{rec("r2", "identity:someone-else ")}}, get, false},
		{"get of a case-folded scope", liar{records: []sdk.Record{rec("r2", "IDENTITY:SOMEONE-ELSE")}}, get, false},
		{"recall of an empty scope", liar{hits: []sdk.Hit{hit("r1", "", 1)}}, recall(sdk.RecallQuery{}), false},
		{"export of a scope without its class", liar{records: []sdk.Record{rec("r1", "someone-else")}}, export, false},
		{"manifest of a scope without its class", liar{rows: []sdk.ManifestRow{{ID: "r1", Scope: "someone-else"}}}, manifest(sdk.ManifestQuery{Tier: sdk.TierFull}), false},
		{"export of a time past year 9999", liar{records: []sdk.Record{farFuture.Record}}, export, false},
		{"get of another realm", liar{records: []sdk.Record{other}}, get, false},
		{"get of an id not asked", liar{records: []sdk.Record{rec("r9", mine)}}, get, false},
		{"get of more records than ids", liar{records: []sdk.Record{rec("r1", mine), rec("r2", mine), rec("r1", mine)}}, get, false},
		{"manifest within the contract", liar{rows: []sdk.ManifestRow{{ID: "r1", Scope: mine}}}, manifest(sdk.ManifestQuery{Scopes: []sdk.Scope{mine}, Tier: sdk.TierFull}), true},
		{"manifest of a scope not asked", liar{rows: []sdk.ManifestRow{{ID: "r1", Scope: theirs}}}, manifest(sdk.ManifestQuery{Scopes: []sdk.Scope{mine}, Tier: sdk.TierFull}), false},
		{"manifest repeating a row", liar{rows: []sdk.ManifestRow{{ID: "r1", Scope: mine}, {ID: "r1", Scope: mine}}}, manifest(sdk.ManifestQuery{Tier: sdk.TierFull}), false},
		{"manifest over a working set's 2k", liar{rows: []sdk.ManifestRow{{ID: "r1", Scope: mine}, {ID: "r2", Scope: mine}, {ID: "r3", Scope: mine}}}, manifest(sdk.ManifestQuery{Tier: sdk.TierWorkingSet, K: 1}), false},
		// Rows over the limits of the records they list: a title of a
		// chunk's whole message made the bound on a full manifest's rows
		// none on its bytes, and a time JSON cannot hold failed the
		// caller's answer as the host's own error.
		{"manifest of a title over the record limit", liar{rows: []sdk.ManifestRow{{ID: "r1", Scope: mine, Title: strings.Repeat("t", sdk.MaxTitleBytes+1)}}}, manifest(sdk.ManifestQuery{Tier: sdk.TierFull}), false},
		{"manifest of a description over the record limit", liar{rows: []sdk.ManifestRow{{ID: "r1", Scope: mine, Description: strings.Repeat("d", sdk.MaxDescriptionBytes+1)}}}, manifest(sdk.ManifestQuery{Tier: sdk.TierWorkingSet, K: 1}), false},
		{"manifest of a time past year 9999", liar{rows: []sdk.ManifestRow{{ID: "r1", Scope: mine, UpdatedAt: time.Date(12000, 1, 1, 0, 0, 0, 0, time.UTC)}}}, manifest(sdk.ManifestQuery{Tier: sdk.TierFull}), false},
		{"manifest at the record limits", liar{rows: []sdk.ManifestRow{{ID: "r1", Scope: mine, Title: strings.Repeat("t", sdk.MaxTitleBytes), Description: strings.Repeat("d", sdk.MaxDescriptionBytes), UpdatedAt: time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)}}}, manifest(sdk.ManifestQuery{Tier: sdk.TierFull}), true},
		{"manifest with a NaN rank", liar{rows: []sdk.ManifestRow{{ID: "r1", Scope: mine, Rank: math.NaN()}}}, manifest(sdk.ManifestQuery{Tier: sdk.TierFull}), false},
		{"export within the contract", liar{records: []sdk.Record{rec("r1", mine), rec("r2", mine)}, next: "r2"}, export, true},
		{"export of another realm", liar{records: []sdk.Record{other}}, export, false},
		{"export over the limit", liar{records: []sdk.Record{rec("r1", mine), rec("r2", mine), rec("r3", mine)}}, export, false},
		{"export repeating a record", liar{records: []sdk.Record{rec("r1", mine), rec("r1", mine)}}, export, false},
		{"export with an unsafe cursor", liar{records: []sdk.Record{rec("r1", mine)}, next: "a/../b"}, export, false},
		// A cursor that does not move had callers ask for the same page
		// until their deadline.
		{"export out of id order", liar{records: []sdk.Record{rec("r2", mine), rec("r1", mine)}}, export, false},
		{"export of records before the cursor", liar{records: []sdk.Record{rec("r1", mine)}}, exportAfter("r5"), false},
		{"export of nothing with the cursor asked with", liar{next: "r5"}, exportAfter("r5"), false},
		{"export with a cursor before its last record", liar{records: []sdk.Record{rec("r1", mine), rec("r3", mine)}, next: "r2"}, export, false},
		{"export of nothing with a cursor past the one asked with", liar{next: "r6"}, exportAfter("r5"), true},
		{"select within the contract", liar{selection: []string{"r2", "r1"}}, selectIDs, true},
		{"select of a row not offered", liar{selection: []string{"r9"}}, selectIDs, false},
		{"select of a suppressed row", liar{selection: []string{"r3"}}, selectIDs, false},
		{"select over max", liar{selection: []string{"r1", "r2", "r1"}}, selectIDs, false},
		{"select repeating a row", liar{selection: []string{"r1", "r1"}}, selectIDs, false},
		{"remember of one content twice", liar{ids: []string{"r1", "r1"}}, remember(2), true},
		{"remember with too few ids", liar{ids: []string{"r1"}}, remember(2), false},
		{"remember with an unsafe id", liar{ids: []string{"r 1"}}, remember(1), false},
		{"forget of more than asked", liar{count: 3}, func() error { _, err := f.Forget(ctx, "a", []string{"r1"}); return err }, false},
		{"forget of a negative count", liar{count: -1}, func() error { _, err := f.Forget(ctx, "a", []string{"r1"}); return err }, false},
		{"supersede with an unsafe id", liar{next: "new\nid"}, func() error {
			_, err := su.Supersede(ctx, "a", "r1", sdk.Record{Title: "t"})
			return err
		}, false},
		{"import of more than given", liar{count: 2}, func() error {
			r := rec("r1", mine)
			now := time.Now().UTC()
			r.CreatedAt, r.UpdatedAt = now, now
			_, err := ar.Import(ctx, "a", []sdk.Record{r})
			return err
		}, false},
		{"missing vectors over the limit", liar{ids: []string{"r1", "r2"}}, missing("", 1), false},
		{"missing vectors in id order after the cursor", liar{ids: []string{"r2", "r3"}}, missing("r1", 2), true},
		{"missing vectors out of id order", liar{ids: []string{"r3", "r2"}}, missing("", 2), false},
		{"missing vectors not after the cursor", liar{ids: []string{"r1", "r2"}}, missing("r1", 2), false},
	}
	// A request over the limit is the caller's: too large, not the
	// plugin's fault.
	_, err = w.Remember(ctx, "a", []sdk.Record{{Scope: sdk.RealmScope, Kind: sdk.KindFact, Title: "t", Body: huge}})
	if !errors.Is(err, sdk.ErrTooLarge) || errors.Is(err, host.ErrBadAnswer) {
		t.Errorf("a request over the message limit: err = %v, want too large", err)
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			*l = c.answer
			err := c.call()
			if c.ok {
				if err != nil {
					t.Fatalf("an answer within the protocol was refused: %v", err)
				}
				return
			}
			if !errors.Is(err, host.ErrBadAnswer) {
				t.Fatalf("err = %v, want the answer refused as breaking the protocol", err)
			}
			if sdk.CodeOf(err) != sdk.CodeInternal {
				t.Errorf("code %s: a plugin's broken answer is no caller's mistake", sdk.CodeOf(err))
			}
			for _, leak := range []string{"tenant-b", "someone-else"} {
				if strings.Contains(err.Error(), leak) {
					t.Errorf("the error names another tenant's %q: %v", leak, err)
				}
			}
		})
	}
}

// TestAFullManifestHasABound: of a full manifest the host reads
// MaxFullManifestRows rows and one more, which tells the caller there were
// more, and no further. Before, the host read and held any number of
// rows: one request for 600,000 rows took the host from 47 MB to 2.2 GB
// (from an outside review).
func TestAFullManifestHasABound(t *testing.T) {
	rows := make([]sdk.ManifestRow, sdk.MaxFullManifestRows+5000)
	for i := range rows {
		rows[i] = sdk.ManifestRow{ID: fmt.Sprintf("r%d", i), Scope: sdk.RealmScope, Kind: sdk.KindFact, Title: "t"}
	}
	l := &liar{rows: rows}
	m, _ := servedProvider(t, l).Lister()
	q := sdk.ManifestQuery{Realm: "a", Scopes: []sdk.Scope{sdk.RealmScope}, Tier: sdk.TierFull}
	if got, err := m.Manifest(t.Context(), q); err != nil || len(got) != sdk.MaxFullManifestRows+1 || got[len(got)-1].ID != rows[sdk.MaxFullManifestRows].ID {
		t.Fatalf("a full manifest of %d rows: %d rows, %v; want the first %d and one more", len(rows), len(got), err, sdk.MaxFullManifestRows)
	}
	l.rows = rows[:sdk.MaxFullManifestRows]
	if got, err := m.Manifest(t.Context(), q); err != nil || len(got) != sdk.MaxFullManifestRows {
		t.Fatalf("a full manifest at the bound: %d rows, %v", len(got), err)
	}
}

// TestAnAnswerThatIsNotUTF8IsThePluginsFault: a plugin holding a record
// whose title is not valid UTF-8 cannot encode its answer; the host saw an
// internal error naming no one. It is now a bad answer, the plugin's.
func TestAnAnswerThatIsNotUTF8IsThePluginsFault(t *testing.T) {
	h := hit("r1", sdk.RealmScope, 1)
	h.Record.Title = "bad \xff title"
	l := &liar{hits: []sdk.Hit{h}, records: []sdk.Record{h.Record},
		rows: []sdk.ManifestRow{{ID: "r1", Scope: sdk.RealmScope, Kind: sdk.KindFact, Title: "bad \xff title"}}}
	p := servedProvider(t, l)
	if _, err := p.Recall(t.Context(), sdk.RecallQuery{Realm: "a", Query: "x"}); !errors.Is(err, host.ErrBadAnswer) {
		t.Fatalf("recall answered %v (code %s); want a bad answer", err, sdk.CodeOf(err))
	}
	// A streamed answer (the manifest's rows) likewise.
	m, _ := p.Lister()
	if _, err := m.Manifest(t.Context(), sdk.ManifestQuery{Realm: "a", Scopes: []sdk.Scope{sdk.RealmScope}, Tier: sdk.TierFull}); !errors.Is(err, host.ErrBadAnswer) {
		t.Fatalf("manifest answered %v (code %s); want a bad answer", err, sdk.CodeOf(err))
	}
	// A request that is not valid UTF-8 stays the caller's mistake.
	if _, err := p.Recall(t.Context(), sdk.RecallQuery{Realm: "a", Query: "bad \xff query"}); !errors.Is(err, sdk.ErrInvalid) || errors.Is(err, host.ErrBadAnswer) {
		t.Fatalf("a request that is not UTF-8 answered %v; want invalid input", err)
	}
}

// reindexLiar reports whatever progress and result it is given.
type reindexLiar struct {
	liar
	steps  [][2]int
	result int
}

func (r *reindexLiar) Info() sdk.Info {
	info := r.liar.Info()
	info.Capabilities = append(info.Capabilities, sdk.CapReindex)
	return info
}

func (r *reindexLiar) Reindex(_ context.Context, _ string, progress func(done, total int)) (int, error) {
	for _, s := range r.steps {
		progress(s[0], s[1])
	}
	return r.result, nil
}

// TestReindexProgressKeepsItsContract: a reindex's progress only grows and
// never passes its total, and its count is not negative; an answer
// otherwise is refused as the plugin's. Before, a client streamed
// {"done":-1,"total":-1} and "reindexed":-5 (from an outside review).
func TestReindexProgressKeepsItsContract(t *testing.T) {
	for _, c := range []struct {
		name   string
		steps  [][2]int
		result int
		ok     bool
	}{
		{"within the contract", [][2]int{{0, 10}, {5, 10}, {10, 10}}, 10, true},
		{"progress past its total", [][2]int{{20, 10}}, 10, false},
		{"negative progress", [][2]int{{-1, -1}}, 10, false},
		{"a negative count", nil, -5, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			ri, ok := servedProvider(t, &reindexLiar{steps: c.steps, result: c.result}).Reindexer()
			if !ok {
				t.Fatal("no reindexer")
			}
			var seen [][2]int
			n, err := ri.Reindex(t.Context(), "a", func(done, total int) { seen = append(seen, [2]int{done, total}) })
			if c.ok != (err == nil) || (!c.ok && !errors.Is(err, host.ErrBadAnswer)) {
				t.Fatalf("reindex = %d, %v (progress %v); want ok %v", n, err, seen, c.ok)
			}
			for _, s := range seen {
				if s[0] < 0 || s[0] > s[1] {
					t.Errorf("progress %v reached the caller", s)
				}
			}
		})
	}
}

// servedProvider serves plugin in-process for the test and answers its
// provider.
func servedProvider(t *testing.T, plugin sdk.Plugin) *host.Provider {
	t.Helper()
	conn, err := host.ServeInProcess(t.Context(), plugin, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(conn.Close)
	p, err := conn.Provider()
	if err != nil {
		t.Fatal(err)
	}
	return p
}
