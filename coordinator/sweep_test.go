package coordinator

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	hclog "github.com/hashicorp/go-hclog"
	"github.com/memhost/memhost/coordinator/coordinatortest"
	"github.com/memhost/memhost/sdk"
	"github.com/memhost/memhost/sdk/host"
)

// manifestOnly is a provider holding n manifest rows, newest first; every
// tenth row is ranked.
type manifestOnly struct{ rows []sdk.ManifestRow }

func newManifestOnly(n int) *manifestOnly {
	m := &manifestOnly{}
	for i := range n {
		r := sdk.ManifestRow{ID: fmt.Sprintf("r%05d", i), Scope: "identity:alice", Kind: sdk.KindFact, Title: "t",
			UpdatedAt: testNow.Add(-time.Duration(i) * time.Minute)}
		if i%10 == 9 {
			r.Rank = float64(i)
		}
		m.rows = append(m.rows, r)
	}
	return m
}

func (m *manifestOnly) Recall(context.Context, sdk.RecallQuery) ([]sdk.Hit, error) { return nil, nil }

// Capabilities declares the manifest it lists.
func (m *manifestOnly) Capabilities() sdk.Capabilities { return sdk.Capabilities{sdk.CapManifest} }
func (m *manifestOnly) Manifest(context.Context, sdk.ManifestQuery) ([]sdk.ManifestRow, error) {
	return slices.Clone(m.rows), nil
}

// pageSelector picks the first `per` rows of each request; call block (1-based)
// waits for the deadline instead.
type pageSelector struct {
	per   int
	block int
	mu    sync.Mutex
	reqs  []sdk.SelectRequest
}

func (s *pageSelector) Select(ctx context.Context, req sdk.SelectRequest) (sdk.Selection, error) {
	s.mu.Lock()
	s.reqs = append(s.reqs, req)
	n := len(s.reqs)
	s.mu.Unlock()
	if n == s.block {
		<-ctx.Done()
		return sdk.Selection{}, fmt.Errorf("select: %w", sdk.ErrDeadline)
	}
	var ids []string
	for _, r := range req.Rows[:min(s.per, len(req.Rows))] {
		ids = append(ids, r.ID)
	}
	return sdk.Selection{IDs: ids, Coverage: sdk.CoverageSufficient}, nil
}

func TestFullSweepPages(t *testing.T) {
	tests := []struct {
		name       string
		rows       int
		per        int
		maxEntries int
		block      int
		wantPages  []int // rows per Select call, narrowing call included
		wantIDs    []string
		wantLog    []string
		noLog      []string
	}{
		{name: "one page", rows: 1500, per: 1, maxEntries: 8, wantPages: []int{1500}, wantIDs: []string{"r00000"},
			noLog: []string{"large manifest"}},
		{name: "pages, few picks: no narrowing", rows: 4000, per: 1, maxEntries: 8, wantPages: []int{2000, 2000},
			wantIDs: []string{"r00000", "r02000"}, noLog: []string{"large manifest"}},
		{name: "pages, many picks: narrowed", rows: 4001, per: 2, maxEntries: 2, wantPages: []int{2000, 2000, 1, 5},
			wantIDs: []string{"r00000", "r00001"}, wantLog: []string{"large manifest", "rows=4001"}},
		{name: "time bound keeps pages done", rows: 6000, per: 1, maxEntries: 8, block: 2, wantPages: []int{2000, 2000},
			wantIDs: []string{"r00000"}, wantLog: []string{"ran out of time"}},
	}
	for _, tt := range tests {
		// In a bubble (testing/synctest) time passes only while every
		// goroutine waits: the sweep's 50 ms pass while the blocked page
		// waits, never while the manifest is listed or the first page
		// answered, however loaded the machine.
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				sel := &pageSelector{per: tt.per, block: tt.block}
				m := newManifestOnly(tt.rows)
				f := newFixture(t, func(c *Config, o *Options) {
					o.Selector = sel
					c.MaxEntries = tt.maxEntries
					if tt.block > 0 {
						c.SweepTimeout = 50 * time.Millisecond
					}
				})
				ctx, cancel := context.WithTimeout(context.Background(), f.c.cfg.SweepTimeout)
				defer cancel()
				// The sweep runs with the logger of the turn that asked for it.
				ctx = hclog.WithContext(ctx, hclog.New(&hclog.LoggerOptions{Output: io.Discard}).With("request_id", "turn-9"))
				ids, err := f.c.fullSweep(ctx, SessionKey{Realm: "default", Identity: "alice", Session: "s"}, alice,
					provider{Provider: host.ProviderOf(m), caps: sdk.Capabilities{sdk.CapManifest, sdk.CapFetch}}, []sdk.Scope{"identity:alice"}, "q")
				if err != nil {
					t.Fatal(err)
				}
				if !slices.Equal(ids, tt.wantIDs) {
					t.Errorf("ids %v, want %v", ids, tt.wantIDs)
				}
				var pages []int
				for _, r := range sel.reqs {
					pages = append(pages, len(r.Rows))
				}
				if !slices.Equal(pages, tt.wantPages) {
					t.Errorf("rows per Select %v, want %v", pages, tt.wantPages)
				}
				logs := f.logs.String()
				for _, w := range tt.wantLog {
					if !strings.Contains(logs, w) {
						t.Errorf("log lacks %q:\n%s", w, logs)
					}
				}
				for _, line := range strings.Split(strings.TrimSpace(logs), "\n") {
					if line != "" && !strings.Contains(line, "request_id=turn-9") {
						t.Errorf("sweep line without the turn's request id: %s", line)
					}
				}
				for _, w := range tt.noLog {
					if strings.Contains(logs, w) {
						t.Errorf("log has %q:\n%s", w, logs)
					}
				}
			})
		})
	}
}

func TestFullSweepTruncatesRankedFirstThenNewest(t *testing.T) {
	sel := &pageSelector{per: 0}
	m := newManifestOnly(16010)
	// Make the oldest rows' ranks matter: rank a few very old ones.
	for i := 16000; i < 16010; i += 3 {
		m.rows[i].Rank = 1
	}
	f := newFixture(t, func(_ *Config, o *Options) { o.Selector = sel })
	if _, err := f.c.fullSweep(context.Background(), SessionKey{Realm: "default", Identity: "alice", Session: "s"}, alice,
		provider{Provider: host.ProviderOf(m)}, []sdk.Scope{"identity:alice"}, "q"); err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	total := 0
	for _, r := range sel.reqs {
		total += len(r.Rows)
		for _, row := range r.Rows {
			seen[row.ID] = true
		}
	}
	if total != 16000 {
		t.Fatalf("%d rows swept, want 16000", total)
	}
	for i, r := range m.rows {
		ranked := r.Rank > 0
		// Ranked rows all stay; of the unranked, the oldest go first.
		if ranked && !seen[r.ID] {
			t.Errorf("ranked row %d (%s) was cut", i, r.ID)
		}
	}
	for _, id := range []string{"r16001", "r16002", "r16004"} {
		if seen[id] {
			t.Errorf("old unranked row %s kept over newer ones", id)
		}
	}
	if !seen["r00000"] || !seen["r16000"] {
		t.Error("the newest row or an old ranked row was cut")
	}
	if !strings.Contains(f.logs.String(), "truncated") {
		t.Errorf("no truncation warning:\n%s", f.logs.String())
	}
}

func TestFullSweepFirstPageFailure(t *testing.T) { synctest.Test(t, testFullSweepFirstPageFailure) }

func testFullSweepFirstPageFailure(t *testing.T) {
	sel := &pageSelector{per: 1, block: 1}
	f := newFixture(t, func(c *Config, o *Options) { o.Selector = sel; c.SweepTimeout = 20 * time.Millisecond })
	ctx, cancel := context.WithTimeout(context.Background(), f.c.cfg.SweepTimeout)
	defer cancel()
	if _, err := f.c.fullSweep(ctx, SessionKey{Realm: "default", Identity: "alice", Session: "s"}, alice,
		provider{Provider: host.ProviderOf(newManifestOnly(10))}, []sdk.Scope{"identity:alice"}, "q"); err == nil {
		t.Fatal("a sweep whose only page failed succeeded")
	}
}

// countingMobs answers the mobs it is set to and counts calls.
type countingMobs struct {
	mu    sync.Mutex
	mobs  []string
	calls int
	err   error
}

func (m *countingMobs) ResolveMobs(context.Context, sdk.Identity) ([]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.calls++
	return slices.Clone(m.mobs), m.err
}

type countingOperator struct {
	mu    sync.Mutex
	op    string
	calls int
}

func (o *countingOperator) ResolveOperator(context.Context, sdk.Identity) (string, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.calls++
	return o.op, nil
}

func TestResolverAnswersAreCached(t *testing.T) {
	clock := testNow
	var clockMu sync.Mutex
	now := func() time.Time { clockMu.Lock(); defer clockMu.Unlock(); return clock }
	advance := func(d time.Duration) { clockMu.Lock(); clock = clock.Add(d); clockMu.Unlock() }
	mobs := &countingMobs{mobs: []string{"team"}}
	ops := &countingOperator{op: "carol"}
	f := newFixture(t, func(c *Config, o *Options) {
		o.MobResolver, o.OperatorResolver, o.Now = mobs, ops, now
		c.OperatorScope = OperatorScopeProvisional
		c.ResolverCacheTTL = 5 * time.Second
	})
	scopes := func() []sdk.Scope {
		s, err := f.c.Scopes(context.Background(), alice)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	want := []sdk.Scope{"identity:alice", "mob:team", "operator:carol", "realm"}
	if got := scopes(); !slices.Equal(got, want) {
		t.Fatalf("scopes %v, want %v", got, want)
	}
	mobs.mu.Lock()
	mobs.mobs = []string{"other"}
	mobs.mu.Unlock()
	advance(4 * time.Second)
	if got := scopes(); !slices.Equal(got, want) || mobs.calls != 1 || ops.calls != 1 {
		t.Fatalf("within the TTL: scopes %v, %d mob and %d operator calls; want the cached answer and one call each", got, mobs.calls, ops.calls)
	}
	advance(2 * time.Second)
	if got := scopes(); !slices.Contains(got, "mob:other") || mobs.calls != 2 {
		t.Fatalf("after the TTL: scopes %v, %d mob calls; want the new answer", got, mobs.calls)
	}
	// Another identity is asked for itself.
	if _, err := f.c.Scopes(context.Background(), sdk.Identity{Realm: "default", ID: "bob"}); err != nil || mobs.calls != 3 {
		t.Fatalf("bob: %v, %d mob calls, want 3", err, mobs.calls)
	}
}

func TestResolverErrorsAreNotCached(t *testing.T) {
	mobs := &countingMobs{err: fmt.Errorf("down: %w", sdk.ErrUnavailable)}
	f := newFixture(t, func(_ *Config, o *Options) { o.MobResolver = mobs })
	for range 2 {
		if _, err := f.c.Scopes(context.Background(), alice); err == nil {
			t.Fatal("a failing mob resolver composed scopes")
		}
	}
	mobs.mu.Lock()
	mobs.err, mobs.mobs = nil, []string{"team"}
	mobs.mu.Unlock()
	got, err := f.c.Scopes(context.Background(), alice)
	if err != nil || !slices.Contains(got, "mob:team") || mobs.calls != 3 {
		t.Fatalf("after recovery: %v, %v, %d calls; want the answer asked anew each time", got, err, mobs.calls)
	}
}

func TestResolverCacheOff(t *testing.T) {
	mobs := &countingMobs{mobs: []string{"team"}}
	f := newFixture(t, func(c *Config, o *Options) { o.MobResolver = mobs; c.ResolverCacheTTL = 0 })
	for range 3 {
		if _, err := f.c.Scopes(context.Background(), alice); err != nil {
			t.Fatal(err)
		}
	}
	if mobs.calls != 3 {
		t.Fatalf("%d calls with the cache off, want 3", mobs.calls)
	}
}

// TestSweepShowsTheSelectorOnlyTheScopes: a background sweep hands the
// selector (a model, for the llm plugin) the full manifest's rows of the
// turn's scopes only, as a turn does its working set: a provider that
// ignores the scopes of its manifest must not put another identity's
// titles before alice's selector.
func TestSweepShowsTheSelectorOnlyTheScopes(t *testing.T) {
	const secret = "bob's diagnosis: harbour anxiety"
	sel := &recordingSelector{pick: func(req sdk.SelectRequest) (sdk.Selection, error) {
		return sdk.Selection{Coverage: sdk.CoverageNeedDeeperSweep}, nil
	}}
	f := newFixture(t, func(c *Config, o *Options) {
		o.Selector = sel
		o.Providers = RealmProviders{"default": scopeDeaf{o.Providers.(RealmProviders)["default"].(*coordinatortest.Provider)}}
	})
	f.add(rec("harbour plan", "alice likes the harbour walk"))
	f.add(scoped(sdk.IdentityScope("bob"), secret, "private to bob"))
	f.turn(alice, "s", "harbour")
	f.c.sweeps.Wait()
	if fullSweeps(f.p) != 1 {
		t.Fatalf("%d full sweeps, want 1", fullSweeps(f.p))
	}
	for _, req := range sel.requests() {
		for _, r := range req.Rows {
			if strings.Contains(r.Title, "bob") {
				t.Errorf("the selector was shown bob's row %q", r.Title)
			}
		}
	}
	if logs := f.logs.String(); !strings.Contains(logs, faultManifest) {
		t.Errorf("the provider's out-of-scope rows were not logged:\n%s", logs)
	}
}

// TestAFailedTurnKeepsTheSweepPicks: a turn takes a finished sweep's picks
// before its recall; when the recall fails they wait for the next turn
// again, which injects them. They were dropped with the failed turn.
func TestAFailedTurnKeepsTheSweepPicks(t *testing.T) {
	var fail atomic.Bool
	sel := &recordingSelector{pick: func(req sdk.SelectRequest) (sdk.Selection, error) {
		if fail.Load() {
			return sdk.Selection{}, fmt.Errorf("select: %w", sdk.ErrUnavailable)
		}
		return sdk.Selection{Coverage: sdk.CoverageSufficient}, nil
	}}
	f := newFixture(t, func(_ *Config, o *Options) { o.Selector = sel })
	ids := f.add(rec("Coffee", "a"), rec("Harbour", "the ferry leaves at noon"))
	key := SessionKey{Realm: "default", Identity: alice.ID, Session: "s"}
	if err := f.c.visit(t.Context(), key, func(s *SessionState) bool { s.SweepIDs = []string{ids[1]}; return true }); err != nil {
		t.Fatal(err)
	}
	fail.Store(true)
	if res := f.turn(alice, "s", "coffee"); res.SkipReason != SkipRecallFailed {
		t.Fatalf("turn with a failing selector: %q, want recall_failed", res.SkipReason)
	}
	fail.Store(false)
	if res := f.turn(alice, "s", "coffee"); !slices.Contains(res.RecordIDs, ids[1]) {
		t.Fatalf("the turn after a failed one injected %v, want the sweep's pick %s", res.RecordIDs, ids[1])
	}
}

// TestALexicalTurnLeavesTheSweepPicks: a turn that recalls lexically (no
// words to select by) does not take a finished sweep's picks, which only
// the selector weighs; it took and dropped them.
func TestALexicalTurnLeavesTheSweepPicks(t *testing.T) {
	sel := &recordingSelector{pick: func(req sdk.SelectRequest) (sdk.Selection, error) {
		return sdk.Selection{Coverage: sdk.CoverageSufficient}, nil
	}}
	f := newFixture(t, func(c *Config, o *Options) { c.Selection, o.Selector = SelectionAlways, sel })
	ids := f.add(rec("Coffee", "a"), rec("Harbour", "the ferry leaves at noon"))
	key := SessionKey{Realm: "default", Identity: alice.ID, Session: "s"}
	if err := f.c.visit(t.Context(), key, func(s *SessionState) bool { s.SweepIDs = []string{ids[1]}; return true }); err != nil {
		t.Fatal(err)
	}
	f.turn(alice, "s", " ")
	var waiting []string
	if err := f.c.visit(t.Context(), key, func(s *SessionState) bool { waiting = slices.Clone(s.SweepIDs); return false }); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(waiting, []string{ids[1]}) {
		t.Fatalf("after a lexical turn the sweep's picks are %v, want %v waiting", waiting, []string{ids[1]})
	}
}
