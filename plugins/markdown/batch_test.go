package markdown

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/memhost/memhost/sdk"
)

// stageBatch puts down a batch of records as writeAll does up to its
// renames, and answers the records' ids, their temps and pending writes,
// and the intent (none when whole is false: the crash came before the
// intent was whole).
func stageBatch(t *testing.T, tp *testProvider, titles []string, whole bool) ([]string, []string, []*pendingWrite, string) {
	t.Helper()
	var ids, tmps []string
	var ws []*pendingWrite
	for _, title := range titles {
		r := rec(alice, title, "in a batch a crash cut")
		if err := prepare(&r, sdk.DefaultRealm, time.Now()); err != nil {
			t.Fatal(err)
		}
		if err := ensureDir(tp.root, fileKey{r.Realm, r.Scope, r.ID}.dirRel()); err != nil {
			t.Fatal(err)
		}
		w, err := newPendingWrite(tp.root, r, nil)
		if err != nil {
			t.Fatal(err)
		}
		tmp, _, err := writeTemp(w.path, w.data)
		if err != nil {
			t.Fatal(err)
		}
		ids, tmps, ws = append(ids, r.ID), append(tmps, tmp), append(ws, w)
	}
	intent, err := tp.st.writeIntent(tmps, ws)
	if err != nil {
		t.Fatal(err)
	}
	if !whole {
		data, _ := os.ReadFile(intent)
		if err := os.WriteFile(intent, []byte(strings.TrimSuffix(string(data), intentEnd+"\n")), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return ids, tmps, ws, intent
}

// TestACrashMidBatchLeavesAllOfIt: a batch cut by a crash between its
// renames is whole at the next start; one cut before its intent was whole
// left nothing. Before, the files already renamed came back as records
// and the others were lost: 5 of a batch of 50 (from an outside review).
func TestACrashMidBatchLeavesAllOfIt(t *testing.T) {
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			tp := newTestProvider(t, m)
			whole, tmps, ws, _ := stageBatch(t, tp, []string{"first", "second", "third"}, true)
			// The crash: one rename done.
			if err := os.Rename(tmps[0], ws[0].path); err != nil {
				t.Fatal(err)
			}
			cut, _, _, _ := stageBatch(t, tp, []string{"fourth", "fifth"}, false)
			tp.Close()
			again := openTestProvider(t, tp.root, m)
			if got := again.get(t, sdk.DefaultRealm, whole...); len(got) != len(whole) {
				t.Errorf("after the restart %d of the batch's %d records are there, want all", len(got), len(whole))
			}
			if got := again.get(t, sdk.DefaultRealm, cut...); len(got) != 0 {
				t.Errorf("after the restart %d records of a batch cut before its intent are there, want none", len(got))
			}
			leftovers, _ := filepath.Glob(filepath.Join(tp.root, batchPrefix+"*"))
			if len(leftovers) != 0 {
				t.Errorf("intents left behind: %v", leftovers)
			}
			if !strings.Contains(again.logs.String(), "finished a batch of writes a crash interrupted") {
				t.Errorf("the start did not say it finished a batch:\n%s", again.logs.String())
			}
		})
	}
}

// TestAWritePastItsDeadlineStoresNothing: a batch whose caller's context
// ended before its renames stores nothing and leaves no file: the caller
// was answered 504, and the batch landed a few seconds later (from an
// outside review).
func TestAWritePastItsDeadlineStoresNothing(t *testing.T) {
	tp := newTestProvider(t, modes[1])
	c, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := tp.Remember(c, sdk.DefaultRealm, []sdk.Record{rec(alice, "late one", "x"), rec(alice, "late two", "y")})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("a write whose caller has gone answered %v, want its context's end", err)
	}
	if hits := tp.recall(t, sdk.RecallQuery{Query: "late", Scopes: []sdk.Scope{alice}}); len(hits) != 0 {
		t.Fatalf("the write stored %d records", len(hits))
	}
	var files []string
	filepath.WalkDir(tp.root, func(path string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && (strings.HasPrefix(d.Name(), tempPrefix) || strings.HasPrefix(d.Name(), batchPrefix) || strings.HasSuffix(d.Name(), recordExt)) {
			files = append(files, path)
		}
		return nil
	})
	if len(files) != 0 {
		t.Fatalf("the write left files: %v", files)
	}
}

// TestPlantedIntentsStayInTheRoot: an intent is finished only for temp
// files beside their records in plain directories of the tree. One
// planted in a shared notes folder, naming a record path through a link
// to elsewhere (or a temp file elsewhere, or a record in the root), wrote
// outside the root at the next start (from an outside review).
func TestPlantedIntentsStayInTheRoot(t *testing.T) {
	outside := t.TempDir()
	tp := newTestProvider(t, modes[1])
	root := tp.root
	tp.Close()
	if err := os.Symlink(outside, filepath.Join(root, "notes-link")); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(root, "default", "realm"), 0o700); err != nil {
		t.Fatal(err)
	}
	plant := func(name, data string) {
		if err := os.WriteFile(filepath.Join(root, name), []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	plant(tempPrefix+"planted", "escaped")
	plant(filepath.Join("default", "realm", tempPrefix+"beside"), "escaped")
	for i, line := range []string{
		"notes-link/" + tempPrefix + "x\tnotes-link/README.md", // through a link
		tempPrefix + "planted\tnotes-link/README.md",           // from elsewhere
		tempPrefix + "planted\tREADME.md",                      // in the root
		"default/realm/" + tempPrefix + "beside\tnotes-link/README.md",
		"default/realm/" + tempPrefix + "beside\t../../outside.md",
	} {
		plant(batchPrefix+strconv.Itoa(i), line+"\n"+intentEnd+"\n")
	}
	again := openTestProvider(t, root, modes[1])
	if entries, _ := os.ReadDir(outside); len(entries) != 0 {
		t.Fatalf("the start wrote outside the root: %v", entries)
	}
	if _, err := os.Stat(filepath.Join(root, "README.md")); err == nil {
		t.Fatal("the start renamed a planted file into the root")
	}
	if !strings.Contains(again.logs.String(), "cannot finish a batch") {
		t.Errorf("the start did not say it refused the planted intents:\n%s", again.logs.String())
	}
}
