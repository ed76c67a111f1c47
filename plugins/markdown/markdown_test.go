package markdown

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/memhost/memhost/sdk"
	"github.com/memhost/memhost/sdk/conformance"
	"github.com/memhost/memhost/sdk/host"
)

func TestInfo(t *testing.T) {
	p := New()
	if err := sdk.CheckPlugin(p); err != nil {
		t.Fatal(err)
	}
	info := p.Info()
	if info.Name != "markdown" || !host.IsSemver(info.Version) {
		t.Fatalf("Info = %+v", info)
	}
	caps := sdk.CapabilitiesOf(p)
	for _, c := range []sdk.Capability{sdk.CapWrite, sdk.CapFetch, sdk.CapForget, sdk.CapSupersede, sdk.CapArchive, sdk.CapReindex, sdk.CapNeighbours} {
		if !caps.Has(c) {
			t.Errorf("capability %q missing from %v", c, caps)
		}
	}
	for _, c := range []sdk.Capability{sdk.CapManifest, sdk.CapLedger, sdk.CapUsage} {
		if caps.Has(c) {
			t.Errorf("capability %q declared; the markdown provider has none", c)
		}
	}
	var schema map[string]any
	if err := json.Unmarshal(info.ConfigSchema, &schema); err != nil || schema["additionalProperties"] != false {
		t.Fatalf("config schema %s: %v", info.ConfigSchema, err)
	}
}

func TestConfigure(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	writeFile(t, file, "x")
	tests := []struct {
		name     string
		config   string
		wantErr  error
		wantRoot string // relative to the working directory
	}{
		{"empty object uses md", `{}`, nil, "md"},
		{"no config at all", ``, nil, "md"},
		{"relative root", `{"root": "notes/deep"}`, nil, "notes/deep"},
		{"absolute root", fmt.Sprintf(`{"root": %q}`, filepath.Join(dir, "abs")), nil, filepath.Join(dir, "abs")},
		{"unknown key", `{"root": "md", "path": "x"}`, sdk.ErrInvalid, ""},
		{"wrong type", `{"root": 5}`, sdk.ErrInvalid, ""},
		{"not an object", `["md"]`, sdk.ErrInvalid, ""},
		{"null", `null`, sdk.ErrInvalid, ""},
		{"trailing data", `{"root": "md"} {}`, sdk.ErrInvalid, ""},
		{"root is a file", fmt.Sprintf(`{"root": %q}`, file), sdk.ErrInvalid, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wd := t.TempDir()
			t.Chdir(wd)
			p := New()
			p.opts.background = false
			defer p.Close()
			err := p.Configure(ctx, json.RawMessage(tt.config))
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("err = %v, want %v", err, tt.wantErr)
				}
				if _, err := p.Recall(ctx, sdk.RecallQuery{Realm: "default", Query: "x"}); !errors.Is(err, sdk.ErrUnavailable) {
					t.Fatalf("a failed Configure left the provider usable: %v", err)
				}
				if ents, _ := os.ReadDir(wd); len(ents) != 0 {
					t.Fatalf("a failed Configure created %v", ents)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			root := tt.wantRoot
			if !filepath.IsAbs(root) {
				root = filepath.Join(wd, root)
			}
			if fi, err := os.Stat(root); err != nil || !fi.IsDir() {
				t.Fatalf("root %s not created: %v", root, err)
			}
			if _, err := p.Remember(ctx, "default", []sdk.Record{rec(alice, "t", "b")}); err != nil {
				t.Fatal(err)
			}
			if ents, _ := os.ReadDir(filepath.Join(root, "default", "identity", "alice")); len(ents) != 1 {
				t.Fatalf("record not written under the configured root: %v", ents)
			}
		})
	}
}

func TestUnconfigured(t *testing.T) {
	p := New()
	if _, err := p.Recall(ctx, sdk.RecallQuery{Realm: "default", Query: "x"}); !errors.Is(err, sdk.ErrUnavailable) {
		t.Fatalf("Recall before Configure: %v", err)
	}
	if _, err := p.Remember(ctx, "default", []sdk.Record{rec(alice, "t", "b")}); !errors.Is(err, sdk.ErrUnavailable) {
		t.Fatalf("Remember before Configure: %v", err)
	}
}

func TestRoundTrip(t *testing.T) {
	expires := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		name string
		in   sdk.Record
	}{
		{"minimal", sdk.Record{Scope: alice, Kind: sdk.KindFact, Body: "just a body"}},
		{"every field", sdk.Record{
			ID: "my-id.1", Scope: sdk.MobScope("ops"), Kind: sdk.KindProcedure, Title: "Deploy", Description: "how to deploy",
			Body: "1. build\n2. ship\n", Tags: []string{"ops", "Deploy"}, Trust: sdk.TrustOperator, Status: sdk.StatusQuarantined,
			Supersedes: "older", ExpiresAt: expires, UseCount: 4, LastUsedAt: time.Date(2026, 2, 1, 1, 2, 3, 456789000, time.UTC),
		}},
		{"operator and realm scopes", sdk.Record{Scope: sdk.OperatorScope("root"), Kind: sdk.KindGotcha, Title: "t"}},
		{"realm scope", sdk.Record{Scope: sdk.RealmScope, Kind: sdk.KindReference, Title: "t"}},
		{"unicode and markup", sdk.Record{Scope: alice, Kind: sdk.KindFact, Title: "東京 \"quoted\" <b>", Body: "---\nnot front matter\n---\n\n\n"}},
	}
	for _, m := range modes {
		for _, tt := range tests {
			t.Run(m.name+"/"+tt.name, func(t *testing.T) {
				tp := newTestProvider(t, m)
				ids := tp.remember(t, "default", tt.in)
				got := tp.get(t, "default", ids[0])
				if len(got) != 1 {
					t.Fatalf("Get(%s) = %v", ids[0], got)
				}
				want := tt.in
				if want.ID == "" {
					want.ID = ids[0]
				}
				want.Realm = "default"
				if want.Trust == "" {
					want.Trust = sdk.TrustAgentObserved
				}
				if want.Status == "" {
					want.Status = sdk.StatusActive
				}
				want.CreatedAt = tp.clock.Now()
				want.UpdatedAt = tp.clock.Now()
				want.LastUsedAt = want.LastUsedAt.Truncate(time.Millisecond)
				want.ContentHash = sdk.ContentHash(want.Title, want.Body)
				if !sameRecord(got[0], want) {
					t.Fatalf("Get = %+v\nwant %+v", got[0], want)
				}
				// The file is the record: a fresh provider on the same root agrees.
				tp.Close()
				again := openTestProvider(t, tp.root, m)
				if got := again.get(t, "default", ids[0]); len(got) != 1 || !sameRecord(got[0], want) {
					t.Fatalf("after reopening: %+v\nwant %+v", got, want)
				}
			})
		}
	}
}

func TestRememberIdempotent(t *testing.T) {
	tp := newTestProvider(t, modes[0])
	first := tp.remember(t, "default", rec(alice, "same", "body", "a"))[0]
	// Same title and body in the same scope: the existing id, even with other metadata.
	again := tp.remember(t, "default", sdk.Record{Scope: alice, Kind: sdk.KindGotcha, Title: "same", Body: "body", Tags: []string{"b"}})[0]
	if again != first {
		t.Fatalf("duplicate got id %s, want %s", again, first)
	}
	// Another scope or realm is another record.
	if other := tp.remember(t, "default", rec(bob, "same", "body"))[0]; other == first {
		t.Fatal("same content in another scope reused the id")
	}
	if other := tp.remember(t, "acme", rec(alice, "same", "body"))[0]; other == first {
		t.Fatal("same content in another realm reused the id")
	}
	// Within one batch.
	ids := tp.remember(t, "default", rec(alice, "x", "y"), rec(alice, "x", "y"), rec(alice, "z", "y"))
	if ids[0] != ids[1] || ids[0] == ids[2] {
		t.Fatalf("batch ids = %v, want the first two equal", ids)
	}
	// A caller-chosen id that exists with the same content is a retry...
	fixed := rec(alice, "fixed", "id")
	fixed.ID = "chosen"
	tp.remember(t, "default", fixed)
	if got := tp.remember(t, "default", fixed); got[0] != "chosen" {
		t.Fatalf("retry with a chosen id answered %v", got)
	}
	// ...with other content it is a conflict.
	clash := rec(alice, "other", "content")
	clash.ID = "chosen"
	if _, err := tp.Remember(ctx, "default", []sdk.Record{clash}); !errors.Is(err, sdk.ErrConflict) {
		t.Fatalf("id clash: err = %v, want ErrConflict", err)
	}
	if n := len(tp.recall(t, sdk.RecallQuery{Query: "same body", Limit: 100})); n != 2 {
		t.Fatalf("recall found %d copies in realm default, want 2 (alice and bob)", n)
	}
}

// TestBadInputChangesNothing sends bad writes and checks the tree is
// byte-for-byte unchanged and the error names the problem.
func TestBadInputChangesNothing(t *testing.T) {
	good := rec(alice, "good", "record")
	withID := func(id string) sdk.Record { r := good; r.ID = id; return r }
	withScope := func(s sdk.Scope) sdk.Record { r := good; r.Scope = s; return r }
	tests := []struct {
		name    string
		realm   string
		batch   []sdk.Record
		wantErr error
		errHas  string
	}{
		{"oversized body", "default", []sdk.Record{good, rec(alice, "t", strings.Repeat("x", sdk.MaxBodyBytes+1))}, sdk.ErrTooLarge, "body"},
		{"oversized title", "default", []sdk.Record{rec(alice, strings.Repeat("x", sdk.MaxTitleBytes+1), "b")}, sdk.ErrTooLarge, "title"},
		{"invalid UTF-8", "default", []sdk.Record{good, rec(alice, "t\xff", "b")}, sdk.ErrInvalid, "UTF-8"},
		{"path traversal id", "default", []sdk.Record{good, withID("../../etc/passwd")}, sdk.ErrInvalid, "id"},
		{"absolute id", "default", []sdk.Record{withID("/etc/passwd")}, sdk.ErrInvalid, "id"},
		{"dot id", "default", []sdk.Record{withID(".hidden")}, sdk.ErrInvalid, "id"},
		{"traversal scope", "default", []sdk.Record{good, withScope("identity:../../x")}, sdk.ErrInvalid, "scope"},
		{"unknown scope", "default", []sdk.Record{withScope("team:x")}, sdk.ErrInvalid, "scope"},
		{"no scope", "default", []sdk.Record{withScope("")}, sdk.ErrInvalid, "scope"},
		{"traversal realm", "../outside", []sdk.Record{good}, sdk.ErrInvalid, "realm"},
		{"empty realm", "", []sdk.Record{good}, sdk.ErrInvalid, "realm"},
		{"record names another realm", "default", []sdk.Record{{Realm: "acme", Scope: alice, Kind: sdk.KindFact, Title: "t"}}, sdk.ErrInvalid, "realm"},
		{"empty title and body", "default", []sdk.Record{good, rec(alice, " ", "")}, sdk.ErrInvalid, "empty"},
		{"unknown kind", "default", []sdk.Record{{Scope: alice, Kind: "opinion", Title: "t"}}, sdk.ErrInvalid, "kind"},
		{"bad tag", "default", []sdk.Record{rec(alice, "t", "b", "a,b")}, sdk.ErrInvalid, "tags"},
		{"expiry a file cannot hold", "default", []sdk.Record{{Scope: alice, Kind: sdk.KindFact, Title: "t", ExpiresAt: time.Date(12000, 1, 1, 0, 0, 0, 0, time.UTC)}}, sdk.ErrInvalid, "expires_at"},
		{"duplicate id in batch", "default", []sdk.Record{withID("twice"), {ID: "twice", Scope: alice, Kind: sdk.KindFact, Title: "other"}}, sdk.ErrConflict, "twice"},
		{"id already taken", "default", []sdk.Record{good, {ID: "taken", Scope: bob, Kind: sdk.KindFact, Title: "new"}}, sdk.ErrConflict, "taken"},
		{"batch too large", "default", make([]sdk.Record, sdk.MaxBatch+1), sdk.ErrTooLarge, "limit"},
		{"chosen id over an invalid hand-written file", "default", []sdk.Record{good, {ID: "handmade", Scope: alice, Kind: sdk.KindFact, Title: "mine"}}, sdk.ErrConflict, "not a valid record"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tp := newTestProvider(t, modes[0])
			taken := rec(alice, "taken", "already")
			taken.ID = "taken"
			tp.remember(t, "default", taken)
			writeFile(t, tp.path("default", alice, "handmade"), "my notes, no front matter yet\n")
			before := snapshot(t, tp.root)
			_, err := conformance.Served(t, tp.Provider).Remember(ctx, tt.realm, tt.batch)
			if !errors.Is(err, tt.wantErr) || !strings.Contains(err.Error(), tt.errHas) {
				t.Fatalf("err = %v, want %v mentioning %q", err, tt.wantErr, tt.errHas)
			}
			if after := snapshot(t, tp.root); !mapsEqual(before, after) {
				t.Fatalf("a refused write changed the tree:\nbefore %v\nafter  %v", keys(before), keys(after))
			}
			if n := len(tp.recall(t, sdk.RecallQuery{Query: "good record"})); n != 0 {
				t.Fatalf("a refused write is recalled (%d hits)", n)
			}
			if _, err := os.Stat(filepath.Join(filepath.Dir(tp.root), "outside")); err == nil {
				t.Fatal("a write escaped the root")
			}
		})
	}
}

func TestBadIDsInReadsAndDeletes(t *testing.T) {
	tp := newTestProvider(t, modes[0])
	id := tp.remember(t, "default", rec(alice, "keep", "me"))[0]
	before := snapshot(t, tp.root)
	sp := conformance.Served(t, tp.Provider)
	for _, bad := range []string{"../../etc/passwd", "", ".x", "a/b", strings.Repeat("x", 200)} {
		if _, err := sp.Get(ctx, "default", []string{id, bad}); !errors.Is(err, sdk.ErrInvalid) {
			t.Errorf("Get(%q): err = %v, want ErrInvalid", bad, err)
		}
		if _, err := sp.Forget(ctx, "default", []string{id, bad}); !errors.Is(err, sdk.ErrInvalid) {
			t.Errorf("Forget(%q): err = %v, want ErrInvalid", bad, err)
		}
		if _, err := sp.Supersede(ctx, "default", bad, rec(alice, "n", "b")); !errors.Is(err, sdk.ErrInvalid) {
			t.Errorf("Supersede(%q): err = %v, want ErrInvalid", bad, err)
		}
	}
	for _, q := range []sdk.RecallQuery{
		{Realm: "../x", Query: "keep"},
		{Realm: "default", Query: "keep", Scopes: []sdk.Scope{"identity:../../x"}},
		{Realm: "default", Query: "keep", Scopes: []sdk.Scope{"everyone"}},
	} {
		if _, err := sp.Recall(ctx, q); !errors.Is(err, sdk.ErrInvalid) {
			t.Errorf("Recall(%+v): err = %v, want ErrInvalid", q, err)
		}
	}
	if _, err := sp.Get(ctx, "default", make([]string, sdk.MaxBatch+1)); !errors.Is(err, sdk.ErrTooLarge) {
		t.Errorf("Get of too many ids: %v", err)
	}
	if after := snapshot(t, tp.root); !mapsEqual(before, after) {
		t.Fatal("refused calls changed the tree")
	}
}

// TestWriteFailureRollsBack makes a write of a batch fail at each stage
// and checks that nothing of the batch stays behind.
func TestWriteFailureRollsBack(t *testing.T) {
	blockedID := rec(alice, "second", "fails")
	blockedID.ID = "blocked"
	tests := []struct {
		name  string
		block func(tp *testProvider)
		batch []sdk.Record
	}{
		{"scope directory is a file", func(tp *testProvider) {
			writeFile(t, filepath.Join(tp.root, "default", "identity", "bob"), "in the way")
		}, []sdk.Record{rec(alice, "first", "ok"), rec(bob, "second", "fails")}},
		{"rename fails after another succeeded", func(tp *testProvider) {
			writeFile(t, filepath.Join(tp.root, "default", "identity", "alice", "blocked.md", "x"), "a directory in the way")
		}, []sdk.Record{rec(alice, "first", "ok"), blockedID}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tp := newTestProvider(t, modes[0])
			tt.block(tp)
			before := snapshot(t, tp.root)
			if _, err := tp.Remember(ctx, "default", tt.batch); err == nil {
				t.Fatal("the blocked write succeeded")
			}
			if after := snapshot(t, tp.root); !sameFiles(before, after) {
				t.Fatalf("failed batch left files behind:\nbefore %v\nafter  %v", keys(before), keys(after))
			}
			if hits := tp.recall(t, sdk.RecallQuery{Query: "first ok"}); len(hits) != 0 {
				t.Fatalf("failed batch is recalled: %v", hitIDs(hits))
			}
		})
	}
}

func TestRefusesSymlinkedDirectories(t *testing.T) {
	outside := t.TempDir()
	tp := newTestProvider(t, modes[0])
	if err := os.MkdirAll(filepath.Join(tp.root, "default", "identity"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(tp.root, "default", "identity", "eve")); err != nil {
		t.Skip("no symlinks here:", err)
	}
	writeFile(t, filepath.Join(outside, "planted.md"), "---\nkind: \"fact\"\ntitle: \"planted secret\"\n---\n")
	_, err := tp.Remember(ctx, "default", []sdk.Record{rec(sdk.IdentityScope("eve"), "t", "b")})
	if !errors.Is(err, sdk.ErrPermission) {
		t.Fatalf("write through a symlinked directory: err = %v, want ErrPermission", err)
	}
	if ents, _ := os.ReadDir(outside); len(ents) != 1 {
		t.Fatalf("write escaped the root: %v", ents)
	}
	if hits := tp.recall(t, sdk.RecallQuery{Query: "planted secret"}); len(hits) != 0 {
		t.Fatal("a record was read through a symlink out of the root")
	}
}

func TestNoTempFilesLeft(t *testing.T) {
	tp := newTestProvider(t, modes[0], func(root string) {
		// A crash's leftover is cleaned at open.
		writeFile(t, filepath.Join(root, "default", "realm", tempPrefix+"x.md.123"), "half a record")
	})
	ids := tp.remember(t, "default", rec(alice, "a", "1"), rec(sdk.RealmScope, "b", "2"), rec(sdk.MobScope("m"), "c", "3"))
	if _, err := tp.Supersede(ctx, "default", ids[0], rec(alice, "a2", "1")); err != nil {
		t.Fatal(err)
	}
	if _, err := tp.Forget(ctx, "default", ids[1:2]); err != nil {
		t.Fatal(err)
	}
	for rel := range snapshot(t, tp.root) {
		if strings.Contains(rel, tempPrefix) {
			t.Errorf("temp file left behind: %s", rel)
		}
	}
}

func TestIsolation(t *testing.T) {
	tp := newTestProvider(t, modes[0])
	a := tp.remember(t, "default", rec(alice, "shared secret", "alpha"), rec(bob, "shared secret", "beta"), rec(sdk.RealmScope, "shared secret", "gamma"))
	b := tp.remember(t, "acme", rec(alice, "shared secret", "delta"))
	tests := []struct {
		name   string
		realm  string
		scopes []sdk.Scope
		want   []string
	}{
		{"realm default, every scope", "default", nil, a},
		{"realm acme", "acme", nil, b},
		{"unknown realm", "other", nil, nil},
		{"one scope", "default", []sdk.Scope{alice}, a[:1]},
		{"two scopes", "default", []sdk.Scope{bob, sdk.RealmScope}, a[1:]},
		{"scope with no records", "default", []sdk.Scope{sdk.MobScope("x")}, nil},
		{"alice in acme only sees acme", "acme", []sdk.Scope{alice}, b},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := hitIDs(tp.recall(t, sdk.RecallQuery{Realm: tt.realm, Query: "shared secret", Scopes: tt.scopes}))
			slices.Sort(got)
			want := slices.Sorted(slices.Values(tt.want))
			if !slices.Equal(got, want) {
				t.Fatalf("got %v, want %v", got, want)
			}
		})
	}
	if got := tp.get(t, "acme", a...); len(got) != 0 {
		t.Fatalf("Get crossed realms: %v", recordIDs(got))
	}
	if n, err := tp.Forget(ctx, "acme", a); err != nil || n != 0 {
		t.Fatalf("Forget crossed realms: %d, %v", n, err)
	}
	if _, err := tp.Supersede(ctx, "acme", a[0], rec(alice, "n", "b")); !errors.Is(err, sdk.ErrNotFound) {
		t.Fatalf("Supersede crossed realms: %v", err)
	}
	if got := tp.get(t, "default", a...); len(got) != 3 {
		t.Fatalf("records of default changed: %v", recordIDs(got))
	}
}

func TestStatusAndExpiry(t *testing.T) {
	tp := newTestProvider(t, modes[0])
	now := tp.clock.Now()
	mk := func(title string, st sdk.Status, expires time.Time) sdk.Record {
		r := rec(alice, title, "lighthouse keeper")
		r.Status, r.ExpiresAt = st, expires
		return r
	}
	ids := tp.remember(t, "default",
		mk("active", sdk.StatusActive, time.Time{}),
		mk("superseded", sdk.StatusSuperseded, time.Time{}),
		mk("quarantined", sdk.StatusQuarantined, time.Time{}),
		mk("tombstoned", sdk.StatusTombstoned, time.Time{}),
		mk("expires later", sdk.StatusActive, now.Add(time.Hour)),
		mk("expired", sdk.StatusActive, now.Add(-time.Second)),
	)
	q := sdk.RecallQuery{Query: "lighthouse", Limit: 100}
	if got, want := hitIDs(tp.recall(t, q)), []string{ids[0], ids[4]}; !sameSet(got, want) {
		t.Fatalf("recall = %v, want the active unexpired %v", got, want)
	}
	if got := tp.get(t, "default", ids...); len(got) != len(ids) {
		t.Fatalf("Get answered %d of %d records; it must answer any status", len(got), len(ids))
	}
	tp.clock.Advance(time.Hour)
	if got := hitIDs(tp.recall(t, q)); !slices.Equal(got, ids[:1]) {
		t.Fatalf("after the expiry: %v, want %v", got, ids[:1])
	}
}

func TestGetOrder(t *testing.T) {
	tp := newTestProvider(t, modes[0])
	ids := tp.remember(t, "default", rec(alice, "one", "1"), rec(alice, "two", "2"), rec(bob, "three", "3"))
	got := recordIDs(tp.get(t, "default", ids[2], "missing", ids[0], ids[1]))
	if want := []string{ids[2], ids[0], ids[1]}; !slices.Equal(got, want) {
		t.Fatalf("Get order = %v, want %v", got, want)
	}
}

func TestForget(t *testing.T) {
	tp := newTestProvider(t, modes[0])
	ids := tp.remember(t, "default", rec(alice, "one", "forget me"), rec(alice, "two", "forget me too"))
	path := tp.path("default", alice, ids[0])
	n, err := tp.Forget(ctx, "default", []string{ids[0], ids[0], "never-existed"})
	if err != nil || n != 1 {
		t.Fatalf("Forget = %d, %v; want 1", n, err)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatalf("file still there: %v", err)
	}
	if n, err := tp.Forget(ctx, "default", ids[:1]); err != nil || n != 0 {
		t.Fatalf("second Forget = %d, %v; want 0, nil", n, err)
	}
	if got := hitIDs(tp.recall(t, sdk.RecallQuery{Query: "forget"})); !slices.Equal(got, ids[1:]) {
		t.Fatalf("recall after forget = %v", got)
	}
	// Forgotten content may be remembered again, as a new record.
	if again := tp.remember(t, "default", rec(alice, "one", "forget me"))[0]; again == ids[0] {
		t.Fatal("re-remembering forgotten content answered the forgotten id")
	}
}

func TestSupersede(t *testing.T) {
	tp := newTestProvider(t, modes[0])
	old := tp.remember(t, "default", sdk.Record{Scope: alice, Kind: sdk.KindPreference, Title: "editor", Body: "uses vim"})[0]
	tp.clock.Advance(time.Minute)
	newID, err := tp.Supersede(ctx, "default", old, sdk.Record{Title: "editor", Body: "uses helix now"})
	if err != nil {
		t.Fatal(err)
	}
	got := tp.get(t, "default", old, newID)
	if len(got) != 2 {
		t.Fatalf("Get = %v", recordIDs(got))
	}
	o, n := got[0], got[1]
	if o.Status != sdk.StatusSuperseded || !o.UpdatedAt.Equal(tp.clock.Now()) {
		t.Errorf("old record: status %s updated %v", o.Status, o.UpdatedAt)
	}
	if n.Supersedes != old || n.Scope != alice || n.Kind != sdk.KindPreference || n.Status != sdk.StatusActive {
		t.Errorf("replacement = %+v; want it to supersede %s and inherit scope and kind", n, old)
	}
	if hits := hitIDs(tp.recall(t, sdk.RecallQuery{Query: "editor uses"})); !slices.Equal(hits, []string{newID}) {
		t.Errorf("recall = %v, want only the replacement", hits)
	}
	b, _ := os.ReadFile(tp.path("default", alice, old))
	if !strings.Contains(string(b), `status: "superseded"`) {
		t.Errorf("old file not marked:\n%s", b)
	}
	// A retry answers the same replacement.
	if again, err := tp.Supersede(ctx, "default", old, sdk.Record{Title: "editor", Body: "uses helix now"}); err != nil || again != newID {
		t.Errorf("retry = %s, %v; want %s", again, err, newID)
	}
	// Superseding again with something else is a conflict; a missing record is not found.
	if _, err := tp.Supersede(ctx, "default", old, sdk.Record{Title: "editor", Body: "emacs"}); !errors.Is(err, sdk.ErrConflict) {
		t.Errorf("second supersede: %v, want ErrConflict", err)
	}
	if _, err := tp.Supersede(ctx, "default", "nope", sdk.Record{Title: "x", Body: "y"}); !errors.Is(err, sdk.ErrNotFound) {
		t.Errorf("missing record: %v, want ErrNotFound", err)
	}
	if _, err := tp.Supersede(ctx, "default", newID, sdk.Record{Title: "x", Body: "y", Supersedes: "other"}); !errors.Is(err, sdk.ErrInvalid) {
		t.Errorf("contradicting Supersedes field: %v, want ErrInvalid", err)
	}
	// Same title and body but new tags: a real replacement, and a later
	// remember of that content finds the active one.
	third, err := tp.Supersede(ctx, "default", newID, sdk.Record{Title: "editor", Body: "uses helix now", Tags: []string{"tools"}})
	if err != nil || third == newID {
		t.Fatalf("metadata-only supersede = %s, %v", third, err)
	}
	if id := tp.remember(t, "default", rec(alice, "editor", "uses helix now"))[0]; id != third {
		t.Fatalf("remember of superseded content answered %s, want the active %s", id, third)
	}
}

func TestSupersedeRollsBack(t *testing.T) {
	tp := newTestProvider(t, modes[0])
	old := tp.remember(t, "default", rec(alice, "old", "record"))[0]
	// The replacement goes to a scope whose directory is blocked by a file.
	writeFile(t, filepath.Join(tp.root, "default", "mob", "blocked"), "in the way")
	before := snapshot(t, tp.root)
	if _, err := tp.Supersede(ctx, "default", old, rec(sdk.MobScope("blocked"), "new", "record")); err == nil {
		t.Fatal("supersede into a blocked directory succeeded")
	}
	if after := snapshot(t, tp.root); !sameFiles(before, after) {
		t.Fatal("failed supersede changed files")
	}
	if got := tp.get(t, "default", old); got[0].Status != sdk.StatusActive {
		t.Fatalf("old record status %s after a failed supersede", got[0].Status)
	}
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// sameFiles compares snapshots ignoring directories (a failed write may
// leave an empty directory, which is harmless).
func sameFiles(a, b map[string]string) bool {
	strip := func(m map[string]string) map[string]string {
		out := map[string]string{}
		for k, v := range m {
			if !strings.HasSuffix(k, "/") {
				out[k] = v
			}
		}
		return out
	}
	return mapsEqual(strip(a), strip(b))
}

func keys(m map[string]string) []string {
	return slices.Sorted(func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	})
}

func sameSet(a, b []string) bool {
	return slices.Equal(slices.Sorted(slices.Values(a)), slices.Sorted(slices.Values(b)))
}
