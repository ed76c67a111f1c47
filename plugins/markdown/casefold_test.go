package markdown

import (
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/memhost/memhost/sdk"
)

// openFoldingProvider opens a provider on a fresh root that it treats as
// a file system folding case (macOS's and Windows' defaults), whatever
// the test machine's is.
func openFoldingProvider(t *testing.T) *testProvider {
	t.Helper()
	root := t.TempDir()
	tp := &testProvider{Provider: New(), root: root, clock: newClock(), logs: &syncBuffer{}}
	tp.opts.now = tp.clock.Now
	tp.opts.watch = false
	tp.opts.background = false
	tp.opts.foldsCase = true
	tp.logger = slog.New(slog.NewTextHandler(tp.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	cfg, _ := json.Marshal(Config{Root: root})
	if err := tp.Configure(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tp.Close() })
	return tp
}

// On a root whose file system folds case, a realm or scope whose
// directory differs from an existing one only in case would share it:
// the next scan reads its files as the other realm's records, or drops
// them. Such a write is refused; names that differ otherwise are not.
func TestCaseFoldingRootRefusesClashingNames(t *testing.T) {
	cases := []struct {
		name         string
		firstRealm   string
		first        sdk.Scope
		secondRealm  string
		second       sdk.Scope
		wantConflict bool
	}{
		{"identity differing in case", "default", sdk.IdentityScope("alice"), "default", sdk.IdentityScope("Alice"), true},
		{"mob differing in case", "default", sdk.MobScope("ops"), "default", sdk.MobScope("OPS"), true},
		{"realm differing in case", "md", sdk.RealmScope, "MD", sdk.RealmScope, true},
		{"realm differing in case, identity scope", "md", sdk.IdentityScope("alice"), "Md", sdk.IdentityScope("alice"), true},
		{"same identity", "default", sdk.IdentityScope("alice"), "default", sdk.IdentityScope("alice"), false},
		{"other identity", "default", sdk.IdentityScope("alice"), "default", sdk.IdentityScope("alice2"), false},
		{"same name, other class", "default", sdk.IdentityScope("ops"), "default", sdk.MobScope("OPS"), false},
		{"other realm", "md", sdk.RealmScope, "md2", sdk.RealmScope, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tp := openFoldingProvider(t)
			tp.remember(t, c.firstRealm, rec(c.first, "first", "the first tenant's record"))
			ids, err := tp.Remember(ctx, c.secondRealm, []sdk.Record{rec(c.second, "second", "the second tenant's record")})
			if got := errors.Is(err, sdk.ErrConflict); got != c.wantConflict {
				t.Fatalf("second write: err = %v, want conflict %v", err, c.wantConflict)
			}
			if c.wantConflict {
				if len(ids) != 0 {
					t.Fatalf("a refused write answered ids %v", ids)
				}
				// Nothing of it reached the first tenant's directory.
				d, _ := scopeDir(c.first)
				entries, err := os.ReadDir(filepath.Join(tp.root, c.firstRealm, filepath.FromSlash(d)))
				if err != nil {
					t.Fatal(err)
				}
				if len(entries) != 1 {
					t.Fatalf("the first tenant's directory holds %d entries, want its one record", len(entries))
				}
				return
			}
			if got := tp.get(t, c.secondRealm, ids...); len(got) != 1 || got[0].Scope != c.second {
				t.Fatalf("second record read back as %+v", got)
			}
		})
	}
}

// The probe answers what the file system does with a name in another case.
func TestFoldsCaseProbe(t *testing.T) {
	root := t.TempDir()
	got, err := foldsCase(root)
	if err != nil {
		t.Fatal(err)
	}
	// Ask the file system directly, with another pair of names.
	if err := os.WriteFile(filepath.Join(root, "probe-a"), nil, filePerm); err != nil {
		t.Fatal(err)
	}
	_, err = os.Stat(filepath.Join(root, "PROBE-A"))
	if want := err == nil; got != want {
		t.Fatalf("foldsCase = %v, the file system answers %v", got, want)
	}
	if _, err := os.Lstat(filepath.Join(root, caseProbeName)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the probe file is left behind: %v", err)
	}
}

// TestFoldsCaseProbeFollowsNoLink: from an outside review. The probe was
// opened with O_TRUNC through whatever stood at its name, so a symbolic
// link there emptied the file it led to, outside the root, at every start.
func TestFoldsCaseProbeFollowsNoLink(t *testing.T) {
	for _, c := range []struct {
		name    string
		content string // of the link's target; "" for a link to nothing
	}{
		{"a link to a file", "precious\n"},
		{"a dangling link", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			root := t.TempDir()
			victim := filepath.Join(t.TempDir(), "victim")
			if c.content != "" {
				if err := os.WriteFile(victim, []byte(c.content), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			if err := os.Symlink(victim, filepath.Join(root, caseProbeName)); err != nil {
				t.Fatal(err)
			}
			if _, err := foldsCase(root); err != nil {
				t.Fatal(err)
			}
			got, err := os.ReadFile(victim)
			switch {
			case c.content == "" && !errors.Is(err, os.ErrNotExist):
				t.Fatalf("the link's target was created: %q, %v", got, err)
			case c.content != "" && string(got) != c.content:
				t.Fatalf("the link's target now holds %q, want %q", got, c.content)
			}
			if _, err := os.Lstat(filepath.Join(root, caseProbeName)); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("the probe is left behind: %v", err)
			}
		})
	}
}

// TestCaseFoldingRootForgetsRemovedDirectories: from an outside review. The
// names a write checks against were listed once and kept: a directory
// removed since (an operator wiping a realm or an identity by hand) still
// refused a realm or scope differing from it only in case, until the
// plugin restarted, though nothing on disk clashed any longer.
func TestCaseFoldingRootForgetsRemovedDirectories(t *testing.T) {
	for _, c := range []struct {
		name        string
		firstRealm  string
		first       sdk.Scope
		removed     string // relative to the root
		secondRealm string
		second      sdk.Scope
	}{
		{"a realm removed", "md", sdk.RealmScope, "md", "MD", sdk.RealmScope},
		{"an identity removed", "default", sdk.IdentityScope("alice"), "default/identity/alice", "default", sdk.IdentityScope("Alice")},
	} {
		t.Run(c.name, func(t *testing.T) {
			tp := openFoldingProvider(t)
			tp.remember(t, c.firstRealm, rec(c.first, "first", "the first tenant's record"))
			// A write beside it, so the directories above are listed.
			tp.remember(t, c.firstRealm, rec(sdk.IdentityScope("bob"), "beside", "another identity's record"))
			if err := os.RemoveAll(filepath.Join(tp.root, filepath.FromSlash(c.removed))); err != nil {
				t.Fatal(err)
			}
			if _, err := tp.Remember(ctx, c.secondRealm, []sdk.Record{rec(c.second, "second", "the second tenant's record")}); err != nil {
				t.Fatalf("a write after the clashing directory was removed: %v", err)
			}
		})
	}
}
