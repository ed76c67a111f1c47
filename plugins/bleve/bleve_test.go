package bleve

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/memhost/memhost/sdk"
	"github.com/memhost/memhost/sdk/conformance"
	"github.com/memhost/memhost/sdk/host"
	"github.com/memhost/memhost/sdk/usage"
)

var ctx = context.Background()

const realm = "default"

func configJSON(dir string) json.RawMessage {
	raw, _ := json.Marshal(Config{Dir: dir})
	return raw
}

// newProvider configures a provider on dir (a fresh temp dir when empty)
// and closes it when the test ends.
func newProvider(t testing.TB, dir string) *Provider {
	t.Helper()
	if dir == "" {
		dir = t.TempDir()
	}
	p := NewWithLogger(nil)
	if err := p.Configure(ctx, configJSON(dir)); err != nil {
		t.Fatalf("Configure(%s): %v", dir, err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

func rec(scope, title, body string, tags ...string) sdk.Record {
	return sdk.Record{Scope: sdk.Scope(scope), Kind: sdk.KindFact, Title: title, Body: body, Tags: tags}
}

func remember(t testing.TB, p *Provider, realm string, recs ...sdk.Record) []string {
	t.Helper()
	ids, err := p.Remember(ctx, realm, recs)
	if err != nil {
		t.Fatalf("Remember: %v", err)
	}
	if len(ids) != len(recs) {
		t.Fatalf("Remember answered %d ids for %d records", len(ids), len(recs))
	}
	return ids
}

func recallIDs(t testing.TB, p *Provider, q sdk.RecallQuery) []string {
	t.Helper()
	if q.Realm == "" {
		q.Realm = realm
	}
	hits, err := p.Recall(ctx, q)
	if err != nil {
		t.Fatalf("Recall(%+v): %v", q, err)
	}
	ids := make([]string, len(hits))
	for i, h := range hits {
		ids[i] = h.Record.ID
	}
	return ids
}

func sorted(ids []string) []string {
	out := slices.Clone(ids)
	slices.Sort(out)
	return out
}

func TestParseConfig(t *testing.T) {
	cases := []struct {
		name    string
		raw     string
		wantDir string
		wantErr error
	}{
		{"empty means defaults", ``, DefaultDir, nil},
		{"null means defaults", `null`, DefaultDir, nil},
		{"empty object", `{}`, DefaultDir, nil},
		{"dir", `{"dir": "/var/lib/memhost/bleve"}`, "/var/lib/memhost/bleve", nil},
		{"unknown key", `{"dir": "x", "path": "y"}`, "", sdk.ErrInvalid},
		{"blank dir", `{"dir": "  "}`, "", sdk.ErrInvalid},
		{"dir of wrong type", `{"dir": 3}`, "", sdk.ErrInvalid},
		{"not an object", `["dir"]`, "", sdk.ErrInvalid},
		{"trailing data", `{"dir": "x"} {}`, "", sdk.ErrInvalid},
		{"broken json", `{"dir": `, "", sdk.ErrInvalid},
		{"nul in dir", `{"dir": "a\u0000b"}`, "", sdk.ErrInvalid},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg, err := ParseConfig(json.RawMessage(c.raw))
			if !errors.Is(err, c.wantErr) || (c.wantErr == nil) != (err == nil) {
				t.Fatalf("ParseConfig(%s) error = %v, want %v", c.raw, err, c.wantErr)
			}
			if err == nil && cfg.Dir != c.wantDir {
				t.Fatalf("dir = %q, want %q", cfg.Dir, c.wantDir)
			}
		})
	}
}

func FuzzParseConfig(f *testing.F) {
	for _, s := range []string{``, `{}`, `null`, `{"dir":"x"}`, `{"dir":""}`, `{"dir":1}`, `{"x":1}`, `[]`, `{"dir":"a"}{}`, "{\"dir\":\"\\u0000\"}"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		cfg, err := ParseConfig(json.RawMessage(raw))
		if err != nil {
			if !errors.Is(err, sdk.ErrInvalid) {
				t.Fatalf("ParseConfig(%q) error %v does not wrap ErrInvalid", raw, err)
			}
			return
		}
		if strings.TrimSpace(cfg.Dir) == "" {
			t.Fatalf("ParseConfig(%q) accepted a blank dir", raw)
		}
	})
}

func TestInfo(t *testing.T) {
	p := New()
	if err := sdk.CheckPlugin(p); err != nil {
		t.Fatal(err)
	}
	info := p.Info()
	if info.Name != "bleve" || !host.IsSemver(info.Version) {
		t.Fatalf("info = %+v", info)
	}
	for _, c := range []sdk.Capability{sdk.CapWrite, sdk.CapFetch, sdk.CapForget, sdk.CapManifest, sdk.CapSupersede, sdk.CapUsage, sdk.CapArchive, sdk.CapReindex, sdk.CapNeighbours} {
		if !sdk.Supports(p, c) {
			t.Errorf("capability %s not supported", c)
		}
	}
	if sdk.Supports(p, sdk.CapLedger) {
		t.Error("ledger is declared but not kept")
	}
	var schema map[string]any
	if err := json.Unmarshal(info.ConfigSchema, &schema); err != nil {
		t.Fatalf("config schema is not JSON: %v", err)
	}
	if schema["additionalProperties"] != false {
		t.Fatal("schema must forbid unknown keys, as Configure does")
	}
}

func TestLifecycle(t *testing.T) {
	p := NewWithLogger(nil)
	if _, err := p.Recall(ctx, sdk.RecallQuery{Realm: realm, Query: "x"}); !errors.Is(err, sdk.ErrUnavailable) {
		t.Fatalf("recall before Configure: %v, want ErrUnavailable", err)
	}
	dir := t.TempDir()
	if err := p.Configure(ctx, json.RawMessage(`{"bogus": 1}`)); !errors.Is(err, sdk.ErrInvalid) {
		t.Fatalf("bad config: %v, want ErrInvalid", err)
	}
	if err := p.Configure(ctx, configJSON(dir)); err != nil {
		t.Fatalf("good config after a bad one: %v", err)
	}
	if err := p.Configure(ctx, configJSON(dir)); !errors.Is(err, sdk.ErrConflict) {
		t.Fatalf("second Configure: %v, want ErrConflict", err)
	}
	remember(t, p, realm, rec("realm", "kept", "survives a restart"))
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if err := p.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := p.Remember(ctx, realm, []sdk.Record{rec("realm", "x", "y")}); !errors.Is(err, sdk.ErrUnavailable) {
		t.Fatalf("write after Close: %v, want ErrUnavailable", err)
	}
	// The lock is released and the data persists.
	p2 := newProvider(t, dir)
	if got := recallIDs(t, p2, sdk.RecallQuery{Query: "restart"}); len(got) != 1 {
		t.Fatalf("after reopen recall = %v, want one hit", got)
	}
}

func TestRoundTrip(t *testing.T) {
	p := newProvider(t, "")
	exp := time.Now().Add(time.Hour).UTC().Truncate(time.Millisecond)
	in := sdk.Record{
		Scope: "identity:alice", Kind: sdk.KindPreference, Title: "Coffee order", Description: "how alice takes coffee",
		Body: "Alice drinks a double espresso, no sugar.", Tags: []string{"drinks", "Morning"},
		Trust: sdk.TrustApplication, ExpiresAt: exp,
		UseCount: 99, LastUsedAt: time.Now(), // the store's to count: ignored
	}
	ids := remember(t, p, realm, in)
	got, err := p.Get(ctx, realm, ids)
	if err != nil || len(got) != 1 {
		t.Fatalf("Get = %v, %v", got, err)
	}
	r := got[0]
	if r.ID != ids[0] || r.Realm != realm || r.Scope != in.Scope || r.Kind != in.Kind || r.Title != in.Title ||
		r.Description != in.Description || r.Body != in.Body || !slices.Equal(r.Tags, in.Tags) ||
		r.Trust != in.Trust || r.Status != sdk.StatusActive || !r.ExpiresAt.Equal(exp) ||
		r.ContentHash != sdk.ContentHash(in.Title, in.Body) || r.CreatedAt.IsZero() || r.UpdatedAt.IsZero() ||
		r.UseCount != 0 || !r.LastUsedAt.IsZero() {
		t.Fatalf("stored record differs:\n got %+v\n put %+v", r, in)
	}
	hits, err := p.Recall(ctx, sdk.RecallQuery{Realm: realm, Query: "what espresso does alice drink?"})
	if err != nil || len(hits) != 1 {
		t.Fatalf("Recall = %v, %v", hits, err)
	}
	if hits[0].Score <= 0 || hits[0].Record.Body != in.Body {
		t.Fatalf("hit = %+v, want the whole record with a positive score", hits[0])
	}
	// Get answers in request order, found ones only, each once.
	ids2 := remember(t, p, realm, rec("realm", "second", "two"), rec("realm", "third", "three"))
	got, err = p.Get(ctx, realm, []string{ids2[1], "missing-id", ids[0], ids2[0], ids[0]})
	if err != nil {
		t.Fatal(err)
	}
	var order []string
	for _, r := range got {
		order = append(order, r.ID)
	}
	if want := []string{ids2[1], ids[0], ids2[0]}; !slices.Equal(order, want) {
		t.Fatalf("Get order = %v, want %v", order, want)
	}
}

func TestIdempotentWrites(t *testing.T) {
	p := newProvider(t, "")
	a := remember(t, p, realm, rec("identity:alice", "Coffee", "strong"))[0]
	again := remember(t, p, realm, rec("identity:alice", "Coffee", "strong", "new-tag"))[0]
	if again != a {
		t.Fatalf("same content, same scope: id %s, want existing %s", again, a)
	}
	other := remember(t, p, realm, rec("identity:bob", "Coffee", "strong"))[0]
	if other == a {
		t.Fatal("same content in another scope answered the first scope's id")
	}
	batch := remember(t, p, realm,
		rec("mob:team", "Standup", "at ten"), rec("mob:team", "Standup", "at ten"), rec("identity:alice", "Coffee", "strong"))
	if batch[0] != batch[1] || batch[2] != a {
		t.Fatalf("duplicates within a batch: %v (want [x x %s])", batch, a)
	}
	full, err := p.Manifest(ctx, sdk.ManifestQuery{Realm: realm, Tier: sdk.TierFull})
	if err != nil || len(full) != 3 {
		t.Fatalf("manifest has %d rows (%v), want 3 distinct records", len(full), err)
	}
	// Retrying a batch with caller-chosen ids answers the same ids.
	chosen := rec("realm", "chosen", "id")
	chosen.ID = "my-id-1"
	if id := remember(t, p, realm, chosen)[0]; id != "my-id-1" {
		t.Fatalf("chosen id answered %s", id)
	}
	if id := remember(t, p, realm, chosen)[0]; id != "my-id-1" {
		t.Fatalf("retry answered %s", id)
	}
	// Another record under a taken id is a conflict, and stores nothing.
	clash := rec("realm", "different", "content")
	clash.ID = "my-id-1"
	if _, err := p.Remember(ctx, realm, []sdk.Record{rec("realm", "innocent", "bystander"), clash}); !errors.Is(err, sdk.ErrConflict) {
		t.Fatalf("taken id: %v, want ErrConflict", err)
	}
	if got := recallIDs(t, p, sdk.RecallQuery{Query: "innocent bystander"}); len(got) != 0 {
		t.Fatal("a failed batch stored a record")
	}
}

func TestRealmIsolation(t *testing.T) {
	p := newProvider(t, "")
	ids := remember(t, p, "acme", rec("realm", "secret plan", "acme launches rockets"))
	remember(t, p, "globex", rec("realm", "other plan", "globex builds volcanoes"))
	if got := recallIDs(t, p, sdk.RecallQuery{Realm: "globex", Query: "rockets plan"}); len(got) != 1 || got[0] == ids[0] {
		t.Fatalf("globex recall = %v, must not include acme's %s", got, ids[0])
	}
	if got, err := p.Get(ctx, "globex", ids); err != nil || len(got) != 0 {
		t.Fatalf("Get across realms = %v, %v", got, err)
	}
	if n, err := p.Forget(ctx, "globex", ids); err != nil || n != 0 {
		t.Fatalf("Forget across realms = %d, %v", n, err)
	}
	if _, err := p.Supersede(ctx, "globex", ids[0], rec("realm", "x", "y")); !errors.Is(err, sdk.ErrNotFound) {
		t.Fatalf("Supersede across realms: %v, want ErrNotFound", err)
	}
	if err := p.MarkUsed(ctx, "globex", ids, time.Now()); err != nil {
		t.Fatal(err)
	}
	if got, _ := p.Get(ctx, "acme", ids); len(got) != 1 || got[0].UseCount != 0 {
		t.Fatalf("acme record after globex calls = %+v", got)
	}
	rows, err := p.Manifest(ctx, sdk.ManifestQuery{Realm: "globex", Tier: sdk.TierFull})
	if err != nil || len(rows) != 1 || rows[0].Title != "other plan" {
		t.Fatalf("globex manifest = %v, %v", rows, err)
	}
	// A realm never written has no index and answers nothing.
	if got := recallIDs(t, p, sdk.RecallQuery{Realm: "initech", Query: "plan"}); len(got) != 0 {
		t.Fatalf("empty realm recall = %v", got)
	}
	if _, err := os.Stat(filepath.Join(p.dir, "initech.bleve")); !os.IsNotExist(err) {
		t.Fatal("a read created an index")
	}
	// A realm name cannot escape the directory.
	sp := conformance.Served(t, p)
	for _, bad := range []string{"../x", "a/b", ".hidden", "", "x y"} {
		if _, err := sp.Remember(ctx, bad, []sdk.Record{rec("realm", "x", "y")}); !errors.Is(err, sdk.ErrInvalid) {
			t.Errorf("realm %q: %v, want ErrInvalid", bad, err)
		}
	}
}

func TestScopes(t *testing.T) {
	p := newProvider(t, "")
	ids := remember(t, p, realm,
		rec("identity:alice", "alice garden", "tomatoes grow"),
		rec("identity:bob", "bob garden", "tomatoes rot"),
		rec("mob:gardeners", "club garden", "tomatoes shared"),
		rec("realm", "realm garden", "tomatoes everywhere"),
	)
	cases := []struct {
		scopes []sdk.Scope
		want   []string
	}{
		{nil, ids},
		{[]sdk.Scope{"identity:alice"}, ids[:1]},
		{[]sdk.Scope{"identity:alice", "mob:gardeners", "realm"}, []string{ids[0], ids[2], ids[3]}},
		{[]sdk.Scope{"operator:nobody"}, nil},
	}
	for _, c := range cases {
		got := recallIDs(t, p, sdk.RecallQuery{Query: "tomatoes", Scopes: c.scopes})
		if !slices.Equal(sorted(got), sorted(c.want)) {
			t.Errorf("scopes %v: recall %v, want %v", c.scopes, got, c.want)
		}
		rows, err := p.Manifest(ctx, sdk.ManifestQuery{Realm: realm, Scopes: c.scopes, Tier: sdk.TierFull})
		if err != nil {
			t.Fatal(err)
		}
		var rowIDs []string
		for _, r := range rows {
			rowIDs = append(rowIDs, r.ID)
		}
		if !slices.Equal(sorted(rowIDs), sorted(c.want)) {
			t.Errorf("scopes %v: manifest %v, want %v", c.scopes, rowIDs, c.want)
		}
	}
	if _, err := conformance.Served(t, p).Recall(ctx, sdk.RecallQuery{Realm: realm, Query: "x", Scopes: []sdk.Scope{"team:x"}}); !errors.Is(err, sdk.ErrInvalid) {
		t.Fatalf("bad scope: %v, want ErrInvalid", err)
	}
}

func TestStatusAndExpiry(t *testing.T) {
	p := newProvider(t, "")
	mk := func(title string, status sdk.Status, expires time.Time) sdk.Record {
		r := rec("realm", title, "lighthouse keeper notes")
		r.Status, r.ExpiresAt = status, expires
		return r
	}
	now := time.Now()
	ids := remember(t, p, realm,
		mk("active", "", time.Time{}),
		mk("quarantined", sdk.StatusQuarantined, time.Time{}),
		mk("tombstoned", sdk.StatusTombstoned, time.Time{}),
		mk("superseded", sdk.StatusSuperseded, time.Time{}),
		mk("expired", "", now.Add(-time.Minute)),
		mk("expires later", "", now.Add(time.Hour)),
	)
	want := []string{ids[0], ids[5]}
	if got := recallIDs(t, p, sdk.RecallQuery{Query: "lighthouse"}); !slices.Equal(sorted(got), sorted(want)) {
		t.Fatalf("recall = %v, want only active unexpired %v", got, want)
	}
	for _, tier := range []sdk.ManifestTier{sdk.TierFull, sdk.TierWorkingSet} {
		rows, err := p.Manifest(ctx, sdk.ManifestQuery{Realm: realm, Tier: tier, K: 10})
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, r := range rows {
			got = append(got, r.ID)
		}
		if !slices.Equal(sorted(got), sorted(want)) {
			t.Fatalf("tier %d manifest = %v, want %v", tier, got, want)
		}
	}
	all, err := p.Get(ctx, realm, ids)
	if err != nil || len(all) != len(ids) {
		t.Fatalf("Get answered %d of %d records of every status (%v)", len(all), len(ids), err)
	}
}

func TestFieldBoostOrder(t *testing.T) {
	p := newProvider(t, "")
	// Each record carries the query term in one field only; the bodies and
	// titles are padded alike so only the field differs.
	ids := remember(t, p, realm,
		sdk.Record{Scope: "realm", Kind: sdk.KindFact, Title: "notes one", Body: "walrus mentioned here among words"},
		sdk.Record{Scope: "realm", Kind: sdk.KindFact, Title: "notes two", Description: "walrus", Body: "other plain words here among"},
		sdk.Record{Scope: "realm", Kind: sdk.KindFact, Title: "walrus notes", Body: "other plain words here among"},
		sdk.Record{Scope: "realm", Kind: sdk.KindFact, Title: "notes three", Body: "other plain words here among", Tags: []string{"walrus"}},
		sdk.Record{Scope: "realm", Kind: sdk.KindFact, Title: "unrelated", Body: "nothing to see"},
	)
	got := recallIDs(t, p, sdk.RecallQuery{Query: "walrus"})
	want := []string{ids[3], ids[2], ids[1], ids[0]} // tag > title > description > body
	if !slices.Equal(got, want) {
		t.Fatalf("order = %v, want tag, title, description, body %v", got, want)
	}
}

func TestCJKRecall(t *testing.T) {
	p := newProvider(t, "")
	ids := remember(t, p, realm,
		rec("realm", "咖啡", "我喜欢喝咖啡，每天早上一杯"),
		rec("realm", "茶", "他喜欢喝绿茶"),
		rec("realm", "コーヒー", "毎朝コーヒーを飲みます"),
		rec("realm", "커피", "나는 아침마다 커피를 마신다"),
	)
	cases := []struct {
		query string
		want  string
	}{
		{"谁喜欢咖啡？", ids[0]},
		{"绿茶", ids[1]},
		{"コーヒー", ids[2]},
		{"커피", ids[3]},
	}
	for _, c := range cases {
		got := recallIDs(t, p, sdk.RecallQuery{Query: c.query})
		if len(got) == 0 || got[0] != c.want {
			t.Errorf("query %q: %v, want %s first", c.query, got, c.want)
		}
	}
}

func TestTagFilters(t *testing.T) {
	p := newProvider(t, "")
	ids := remember(t, p, realm,
		rec("realm", "one", "kettle", "Kitchen", "Urgent"),
		rec("realm", "two", "kettle", "kitchen"),
		rec("realm", "three", "kettle", "garage"),
		rec("realm", "four", "kettle", "Straße", "\u212Aelvin"), // Kelvin sign
		rec("realm", "five", "kettle", "cafe\u0301"),            // stored before tags were sent in NFC
	)
	cases := []struct {
		name          string
		tags, exclude []string
		want          []string
	}{
		{"none", nil, nil, ids},
		{"a decomposed tag in NFC", []string{"CAF\u00c9"}, nil, ids[4:]},
		{"exclude a decomposed tag in NFC", nil, []string{"caf\u00e9"}, ids[:4]},
		{"one tag, case-folded", []string{"KITCHEN"}, nil, ids[:2]},
		{"all tags required", []string{"kitchen", "urgent"}, nil, ids[:1]},
		{"exclude any", nil, []string{"URGENT", "garage"}, []string{ids[1], ids[3], ids[4]}},
		{"require and exclude", []string{"kitchen"}, []string{"urgent"}, ids[1:2]},
		{"unicode folding", []string{"STRASSE"}, nil, nil}, // EqualFold does not fold ß to ss
		{"unicode simple folding", []string{"straSSe"}, nil, nil},
		{"kelvin sign folds to k", []string{"kelvin"}, nil, ids[3:4]},
		{"exact unicode", []string{"STRAßE"}, nil, ids[3:4]},
	}
	for _, c := range cases {
		got := recallIDs(t, p, sdk.RecallQuery{Query: "kettle", Tags: c.tags, ExcludeTags: c.exclude})
		if !slices.Equal(sorted(got), sorted(c.want)) {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}

func TestFoldTagAgreesWithSameTag(t *testing.T) {
	words := []string{"k", "K", "\u212A", "s", "S", "\u017F", "ß", "ẞ", "Σ", "σ", "ς", "straße", "STRASSE", "Ǆ", "ǅ", "ǆ", "İ", "ı", "i", "I", "caf\u00e9", "CAF\u00c9", "cafe\u0301"}
	for _, a := range words {
		for _, b := range words {
			if (foldTag(a) == foldTag(b)) != sdk.SameTag(a, b) {
				t.Errorf("foldTag(%q)=%q, foldTag(%q)=%q, SameTag=%v", a, foldTag(a), b, foldTag(b), sdk.SameTag(a, b))
			}
		}
	}
}

func TestExcludeIDsAndLimit(t *testing.T) {
	p := newProvider(t, "")
	var recs []sdk.Record
	for i := range 15 {
		recs = append(recs, rec("realm", fmt.Sprintf("harbor note %d", i), fmt.Sprintf("boats in the harbor, entry %d", i)))
	}
	ids := remember(t, p, realm, recs...)
	if got := recallIDs(t, p, sdk.RecallQuery{Query: "harbor"}); len(got) != sdk.DefaultRecallLimit {
		t.Fatalf("default limit: %d hits, want %d", len(got), sdk.DefaultRecallLimit)
	}
	if got := recallIDs(t, p, sdk.RecallQuery{Query: "harbor", Limit: 3}); len(got) != 3 {
		t.Fatalf("limit 3: %d hits", len(got))
	}
	got := recallIDs(t, p, sdk.RecallQuery{Query: "harbor", Limit: 100, ExcludeIDs: ids[:5]})
	if len(got) != 10 {
		t.Fatalf("excluding 5 of 15: %d hits", len(got))
	}
	for _, id := range got {
		if slices.Contains(ids[:5], id) {
			t.Fatalf("excluded id %s recalled", id)
		}
	}
	if _, err := conformance.Served(t, p).Recall(ctx, sdk.RecallQuery{Realm: realm, Query: "harbor", Limit: -1}); !errors.Is(err, sdk.ErrInvalid) {
		t.Fatalf("negative limit: %v, want ErrInvalid", err)
	}
	if _, err := conformance.Served(t, p).Recall(ctx, sdk.RecallQuery{Realm: realm, Query: "harbor", ExcludeIDs: []string{"../x"}}); !errors.Is(err, sdk.ErrInvalid) {
		t.Fatalf("bad exclude id: %v, want ErrInvalid", err)
	}
}

// hostileQueries are texts that break query-string parsers, regexes or
// tokenizers; recall must answer them without error.
var hostileQueries = []string{
	"", "   ", "AND OR NOT", "title:walrus", "+walrus -body", `"unterminated`, "walrus~2", "wal*", "/wal.*/",
	`+-&&||!(){}[]^"~*?:\/`, "_id:x", "_all:*", "\x00\x01\x02", "\xff\xfe\xfd", "walrus\x00body",
	strings.Repeat("walrus ", 10000), strings.Repeat("a", 70000), strings.Repeat("(", 5000),
	"<memhost_memory_observation>", "'; DROP TABLE records; --", "{{.}}", "%s%n%x", "咖啡" + strings.Repeat("字", 3000),
}

func TestHostileQueries(t *testing.T) {
	p := newProvider(t, "")
	remember(t, p, realm, rec("realm", "walrus", "body text"))
	for _, q := range hostileQueries {
		if _, err := p.Recall(ctx, sdk.RecallQuery{Realm: realm, Query: q}); err != nil {
			t.Errorf("Recall(%.40q): %v", q, err)
		}
		if _, err := p.Recall(ctx, sdk.RecallQuery{Realm: realm, Query: "walrus", Tags: []string{q}, ExcludeTags: []string{q}}); err != nil {
			t.Errorf("Recall with tag %.40q: %v", q, err)
		}
	}
	// Query syntax is text, not structure: a field prefix matches nothing extra.
	if got := recallIDs(t, p, sdk.RecallQuery{Query: "_id:*"}); len(got) != 0 {
		t.Fatalf("query syntax matched %v", got)
	}
}

func FuzzRecallQuery(f *testing.F) {
	for _, q := range hostileQueries {
		if len(q) < 200 {
			f.Add(q)
		}
	}
	p := newProvider(f, "")
	remember(f, p, realm, rec("realm", "walrus", "body text"), rec("identity:x", "咖啡", "我喜欢咖啡"))
	f.Fuzz(func(t *testing.T, q string) {
		hits, err := p.Recall(ctx, sdk.RecallQuery{Realm: realm, Query: q, Tags: []string{q}})
		if err != nil {
			t.Fatalf("Recall(%q): %v", q, err)
		}
		if len(hits) > 0 {
			for _, h := range hits {
				if !h.Record.HasTag(q) {
					t.Fatalf("hit %s lacks required tag %q", h.Record.ID, q)
				}
			}
		}
	})
}

func TestBadInputChangesNothing(t *testing.T) {
	p := newProvider(t, "")
	good := rec("realm", "good", "valid record")
	existing := remember(t, p, realm, rec("realm", "existing", "already here"))
	sp := conformance.Served(t, p)
	cases := []struct {
		name string
		recs []sdk.Record
		want error
	}{
		{"empty title and body", []sdk.Record{good, {Scope: "realm", Kind: sdk.KindFact}}, sdk.ErrInvalid},
		{"unknown kind", []sdk.Record{good, {Scope: "realm", Kind: "rumour", Title: "x"}}, sdk.ErrInvalid},
		{"bad scope", []sdk.Record{good, {Scope: "team:x", Kind: sdk.KindFact, Title: "x"}}, sdk.ErrInvalid},
		{"body too large", []sdk.Record{good, {Scope: "realm", Kind: sdk.KindFact, Title: "x", Body: strings.Repeat("b", sdk.MaxBodyBytes+1)}}, sdk.ErrTooLarge},
		{"invalid utf-8", []sdk.Record{good, {Scope: "realm", Kind: sdk.KindFact, Title: "\xff"}}, sdk.ErrInvalid},
		{"unsafe id", []sdk.Record{good, {ID: "../../etc", Scope: "realm", Kind: sdk.KindFact, Title: "x"}}, sdk.ErrInvalid},
		{"other realm", []sdk.Record{good, {Realm: "acme", Scope: "realm", Kind: sdk.KindFact, Title: "x"}}, sdk.ErrInvalid},
		{"too many", slices.Repeat([]sdk.Record{good}, sdk.MaxBatch+1), sdk.ErrTooLarge},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ids, err := sp.Remember(ctx, realm, c.recs)
			if !errors.Is(err, c.want) || ids != nil {
				t.Fatalf("Remember = %v, %v; want %v", ids, err, c.want)
			}
		})
	}
	idCases := []struct {
		name string
		ids  []string
		want error
	}{
		{"unsafe id", []string{existing[0], "../x"}, sdk.ErrInvalid},
		{"empty id", []string{""}, sdk.ErrInvalid},
		{"too many", slices.Repeat(existing, sdk.MaxBatch+1), sdk.ErrTooLarge},
	}
	for _, c := range idCases {
		t.Run("ids "+c.name, func(t *testing.T) {
			if _, err := sp.Get(ctx, realm, c.ids); !errors.Is(err, c.want) {
				t.Errorf("Get: %v, want %v", err, c.want)
			}
			if _, err := sp.Forget(ctx, realm, c.ids); !errors.Is(err, c.want) {
				t.Errorf("Forget: %v, want %v", err, c.want)
			}
			if err := sp.MarkUsed(ctx, realm, c.ids, time.Now()); !errors.Is(err, c.want) {
				t.Errorf("MarkUsed: %v, want %v", err, c.want)
			}
		})
	}
	for _, q := range []sdk.ManifestQuery{{Realm: realm}, {Realm: realm, Tier: 9}, {Realm: realm, Tier: sdk.TierWorkingSet, K: -1}, {Realm: realm, Tier: sdk.TierWorkingSet}, {Realm: realm, Tier: sdk.TierFull, Scopes: []sdk.Scope{"nope"}}} {
		if _, err := sp.Manifest(ctx, q); !errors.Is(err, sdk.ErrInvalid) {
			t.Errorf("Manifest(%+v): %v, want ErrInvalid", q, err)
		}
	}
	if _, err := sp.Supersede(ctx, realm, existing[0], sdk.Record{Title: "\xff"}); !errors.Is(err, sdk.ErrInvalid) {
		t.Errorf("bad replacement: %v, want ErrInvalid", err)
	}
	// Nothing of the above was stored or changed.
	rows, err := p.Manifest(ctx, sdk.ManifestQuery{Realm: realm, Tier: sdk.TierFull})
	if err != nil || len(rows) != 1 || rows[0].ID != existing[0] || rows[0].Rank != 0 {
		t.Fatalf("after bad input the realm holds %+v (%v), want only the existing unused record", rows, err)
	}
	got, _ := p.Get(ctx, realm, existing)
	if len(got) != 1 || got[0].Status != sdk.StatusActive {
		t.Fatalf("existing record changed: %+v", got)
	}
}

func TestForget(t *testing.T) {
	p := newProvider(t, "")
	ids := remember(t, p, realm, rec("realm", "forget me", "soon gone"), rec("realm", "keep me", "stays"))
	if n, err := p.Forget(ctx, realm, []string{ids[0], "never-was"}); err != nil || n != 1 {
		t.Fatalf("Forget = %d, %v; want 1", n, err)
	}
	if n, err := p.Forget(ctx, realm, ids[:1]); err != nil || n != 0 {
		t.Fatalf("second Forget = %d, %v; want 0, nil", n, err)
	}
	if got, _ := p.Get(ctx, realm, ids); len(got) != 1 || got[0].ID != ids[1] {
		t.Fatalf("after Forget Get = %+v", got)
	}
	if got := recallIDs(t, p, sdk.RecallQuery{Query: "forget soon"}); len(got) != 0 {
		t.Fatalf("forgotten record recalled: %v", got)
	}
	// The same content may be written again, as a new record.
	if again := remember(t, p, realm, rec("realm", "forget me", "soon gone"))[0]; again == ids[0] {
		t.Fatal("a forgotten id came back")
	}
}

func TestSupersede(t *testing.T) {
	p := newProvider(t, "")
	old := remember(t, p, realm, sdk.Record{Scope: "identity:alice", Kind: sdk.KindPreference, Title: "Coffee", Body: "latte"})[0]
	newID, err := p.Supersede(ctx, realm, old, sdk.Record{Title: "Coffee", Body: "flat white"})
	if err != nil {
		t.Fatal(err)
	}
	got, _ := p.Get(ctx, realm, []string{old, newID})
	if len(got) != 2 || got[0].Status != sdk.StatusSuperseded || got[1].Status != sdk.StatusActive ||
		got[1].Supersedes != old || got[1].Scope != "identity:alice" || got[1].Kind != sdk.KindPreference {
		t.Fatalf("after Supersede: %+v", got)
	}
	if ids := recallIDs(t, p, sdk.RecallQuery{Query: "coffee"}); !slices.Equal(ids, []string{newID}) {
		t.Fatalf("recall after Supersede = %v, want only %s", ids, newID)
	}
	// A retry answers the same id and changes nothing.
	if again, err := p.Supersede(ctx, realm, old, sdk.Record{Title: "Coffee", Body: "flat white"}); err != nil || again != newID {
		t.Fatalf("retried Supersede = %s, %v; want %s", again, err, newID)
	}
	// Superseding a superseded record with new content is a conflict.
	if _, err := p.Supersede(ctx, realm, old, sdk.Record{Title: "Coffee", Body: "mocha"}); !errors.Is(err, sdk.ErrConflict) {
		t.Fatalf("supersede twice: %v, want ErrConflict", err)
	}
	// Content identical to the record itself changes nothing.
	if same, err := p.Supersede(ctx, realm, newID, sdk.Record{Title: "Coffee", Body: "flat white"}); err != nil || same != newID {
		t.Fatalf("identical replacement = %s, %v; want %s", same, err, newID)
	}
	if _, err := p.Supersede(ctx, realm, "no-such-id", rec("realm", "x", "y")); !errors.Is(err, sdk.ErrNotFound) {
		t.Fatalf("unknown id: %v, want ErrNotFound", err)
	}
	if _, err := p.Supersede(ctx, realm, newID, sdk.Record{Title: "x", Supersedes: "someone-else"}); !errors.Is(err, sdk.ErrInvalid) {
		t.Fatalf("mismatched supersedes: %v, want ErrInvalid", err)
	}
	// Superseded content may be remembered afresh.
	if id := remember(t, p, realm, sdk.Record{Scope: "identity:alice", Kind: sdk.KindPreference, Title: "Coffee", Body: "latte"})[0]; id == old {
		t.Fatal("re-remembering superseded content answered the superseded id")
	}
}

func TestManifestWorkingSet(t *testing.T) {
	p := newProvider(t, "")
	var recs []sdk.Record
	for i := range 10 {
		recs = append(recs, rec("identity:alice", fmt.Sprintf("note %d", i), fmt.Sprintf("body %d", i)))
	}
	var ids []string
	for _, r := range recs { // one by one, so updated times differ
		ids = append(ids, remember(t, p, realm, r)...)
		time.Sleep(2 * time.Millisecond)
	}
	now := time.Now()
	use := func(id string, times int, at time.Time) {
		for range times {
			if err := p.MarkUsed(ctx, realm, []string{id}, at); err != nil {
				t.Fatal(err)
			}
		}
	}
	use(ids[0], 3, now)                       // rank 3: most used, recent
	use(ids[1], 1, now)                       // rank 1: used once, recent
	use(ids[2], 3, now.Add(-90*24*time.Hour)) // rank 3/8: used a lot, long ago
	use(ids[3], 1, now.Add(-24*time.Hour))    // rank 0.98
	got, _ := p.Get(ctx, realm, ids[:1])
	if got[0].UseCount != 3 || !got[0].LastUsedAt.Equal(now.UTC()) {
		t.Fatalf("usage not counted: %+v", got[0])
	}
	// One call counts each distinct id once.
	if err := p.MarkUsed(ctx, realm, []string{ids[4], ids[4]}, now.Add(-time.Hour)); err != nil { // rank just under 1
		t.Fatal(err)
	}
	if got, _ := p.Get(ctx, realm, ids[4:5]); got[0].UseCount != 1 {
		t.Fatalf("an id named twice in one call counted %d times", got[0].UseCount)
	}

	rows, err := p.Manifest(ctx, sdk.ManifestQuery{Realm: realm, Tier: sdk.TierWorkingSet, K: 2})
	if err != nil {
		t.Fatal(err)
	}
	var gotIDs []string
	for _, r := range rows {
		gotIDs = append(gotIDs, r.ID)
	}
	// Top 2 ranked, then the newest unranked to 2k = 4 rows.
	want := []string{ids[0], ids[1], ids[9], ids[8]}
	if math.Abs(rows[0].Rank-3) > 1e-3 || math.Abs(rows[1].Rank-1) > 1e-3 {
		t.Fatalf("ranks %v, %v; want the decayed use counts 3 and 1", rows[0].Rank, rows[1].Rank)
	}
	if !slices.Equal(gotIDs, want) {
		t.Fatalf("working set(2) = %v, want %v", gotIDs, want)
	}
	if !(rows[0].Rank > rows[1].Rank && rows[1].Rank > 0 && rows[2].Rank == 0 && rows[3].Rank == 0) {
		t.Fatalf("ranks = %v %v %v %v", rows[0].Rank, rows[1].Rank, rows[2].Rank, rows[3].Rank)
	}
	if rows[0].Title != "note 0" || rows[0].Scope != "identity:alice" || rows[0].Kind != sdk.KindFact || rows[0].UpdatedAt.IsZero() {
		t.Fatalf("row metadata = %+v", rows[0])
	}
	// k larger than the ranked rows: every ranked row, in rank order,
	// then unranked ones up to 2k (capped by what exists).
	rows, err = p.Manifest(ctx, sdk.ManifestQuery{Realm: realm, Tier: sdk.TierWorkingSet, K: 6})
	if err != nil || len(rows) != 10 {
		t.Fatalf("working set(6) has %d rows (%v), want 10", len(rows), err)
	}
	gotIDs = gotIDs[:0]
	for _, r := range rows[:5] {
		gotIDs = append(gotIDs, r.ID)
	}
	if want := []string{ids[0], ids[1], ids[4], ids[3], ids[2]}; !slices.Equal(gotIDs, want) {
		t.Fatalf("ranked order = %v, want %v (age decays old use)", gotIDs, want)
	}
	// Full: every row, newest first, with ranks.
	full, err := p.Manifest(ctx, sdk.ManifestQuery{Realm: realm, Tier: sdk.TierFull})
	if err != nil || len(full) != 10 {
		t.Fatalf("full = %d rows (%v)", len(full), err)
	}
	for i, r := range full {
		if r.ID != ids[9-i] {
			t.Fatalf("full row %d is %s, want %s (newest first)", i, r.ID, ids[9-i])
		}
		if (r.Rank > 0) != (i >= 5) { // ids[0..4] were used
			t.Fatalf("full row %s has rank %v", r.ID, r.Rank)
		}
	}
}

func TestUsageRank(t *testing.T) {
	now := time.Now()
	day := 24 * time.Hour
	halfLife := usage.HalfLife.Hours() / 24
	cases := []struct {
		name string
		uses []time.Duration // ages at now
	}{
		{"one use now", []time.Duration{0}},
		{"one use a half-life ago", []time.Duration{30 * day}},
		{"three uses", []time.Duration{0, 5 * day, 40 * day}},
		{"an ancient use", []time.Duration{100 * 365 * day}},
		{"uses out of order", []time.Duration{10 * day, 0, 60 * day}},
	}
	keys := make([]float64, len(cases))
	for i, c := range cases {
		var key float64
		want := 0.0
		for n, age := range c.uses {
			key = usage.Key(key, n > 0, now.Add(-age))
			want += math.Exp2(-age.Hours() / 24 / halfLife)
		}
		keys[i] = key
		got := usage.Rank(key, now)
		if got <= 0 || math.Abs(got-want) > 1e-9*max(want, 1e-300) && want > 1e-300 {
			t.Errorf("%s: rank %v, want %v (the decayed use count)", c.name, got, want)
		}
	}
	// Keys order like ranks at any later moment.
	for _, later := range []time.Duration{0, day, 400 * day} {
		at := now.Add(later)
		for i := range keys {
			for j := range keys {
				if (keys[i] < keys[j]) != (usage.Rank(keys[i], at) < usage.Rank(keys[j], at)) && usage.Rank(keys[i], at) > 1e-300 {
					t.Fatalf("key order and rank order disagree for %q, %q at +%v", cases[i].name, cases[j].name, later)
				}
			}
		}
	}
}

func TestConcurrency(t *testing.T) {
	p := newProvider(t, "")
	const writers, perWriter = 4, 20
	var wg sync.WaitGroup
	idsCh := make(chan []string, writers*perWriter)
	errCh := make(chan error, 64)
	stop := make(chan struct{})
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range perWriter {
				// Writers share some content, so concurrent duplicates race.
				ids, err := p.Remember(ctx, realm, []sdk.Record{
					rec("realm", fmt.Sprintf("shared %d", i), "concurrent shared body"),
					rec("realm", fmt.Sprintf("own %d-%d", w, i), "concurrent own body"),
				})
				if err != nil {
					errCh <- err
					return
				}
				idsCh <- ids
				if err := p.MarkUsed(ctx, realm, ids[:1], time.Now()); err != nil {
					errCh <- err
					return
				}
			}
		}()
	}
	var readers sync.WaitGroup
	for range 3 {
		readers.Add(1)
		go func() {
			defer readers.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				if _, err := p.Recall(ctx, sdk.RecallQuery{Realm: realm, Query: "concurrent shared"}); err != nil {
					errCh <- err
					return
				}
				if _, err := p.Manifest(ctx, sdk.ManifestQuery{Realm: realm, Tier: sdk.TierWorkingSet, K: 5}); err != nil {
					errCh <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(stop)
	readers.Wait()
	close(errCh)
	for err := range errCh {
		t.Fatal(err)
	}
	close(idsCh)
	shared := map[string]string{}
	var all []string
	for ids := range idsCh {
		all = append(all, ids...)
	}
	got, err := p.Get(ctx, realm, all)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range got {
		if prev, ok := shared[r.Title]; ok && prev != r.ID {
			t.Fatalf("title %q stored twice: %s and %s", r.Title, prev, r.ID)
		}
		shared[r.Title] = r.ID
	}
	if want := perWriter + writers*perWriter; len(shared) != want {
		t.Fatalf("%d distinct records, want %d", len(shared), want)
	}
	var uses int64
	for _, r := range got {
		if strings.HasPrefix(r.Title, "shared") {
			uses += r.UseCount
		}
	}
	if uses != writers*perWriter {
		t.Fatalf("use counts sum to %d, want %d (a lost update?)", uses, writers*perWriter)
	}
}

func TestCancelledWriteStoresNothing(t *testing.T) {
	p := newProvider(t, "")
	remember(t, p, realm, rec("realm", "first", "creates the realm index"))
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := p.Remember(cancelled, realm, []sdk.Record{rec("realm", "late", "never stored")}); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled Remember: %v, want context.Canceled", err)
	}
	if got := recallIDs(t, p, sdk.RecallQuery{Query: "late never stored"}); len(got) != 0 {
		t.Fatalf("a cancelled write was stored: %v", got)
	}
}

// TestThreadContext: a turn that answers without naming the topic is found
// through its neighbour, whether they arrive in one batch or apart (their
// order is the boosts' business); it loses that context when the
// neighbour is forgotten, and gains it again from a supersede, across a
// reopen.
func TestThreadContext(t *testing.T) {
	dir := t.TempDir()
	p := newProvider(t, dir)
	turn := func(body string, seq int64) sdk.Record {
		r := rec("realm", "", body)
		r.Thread = &sdk.Thread{ID: "conv", Seq: seq}
		return r
	}
	q := sdk.RecallQuery{Query: "pottery class", Limit: 10}
	ids := remember(t, p, realm, turn("Did you go to the pottery class?", 1), turn("Yes, I made a bowl on Tuesday", 2))
	far := remember(t, p, realm, turn("The weather was nice", 4), rec("realm", "", "I made soup"))
	if got, want := recallIDs(t, p, q), ids; !slices.Equal(sorted(got), sorted(want)) {
		t.Fatalf("one batch: %v, want %v", got, want)
	}
	if got := recallIDs(t, p, sdk.RecallQuery{Query: "bowl tuesday", Limit: 10}); len(got) != 3 || got[0] != ids[1] || !slices.Equal(sorted(got[1:]), sorted([]string{ids[0], far[0]})) {
		t.Fatalf("the answer's own terms: %v, want %v then both neighbours", got, ids[1])
	}
	if _, err := p.Forget(ctx, realm, ids[:1]); err != nil {
		t.Fatal(err)
	}
	if got := recallIDs(t, p, q); len(got) != 0 {
		t.Fatalf("after forgetting the question: %v, want nothing", got)
	}
	again, err := p.Supersede(ctx, realm, far[0], turn("Pottery again next week", 4))
	if err != nil {
		t.Fatal(err)
	}
	p.Close()
	p = newProvider(t, dir)
	if got, want := recallIDs(t, p, q), []string{again, ids[1]}; !slices.Equal(sorted(got), sorted(want)) {
		t.Fatalf("after the supersede and a reopen: %v, want %v", got, want)
	}
}

// TestReadThread: the records at the asked places of a thread, in their
// scope only; an empty place answers nothing, nor does a forgotten
// record, and the places survive a reopen. Recall's neighbours come from
// them.
func TestReadThread(t *testing.T) {
	dir := t.TempDir()
	p := newProvider(t, dir)
	turn := func(scope, body string, seq int64) sdk.Record {
		r := rec(scope, "", body)
		r.Thread = &sdk.Thread{ID: "conv", Seq: seq}
		return r
	}
	ids := remember(t, p, realm, turn("realm", "apple", 0), turn("realm", "pear", 1), turn("realm", "plum", 2),
		turn("realm", "fig", 3), turn("identity:alice", "pear", 1), turn("identity:alice", "plum", 2), rec("realm", "", "unthreaded"))
	at := func(scope string, seq int64) sdk.ThreadPlace {
		return sdk.ThreadPlace{Scope: sdk.Scope(scope), Thread: "conv", Seq: seq}
	}
	read := func(places ...sdk.ThreadPlace) []string {
		t.Helper()
		recs, err := p.ReadThread(ctx, realm, places)
		if err != nil {
			t.Fatalf("ReadThread(%v): %v", places, err)
		}
		got := make([]string, len(recs))
		for i, r := range recs {
			got[i] = r.ID
		}
		return sorted(got)
	}
	places := []sdk.ThreadPlace{at("realm", 1), at("realm", 3), at("identity:alice", 2), at("realm", 7), {Scope: "realm", Thread: "none", Seq: 1}}
	if got, want := read(places...), sorted([]string{ids[1], ids[3], ids[5]}); !slices.Equal(got, want) {
		t.Fatalf("ReadThread = %v, want %v", got, want)
	}
	if got := read(at("realm", 7)); len(got) != 0 {
		t.Fatalf("an empty place answered %v", got)
	}
	if got := read(); len(got) != 0 {
		t.Fatalf("no places answered %v", got)
	}
	if recs, err := p.ReadThread(ctx, "elsewhere", places); err != nil || len(recs) != 0 {
		t.Fatalf("ReadThread of a realm without an index = %v, %v", recs, err)
	}
	if _, err := p.Forget(ctx, realm, ids[3:4]); err != nil {
		t.Fatal(err)
	}
	if got, want := read(places...), sorted([]string{ids[1], ids[5]}); !slices.Equal(got, want) {
		t.Fatalf("after Forget ReadThread = %v, want %v", got, want)
	}
	p.Close()
	if _, err := p.ReadThread(ctx, realm, places); !errors.Is(err, sdk.ErrUnavailable) {
		t.Fatalf("ReadThread after Close: %v, want ErrUnavailable", err)
	}
	p = newProvider(t, dir)
	if got, want := read(places...), sorted([]string{ids[1], ids[5]}); !slices.Equal(got, want) {
		t.Fatalf("after a reopen ReadThread = %v, want %v", got, want)
	}
	// A crowded place answers its first sdk.MaxPlaceReads by id, alone
	// and beside a sparse one, where one search would serve them all.
	var crowd []sdk.Record
	for i := range sdk.MaxPlaceReads + 5 {
		crowd = append(crowd, turn("realm", fmt.Sprint("crowd ", i), 9))
	}
	c := remember(t, p, realm, crowd...)
	first := sorted(c)[:sdk.MaxPlaceReads]
	if got := read(at("realm", 9)); !slices.Equal(got, first) {
		t.Fatalf("a place of %d records: ReadThread = %v, want %v", len(crowd), got, first)
	}
	if got := read(at("realm", 9), at("realm", 9)); !slices.Equal(got, first) {
		t.Fatalf("a place of %d records asked twice: ReadThread = %v, want %v", len(crowd), got, first)
	}
	if got, want := read(at("realm", 9), at("realm", 1), at("realm", 20)), sorted(append(slices.Clone(first), ids[1])); !slices.Equal(got, want) {
		t.Fatalf("a place of %d records and two others: ReadThread = %v, want %v", len(crowd), got, want)
	}
	q := sdk.RecallQuery{Realm: realm, Query: "plum", Scopes: []sdk.Scope{"realm"}, Limit: 1, Neighbours: 1}
	hits, err := p.Recall(ctx, q)
	if err != nil || len(hits) != 1 || hits[0].Record.ID != ids[2] {
		t.Fatalf("Recall = %+v, %v", hits, err)
	}
	if err := sdk.AttachNeighbours(ctx, p, q, hits, time.Now()); err != nil {
		t.Fatal(err)
	}
	if n := hits[0].Neighbours; len(n) != 1 || n[0].ID != ids[1] {
		t.Fatalf("neighbours of seq 2 = %+v, want only seq 1 (seq 3 is forgotten)", n)
	}
}
