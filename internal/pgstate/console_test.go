package pgstate

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/memhost/memhost/coordinator"
	"github.com/memhost/memhost/internal/proposal"
	"github.com/memhost/memhost/internal/turntrace"
	"github.com/memhost/memhost/internal/turntrace/tracetest"
	"github.com/memhost/memhost/sdk"
)

// TestProposalBoundAcrossHosts: two hosts noting proposals of one token at
// once never pass the bound together; another token and realm are apart.
func TestProposalBoundAcrossHosts(t *testing.T) {
	ctx := context.Background()
	dbs := open(t, 2)
	ledgers := []*Proposals{NewProposals(dbs[0]), NewProposals(dbs[1])}
	const bound, tries = 20, 60
	var wg sync.WaitGroup
	var mu sync.Mutex
	ok, refused := 0, 0
	for i := range tries {
		wg.Add(1)
		go func() {
			defer wg.Done()
			e := proposal.Entry{Realm: "r", ID: fmt.Sprintf("p%03d", i), Proposer: "bot", CreatedAt: time.UnixMilli(int64(1000 + i))}
			err := ledgers[i%2].Add(ctx, []proposal.Entry{e}, bound)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				ok++
			case errors.Is(err, proposal.ErrTooMany):
				refused++
			default:
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if ok != bound || refused != tries-bound {
		t.Fatalf("%d noted, %d refused; want %d and %d", ok, refused, bound, tries-bound)
	}
	if err := ledgers[0].Add(ctx, []proposal.Entry{{Realm: "r", ID: "other", Proposer: "bot2", CreatedAt: time.Now()}}, bound); err != nil {
		t.Errorf("another token: %v", err)
	}
	if err := ledgers[0].Add(ctx, []proposal.Entry{{Realm: "r2", ID: "x", Proposer: "bot", CreatedAt: time.Now()}}, bound); err != nil {
		t.Errorf("another realm: %v", err)
	}
	// Paging sees each once, oldest first; Remove makes room.
	var seen []string
	after := proposal.Cursor{}
	for {
		page, total, err := ledgers[1].List(ctx, "r", after, 7)
		if err != nil || total != bound+1 {
			t.Fatalf("list: %d, %v", total, err)
		}
		for _, e := range page {
			seen = append(seen, e.ID)
		}
		if len(page) < 7 {
			break
		}
		after = proposal.After(page[len(page)-1])
	}
	if len(seen) != bound+1 {
		t.Fatalf("paged %d entries, want %d: %v", len(seen), bound+1, seen)
	}
	if err := ledgers[0].Remove(ctx, "r", []string{seen[0]}); err != nil {
		t.Fatal(err)
	}
	if _, found, _ := ledgers[1].Lookup(ctx, "r", seen[0]); found {
		t.Error("a removed entry is still found")
	}
	if err := ledgers[1].Add(ctx, []proposal.Entry{{Realm: "r", ID: "again", Proposer: "bot", CreatedAt: time.Now()}}, bound); err != nil {
		t.Errorf("after a removal: %v", err)
	}
	if counts, err := ledgers[0].Counts(ctx); err != nil || counts["r"] != bound+1 || counts["r2"] != 1 {
		t.Errorf("counts = %v, %v", counts, err)
	}
}

func TestSharedTraces(t *testing.T) {
	ctx := context.Background()
	tr := NewTraces(open(t, 1)[0])
	now := time.Now().UTC()
	mk := func(realm string, at time.Time, id string) coordinator.TurnTrace {
		return coordinator.TurnTrace{Realm: realm, Identity: "alice", Session: "s", Kind: coordinator.TraceInject, At: at,
			Included: []coordinator.TraceRecord{{ID: id, Bytes: 5}}, Excluded: []coordinator.TraceRecord{}}
	}
	var batch []coordinator.TurnTrace
	for i := range 5 {
		batch = append(batch, mk("busy", now, fmt.Sprint("r", i)))
	}
	batch = append(batch, mk("quiet", now, "q"), mk("old", now.Add(-48*time.Hour), "o"))
	if err := tr.Append(ctx, batch); err != nil {
		t.Fatal(err)
	}
	if n, err := tr.Prune(ctx, now.Add(-time.Hour), 2); err != nil || n != 4 {
		t.Fatalf("pruned %d, %v; want 4", n, err)
	}
	busy, err := tr.Session(ctx, "busy", []string{"alice"}, "s", 10)
	if err != nil || len(busy) != 2 || busy[1].Included[0].ID != "r4" {
		t.Fatalf("busy = %+v, %v", busy, err)
	}
	if got, err := tr.Record(ctx, "busy", nil, "r3", 10); err != nil || len(got) != 1 {
		t.Errorf("record trace = %v, %v", got, err)
	}
	if got, _ := tr.Record(ctx, "quiet", nil, "r3", 10); len(got) != 0 {
		t.Errorf("another realm's trace: %v", got)
	}
	if s, err := tr.Recent(ctx, "busy", nil, 10); err != nil || len(s) != 1 || s[0].Turns != 2 || s[0].Bytes != 0 {
		t.Errorf("recent = %+v, %v", s, err)
	}
	// A read for some identities leaves the others' turns out before its
	// limit, so newer turns of other identities cannot crowd them out.
	var others []coordinator.TurnTrace
	for i := range 3 {
		o := mk("busy", now, "r4")
		o.Identity, o.Session = fmt.Sprint("user", i), fmt.Sprint("o", i)
		others = append(others, o)
	}
	if err := tr.Append(ctx, others); err != nil {
		t.Fatal(err)
	}
	alice := []string{"alice"}
	if s, err := tr.Recent(ctx, "busy", alice, 1); err != nil || len(s) != 1 || s[0].Identity != "alice" {
		t.Errorf("recent sessions of alice = %+v, %v", s, err)
	}
	if got, err := tr.Record(ctx, "busy", alice, "r4", 1); err != nil || len(got) != 1 || got[0].Identity != "alice" {
		t.Errorf("record trace of alice = %+v, %v", got, err)
	}
	if got, err := tr.Session(ctx, "busy", []string{"user0"}, "s", 10); err != nil || len(got) != 0 {
		t.Errorf("alice's session read for user0 = %+v, %v", got, err)
	}
	// user0 floods the realm past its bound: user0's oldest go, while
	// alice keeps her newest turn, older than all of user0's.
	var flood []coordinator.TurnTrace
	for range 4 {
		f := mk("busy", now, "r5")
		f.Identity, f.Session = "user0", "o0"
		flood = append(flood, f)
	}
	if err := tr.Append(ctx, flood); err != nil {
		t.Fatal(err)
	}
	if n, err := tr.Prune(ctx, now.Add(-time.Hour), 5); err != nil || n != 4 {
		t.Fatalf("pruned %d, %v; want 4 (three of user0's, alice's older turn)", n, err)
	}
	if got, err := tr.Session(ctx, "busy", alice, "s", 10); err != nil || len(got) != 1 || got[0].Included[0].ID != "r4" {
		t.Errorf("alice kept %+v, %v; want her newest turn", got, err)
	}
	if got, err := tr.Session(ctx, "busy", []string{"user0"}, "o0", 10); err != nil || len(got) != 2 {
		t.Errorf("user0 kept %d turns, %v; want 2", len(got), err)
	}
}

// TestSharedTracesForget: a forgotten record's title is blanked in every
// trace of its realm that names it, and only there.
// TestSharedTracesPage: see tracetest.CheckPaging.
func TestSharedTracesPage(t *testing.T) { tracetest.CheckPaging(t, NewTraces(open(t, 1)[0])) }

func TestSharedTracesForget(t *testing.T) {
	ctx := context.Background()
	tr := NewTraces(open(t, 1)[0])
	mk := func(realm string) coordinator.TurnTrace {
		return coordinator.TurnTrace{Realm: realm, Identity: "alice", Session: "s", Kind: coordinator.TraceInject, At: time.Now().UTC(),
			Included: []coordinator.TraceRecord{{ID: "gone", Title: "the secret"}, {ID: "kept", Title: "kept title"}},
			Excluded: []coordinator.TraceRecord{{ID: "gone", Title: "the secret", Reason: coordinator.ExcludedBudget}}}
	}
	if err := tr.Append(ctx, []coordinator.TurnTrace{mk("r"), mk("elsewhere")}); err != nil {
		t.Fatal(err)
	}
	if err := tr.Forget(ctx, "r", []string{"gone"}); err != nil {
		t.Fatal(err)
	}
	got, err := tr.Session(ctx, "r", nil, "s", 10)
	if err != nil || len(got) != 1 {
		t.Fatalf("read %d traces, %v", len(got), err)
	}
	rows := append(got[0].Included, got[0].Excluded...)
	if rows[0].Title != "" || !rows[0].Forgotten || rows[2].Title != "" || !rows[2].Forgotten || rows[1].Title != "kept title" || rows[1].Forgotten {
		t.Errorf("rows after the forget: %+v", rows)
	}
	if theirs, err := tr.Session(ctx, "elsewhere", nil, "s", 10); err != nil || theirs[0].Included[0].Title != "the secret" {
		t.Errorf("another realm's trace = %+v, %v; a forget is per realm", theirs, err)
	}
}

// TestTraceOutageSaysTurnTraceOnce: a forget, and a read after lost
// traces, on a stopped server answer unavailable, naming the turn trace
// once (the store names it; the recorder over it must not again).
func TestTraceOutageSaysTurnTraceOnce(t *testing.T) {
	ctx := context.Background()
	c, db := ownServer(t)
	rec := turntrace.NewRecorder(NewTraces(db), turntrace.Options{})
	defer rec.Close()
	c.StopServer()
	err := rec.Forget(ctx, "r", []string{"gone"})
	if !errors.Is(err, sdk.ErrUnavailable) || strings.Count(err.Error(), "turn trace") != 1 {
		t.Errorf("forget during the outage: %v, want unavailable naming the turn trace once", err)
	}
	rec.Trace(coordinator.TurnTrace{Realm: "r", Identity: "alice", Session: "s", Kind: coordinator.TraceInject, At: time.Now().UTC()})
	_, err = rec.Session(ctx, "r", nil, "s", 10)
	if !errors.Is(err, sdk.ErrUnavailable) || strings.Count(err.Error(), "turn trace") != 1 {
		t.Errorf("read after lost traces: %v, want unavailable naming the turn trace once", err)
	}
}
