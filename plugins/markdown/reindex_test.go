package markdown

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/memhost/memhost/sdk"
)

func TestReindex(t *testing.T) {
	root := t.TempDir()
	handRecords(t, root, "default", 40)
	handRecords(t, root, "other", 25)
	writeFile(t, filepath.Join(root, "default/realm/broken.md"), "no front matter")
	tp := openTestProvider(t, root, modes[0])

	// An edit no stamp shows (same size, same inode, the old mtime put
	// back): the sweep trusts the stamp, a reindex reads the file.
	p := filepath.Join(root, "default/identity/alice/h003.md")
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	editInPlace(t, p, func(s string) string { return strings.Replace(s, "lighthouse", "marigoldse", 1) })
	if err := os.Chtimes(p, fi.ModTime(), fi.ModTime()); err != nil {
		t.Fatal(err)
	}
	if got := tp.recall(t, sdk.RecallQuery{Query: "marigoldse"}); len(got) != 0 {
		t.Fatalf("the hidden edit showed before the reindex: %v", hitIDs(got))
	}

	var calls [][2]int
	n, err := tp.Reindex(ctx, "default", func(done, total int) { calls = append(calls, [2]int{done, total}) })
	if err != nil || n != 40 {
		t.Fatalf("Reindex(default) = %d, %v; want 40 records", n, err)
	}
	// 41 files, one not a record: the total drops to the 40 records.
	if len(calls) < 2 || calls[0] != [2]int{0, 41} || calls[len(calls)-1] != [2]int{40, 40} {
		t.Fatalf("progress calls %v: want 0/41 first and 40/40 last", calls)
	}
	for i := 1; i < len(calls); i++ {
		if calls[i][0] < calls[i-1][0] || calls[i][0] > calls[i][1] {
			t.Fatalf("progress went %v then %v", calls[i-1], calls[i])
		}
	}
	if got := hitIDs(tp.recall(t, sdk.RecallQuery{Query: "marigoldse"})); len(got) != 1 || got[0] != "h003" {
		t.Fatalf("after the reindex marigoldse recalls %v", got)
	}
	checkAgainstFiles(t, tp, "after reindex")
	if got := tp.recall(t, sdk.RecallQuery{Realm: "other", Query: "harbor", Limit: 100}); len(got) != 25 {
		t.Fatalf("the other realm lost records: %d hits", len(got))
	}
	if !strings.Contains(tp.logs.String(), "broken.md") {
		t.Fatal("the invalid file was not reported")
	}

	if n, err := tp.Reindex(ctx, "", nil); err != nil || n != 65 {
		t.Fatalf("Reindex(all) = %d, %v; want 65", n, err)
	}
	if n, err := tp.Reindex(ctx, "nobody", nil); err != nil || n != 0 {
		t.Fatalf("Reindex of an empty realm = %d, %v", n, err)
	}
	if _, err := tp.Reindex(ctx, "../x", nil); !errors.Is(err, sdk.ErrInvalid) {
		t.Fatalf("bad realm: err = %v, want ErrInvalid", err)
	}

	// One waiting behind another gives up at its deadline.
	tp.st.reindexing <- struct{}{}
	dctx, dcancel := context.WithTimeout(ctx, 10*time.Millisecond)
	_, err = tp.Reindex(dctx, "", nil)
	dcancel()
	<-tp.st.reindexing
	if !errors.Is(err, sdk.ErrDeadline) {
		t.Fatalf("a reindex waiting past its deadline: err = %v, want ErrDeadline", err)
	}

	// A cancelled reindex leaves the index as it was.
	if err := os.Remove(filepath.Join(root, "other/realm/h002.md")); err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := tp.st.reindex(cctx, "other", nil); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled reindex: err = %v", err)
	}
	tp.st.idx.RLock()
	held := tp.st.realms["other"].get("h002") != nil
	tp.st.idx.RUnlock()
	if !held {
		t.Fatal("a cancelled reindex changed the index")
	}
}

// TestReindexKeepsWrites: writes racing a reindex are in the index after.
func TestReindexKeepsWrites(t *testing.T) {
	root := t.TempDir()
	handRecords(t, root, "default", 200)
	tp := openTestProvider(t, root, modes[0])
	done := make(chan []string)
	go func() {
		var ids []string
		for i := range 20 {
			got, err := tp.Remember(ctx, "default", []sdk.Record{rec(alice, "racing write", fmt.Sprint("number ", i))})
			if err != nil {
				t.Error(err)
				break
			}
			ids = append(ids, got...)
		}
		done <- ids
	}()
	for range 3 {
		if _, err := tp.Reindex(ctx, "", nil); err != nil {
			t.Fatal(err)
		}
	}
	ids := <-done
	if got := tp.get(t, "default", ids...); len(got) != len(ids) {
		t.Fatalf("%d of %d writes survived reindexing", len(got), len(ids))
	}
	if got := tp.recall(t, sdk.RecallQuery{Query: "racing", Limit: 100}); len(got) != len(ids) {
		t.Fatalf("racing recalls %d of %d writes", len(got), len(ids))
	}
}
