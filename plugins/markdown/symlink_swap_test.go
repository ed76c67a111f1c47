package markdown

import (
	"errors"
	"os"
	"path/filepath"
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
