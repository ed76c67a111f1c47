package sqlite

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/memhost/memhost/sdk"
)

// TestSecondInstanceThroughALinkIsRefused opens one database under two
// names, as two hosts configured with a symlinked data directory, or a
// link to the file, would: the lock, and so the index snapshot and log
// beside it, belong to the file, not to the name it was opened by.
func TestSecondInstanceThroughALinkIsRefused(t *testing.T) {
	for _, tc := range []struct {
		name string
		// link makes another name for the database at path.
		link func(t *testing.T, path string) string
	}{
		{"linked directory", func(t *testing.T, path string) string {
			link := filepath.Join(t.TempDir(), "data")
			if err := os.Symlink(filepath.Dir(path), link); err != nil {
				t.Skip("no symlinks here:", err)
			}
			return filepath.Join(link, filepath.Base(path))
		}},
		{"linked file", func(t *testing.T, path string) string {
			link := filepath.Join(t.TempDir(), "other.db")
			if err := os.Symlink(path, link); err != nil {
				t.Skip("no symlinks here:", err)
			}
			return link
		}},
		{"relative link", func(t *testing.T, path string) string {
			dir := filepath.Dir(path)
			if err := os.Symlink(filepath.Base(path), filepath.Join(dir, "alias.db")); err != nil {
				t.Skip("no symlinks here:", err)
			}
			return filepath.Join(dir, "alias.db")
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "memory.db")
			first := openAt(t, path)
			id := mustRemember(t, first, realm, rec(alice, "Mine", "first instance"))[0]
			other := tc.link(t, path)
			err := configureErr(t, other)
			wantErr(t, "second instance through "+other, err, sdk.ErrConflict, path+".lock", "another process", "the plugin of a host just killed")
			if err := first.Close(); err != nil {
				t.Fatal(err)
			}
			// Once the first is gone, the other name opens the same
			// database, with its snapshot.
			second := openAt(t, other)
			if got := mustGet(t, second, realm, id); len(got) != 1 {
				t.Fatal("record missing through the link")
			}
			if !second.db.fromSnapshot {
				t.Error("the open through the link did not find the snapshot the first left")
			}
			// Nothing of its own was created beside the link.
			for _, suffix := range []string{".lock", ".index", ".index.log"} {
				got, err := os.Stat(other + suffix)
				if err != nil {
					continue
				}
				if want, err := os.Stat(path + suffix); err != nil || !os.SameFile(got, want) {
					t.Errorf("%s%s was created beside the link", other, suffix)
				}
			}
		})
	}
}
