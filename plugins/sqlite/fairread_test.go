package sqlite

import (
	"context"
	"runtime"
	"testing"
)

// TestAReindexDoesNotStarveItsRealmsReads: from an outside review. The
// read a reindex holds for its whole rebuild counted as its realm's, so
// while it ran the realm held one read connection, another realm holding
// the other and asking again always went first (the realm holding the
// fewest first), and the reindexed realm's recalls waited for the rebuild
// to end: with the reads of another realm in flood, for minutes.
func TestAReindexDoesNotStarveItsRealmsReads(t *testing.T) {
	for _, c := range []struct {
		name    string
		reindex string // the realm reindexed, "" for every realm
	}{
		{"a realm's reindex", "x"},
		{"a reindex of every realm", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, _ := open(t, nil)
			ctx := context.Background()
			xs := mustRemember(t, s, "x", rec(alice, "x title", "x body"))
			ys := mustRemember(t, s, "y", rec(alice, "y title", "y body"))

			inside, proceed := make(chan struct{}), make(chan struct{})
			reindexed := make(chan error, 1)
			go func() {
				first := true
				_, err := s.Reindex(ctx, c.reindex, func(done, total int) {
					if first {
						first = false
						close(inside)
						<-proceed
					}
				})
				reindexed <- err
			}()
			<-inside // the reindex holds one of the two read connections

			d := s.db
			releaseY, err := d.acquireRead(ctx, "y") // realm y's read holds the other
			if err != nil {
				t.Fatal(err)
			}
			waitFor := func(n int) {
				for d.slots.Waiting() != n {
					runtime.Gosched()
				}
			}
			got := make(chan string, 2)
			read := func(realm string, ids []string) {
				recs, err := s.Get(ctx, realm, ids)
				if err != nil || len(recs) != 1 {
					t.Errorf("Get(%s) = %v, %v", realm, recs, err)
				}
				got <- realm
			}
			go read("x", xs) // x's recall waits first
			waitFor(1)
			go read("y", ys) // then y asks again
			waitFor(2)
			releaseY()
			if first := <-got; first != "x" {
				t.Errorf("after y's read, %s's went first; want x's, which waited longer while y held as much as x's own reads did", first)
			}
			<-got
			close(proceed)
			if err := <-reindexed; err != nil {
				t.Fatalf("Reindex: %v", err)
			}
		})
	}
}
