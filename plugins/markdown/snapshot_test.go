package markdown

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"hash/crc64"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/memhost/memhost/sdk"
)

// handRecords writes n record files straight to disk with mtimes an hour
// old (so no stamp is racy) and answers their ids.
func handRecords(t *testing.T, root, realm string, n int) []string {
	t.Helper()
	old := time.Now().Add(-time.Hour)
	var ids []string
	for i := range n {
		id := fmt.Sprintf("h%03d", i)
		scope := []sdk.Scope{alice, bob, sdk.RealmScope}[i%3]
		r := rec(scope, fmt.Sprintf("harbor note %d", i), fmt.Sprintf("lighthouse keeper %d", i%7), "ops")
		r.ID = id
		if i%4 == 0 {
			r.Thread = &sdk.Thread{ID: "conv", Seq: int64(i)}
		}
		if err := prepare(&r, realm, old); err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(root, filepath.FromSlash(fileKey{realm, r.Scope, id}.rel()))
		writeFile(t, p, string(renderRecord(&r)))
		if err := os.Chtimes(p, old, old); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	return ids
}

// checkAgainstFiles holds a few queries to the reference over the files.
func checkAgainstFiles(t *testing.T, tp *testProvider, label string) {
	t.Helper()
	for _, q := range []sdk.RecallQuery{
		{Query: "harbor lighthouse"},
		{Query: "keeper marigold", Limit: 50},
		{Query: "note 3", Scopes: []sdk.Scope{alice, sdk.RealmScope}},
		{Query: "harbor", Tags: []string{"OPS"}, Limit: 100},
	} {
		compareWithReference(t, tp, q, label)
	}
}

func TestSnapshotReopen(t *testing.T) {
	root := t.TempDir()
	handRecords(t, root, "default", 60)
	tp := openTestProvider(t, root, modes[0])
	if tp.st.fromSnapshot {
		t.Fatal("a fresh root opened from a snapshot")
	}
	if n := tp.st.loads.Load(); n != 60 {
		t.Fatalf("first open read %d files, want 60", n)
	}
	checkAgainstFiles(t, tp, "first open")
	tp.Close()
	if _, err := os.Stat(filepath.Join(root, DefaultSnapshot)); err != nil {
		t.Fatalf("no snapshot after close: %v", err)
	}

	// Unchanged files are not read again.
	tp = openTestProvider(t, root, modes[0])
	if !tp.st.fromSnapshot || tp.st.loads.Load() != 0 {
		t.Fatalf("reopen: from snapshot %v, %d files read; want true, 0", tp.st.fromSnapshot, tp.st.loads.Load())
	}
	checkAgainstFiles(t, tp, "from the snapshot")
	tp.Close()

	// Edits made while the plugin was down: only those files are read.
	editInPlace(t, filepath.Join(root, "default/identity/alice/h003.md"), func(s string) string {
		return strings.Replace(s, "lighthouse", "marigold", 1)
	})
	if err := os.Remove(filepath.Join(root, "default/identity/bob/h004.md")); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(root, "default/realm/added.md"), "---\nkind: \"fact\"\ntitle: \"added by hand\"\n---\nmarigold harbor\n")
	tp = openTestProvider(t, root, modes[0])
	if !tp.st.fromSnapshot || tp.st.loads.Load() != 2 {
		t.Fatalf("reopen after edits: from snapshot %v, %d files read; want true, 2", tp.st.fromSnapshot, tp.st.loads.Load())
	}
	if got := hitIDs(tp.recall(t, sdk.RecallQuery{Query: "marigold"})); !sameSet(got, []string{"h003", "added"}) {
		t.Fatalf("marigold recalls %v", got)
	}
	if got := tp.get(t, "default", "h004"); len(got) != 0 {
		t.Fatal("a file deleted while down is still there")
	}
	checkAgainstFiles(t, tp, "after edits while down")
}

// TestSnapshotStaleAfterCrash: writes acknowledged after the last snapshot
// (a crash kept it from being rewritten) are found by the open's sweep.
func TestSnapshotStaleAfterCrash(t *testing.T) {
	tp := newTestProvider(t, modes[0])
	a := tp.remember(t, "default", rec(alice, "before the snapshot", "marigold one"), rec(bob, "also before", "marigold two"))
	if err := tp.st.saveSnapshot(); err != nil {
		t.Fatal(err)
	}
	b := tp.remember(t, "default", rec(alice, "after the snapshot", "marigold three"))
	if _, err := tp.Forget(ctx, "default", a[:1]); err != nil {
		t.Fatal(err)
	}
	newID, err := tp.Supersede(ctx, "default", a[1], rec(bob, "replaced", "marigold four"))
	if err != nil {
		t.Fatal(err)
	}
	// tp is never closed before this look: its snapshot is stale. A
	// crash would free the root's lock; so does this.
	tp.st.lock.Release()
	tp2 := openTestProvider(t, tp.root, modes[0])
	if !tp2.st.fromSnapshot {
		t.Fatal("the stale snapshot was not used")
	}
	if got := hitIDs(tp2.recall(t, sdk.RecallQuery{Query: "marigold"})); !sameSet(got, []string{b[0], newID}) {
		t.Fatalf("marigold recalls %v, want %v", got, []string{b[0], newID})
	}
	if got := tp2.get(t, "default", a[1]); len(got) != 1 || got[0].Status != sdk.StatusSuperseded {
		t.Fatalf("superseded record reads back as %+v", got)
	}
	compareWithReference(t, tp2, sdk.RecallQuery{Query: "marigold before after"}, "stale snapshot")
}

func TestSnapshotUnusable(t *testing.T) {
	tests := []struct {
		name   string
		damage func(t *testing.T, path string) string // answers the root to open
		reason string
	}{
		{"torn", func(t *testing.T, path string) string {
			b, _ := os.ReadFile(path)
			os.WriteFile(path, b[:len(b)/2], 0o600)
			return filepath.Dir(path)
		}, "checksum"},
		{"bit flipped", func(t *testing.T, path string) string {
			b, _ := os.ReadFile(path)
			b[len(b)/3] ^= 0x10
			os.WriteFile(path, b, 0o600)
			return filepath.Dir(path)
		}, "checksum"},
		{"not a snapshot", func(t *testing.T, path string) string {
			os.WriteFile(path, []byte("hello"), 0o600)
			return filepath.Dir(path)
		}, "not a snapshot"},
		// An engine of the layout that joined thread context across
		// scopes (sdk/index v5), in a snapshot whose checksum holds.
		{"of cross-scope thread context", func(t *testing.T, path string) string {
			b, _ := os.ReadFile(path)
			magic := []byte("memhost-index\x00v")
			at := bytes.Index(b, magic)
			if at < 0 {
				t.Fatal("no engine in the snapshot")
			}
			b[at+len(magic)] = '5'
			n := len(b) - 8
			binary.LittleEndian.PutUint64(b[n:], crc64.Checksum(b[:n], digestTable))
			os.WriteFile(path, b, 0o600)
			return filepath.Dir(path)
		}, "across scopes"},
		{"of another root", func(t *testing.T, path string) string {
			other := t.TempDir()
			copyTree(t, filepath.Dir(path), other)
			return other
		}, "taken of root"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := t.TempDir()
			handRecords(t, root, "default", 30)
			tp := openTestProvider(t, root, modes[0])
			tp.Close()
			open := tt.damage(t, filepath.Join(root, DefaultSnapshot))
			tp = openTestProvider(t, open, modes[0])
			if tp.st.fromSnapshot || tp.st.loads.Load() != 30 {
				t.Fatalf("from snapshot %v, %d files read; want a rebuild from all 30", tp.st.fromSnapshot, tp.st.loads.Load())
			}
			if logs := tp.logs.String(); !strings.Contains(logs, "rebuilding the recall index") || !strings.Contains(logs, tt.reason) {
				t.Fatalf("log does not say why it rebuilt (%q):\n%s", tt.reason, logs)
			}
			// And when it is done, with the records read.
			if logs := tp.logs.String(); !strings.Contains(logs, "rebuilt the recall index from the files") || !strings.Contains(logs, "records=30") {
				t.Fatalf("log does not say the rebuild is done:\n%s", logs)
			}
			checkAgainstFiles(t, tp, tt.name)
			// The rebuilt index is snapshotted again at close.
			tp.Close()
			tp = openTestProvider(t, open, modes[0])
			if !tp.st.fromSnapshot {
				t.Fatal("no usable snapshot after the rebuild")
			}
		})
	}
}

func copyTree(t *testing.T, from, to string) {
	t.Helper()
	for rel, content := range snapshot(t, from) {
		if strings.HasSuffix(rel, "/") {
			continue
		}
		writeFile(t, filepath.Join(to, rel), content)
	}
}

func TestSnapshotConfig(t *testing.T) {
	elsewhere := filepath.Join(t.TempDir(), "md.index")
	tests := []struct {
		name string
		cfg  string // %q is the root
		file string // "" for no snapshot
	}{
		{"default", `{"root": %q}`, DefaultSnapshot},
		{"off", `{"root": %q, "snapshot": false}`, ""},
		{"elsewhere", `{"root": %q, "snapshot_path": "` + elsewhere + `"}`, elsewhere},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := t.TempDir()
			p := New()
			p.opts.background = false
			p.logger = tpLogger()
			if err := p.Configure(ctx, json.RawMessage(fmt.Sprintf(tt.cfg, root))); err != nil {
				t.Fatal(err)
			}
			if _, err := p.Remember(ctx, "default", []sdk.Record{rec(alice, "x", "y")}); err != nil {
				t.Fatal(err)
			}
			p.Close()
			want := tt.file
			if want != "" && !filepath.IsAbs(want) {
				want = filepath.Join(root, want)
			}
			_, err := os.Stat(filepath.Join(root, DefaultSnapshot))
			if inRoot := err == nil; inRoot != (want == filepath.Join(root, DefaultSnapshot)) {
				t.Fatalf("snapshot in the root: %v", inRoot)
			}
			if want != "" {
				if _, err := os.Stat(want); err != nil {
					t.Fatalf("no snapshot at %s: %v", want, err)
				}
			}
		})
	}
	if _, err := ParseConfig([]byte(`{"root": "x", "snapshot": "yes"}`)); err == nil {
		t.Fatal("a string snapshot flag was accepted")
	}
}

// TestSnapshotAfterQuiet: the background writes a snapshot once writes
// pause, without a close.
func TestSnapshotAfterQuiet(t *testing.T) {
	root := t.TempDir()
	p := New()
	p.opts.poll, p.opts.quiet = 20*time.Millisecond, 10*time.Millisecond
	p.logger = tpLogger()
	if err := p.Configure(ctx, json.RawMessage(fmt.Sprintf(`{"root": %q}`, root))); err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if _, err := p.Remember(ctx, "default", []sdk.Record{rec(alice, "quiet", "write")}); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if _, err := os.Stat(filepath.Join(root, DefaultSnapshot)); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no snapshot written after writes went quiet")
		}
	}
}

// TestSnapshotRenumbersByScope: saving a snapshot renumbers the documents
// written since in scope order (index.Cluster), so a query of one
// identity's scope passes over the others' blocks; recall still answers as
// the reference over the files, and a reopen from the snapshot keeps the
// order.
func TestSnapshotRenumbersByScope(t *testing.T) {
	if testing.Short() {
		t.Skip("writes 9,000 record files")
	}
	tp := newTestProvider(t, modes[0])
	words := strings.Fields("harbor keeper lantern ferry gull anchor rope quay salt tide")
	const n = 9000
	for b := 0; b < n; b += 500 {
		recs := make([]sdk.Record, 500)
		for i := range recs {
			k := b + i
			scope := sdk.RealmScope
			if k%10 < 7 {
				scope = sdk.IdentityScope(fmt.Sprintf("u%02d", k*7%20))
			}
			recs[i] = rec(scope, fmt.Sprintf("%s %s %d", words[k%10], words[k*3%10], k), words[k*7%10])
		}
		tp.remember(t, "default", recs...)
	}
	out := func(tp *testProvider) int { return tp.st.realms["default"].ix.Unclustered("default") }
	if got := out(tp); got < n*9/10 {
		t.Fatalf("%d of %d documents out of scope order before the snapshot", got, n)
	}
	queries := []sdk.RecallQuery{
		{Query: "harbor keeper", Limit: 20},
		{Query: "ferry gull rope", Scopes: []sdk.Scope{sdk.IdentityScope("u07"), sdk.RealmScope}, Limit: 20},
		{Query: "tide lantern", Scopes: []sdk.Scope{sdk.IdentityScope("u13")}},
	}
	if err := tp.st.saveSnapshot(); err != nil {
		t.Fatal(err)
	}
	if got := out(tp); got != 0 {
		t.Fatalf("%d documents out of scope order after the snapshot", got)
	}
	for _, q := range queries {
		compareWithReference(t, tp, q, "renumbered")
	}
	root := tp.root
	tp.Close()
	back := openTestProvider(t, root, modes[0])
	if !back.st.fromSnapshot || out(back) != 0 {
		t.Fatalf("reopened: from the snapshot %v, %d documents out of scope order", back.st.fromSnapshot, out(back))
	}
	for _, q := range queries {
		compareWithReference(t, back, q, "reopened")
	}
}
