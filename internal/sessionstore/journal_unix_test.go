//go:build unix

package sessionstore

import (
	"os"
	"slices"
	"syscall"
	"testing"
)

// TestJournalThatCannotStartKeepsItsEpoch: a start that cannot write the
// journal's header (a full disk; here a file size limit of one byte) over
// a journal that was emptied or deleted while the table had merged
// epochs. The journal must never start over under an epoch the table has
// merged, or what is appended under it is skipped by the next replay.
func TestJournalThatCannotStartKeepsItsEpoch(t *testing.T) {
	dir := t.TempDir()
	s, db := openStore(t, dir, Options{})
	k := key("r", "s")
	update(t, s, key("r", "first"), inject(1, "x"))
	for _, id := range []string{"a", "b", "c"} { // three merges
		update(t, s, k, inject(1, id))
		count(t, s, "r")
	}
	crash(t, s)
	if err := os.Remove(journalPath(dir)); err != nil {
		t.Fatal(err)
	}
	var old syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_FSIZE, &old); err != nil {
		t.Fatal(err)
	}
	limited := old
	limited.Cur = 1
	if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &limited); err != nil {
		t.Skipf("cannot limit the file size here: %v", err)
	}
	s, err := Open(ctx, db, Options{})
	if rerr := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &old); rerr != nil {
		t.Fatal(rerr)
	}
	if err != nil {
		t.Fatal(err)
	}
	if !s.journal.broken {
		t.Fatal("the journal started although its header could not be written: the test does not reach the case")
	}
	for _, id := range []string{"d", "e"} { // room again: the first merges and starts the journal, the second is journaled
		update(t, s, k, inject(1, id))
	}
	crash(t, s)
	s = reopen(t, db, Options{})
	if st := get(t, s, k); !slices.Equal(st.InjectedIDs, []string{"a", "b", "c", "d", "e"}) {
		t.Fatalf("after a crash the session holds %v, want [a b c d e]", st.InjectedIDs)
	}
}
