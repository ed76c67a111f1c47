package sqlite

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/memhost/memhost/sdk"
	"github.com/memhost/memhost/sdk/conformance"
	"github.com/memhost/memhost/sdk/host"
)

const realm = "acme"

var (
	alice = sdk.IdentityScope("alice")
	bob   = sdk.IdentityScope("bob")
	team  = sdk.MobScope("team")
)

func TestInfo(t *testing.T) {
	s := New()
	if err := sdk.CheckPlugin(s); err != nil {
		t.Fatal(err)
	}
	info := s.Info()
	if info.Name != "sqlite" || !host.IsSemver(info.Version) {
		t.Errorf("name %q version %q", info.Name, info.Version)
	}
	for _, c := range []sdk.Capability{sdk.CapWrite, sdk.CapFetch, sdk.CapForget, sdk.CapManifest, sdk.CapSupersede, sdk.CapUsage, sdk.CapLedger} {
		if !sdk.Supports(s, c) {
			t.Errorf("capability %s not supported", c)
		}
	}
	var schema map[string]any
	if err := json.Unmarshal(info.ConfigSchema, &schema); err != nil {
		t.Fatalf("config schema is not JSON: %v", err)
	}
	if schema["additionalProperties"] != false {
		t.Errorf("config schema allows unknown keys")
	}
}

func TestParseConfig(t *testing.T) {
	good := []struct{ raw, path string }{
		{``, DefaultPath},
		{`{}`, DefaultPath},
		{` {"path": ""} `, DefaultPath},
		{`{"path": "data/mem.db"}`, "data/mem.db"},
		{`{"path": "m.db", "posting_budget": 2000}`, "m.db"},
		{`{"path": "m.db", "ledger_retention_hours": 2562047, "ledger_max_rows": 1}`, "m.db"},
		{`{"path": "/abs/with space?#.db"}`, "/abs/with space?#.db"},
	}
	for _, c := range good {
		cfg, err := ParseConfig(json.RawMessage(c.raw))
		if err != nil || cfg.Path != c.path {
			t.Errorf("ParseConfig(%s) = %+v, %v; want path %q", c.raw, cfg, err, c.path)
		}
	}
	bad := []struct{ raw, mention string }{
		{`{"path": "x.db", "bogus": 1}`, "bogus"},
		{`{"Path ": "x"}`, "unknown field"},
		{`[]`, "object"},
		{`null`, "object"},
		{`"memory.db"`, "object"},
		{`{"path": 1}`, "path"},
		{`{"path": "a"} {"path": "b"}`, "after"},
		{`{"path": ":memory:"}`, "in-memory"},
		{`{"path": "file:x.db?mode=ro"}`, "URI"},
		{`{"path": "   "}`, "blank"},
		{`{"path": "a\u0000b"}`, "NUL"},
		{`{"path": "dir/"}`, "directory"},
		{`{`, "config"},
		{`{"posting_budget": -1}`, "posting_budget"},
		{`{"posting_budget": 1.5}`, "posting_budget"},
		{`{"ledger_max_rows": -1}`, "ledger_max_rows"},
		{`{"ledger_retention_hours": -1}`, "ledger_retention_hours"},
		{`{"ledger_retention_hours": 2562048}`, "ledger_retention_hours"},
	}
	for _, c := range bad {
		_, err := ParseConfig(json.RawMessage(c.raw))
		wantErr(t, "ParseConfig("+c.raw+")", err, sdk.ErrInvalid, c.mention)
	}
}

func FuzzParseConfig(f *testing.F) {
	for _, seed := range []string{``, `{}`, `{"path":"m.db"}`, `{"path":":memory:"}`, `[1]`, `{"path":"a","x":1}`, `{"path":"\u0000"}`, `{} x`} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		cfg, err := ParseConfig(json.RawMessage(raw))
		if err != nil {
			if !strings.Contains(err.Error(), "sqlite") {
				t.Errorf("error %q does not name the plugin", err)
			}
			return
		}
		if cfg.Path == "" || checkPath(cfg.Path) != nil {
			t.Errorf("accepted config %q with unusable path %q", raw, cfg.Path)
		}
	})
}

func TestCallsBeforeConfigureAndAfterClose(t *testing.T) {
	ctx := context.Background()
	s := newStore()
	_, err := s.Recall(ctx, sdk.RecallQuery{Realm: realm, Query: "x"})
	wantErr(t, "Recall before Configure", err, sdk.ErrUnavailable, "not configured")
	s = openAt(t, t.TempDir()+"/m.db")
	err = s.Configure(ctx, configJSON(t.TempDir()+"/other.db"))
	wantErr(t, "second Configure", err, sdk.ErrConflict, "already configured")
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	_, err = s.Remember(ctx, realm, []sdk.Record{rec(alice, "t", "b")})
	wantErr(t, "Remember after Close", err, sdk.ErrUnavailable, "closed")
}

func TestRoundTrip(t *testing.T) {
	s, c := open(t, nil)
	ctx := context.Background()
	expires := c.now().Add(48 * time.Hour)
	in := []sdk.Record{
		{Scope: alice, Kind: sdk.KindPreference, Title: "Editor", Description: "Alice edits in vim", Body: "Prefers vim keybindings everywhere.", Tags: []string{"Tools", "editor"}, Trust: sdk.TrustOperator},
		{Scope: team, Kind: sdk.KindGotcha, Title: "Deploys", Body: "Never deploy on Fridays.", ExpiresAt: expires, CreatedAt: c.now().Add(-time.Hour)},
		{Scope: sdk.RealmScope, Kind: sdk.KindReference, Title: "", Body: "Body only, 中文 and émigré text."},
	}
	ids := mustRemember(t, s, realm, in...)
	got := mustGet(t, s, realm, ids[2], "r-unknown", ids[0], ids[1])
	if len(got) != 3 || got[0].ID != ids[2] || got[1].ID != ids[0] || got[2].ID != ids[1] {
		t.Fatalf("Get answered %v, want ids %v in the asked order", got, []string{ids[2], ids[0], ids[1]})
	}
	now := c.now().Truncate(time.Millisecond)
	for i, want := range []sdk.Record{in[2], in[0], in[1]} {
		g := got[i]
		switch {
		case g.Realm != realm, g.Scope != want.Scope, g.Kind != want.Kind, g.Title != want.Title,
			g.Description != want.Description, g.Body != want.Body, !slices.Equal(g.Tags, want.Tags):
			t.Errorf("record %d content: got %+v, want %+v", i, g, want)
		case g.Status != sdk.StatusActive, g.ContentHash != sdk.ContentHash(want.Title, want.Body):
			t.Errorf("record %d: status %q hash %q", i, g.Status, g.ContentHash)
		case !g.UpdatedAt.Equal(now):
			t.Errorf("record %d updated %v, want %v", i, g.UpdatedAt, now)
		case !g.ExpiresAt.Equal(want.ExpiresAt.Truncate(time.Millisecond)):
			t.Errorf("record %d expires %v, want %v", i, g.ExpiresAt, want.ExpiresAt)
		}
	}
	if got[1].Trust != sdk.TrustOperator || got[0].Trust != sdk.TrustAgentObserved {
		t.Errorf("trust: %q, %q", got[1].Trust, got[0].Trust)
	}
	if !got[2].CreatedAt.Equal(in[1].CreatedAt) {
		t.Errorf("created %v, want the caller's %v", got[2].CreatedAt, in[1].CreatedAt)
	}
	// Empty batches are fine and store nothing.
	if ids, err := s.Remember(ctx, realm, nil); err != nil || len(ids) != 0 {
		t.Errorf("Remember(nil) = %v, %v", ids, err)
	}
	if recs := mustGet(t, s, realm); len(recs) != 0 {
		t.Errorf("Get() = %v", recs)
	}
}

func TestRememberIsIdempotentByContent(t *testing.T) {
	s, c := open(t, nil)
	ctx := context.Background()
	a := rec(alice, "Coffee", "Alice drinks espresso.")
	ids := mustRemember(t, s, realm, a, rec(alice, "Tea", "Bob drinks tea."), a)
	if ids[0] != ids[2] || ids[0] == ids[1] {
		t.Fatalf("duplicate in one batch: ids %v", ids)
	}
	again := mustRemember(t, s, realm, a)
	if again[0] != ids[0] {
		t.Errorf("duplicate in a later batch answered %s, want %s", again[0], ids[0])
	}
	other := mustRemember(t, s, realm, rec(bob, a.Title, a.Body))
	if other[0] == ids[0] {
		t.Errorf("same content in another scope answered the same id")
	}
	if n := rowCount(t, s, "records"); n != 3 {
		t.Errorf("%d rows stored, want 3", n)
	}
	// A duplicate of an expired copy revives it with the new expiry, and
	// the index keeps all it knew of the record: its time for the
	// since/until filter, its thread for its neighbour's context.
	exp := rec(alice, "Parking", "Level 3, spot 12.")
	exp.ExpiresAt = c.now().Add(time.Hour)
	exp.OccurredAt = time.Date(2023, 5, 27, 9, 0, 0, 0, time.UTC)
	exp.Thread = &sdk.Thread{ID: "errands", Seq: 1}
	neighbour := rec(alice, "Car", "The garage closes at ten.")
	neighbour.Thread = &sdk.Thread{ID: "errands", Seq: 2}
	first := mustRemember(t, s, realm, exp, neighbour)[0]
	c.advance(2 * time.Hour)
	// (The neighbour holds "parking" in its context.)
	if hits := recallIDs(t, s, sdk.RecallQuery{Realm: realm, Query: "parking"}); slices.Contains(hits, first) {
		t.Fatalf("expired record recalled: %v", hits)
	}
	exp.ExpiresAt = c.now().Add(time.Hour)
	if id := mustRemember(t, s, realm, exp)[0]; id != first {
		t.Errorf("duplicate of expired copy answered %s, want %s", id, first)
	}
	if hits := recallIDs(t, s, sdk.RecallQuery{Realm: realm, Query: "parking"}); len(hits) == 0 || hits[0] != first {
		t.Errorf("revived record not recalled first: %v", hits)
	}
	may := sdk.RecallQuery{Realm: realm, Query: "parking", Since: time.Date(2023, 5, 1, 0, 0, 0, 0, time.UTC), Until: time.Date(2023, 6, 1, 0, 0, 0, 0, time.UTC)}
	if hits := recallIDs(t, s, may); !slices.Equal(hits, []string{first}) {
		t.Errorf("revived record not recalled in the May it happened: %v", hits)
	}
	if hits := recallIDs(t, s, sdk.RecallQuery{Realm: realm, Query: "garage"}); !slices.Contains(hits, first) {
		t.Errorf("revived record lost its thread: its neighbour's word finds %v", hits)
	}
	// After forget, the same content is stored anew.
	if _, err := s.Forget(ctx, realm, []string{ids[0]}); err != nil {
		t.Fatal(err)
	}
	if id := mustRemember(t, s, realm, a)[0]; id == ids[0] {
		t.Errorf("content remembered after forget answered the forgotten id")
	}
}

func TestRememberIsAllOrNothing(t *testing.T) {
	s, _ := open(t, nil)
	ctx := context.Background()
	first := mustRemember(t, s, realm, rec(alice, "One", "first"))[0]
	taken := rec(alice, "Two", "different content")
	taken.ID = first
	_, err := s.Remember(ctx, realm, []sdk.Record{rec(alice, "Fresh", "would be new"), taken})
	wantErr(t, "Remember with a taken id", err, sdk.ErrConflict, "records[1]", first)
	if n := rowCount(t, s, "records"); n != 1 {
		t.Errorf("%d rows after a failed batch, want 1", n)
	}
	if hits := recallIDs(t, s, sdk.RecallQuery{Realm: realm, Query: "fresh"}); len(hits) != 0 {
		t.Errorf("record of a failed batch is recalled: %v", hits)
	}
}

func TestBadInputChangesNothing(t *testing.T) {
	s, _ := open(t, nil)
	ctx := context.Background()
	existing := mustRemember(t, s, realm, rec(alice, "Keep", "keep me"))[0]
	big := strings.Repeat("x", sdk.MaxTitleBytes+1)
	cases := []struct {
		name     string
		realm    string
		recs     []sdk.Record
		sentinel error
		mention  string
	}{
		{"empty realm", "", []sdk.Record{rec(alice, "t", "b")}, sdk.ErrInvalid, "realm"},
		{"bad realm", "a/b", []sdk.Record{rec(alice, "t", "b")}, sdk.ErrInvalid, "realm"},
		{"empty title and body", realm, []sdk.Record{rec(alice, " ", "")}, sdk.ErrInvalid, "title"},
		{"title too large", realm, []sdk.Record{rec(alice, big, "b")}, sdk.ErrTooLarge, "title"},
		{"invalid utf-8", realm, []sdk.Record{rec(alice, "t", "\xff\xfe")}, sdk.ErrInvalid, "body"},
		{"unknown kind", realm, []sdk.Record{{Scope: alice, Kind: "rumour", Title: "t"}}, sdk.ErrInvalid, "kind"},
		{"bad scope", realm, []sdk.Record{rec("identity:../x", "t", "b")}, sdk.ErrInvalid, "scope"},
		{"bad id", realm, []sdk.Record{{ID: "../etc", Scope: alice, Kind: sdk.KindFact, Title: "t"}}, sdk.ErrInvalid, "id"},
		{"other realm", realm, []sdk.Record{{Realm: "other", Scope: alice, Kind: sdk.KindFact, Title: "t"}}, sdk.ErrInvalid, "realm"},
		{"bad tag", realm, []sdk.Record{rec(alice, "t", "b", "a,b")}, sdk.ErrInvalid, "tags[0]"},
		{"second of two bad", realm, []sdk.Record{rec(alice, "ok", "fine"), rec(alice, "", "")}, sdk.ErrInvalid, "records[1]"},
		{"batch too large", realm, make([]sdk.Record, sdk.MaxBatch+1), sdk.ErrTooLarge, "limit"},
	}
	sp := conformance.Served(t, s)
	for _, c := range cases {
		_, err := sp.Remember(ctx, c.realm, c.recs)
		wantErr(t, c.name, err, c.sentinel, c.mention)
	}
	_, err := sp.Get(ctx, realm, []string{"ok", "no/slash"})
	wantErr(t, "Get with a bad id", err, sdk.ErrInvalid, "ids[1]")
	_, err = sp.Forget(ctx, realm, []string{existing, ""})
	wantErr(t, "Forget with a bad id", err, sdk.ErrInvalid, "ids[1]")
	err = sp.MarkUsed(ctx, realm, []string{existing, "bad id"}, time.Time{})
	wantErr(t, "MarkUsed with a bad id", err, sdk.ErrInvalid, "ids[1]")
	_, err = sp.Recall(ctx, sdk.RecallQuery{Realm: realm, Query: "keep", Scopes: []sdk.Scope{"nope"}})
	wantErr(t, "Recall with a bad scope", err, sdk.ErrInvalid, "scopes[0]")
	_, err = sp.Recall(ctx, sdk.RecallQuery{Realm: realm, Query: "keep", Limit: -1})
	wantErr(t, "Recall with a negative limit", err, sdk.ErrInvalid, "limit")
	_, err = sp.Supersede(ctx, realm, existing, sdk.Record{Title: "", Body: ""})
	wantErr(t, "Supersede with an empty replacement", err, sdk.ErrInvalid, "title")

	if n := rowCount(t, s, "records"); n != 1 {
		t.Errorf("%d rows after bad input, want 1", n)
	}
	got := mustGet(t, s, realm, existing)
	if len(got) != 1 || got[0].Status != sdk.StatusActive || got[0].UseCount != 0 {
		t.Errorf("existing record changed: %+v", got)
	}
}

func TestRealmAndScopeIsolation(t *testing.T) {
	s, _ := open(t, nil)
	ctx := context.Background()
	a := mustRemember(t, s, realm, rec(alice, "Secret plan", "alpha launch"), rec(bob, "Bob plan", "alpha retreat"), rec(team, "Team plan", "alpha review"))
	b := mustRemember(t, s, "other", rec(alice, "Secret plan", "alpha launch"))
	if a[0] == b[0] {
		t.Fatal("the same content in two realms answered one id")
	}
	if ids := recallIDs(t, s, sdk.RecallQuery{Realm: "other", Query: "alpha plan"}); !slices.Equal(ids, b) {
		t.Errorf("realm other recalled %v, want only %v", ids, b)
	}
	if ids := recallIDs(t, s, sdk.RecallQuery{Realm: realm, Query: "alpha", Scopes: []sdk.Scope{alice, team}}); !slices.Equal(sortedCopy(ids), sortedCopy([]string{a[0], a[2]})) {
		t.Errorf("scopes alice+team recalled %v", ids)
	}
	if ids := recallIDs(t, s, sdk.RecallQuery{Realm: realm, Query: "alpha"}); len(ids) != 3 {
		t.Errorf("all scopes recalled %v", ids)
	}
	if recs := mustGet(t, s, "other", a...); len(recs) != 0 {
		t.Errorf("Get across realms answered %v", recs)
	}
	if n, err := s.Forget(ctx, "other", a); err != nil || n != 0 {
		t.Errorf("Forget across realms = %d, %v", n, err)
	}
	if err := s.MarkUsed(ctx, "other", a, time.Time{}); err != nil {
		t.Fatal(err)
	}
	if recs := mustGet(t, s, realm, a...); len(recs) != 3 || recs[0].UseCount != 0 {
		t.Errorf("records touched from another realm: %+v", recs)
	}
	rows, err := s.Manifest(ctx, sdk.ManifestQuery{Realm: "other", Tier: sdk.TierFull})
	if err != nil || len(rows) != 1 || rows[0].ID != b[0] {
		t.Errorf("manifest of realm other = %v, %v", rows, err)
	}
	if _, err := s.Supersede(ctx, "other", a[0], rec(alice, "x", "y")); err == nil {
		t.Error("Supersede across realms succeeded")
	}
}

func TestRecallFilters(t *testing.T) {
	s, c := open(t, nil)
	ctx := context.Background()
	quarantined := rec(alice, "Quarantined note", "zebra stripes")
	quarantined.Status = sdk.StatusQuarantined
	expiring := rec(alice, "Expiring note", "zebra crossing")
	expiring.ExpiresAt = c.now().Add(time.Minute)
	ids := mustRemember(t, s, realm,
		rec(alice, "Go note", "zebra in go", "Go", "Backend"),
		rec(alice, "Rust note", "zebra in rust", "rust", "backend"),
		rec(alice, "Web note", "zebra in web", "frontend"),
		quarantined, expiring,
	)
	cases := []struct {
		name string
		q    sdk.RecallQuery
		want []string
	}{
		{"all recallable", sdk.RecallQuery{Query: "zebra"}, []string{ids[0], ids[1], ids[2], ids[4]}},
		{"tag, case-folded", sdk.RecallQuery{Query: "zebra", Tags: []string{"BACKEND"}}, []string{ids[0], ids[1]}},
		{"all tags", sdk.RecallQuery{Query: "zebra", Tags: []string{"backend", "go"}}, []string{ids[0]}},
		{"exclude any tag", sdk.RecallQuery{Query: "zebra", ExcludeTags: []string{"Rust", "FRONTEND"}}, []string{ids[0], ids[4]}},
		{"exclude ids", sdk.RecallQuery{Query: "zebra", ExcludeIDs: []string{ids[0], ids[4], "unknown"}}, []string{ids[1], ids[2]}},
		{"tag nobody has", sdk.RecallQuery{Query: "zebra", Tags: []string{"back"}}, nil},
		{"limit", sdk.RecallQuery{Query: "zebra go", Limit: 1}, []string{ids[0]}},
		{"no terms", sdk.RecallQuery{Query: "the and of ?!"}, nil},
		{"empty", sdk.RecallQuery{}, nil},
	}
	for _, tc := range cases {
		tc.q.Realm = realm
		got := recallIDs(t, s, tc.q)
		if tc.q.Limit > 0 {
			if !slices.Equal(got, tc.want) {
				t.Errorf("%s: recalled %v, want %v", tc.name, got, tc.want)
			}
		} else if !slices.Equal(sortedCopy(got), sortedCopy(tc.want)) {
			t.Errorf("%s: recalled %v, want %v", tc.name, got, tc.want)
		}
	}
	c.advance(time.Minute)
	if got := recallIDs(t, s, sdk.RecallQuery{Realm: realm, Query: "crossing"}); len(got) != 0 {
		t.Errorf("expired record recalled: %v", got)
	}
	if got := mustGet(t, s, realm, ids[3], ids[4]); len(got) != 2 {
		t.Errorf("Get must answer quarantined and expired records: %v", got)
	}
	// The default limit applies when none is given.
	var many []sdk.Record
	for i := range sdk.DefaultRecallLimit + 5 {
		many = append(many, rec(bob, fmt.Sprintf("Walrus %d", i), "walrus facts"))
	}
	mustRemember(t, s, realm, many...)
	if got := recallIDs(t, s, sdk.RecallQuery{Realm: realm, Query: "walrus"}); len(got) != sdk.DefaultRecallLimit {
		t.Errorf("default limit answered %d hits", len(got))
	}
	_ = ctx
}

func TestFieldWeightsOrderRecall(t *testing.T) {
	s, _ := open(t, nil)
	// Each record holds the term once, in one field, and has the same
	// number of tokens overall, so only the field decides.
	ids := mustRemember(t, s, realm,
		sdk.Record{Scope: alice, Kind: sdk.KindFact, Title: "alpha beta", Description: "gamma delta", Body: "quokka epsilon"},
		sdk.Record{Scope: alice, Kind: sdk.KindFact, Title: "alpha beta", Description: "gamma quokka", Body: "delta epsilon"},
		sdk.Record{Scope: alice, Kind: sdk.KindFact, Title: "alpha quokka", Description: "gamma delta", Body: "beta epsilon"},
		sdk.Record{Scope: alice, Kind: sdk.KindFact, Title: "alpha beta", Description: "gamma delta", Body: "epsilon", Tags: []string{"quokka"}},
	)
	hits := mustRecall(t, s, sdk.RecallQuery{Realm: realm, Query: "quokka"})
	want := []string{ids[3], ids[2], ids[1], ids[0]} // tag, title, description, body
	got := make([]string, len(hits))
	for i, h := range hits {
		got[i] = h.Record.ID
		if i > 0 && !(h.Score < hits[i-1].Score) {
			t.Errorf("hit %d scores %v, not below hit %d's %v", i, h.Score, i-1, hits[i-1].Score)
		}
		if h.Score <= 0 {
			t.Errorf("hit %d scores %v, want > 0", i, h.Score)
		}
	}
	if !slices.Equal(got, want) {
		t.Errorf("order %v, want tag, title, description, body: %v", got, want)
	}
}

func TestCJKRecall(t *testing.T) {
	s, _ := open(t, nil)
	ids := mustRemember(t, s, realm,
		rec(alice, "北京的天气", "今天北京天气很好，适合出去散步。"),
		rec(alice, "上海美食", "小笼包和生煎是上海的特色。"),
		rec(alice, "東京の天気", "明日は東京で雨が降るでしょう。"),
		rec(alice, "English", "The weather in Beijing is fine."),
		rec(alice, "新しいサーバー", "データベースのサーバーが落ちた。"),
		rec(alice, "サ バ ー", "ー バ サ"),
		rec(alice, "ภาษาไทย", "ภาษาไทยไม่มีช่องว่างระหว่างคำ"),
	)
	cases := []struct{ query, want string }{
		{"北京天气怎么样", ids[0]},
		{"上海有什么好吃的小笼包", ids[1]},
		{"東京の天気は？", ids[2]},
		// The length mark ー is of the kana run: the word is found, not
		// the record holding its letters apart.
		{"サーバー", ids[4]},
		{"データベース", ids[4]},
		// Thai has no spaces: a word inside a sentence is found.
		{"ช่องว่าง", ids[6]},
	}
	for _, c := range cases {
		got := recallIDs(t, s, sdk.RecallQuery{Realm: realm, Query: c.query})
		if len(got) == 0 || got[0] != c.want {
			t.Errorf("Recall(%q) = %v, want %s first", c.query, got, c.want)
		}
	}
}

func TestQuerySyntaxIsInert(t *testing.T) {
	s, _ := open(t, nil)
	ids := mustRemember(t, s, realm,
		rec(alice, "near and or not", "Operators as words: NEAR AND OR NOT."),
		rec(alice, "Plain", "title body description tags columns"),
	)
	queries := []string{
		`NEAR(`, `NEAR(near and, 2)`, `"`, `"unbalanced`, `""`, `*`, `near*`, `AND`, `and OR not`, `NOT near`,
		`title:plain`, `{title body}: plain`, `^near`, `(near`, `near)`, `+near -and`, `near AND`, `'near'`,
		`- near`, `col:`, `\"near\"`, "near\x00and", `rank MATCH 'x'`, `); DROP TABLE records; --`, "\xff\xfe",
	}
	for _, q := range queries {
		hits, err := s.Recall(context.Background(), sdk.RecallQuery{Realm: realm, Query: q})
		if err != nil {
			t.Errorf("Recall(%q): %v", q, err)
			continue
		}
		for _, h := range hits {
			if h.Record.ID != ids[0] && h.Record.ID != ids[1] {
				t.Errorf("Recall(%q) answered unknown %s", q, h.Record.ID)
			}
		}
		// Whatever the syntax, a term matches literally: "plain" finds
		// only the record holding it.
		if strings.Contains(q, "plain") && (len(hits) != 1 || hits[0].Record.ID != ids[1]) {
			t.Errorf("Recall(%q) = %v, want only the plain record", q, hits)
		}
	}
	if n := rowCount(t, s, "records"); n != 2 {
		t.Errorf("%d records after hostile queries", n)
	}
}
