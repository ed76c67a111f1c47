package markdown

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/memhost/memhost/sdk"
)

// TestForgetDoesNotFollowASwappedDirectory swaps a record's scope
// directory for a symlink to a directory outside the root that holds a
// file of the same name, before any sweep has seen it (polling, the
// bound not yet reached). Forget, and the supersede that rewrites the old
// record, must not reach through the link: the file outside stays.
func TestForgetDoesNotFollowASwappedDirectory(t *testing.T) {
	for _, tc := range []struct {
		name string
		call func(tp *testProvider, id string) error
	}{
		{"forget", func(tp *testProvider, id string) error {
			_, err := tp.Forget(ctx, sdk.DefaultRealm, []string{id})
			return err
		}},
		{"supersede", func(tp *testProvider, id string) error {
			_, err := tp.Supersede(ctx, sdk.DefaultRealm, id, rec(alice, "new", "replacement"))
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tp := newTestProvider(t, modes[1]) // poll
			id := tp.remember(t, sdk.DefaultRealm, rec(alice, "old", "secret"))[0]
			dir := filepath.Join(tp.root, sdk.DefaultRealm, "identity", "alice")
			outside := t.TempDir()
			victim := filepath.Join(outside, id+recordExt)
			writeFile(t, victim, "not the plugin's to touch\n")
			if err := os.Rename(dir, dir+".moved"); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(outside, dir); err != nil {
				t.Skip("no symlinks here:", err)
			}
			err := tc.call(tp, id)
			if !errors.Is(err, sdk.ErrPermission) {
				t.Errorf("%s through a symlinked directory: err = %v, want a refusal", tc.name, err)
			} else if n := strings.Count(err.Error(), "markdown:"); n != 1 {
				t.Errorf("%s through a symlinked directory: %q says its source %d times, want once", tc.name, err, n)
			}
			data, rerr := os.ReadFile(victim)
			if rerr != nil || string(data) != "not the plugin's to touch\n" {
				t.Fatalf("the file outside the root was changed: %q, %v", data, rerr)
			}
			if ents, _ := os.ReadDir(outside); len(ents) != 1 {
				t.Fatalf("a file was written outside the root: %v", ents)
			}
		})
	}
}

// TestSkippedLinkIsLogged: a symlink where a realm, a scope class, a
// scope directory or a record file should be is never followed, so the
// records behind it drop out; a start and each sweep say so in one
// warning naming the link, once until the link changes or goes.
func TestSkippedLinkIsLogged(t *testing.T) {
	const warning = "skipping a symbolic link in the record tree"
	for _, tc := range []struct {
		name string
		link func(tp *testProvider, id string) string // the path to swap for a link
	}{
		{"scope directory", func(tp *testProvider, id string) string {
			return filepath.Join(tp.root, sdk.DefaultRealm, "identity", "carol")
		}},
		{"scope class", func(tp *testProvider, id string) string {
			return filepath.Join(tp.root, sdk.DefaultRealm, "identity")
		}},
		{"realm", func(tp *testProvider, id string) string {
			return filepath.Join(tp.root, sdk.DefaultRealm)
		}},
		{"record file", func(tp *testProvider, id string) string {
			return filepath.Join(tp.root, sdk.DefaultRealm, "identity", "carol", id+recordExt)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tp := newTestProvider(t, modes[1]) // poll
			id := tp.remember(t, sdk.DefaultRealm, rec(sdk.IdentityScope("carol"), "carol likes tea", "green tea"))[0]
			tp.Close()
			path := tc.link(tp, id)
			moved := filepath.Join(t.TempDir(), "moved")
			if err := os.Rename(path, moved); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(moved, path); err != nil {
				t.Skip("no symlinks here:", err)
			}
			tp = openTestProvider(t, tp.root, modes[1])
			sweep := func() {
				tp.st.sweepMu.Lock()
				tp.st.sweep()
				tp.st.sweepMu.Unlock()
			}
			sweep()
			if got := tp.get(t, sdk.DefaultRealm, id); len(got) != 0 {
				t.Fatalf("a record behind a link was read: %+v", got)
			}
			logs := tp.logs.String()
			if n := strings.Count(logs, warning); n != 1 || !strings.Contains(logs, "link="+path) {
				t.Fatalf("%d warnings of the link, want one naming %s; log:\n%s", n, path, logs)
			}
			// Gone, then back: warned of again.
			if err := os.Remove(path); err != nil {
				t.Fatal(err)
			}
			sweep()
			if err := os.Symlink(moved, path); err != nil {
				t.Fatal(err)
			}
			sweep()
			if n := strings.Count(tp.logs.String(), warning); n != 2 {
				t.Fatalf("%d warnings after the link came back, want 2; log:\n%s", n, tp.logs.String())
			}
		})
	}
}

// TestLinkSwappedInWhileOpenIsNotFollowed: a scope directory moved away
// and replaced by a link to it while the provider runs drops its records,
// as it does at a start: the check that a file is gone must not look
// through the link, nor a reload read the file behind it.
func TestLinkSwappedInWhileOpenIsNotFollowed(t *testing.T) {
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			tp := newTestProvider(t, m)
			id := tp.remember(t, sdk.DefaultRealm, rec(sdk.IdentityScope("carol"), "carol likes tea", "green tea"))[0]
			dir := filepath.Join(tp.root, sdk.DefaultRealm, "identity", "carol")
			moved := filepath.Join(t.TempDir(), "moved")
			if err := os.Rename(dir, moved); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(moved, dir); err != nil {
				t.Skip("no symlinks here:", err)
			}
			for range 2 {
				tp.clock.Advance(tp.opts.poll)
				tp.st.sweepMu.Lock()
				tp.st.sweep()
				tp.st.sweepMu.Unlock()
				if got := tp.get(t, sdk.DefaultRealm, id); len(got) != 0 {
					t.Fatalf("a record behind a link is still served: %+v", got)
				}
			}
		})
	}
}
