package bleve

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/memhost/memhost/internal/testbin"
	"github.com/memhost/memhost/sdk"
	"github.com/memhost/memhost/sdk/conformance"
	"github.com/memhost/memhost/sdk/host"
)

// The tests here run the plugin as the host does: a built binary, started
// through host.Launch (sha256-checked, AutoMTLS), spoken to over gRPC.

// pluginBinary answers the plugin's executable and its sha256: the one
// `make build` made, or built once for this process.
func pluginBinary(t testing.TB) (string, []byte) {
	t.Helper()
	if testing.Short() {
		t.Skip("runs the plugin binary")
	}
	return testbin.Plugin(t, "bleve")
}

// launch starts the plugin binary; configure it with the returned conn.
func launch(t testing.TB) *host.Conn {
	t.Helper()
	bin, sum := pluginBinary(t)
	conn, err := host.Launch(ctx, host.LaunchOptions{Name: "bleve", Path: bin, SHA256: sum})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(conn.Close)
	return conn
}

// launchProvider starts the binary, configures it on dir and answers its provider.
func launchProvider(t testing.TB, dir string) (*host.Conn, *conformance.Client) {
	t.Helper()
	conn := launch(t)
	if err := conn.Configure(ctx, configJSON(dir)); err != nil {
		t.Fatal(err)
	}
	prov, err := conformance.ClientOf(conn)
	if err != nil {
		t.Fatal(err)
	}
	return conn, prov
}

func TestPluginProcess(t *testing.T) {
	dir := t.TempDir()
	conn := launch(t)
	if info := conn.Info(); info.Name != "bleve" || info.Version != Version || len(info.ConfigSchema) == 0 {
		t.Fatalf("Info over the wire = %+v", info)
	}
	if err := conn.Configure(ctx, []byte(`{"dir": 7}`)); !errors.Is(err, sdk.ErrInvalid) {
		t.Fatalf("bad config over the wire: %v, want ErrInvalid", err)
	}
	if err := conn.Configure(ctx, configJSON(dir)); err != nil {
		t.Fatal(err)
	}
	prov, err := conformance.ClientOf(conn)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []sdk.Capability{sdk.CapWrite, sdk.CapFetch, sdk.CapForget, sdk.CapManifest, sdk.CapSupersede, sdk.CapUsage, sdk.CapArchive, sdk.CapReindex, sdk.CapNeighbours} {
		if !sdk.Supports(prov, c) {
			t.Errorf("capability %s not declared over the wire", c)
		}
	}
	ids, err := prov.Remember(ctx, realm, []sdk.Record{rec("identity:alice", "Garden", "tomatoes and basil")})
	if err != nil {
		t.Fatal(err)
	}
	hits, err := prov.Recall(ctx, sdk.RecallQuery{Realm: realm, Query: "basil"})
	if err != nil || len(hits) != 1 || hits[0].Record.ID != ids[0] || hits[0].Record.Body != "tomatoes and basil" {
		t.Fatalf("Recall over the wire = %+v, %v", hits, err)
	}
	if err := prov.MarkUsed(ctx, realm, ids, time.Now()); err != nil {
		t.Fatal(err)
	}
	rows, err := prov.Manifest(ctx, sdk.ManifestQuery{Realm: realm, Tier: sdk.TierWorkingSet, K: 24})
	if err != nil || len(rows) != 1 || rows[0].Rank <= 0 {
		t.Fatalf("Manifest over the wire = %+v, %v", rows, err)
	}
	if _, err := prov.Remember(ctx, realm, []sdk.Record{{Scope: "realm", Kind: "rumour", Title: "x"}}); !errors.Is(err, sdk.ErrInvalid) {
		t.Fatalf("bad record over the wire: %v, want ErrInvalid", err)
	}
	if _, err := prov.Supersede(ctx, realm, "nope", rec("realm", "x", "y")); !errors.Is(err, sdk.ErrNotFound) {
		t.Fatalf("supersede unknown over the wire: %v, want ErrNotFound", err)
	}

	// A second host on the same directory is refused, and harms nothing.
	second := launch(t)
	if err := second.Configure(ctx, configJSON(dir)); !errors.Is(err, sdk.ErrConflict) || !strings.Contains(err.Error(), "the plugin of a host just killed") {
		t.Fatalf("second plugin process on the same dir: %v, want ErrConflict naming who may hold the lock", err)
	}
	if got, err := prov.Get(ctx, realm, ids); err != nil || len(got) != 1 {
		t.Fatalf("first process after the refusal: %v, %v", got, err)
	}
}

// TestKill9KeepsAcknowledgedWrites kills the plugin process with SIGKILL
// at a random moment during a stream of writes (remember, mark used,
// forget), several times over, and checks after each restart that every
// acknowledged write holds: remembered records are there with their
// content, counted uses are counted, forgotten records are gone, and the
// batch in flight at the kill landed whole or not at all.
func TestKill9KeepsAcknowledgedWrites(t *testing.T) {
	dir := t.TempDir()
	st := &ackState{records: map[string]sdk.Record{}, uses: map[string]int64{}, forgotten: map[string]bool{}}
	const rounds, batch = 3, 25
	seq := 0
	for round := range rounds {
		conn, prov := launchProvider(t, dir)
		st.verify(t, prov)

		var inflight []sdk.Record
		firstAck := make(chan struct{})
		writerDone := make(chan struct{})
		go func() {
			defer close(writerDone)
			signalled := false
			for {
				recs := make([]sdk.Record, batch)
				for i := range recs {
					seq++
					recs[i] = rec("identity:writer", fmt.Sprintf("kill round %d record %d", round, seq),
						fmt.Sprintf("payload %d %x", seq, rand.Uint64()))
				}
				st.mu.Lock()
				inflight = recs
				st.mu.Unlock()
				ids, err := prov.Remember(ctx, realm, recs)
				if err != nil {
					return // the plugin is dead
				}
				st.mu.Lock()
				for i, id := range ids {
					r := recs[i]
					r.ID = id
					st.records[id] = r
				}
				inflight = nil
				// The record about to be forgotten is in doubt until acknowledged.
				delete(st.records, ids[1])
				st.mu.Unlock()
				if !signalled {
					close(firstAck)
					signalled = true
				}
				if err := prov.MarkUsed(ctx, realm, ids[:1], time.Now()); err != nil {
					return
				}
				st.mu.Lock()
				st.uses[ids[0]]++
				st.mu.Unlock()
				if _, err := prov.Forget(ctx, realm, ids[1:2]); err != nil {
					return
				}
				st.mu.Lock()
				st.forgotten[ids[1]] = true
				st.mu.Unlock()
			}
		}()
		select {
		case <-firstAck:
		case <-time.After(30 * time.Second):
			t.Fatal("no write acknowledged within 30s")
		}
		time.Sleep(time.Duration(rand.IntN(400)) * time.Millisecond)
		if err := syscall.Kill(conn.Pid(), syscall.SIGKILL); err != nil {
			t.Fatalf("kill -9 %d: %v", conn.Pid(), err)
		}
		<-writerDone
		conn.Close()

		conn2, prov2 := launchProvider(t, dir)
		st.verify(t, prov2)
		st.mu.Lock()
		verifyWholeOrNothing(t, prov2, inflight)
		st.mu.Unlock()
		conn2.Close()
		t.Logf("round %d: %d records, %d uses and %d deletions acknowledged survived kill -9", round, len(st.records), len(st.uses), len(st.forgotten))
	}
}

// ackState is what the plugin acknowledged.
type ackState struct {
	mu        sync.Mutex
	records   map[string]sdk.Record
	uses      map[string]int64
	forgotten map[string]bool
}

func (st *ackState) verify(t *testing.T, prov *conformance.Client) {
	t.Helper()
	st.mu.Lock()
	defer st.mu.Unlock()
	ids := make([]string, 0, len(st.records)+len(st.forgotten))
	for id := range st.records {
		ids = append(ids, id)
	}
	for id := range st.forgotten {
		ids = append(ids, id)
	}
	found := map[string]sdk.Record{}
	for start := 0; start < len(ids); start += sdk.MaxBatch {
		got, err := prov.Get(ctx, realm, ids[start:min(start+sdk.MaxBatch, len(ids))])
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range got {
			found[r.ID] = r
		}
	}
	for id, want := range st.records {
		r, ok := found[id]
		if !ok {
			t.Fatalf("acknowledged record %s (%q) lost after kill -9", id, want.Title)
		}
		if r.Title != want.Title || r.Body != want.Body || r.Scope != want.Scope {
			t.Fatalf("record %s changed after kill -9: got %q/%q, want %q/%q", id, r.Title, r.Body, want.Title, want.Body)
		}
		if r.UseCount < st.uses[id] {
			t.Fatalf("record %s has %d uses after kill -9, %d were acknowledged", id, r.UseCount, st.uses[id])
		}
	}
	for id := range st.forgotten {
		if _, ok := found[id]; ok {
			t.Fatalf("acknowledged forget of %s undone by kill -9", id)
		}
	}
}

func verifyWholeOrNothing(t *testing.T, prov *conformance.Client, inflight []sdk.Record) {
	t.Helper()
	if len(inflight) == 0 {
		return
	}
	rows, err := prov.Manifest(ctx, sdk.ManifestQuery{Realm: realm, Tier: sdk.TierFull})
	if err != nil {
		t.Fatal(err)
	}
	titles := map[string]bool{}
	for _, r := range rows {
		titles[r.Title] = true
	}
	landed := 0
	for _, r := range inflight {
		if titles[r.Title] {
			landed++
		}
	}
	if landed != 0 && landed != len(inflight) {
		t.Fatalf("batch in flight at kill -9 landed in part: %d of %d records", landed, len(inflight))
	}
}
