package sqlite

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/memhost/memhost/sdk"
)

// TestFilesOfAnotherDatabaseAreNotTrusted copies the snapshot or the index
// log of one database next to another at the same index generation (an
// operator restoring the wrong backup, two stores' files mixed up): the
// stamp must tell them apart and the index be rebuilt from the records.
// A stale snapshot whose generation a flipped bit makes current must not
// be trusted either.
func TestFilesOfAnotherDatabaseAreNotTrusted(t *testing.T) {
	for _, tc := range []struct {
		name string
		// plant puts a file of another database at the same generation
		// beside the crash image p; other makes a crash image of one
		// (see below).
		plant func(t *testing.T, p string, other func(snapshot bool) string)
	}{
		{"snapshot of another database", func(t *testing.T, p string, other func(bool) string) {
			copyTo(t, other(true)+".index", p+".index")
		}},
		{"index log of another database", func(t *testing.T, p string, other func(bool) string) {
			os.Remove(p + ".index")
			copyTo(t, other(false)+".index.log", p+".index.log")
		}},
		{"stale snapshot with a bit flipped", func(t *testing.T, p string, _ func(bool) string) {
			// p's snapshot is of generation 2, the database of 3.
			data, err := os.ReadFile(p + ".index")
			if err != nil {
				t.Fatal(err)
			}
			at := len(snapshotMagic) + 16 // the generation's low byte
			if data[at] != 2 {
				t.Fatalf("snapshot of generation %d, want 2", data[at])
			}
			data[at] |= 1
			if err := os.WriteFile(p+".index", data, 0o600); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Each database writes three transactions; with snapshot,
			// its snapshot is taken after the second and its log holds
			// the third, else its log holds all three.
			img := func(title string, snapshot bool) (string, string) {
				path := filepath.Join(t.TempDir(), "memory.db")
				s := openAt(t, path)
				mustRemember(t, s, realm, rec(alice, title+" one", "first"))
				mustRemember(t, s, realm, rec(alice, title+" two", "second"))
				if snapshot {
					if err := s.Close(); err != nil {
						t.Fatal(err)
					}
					s = openAt(t, path)
				}
				id := mustRemember(t, s, realm, rec(alice, title+" three", "third"))[0]
				return crashImage(t, path), id
			}
			p, id := img("Otter", true)
			tc.plant(t, p, func(snapshot bool) string { img, _ := img("Walrus", snapshot); return img })
			s := openAt(t, p)
			if s.db.fromSnapshot || s.db.replayed > 0 {
				t.Errorf("the index was read from the planted file (snapshot %v, %d frames replayed)", s.db.fromSnapshot, s.db.replayed)
			}
			checkIndex(t, s)
			if got := recallIDs(t, s, sdk.RecallQuery{Realm: realm, Query: "otter"}); len(got) != 3 || !slices.Contains(got, id) {
				t.Errorf("recall of this database's records = %v, want 3 with %s", got, id)
			}
			if got := recallIDs(t, s, sdk.RecallQuery{Realm: realm, Query: "walrus"}); len(got) != 0 {
				t.Errorf("recall answers the other database's records: %v", got)
			}
		})
	}
}

func copyTo(t *testing.T, src, dst string) {
	t.Helper()
	data, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, data, 0o600); err != nil {
		t.Fatal(err)
	}
}
