package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/memhost/memhost/sdk"
)

// replicaCfg is a replica setting for tests: generous waits, so a loaded
// machine's slow apply does not turn a replica answer into a SQL one.
func replicaCfg(readWait string) map[string]any {
	return map[string]any{"read_wait": readWait, "max_lag": "1m", "poll_interval": "100ms"}
}

// planLog records how a store's recalls were answered.
type planLog struct {
	mu    sync.Mutex
	plans []string
}

func (p *planLog) hook(s *Store) {
	s.recall.plan = func(plan string) {
		p.mu.Lock()
		p.plans = append(p.plans, plan)
		p.mu.Unlock()
	}
}

// last answers the plan of the latest recall and forgets the log.
func (p *planLog) last() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.plans) == 0 {
		return ""
	}
	last := p.plans[len(p.plans)-1]
	p.plans = nil
	return last
}

func titles(hits []sdk.Hit) []string {
	out := make([]string, len(hits))
	for i, h := range hits {
		out[i] = h.Record.Title
	}
	slices.Sort(out)
	return out
}

func note(title, body string) sdk.Record {
	return sdk.Record{Scope: sdk.RealmScope, Kind: sdk.KindFact, Title: title, Body: body}
}

// twoStores opens two stores with replicas on one schema of t's own,
// both serving; plansB hears how the second's recalls were answered.
func twoStores(t *testing.T, plansB *planLog) (a, b *Store) {
	t.Helper()
	schema := schemaFor(t, t.Name())
	a = openStoreWith(t, configJSON(schema, "replica", replicaCfg("10s")))
	b = openStoreWith(t, configJSON(schema, "replica", replicaCfg("10s")), plansB.hook)
	waitServing(t, a)
	waitServing(t, b)
	return a, b
}

// TestReplicaAcrossStores: two plugin instances on one schema, each with
// its replica. A write on one is recalled on the other at once (the
// other's recall reads the log's head with the hits and waits for it), a
// forget and a supersede too, answered by the replica; and the delay
// until the other's replica has applied a write is measured.
func TestReplicaAcrossStores(t *testing.T) {
	var plansB planLog
	a, b := twoStores(t, &plansB)
	ctx := context.Background()
	recallB := func(query string) []string {
		t.Helper()
		hits, err := b.Recall(ctx, sdk.RecallQuery{Realm: realm, Query: query})
		if err != nil {
			t.Fatal(err)
		}
		if plan := plansB.last(); plan != "replica" {
			t.Errorf("recall %q on the other store answered by %q, want the replica", query, plan)
		}
		return titles(hits)
	}
	ids, err := a.Remember(ctx, realm, []sdk.Record{note("heron sighting", "grey heron by the canal"), note("owl call", "tawny owl at dusk")})
	if err != nil {
		t.Fatal(err)
	}
	if got := recallB("heron owl"); !slices.Equal(got, []string{"heron sighting", "owl call"}) {
		t.Errorf("after a write on the first store, the other recalls %v", got)
	}
	if _, err := a.Forget(ctx, realm, ids[:1]); err != nil {
		t.Fatal(err)
	}
	if got := recallB("heron owl"); !slices.Equal(got, []string{"owl call"}) {
		t.Errorf("after a forget on the first store, the other recalls %v", got)
	}
	if _, err := a.Supersede(ctx, realm, ids[1], note("owl call, corrected", "barn owl at dusk")); err != nil {
		t.Fatal(err)
	}
	if got := recallB("owl"); !slices.Equal(got, []string{"owl call, corrected"}) {
		t.Errorf("after a supersede on the first store, the other recalls %v", got)
	}

	// Visibility: from a write's acknowledgement on a to b's replica
	// having applied it, woken by the notification alone.
	const n = 100
	delays := make([]time.Duration, 0, n)
	for i := range n {
		if _, err := a.Remember(ctx, realm, []sdk.Record{note(fmt.Sprintf("visibility %d", i), "timed write")}); err != nil {
			t.Fatal(err)
		}
		acked, start := a.replica.acked.Load(), time.Now()
		if !b.replica.waitApplied(ctx, acked, start.Add(time.Minute)) {
			t.Fatalf("write %d (change %d) not applied by the other replica within a minute", i, acked)
		}
		delays = append(delays, time.Since(start))
	}
	slices.Sort(delays)
	t.Logf("cross-store visibility over %d writes: p50 %v, p99 %v, max %v", n, delays[n/2], delays[n*99/100], delays[n-1])
}

// TestReplicaNeverStale: a replica that cannot apply (held between
// reading a catch-up and applying it) answers nothing stale: a write on
// another store, and one on its own, are recalled from SQL once the wait
// runs out; released, the replica applies them and answers again.
func TestReplicaNeverStale(t *testing.T) {
	schema := schemaFor(t, t.Name())
	var plans planLog
	a := openStoreWith(t, configJSON(schema, "replica", sqlOnly))
	b := openStoreWith(t, configJSON(schema, "replica", replicaCfg("300ms")), plans.hook)
	gate := holdApplies(t, b)
	waitServing(t, b)
	ctx := context.Background()
	if _, err := a.Remember(ctx, realm, []sdk.Record{note("first lantern", "paper lantern")}); err != nil {
		t.Fatal(err)
	}
	recall := func(want []string, plan string) {
		t.Helper()
		hits, err := b.Recall(ctx, sdk.RecallQuery{Realm: realm, Query: "lantern"})
		if err != nil {
			t.Fatal(err)
		}
		if got := titles(hits); !slices.Equal(got, want) {
			t.Errorf("recall answered %v, want %v", got, want)
		}
		if got := plans.last(); (got == "replica") != (plan == "replica") {
			t.Errorf("recall answered by %q, want %s", got, plan)
		}
	}
	// The first answer is the replica's once it has applied a's write; on
	// a loaded machine that can take longer than the short read_wait this
	// test needs for what follows.
	var head int64
	if err := b.pool.QueryRow(ctx, "SELECT max(seq) FROM changes").Scan(&head); err != nil {
		t.Fatal(err)
	}
	if !b.replica.waitApplied(ctx, head, time.Now().Add(time.Minute)) {
		t.Fatal("the replica did not apply the first write within a minute")
	}
	recall([]string{"first lantern"}, "replica")
	gate.held.Store(true)
	if _, err := a.Remember(ctx, realm, []sdk.Record{note("second lantern", "stone lantern")}); err != nil {
		t.Fatal(err)
	}
	recall([]string{"first lantern", "second lantern"}, "sql")
	if _, err := b.Remember(ctx, realm, []sdk.Record{note("third lantern", "oil lantern")}); err != nil {
		t.Fatal(err)
	}
	recall([]string{"first lantern", "second lantern", "third lantern"}, "sql")
	gate.held.Store(false)
	gate.free()
	if !b.replica.waitApplied(ctx, b.replica.acked.Load(), time.Now().Add(time.Minute)) {
		t.Fatal("the released replica did not catch up within a minute")
	}
	recall([]string{"first lantern", "second lantern", "third lantern"}, "replica")
}

// TestChangeLogTrim: trimming keeps what the slowest live replica has not
// applied, unless older than the retention; a replica that finds the log
// trimmed past its position reloads, and answers as SQL does.
func TestChangeLogTrim(t *testing.T) {
	grace := trimGrace.Load()
	t.Cleanup(func() { trimGrace.Store(grace) }) // after the stores close
	trimGrace.Store(0)
	schema := schemaFor(t, t.Name())
	db := rawPool(t, schema)
	a := openStoreWith(t, configJSON(schema, "replica", sqlOnly))
	var plans planLog
	b := openStoreWith(t, configJSON(schema, "replica", replicaCfg("10s")), plans.hook)
	waitServing(t, b)
	ctx := context.Background()
	for i := range 5 {
		if _, err := a.Remember(ctx, realm, []sdk.Record{note(fmt.Sprintf("tide %d", i), "tide table")}); err != nil {
			t.Fatal(err)
		}
	}
	if !b.replica.waitApplied(ctx, 5, time.Now().Add(time.Minute)) {
		t.Fatal("replica did not apply the writes")
	}
	// b's own heartbeat records its position (a write here could race
	// one of its beats carrying an older one).
	for deadline := time.Now().Add(time.Minute); ; {
		b.replica.beat()
		var pinned int64
		if err := db.QueryRow(ctx, "SELECT applied FROM replicas WHERE name = $1", b.replica.name).Scan(&pinned); err != nil && !errors.Is(err, pgx.ErrNoRows) {
			t.Fatal(err)
		}
		if pinned == b.replica.applied.Load() {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the replica's row holds %d, not its position %d, a minute on", pinned, b.replica.applied.Load())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := db.Exec(ctx, "INSERT INTO replicas (name, applied, seen) VALUES ('slow', 2, now())"); err != nil {
		t.Fatal(err)
	}
	horizon := func() (trimmed, first int64) {
		t.Helper()
		if err := db.QueryRow(ctx, "SELECT trimmed, (SELECT coalesce(min(seq), 0) FROM changes) FROM change_horizon").Scan(&trimmed, &first); err != nil {
			t.Fatal(err)
		}
		return trimmed, first
	}
	if _, err := trimChanges(ctx, b.pool, time.Hour); err != nil {
		t.Fatal(err)
	}
	if trimmed, first := horizon(); trimmed != 2 || first != 3 {
		t.Errorf("trimmed below the slowest live replica: horizon %d, first change %d; want 2 and 3", trimmed, first)
	}

	// Hold b between reading a catch-up and applying it, then write and
	// trim past what it read.
	gate := holdApplies(t, b)
	gate.held.Store(true)
	if _, err := a.Remember(ctx, realm, []sdk.Record{note("tide 5", "tide table")}); err != nil {
		t.Fatal(err)
	}
	<-gate.entered
	gate.held.Store(false)
	for i := 6; i < 8; i++ {
		if _, err := a.Remember(ctx, realm, []sdk.Record{note(fmt.Sprintf("tide %d", i), "tide table")}); err != nil {
			t.Fatal(err)
		}
	}
	var head int64
	if err := db.QueryRow(ctx, "SELECT max(seq) FROM changes").Scan(&head); err != nil {
		t.Fatal(err)
	}
	if _, err := trimChanges(ctx, b.pool, 0); err != nil {
		t.Fatal(err)
	}
	if trimmed, _ := horizon(); trimmed != head {
		t.Errorf("retention 0 trimmed to %d, want every change (%d)", trimmed, head)
	}
	loads := b.replica.loads.Load()
	gate.free()
	if !b.replica.waitApplied(ctx, head, time.Now().Add(time.Minute)) {
		t.Fatal("replica did not catch up after the trim")
	}
	hits, err := b.Recall(ctx, sdk.RecallQuery{Realm: realm, Query: "tide", Limit: 20})
	if err != nil {
		t.Fatal(err)
	}
	if len(hits) != 8 || plans.last() != "replica" {
		t.Errorf("after the reload: %d hits, want 8 from the replica", len(hits))
	}
	if got := b.replica.loads.Load(); got != loads+1 {
		t.Errorf("the replica loaded %d times after finding the log trimmed past it, want once", got-loads)
	}
}

// TestReplicaServerRestart: with the server down recall fails as
// unavailable and the replica stops serving (its LISTEN connection is
// gone); back up, recall answers at once (from SQL until the replica has
// caught up), then from the replica, with the writes made meanwhile.
func TestReplicaServerRestart(t *testing.T) {
	ctx := context.Background()
	c, dsn := ownCluster(t)
	newStore := func(plans *planLog) *Store {
		s := New()
		s.getenv = func(string) string { return dsn }
		if plans != nil {
			plans.hook(s)
		}
		if err := s.Configure(ctx, []byte(`{"statement_timeout": "5s", "replica": {"read_wait": "10s", "max_lag": "1m", "poll_interval": "100ms"}}`)); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	var plans planLog
	s, other := newStore(&plans), newStore(nil)
	waitServing(t, s)
	if _, err := s.Remember(ctx, realm, []sdk.Record{note("restart one", "before the restart")}); err != nil {
		t.Fatal(err)
	}
	if hits, err := s.Recall(ctx, sdk.RecallQuery{Realm: realm, Query: "restart"}); err != nil || len(hits) != 1 || plans.last() != "replica" {
		t.Fatalf("before the restart: %d hits, %v", len(hits), err)
	}
	c.StopServer()
	if _, err := s.Recall(ctx, sdk.RecallQuery{Realm: realm, Query: "restart"}); !errors.Is(err, sdk.ErrUnavailable) {
		t.Errorf("recall with the server down: %v, want unavailable", err)
	}
	deadline := time.Now().Add(time.Minute)
	for s.replica.serving() {
		if time.Now().After(deadline) {
			t.Fatal("the replica still serves a minute after the server stopped")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := c.StartServer(ctx); err != nil {
		t.Fatal(err)
	}
	// The other store writes once the server is back (retried past the
	// refusal pause).
	for attempt := 0; ; attempt++ {
		_, err := other.Remember(ctx, realm, []sdk.Record{note("restart two", "after the restart")})
		if err == nil {
			break
		}
		if !errors.Is(err, sdk.ErrUnavailable) || attempt > 100 {
			t.Fatalf("write after the restart (attempt %d): %v", attempt, err)
		}
		time.Sleep(refusalPause / 4)
	}
	for attempt := 0; ; attempt++ {
		hits, err := s.Recall(ctx, sdk.RecallQuery{Realm: realm, Query: "restart"})
		if err == nil {
			if len(hits) != 2 {
				t.Fatalf("after the restart (%s): %d hits, want 2", plans.last(), len(hits))
			}
			break
		}
		if !errors.Is(err, sdk.ErrUnavailable) || attempt > 100 {
			t.Fatalf("recall after the restart (attempt %d): %v", attempt, err)
		}
		time.Sleep(refusalPause / 4)
	}
	waitServing(t, s)
	hits, err := s.Recall(ctx, sdk.RecallQuery{Realm: realm, Query: "restart"})
	if err != nil || len(hits) != 2 || plans.last() != "replica" {
		t.Errorf("once caught up: %d hits, %v; want 2 from the replica", len(hits), err)
	}
}

// TestReplicaKilledMidApply: a plugin process killed (SIGKILL) while its
// replica follows a stream of writes leaves nothing behind but a stale
// replicas row; a fresh process loads while writes go on and then ranks
// exactly as SQL does, scores within 1e-9.
func TestReplicaKilledMidApply(t *testing.T) {
	if testing.Short() {
		t.Skip("runs plugin processes")
	}
	schema := schemaFor(t, t.Name())
	writer := openStoreWith(t, configJSON(schema, "replica", sqlOnly))
	ctx := context.Background()
	c := benchCorpus()
	write := func(from, to int) {
		for i := from; i < to; i += 100 {
			if _, err := writer.Remember(ctx, realm, benchRecordsIn(i, 100)); err != nil {
				t.Error(err)
				return
			}
		}
	}
	write(0, 1000)
	cfg := configJSON(schema, "replica", replicaCfg("10s"))
	first, _ := launchPlugin(t, cfg)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); write(1000, 3000) }()
	time.Sleep(300 * time.Millisecond) // mid-stream: the first replica is applying
	first.Kill(0)
	db := rawPool(t, schema)
	var before []string
	rows, err := db.Query(ctx, "SELECT name FROM replicas")
	if err == nil {
		before, err = pgx.CollectRows(rows, pgx.RowTo[string])
	}
	if err != nil {
		t.Fatal(err)
	}
	_, fresh := launchPlugin(t, cfg)
	wg.Wait()
	// The fresh replica records its position once loaded, and then every
	// heartbeat: wait for it to have applied every write.
	var head int64
	if err := db.QueryRow(ctx, "SELECT max(seq) FROM changes").Scan(&head); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(time.Minute)
	for {
		var applied int64
		err := db.QueryRow(ctx, "SELECT coalesce(max(applied), 0) FROM replicas WHERE NOT (name = ANY($1))", before).Scan(&applied)
		if err != nil {
			t.Fatal(err)
		}
		if applied >= head {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the fresh replica has applied %d of %d changes after a minute", applied, head)
		}
		time.Sleep(100 * time.Millisecond)
	}
	const n = 3000
	for i := range 100 {
		q := sdk.RecallQuery{Realm: realm, Query: c.query(i, n), Limit: 10}
		if i%5 == 0 {
			q.Scopes = []sdk.Scope{benchScope(i), sdk.RealmScope}
		}
		sameRanking(t, q, "from the fresh plugin", fresh, "from SQL", writer)
	}
}

// TestTrimWithoutReplica: a process without a replica trims the change
// log too (its writes log changes whether or not a replica follows).
func TestTrimWithoutReplica(t *testing.T) {
	grace, beat := trimGrace.Load(), heartbeatInterval
	t.Cleanup(func() { trimGrace.Store(grace); heartbeatInterval = beat }) // after the store closes
	trimGrace.Store(0)
	heartbeatInterval = 20 * time.Millisecond
	schema := schemaFor(t, t.Name())
	s := openStoreWith(t, configJSON(schema, "replica", sqlOnly))
	db := rawPool(t, schema)
	ctx := context.Background()
	for i := range 3 {
		if _, err := s.Remember(ctx, realm, []sdk.Record{note(fmt.Sprintf("kite %d", i), "kite string")}); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(time.Minute)
	for {
		var trimmed, left int64
		if err := db.QueryRow(ctx, "SELECT trimmed, (SELECT count(*) FROM changes) FROM change_horizon").Scan(&trimmed, &left); err != nil {
			t.Fatal(err)
		}
		if trimmed == 3 && left == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("a minute on, the log is trimmed to %d with %d changes left; want 3 and none", trimmed, left)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestReplicaMaxLag: a replica that has known of a change it has not
// applied for longer than max_lag stops serving (recall goes to SQL
// without waiting), and serves again once it has caught up.
func TestReplicaMaxLag(t *testing.T) {
	schema := schemaFor(t, t.Name())
	a := openStoreWith(t, configJSON(schema, "replica", sqlOnly))
	b := openStoreWith(t, configJSON(schema, "replica", map[string]any{"max_lag": "50ms"}))
	gate := holdApplies(t, b)
	waitServing(t, b)
	gate.held.Store(true)
	ctx := context.Background()
	if _, err := a.Remember(ctx, realm, []sdk.Record{note("lagging kettle", "kettle on")}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(time.Minute)
	for b.replica.serving() {
		if time.Now().After(deadline) {
			t.Fatal("a replica held behind a notified change still serves a minute on")
		}
		time.Sleep(10 * time.Millisecond)
	}
	hits, err := b.Recall(ctx, sdk.RecallQuery{Realm: realm, Query: "kettle"})
	if err != nil || len(hits) != 1 {
		t.Errorf("recall while the replica lags: %d hits, %v; want the new record (from SQL)", len(hits), err)
	}
	gate.held.Store(false)
	gate.free()
	waitServing(t, b)
}

// applyGate holds a replica's applies while held is set, until free.
type applyGate struct {
	held    atomic.Bool
	entered chan struct{} // a held apply has arrived
	release chan struct{}
	once    sync.Once
}

// holdApplies installs a gate on s's replica; it is freed when t ends,
// before s closes, should the test fail while s is held.
func holdApplies(t *testing.T, s *Store) *applyGate {
	g := &applyGate{entered: make(chan struct{}, 1), release: make(chan struct{})}
	t.Cleanup(g.free)
	hook := func() {
		if g.held.Load() {
			select {
			case g.entered <- struct{}{}:
			default:
			}
			<-g.release
		}
	}
	s.replica.applyHook.Store(&hook)
	return g
}

func (g *applyGate) free() { g.once.Do(func() { close(g.release) }) }

// TestReplicaRenumbersByScope: the replica renumbers the documents it
// applied in scope order (sdkindex.Index.Cluster) between catch-ups, so a
// query of one identity's scope passes over the others' blocks; it still
// ranks as SQL does.
func TestReplicaRenumbersByScope(t *testing.T) {
	if testing.Short() {
		t.Skip("writes 9,000 records")
	}
	schema := schemaFor(t, t.Name())
	var plans planLog
	s := openStoreWith(t, configJSON(schema, "replica", replicaCfg("10s")), plans.hook)
	waitServing(t, s)
	ctx := context.Background()
	words := []string{"harbor", "keeper", "lantern", "ferry", "gull", "anchor", "rope", "quay", "salt", "tide"}
	const n = 9000
	for b := 0; b < n; b += 500 {
		recs := make([]sdk.Record, 500)
		for i := range recs {
			k := b + i
			scope := sdk.RealmScope
			if k%10 < 7 {
				scope = sdk.IdentityScope(fmt.Sprintf("u%02d", k*7%20))
			}
			recs[i] = sdk.Record{Scope: scope, Kind: sdk.KindFact, Title: fmt.Sprintf("%s %s %d", words[k%10], words[k*3%10], k), Body: words[k*7%10]}
		}
		if _, err := s.Remember(ctx, realm, recs); err != nil {
			t.Fatal(err)
		}
	}
	if !s.replica.waitApplied(ctx, s.replica.acked.Load(), time.Now().Add(time.Minute)) {
		t.Fatal("the replica did not apply the writes within a minute")
	}
	// Cluster runs after the catch-up that applied the last write.
	unclustered := func() int {
		s.replica.mu.RLock()
		defer s.replica.mu.RUnlock()
		return s.replica.ix.Unclustered(realm)
	}
	deadline := time.Now().Add(time.Minute)
	for unclustered() > n/2 {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d documents still out of scope order a minute after the last write", unclustered(), n)
		}
		s.replica.poke()
		time.Sleep(20 * time.Millisecond)
	}
	sql := openStoreWith(t, configJSON(schema, "replica", sqlOnly))
	for _, q := range []sdk.RecallQuery{
		{Realm: realm, Query: "harbor keeper", Limit: 20},
		{Realm: realm, Query: "ferry gull rope", Scopes: []sdk.Scope{sdk.IdentityScope("u07"), sdk.RealmScope}, Limit: 20},
		{Realm: realm, Query: "tide lantern", Scopes: []sdk.Scope{sdk.IdentityScope("u13")}},
	} {
		sameRanking(t, q, "through the replica", s, "from SQL", sql)
		if plan := plans.last(); plan != "replica" {
			t.Errorf("query %q answered by %q, want the replica", q.Query, plan)
		}
	}
}

// TestReplicaLoadOutlastsTrimGrace: a load that takes longer than the
// trim grace, with writes going on, is followed by a catch-up, not by
// another load: the replica stays registered while it loads, so no
// trimmer takes the changes it needs after. (It loaded again and again
// for as long as the writes went on.)
func TestReplicaLoadOutlastsTrimGrace(t *testing.T) {
	shortTrimGrace(t, 300*time.Millisecond)
	schema, a, b, gate := heldReplica(t)
	ctx := context.Background()
	stop := keepWriting(t, a, "tide")
	// A trim past the held replica (as change_retention does) makes it
	// load again, and from now on a load takes slowLoad, past the grace
	// and the time a row stays live without a beat.
	time.Sleep(100 * time.Millisecond)
	trimAll(t, a.pool)
	db := rawPool(t, schema)
	slow := func() {
		var trimmed int64
		if err := db.QueryRow(ctx, "SELECT trimmed FROM change_horizon").Scan(&trimmed); err == nil && trimmed > b.replica.applied.Load() {
			time.Sleep(slowLoad)
		}
	}
	b.replica.applyHook.Store(&slow)
	gate.held.Store(false)
	gate.free()
	time.Sleep(slowLoad + 2*time.Second) // writes and trims go on past the load
	written := stop()
	settled(t, b)
	if n := b.replica.loads.Load(); n != 2 {
		t.Errorf("the replica loaded %d times; want twice (at start, after the trim), then catch-ups", n)
	}
	var plans planLog
	plans.hook(b)
	hits, err := b.Recall(ctx, sdk.RecallQuery{Realm: realm, Query: "tide", Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if int64(len(hits)) != written || plans.last() != "replica" {
		t.Errorf("recall answered %d of the %d records written, by %s; want all, by the replica", len(hits), written, plans.last())
	}
}

// TestReplicaCatchesUpInSteps: a backlog longer than maxApply is applied
// in steps, without a load; while a step of it is held the replica does
// not serve past max_lag, and after the last it answers every record.
// The backlog of 11 is read whole: 4, 4 and 3.
func TestReplicaCatchesUpInSteps(t *testing.T) {
	old := maxApply
	t.Cleanup(func() { maxApply = old })
	maxApply = 4
	schema := schemaFor(t, t.Name())
	a := openStoreWith(t, configJSON(schema, "replica", sqlOnly))
	b := openStoreWith(t, configJSON(schema, "replica", map[string]any{"read_wait": "10s", "max_lag": "200ms", "poll_interval": "100ms"}))
	gate := holdApplies(t, b)
	waitServing(t, b)
	// A catch-up that read none of the backlog is held while it is
	// written (a poll's, within poll_interval): one held after reading
	// the first few writes left fewer steps than the test counts.
	gate.held.Store(true)
	<-gate.entered
	ctx := context.Background()
	for i := range 11 {
		if _, err := a.Remember(ctx, realm, []sdk.Record{note(fmt.Sprintf("step %d", i), "step ladder")}); err != nil {
			t.Fatal(err)
		}
	}
	// Let the backlog's first step through, then hold the next: behind
	// dates from the backlog, not from the step, so max_lag ends serving.
	gate.held.Store(false)
	hold := make(chan struct{})
	var steps atomic.Int64
	next := func() {
		if steps.Add(1) == 2 {
			<-hold
		}
	}
	b.replica.applyHook.Store(&next)
	gate.free()
	deadline := time.Now().Add(time.Minute)
	for b.replica.serving() {
		if time.Now().After(deadline) {
			close(hold)
			t.Fatal("a replica held in the middle of a backlog still serves a minute on")
		}
		time.Sleep(10 * time.Millisecond)
	}
	close(hold)
	var plans planLog
	plans.hook(b)
	if !b.replica.waitServing(ctx, time.Now().Add(time.Minute)) {
		t.Fatal("the replica did not serve again within a minute")
	}
	hits, err := b.Recall(ctx, sdk.RecallQuery{Realm: realm, Query: "step", Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	if len(hits) != 11 || plans.last() != "replica" {
		t.Errorf("after the backlog: %d hits by %s; want 11 by the replica", len(hits), plans.last())
	}
	if n := b.replica.loads.Load(); n != 1 {
		t.Errorf("the replica loaded %d times; want once, the backlog applied in steps", n)
	}
	if n := steps.Load(); n < 3 {
		t.Errorf("%d catch-ups after the first step; want the backlog of 11 in steps of 4", n)
	}
}

// slowLoads makes every whole load of a replica take d, inside its
// snapshot (holding its pooled connection), until t ends.
func slowLoads(t *testing.T, d time.Duration) {
	slow := func() { time.Sleep(d) }
	loadHook.Store(&slow)
	t.Cleanup(func() { loadHook.Store(nil) })
}

// shortTrimGrace shrinks the trim grace and the heartbeat times for t: a
// row stays live 2 s without a beat, twenty beats, so a loaded machine
// does not let it expire; slowLoad outlasts it.
func shortTrimGrace(t *testing.T, grace time.Duration) {
	old, beat, live := trimGrace.Load(), heartbeatInterval, replicaLiveFor
	t.Cleanup(func() { trimGrace.Store(old); heartbeatInterval, replicaLiveFor = beat, live })
	trimGrace.Store(int64(grace))
	heartbeatInterval, replicaLiveFor = 100*time.Millisecond, 2*time.Second
}

// slowLoad is how long the tests' slow loads take: past a row's life
// without a beat (shortTrimGrace), so a load that beats no more loses it.
const slowLoad = 2500 * time.Millisecond

// keepWriting has a write a record every 20 ms until the answered stop
// is called; stop answers how many it wrote.
func keepWriting(t *testing.T, s *Store, title string) (stop func() int64) {
	ctx := context.Background()
	quit, done := make(chan struct{}), make(chan struct{})
	var written atomic.Int64
	go func() {
		defer close(done)
		for i := 0; ; i++ {
			if _, err := s.Remember(ctx, realm, []sdk.Record{note(fmt.Sprintf("%s %d", title, i), title+" table")}); err != nil {
				t.Error(err)
				return
			}
			written.Add(1)
			select {
			case <-quit:
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	return func() int64 {
		close(quit)
		<-done
		return written.Load()
	}
}

// settled waits until s's replica has applied the log's head, so a load
// still running when the writes stopped is counted.
func settled(t *testing.T, s *Store) {
	t.Helper()
	var head int64
	if err := s.pool.QueryRow(context.Background(), "SELECT "+logHead).Scan(&head); err != nil {
		t.Fatal(err)
	}
	if !s.replica.waitApplied(context.Background(), head, time.Now().Add(time.Minute)) {
		t.Fatalf("the replica did not apply the log's head, %d, within a minute", head)
	}
}

// TestReplicaSlowBeatsKeepItsRow: heartbeats slower than their interval
// (a loaded server) still keep the replica's row, so trimmers leave its
// changes. Each beat had the interval as its deadline: every one failed,
// the row expired, and the replica loaded again (CI, 2 cores, busy).
func TestReplicaSlowBeatsKeepItsRow(t *testing.T) {
	shortTrimGrace(t, 300*time.Millisecond)
	slow := func(context.Context) { time.Sleep(3 * heartbeatInterval) }
	beatHook.Store(&slow)
	t.Cleanup(func() { beatHook.Store(nil) })
	schema := schemaFor(t, t.Name())
	a := openStoreWith(t, configJSON(schema, "replica", sqlOnly))
	b := openStoreWith(t, configJSON(schema, "replica", replicaCfg("10s")))
	waitServing(t, b)
	stop := keepWriting(t, a, "tide")
	time.Sleep(3 * replicaLiveFor) // a's trimmer drops rows unrefreshed this long
	stop()
	var rows int
	if err := a.pool.QueryRow(context.Background(), "SELECT count(*) FROM replicas WHERE name = $1 AND seen > now() - make_interval(secs => $2)",
		b.replica.name, replicaLiveFor.Seconds()).Scan(&rows); err != nil {
		t.Fatal(err)
	}
	if rows != 1 {
		t.Error("the replica's row expired while its beats were slow")
	}
	settled(t, b)
	if n := b.replica.loads.Load(); n != 1 {
		t.Errorf("the replica loaded %d times; want once, then catch-ups", n)
	}
}

// TestReplicaStuckBeatKeepsItsRow: a beat stuck on a dead connection (a
// peer gone without a reset) is cut while the row still lives, so the
// next one connects again in time. Given the row's whole life, the stuck
// beat outlasted it and the row expired.
func TestReplicaStuckBeatKeepsItsRow(t *testing.T) {
	shortTrimGrace(t, 300*time.Millisecond)
	schema := schemaFor(t, t.Name())
	b := openStoreWith(t, configJSON(schema, "replica", replicaCfg("10s")))
	waitServing(t, b)
	var stuck atomic.Bool
	hook := func(ctx context.Context) {
		if stuck.CompareAndSwap(false, true) {
			<-ctx.Done() // the connection answers nothing
		}
	}
	beatHook.Store(&hook)
	t.Cleanup(func() { beatHook.Store(nil) })
	db := rawPool(t, schema)
	for end := time.Now().Add(3 * replicaLiveFor); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		var live int
		if err := db.QueryRow(context.Background(), "SELECT count(*) FROM replicas WHERE name = $1 AND seen > now() - make_interval(secs => $2)",
			b.replica.name, replicaLiveFor.Seconds()).Scan(&live); err != nil {
			t.Fatal(err)
		}
		if live != 1 {
			t.Fatal("the replica's row expired while a beat was stuck")
		}
	}
	if !stuck.Load() {
		t.Fatal("no beat went through the hook")
	}
}

// TestReplicaLoadOnAPoolOfOne: with pool_size 1 a load's snapshot holds
// the only pooled connection; the replica's row is still kept alive (its
// heartbeats have a connection of their own), so the writes during a
// load longer than the trim grace are caught up, not loaded again.
func TestReplicaLoadOnAPoolOfOne(t *testing.T) {
	shortTrimGrace(t, 300*time.Millisecond)
	slowLoads(t, slowLoad)
	schema := schemaFor(t, t.Name())
	a := openStoreWith(t, configJSON(schema, "replica", sqlOnly))
	stop := keepWriting(t, a, "tide")
	time.Sleep(200 * time.Millisecond)
	b := openStoreWith(t, configJSON(schema, "pool_size", 1, "replica", replicaCfg("10s")))
	time.Sleep(slowLoad + 2*time.Second)
	written := stop()
	settled(t, b)
	if n := b.replica.loads.Load(); n != 1 {
		t.Errorf("the replica loaded %d times; want once, then catch-ups", n)
	}
	var plans planLog
	plans.hook(b)
	waitServing(t, b)
	hits, err := b.Recall(context.Background(), sdk.RecallQuery{Realm: realm, Query: "tide", Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if int64(len(hits)) != written {
		t.Errorf("recall answered %d of the %d records written (by %s)", len(hits), written, plans.last())
	}
}

// TestReplicaRewoundReloadKeepsItsChanges: a reload after the log went
// back pins the log at the new numbering's position while it loads;
// the old, higher pin let trimmers take the new changes it needed, and
// it loaded a second time. The reload is held until a trim has passed
// over changes written during it, and counted once applied, whatever the
// machine's speed: cut at a fixed time, a reload slowed by a loaded
// machine was not counted yet (the replica's position, of the old
// numbering, was past the new head, so settled did not wait for it), and
// the test reported no load at all. The restore puts the log's horizon
// back with its changes, as a real one does, under the trim lock: a trim
// landing between lowering the grace and a restore of the changes alone
// had raised the horizon to the replica's position, so the log still
// ended where the replica did and it never reloaded (the test waited a
// minute for a load).
func TestReplicaRewoundReloadKeepsItsChanges(t *testing.T) {
	shortTrimGrace(t, time.Hour)
	schema := schemaFor(t, t.Name())
	a := openStoreWith(t, configJSON(schema, "replica", sqlOnly))
	b := openStoreWith(t, configJSON(schema, "replica", replicaCfg("10s")))
	waitServing(t, b)
	ctx := context.Background()
	db := rawPool(t, schema)
	if _, err := a.Remember(ctx, realm, []sdk.Record{note("first", "first note")}); err != nil {
		t.Fatal(err)
	}
	// The backup: the log's head and horizon after the first write.
	var kept, keptHorizon int64
	if err := db.QueryRow(ctx, "SELECT (SELECT max(seq) FROM changes), trimmed FROM change_horizon").Scan(&kept, &keptHorizon); err != nil {
		t.Fatal(err)
	}
	recs := make([]sdk.Record, 200)
	for i := range recs {
		recs[i] = note(fmt.Sprintf("bulk %d", i), "bulk note")
	}
	if _, err := a.Remember(ctx, realm, recs); err != nil {
		t.Fatal(err)
	}
	var head int64
	if err := db.QueryRow(ctx, "SELECT max(seq) FROM changes").Scan(&head); err != nil {
		t.Fatal(err)
	}
	if !b.replica.waitApplied(ctx, head, time.Now().Add(time.Minute)) {
		t.Fatal("the replica did not apply the writes within a minute")
	}
	waitRowAt(t, db, b, head)
	// A restore: the changes after kept are gone, their numbers handed
	// out again, and the horizon is the backup's. The reload, once its row says it loads, has records
	// written, and goes on until some of their changes are past the
	// grace and a trim has run: a trimmer going by the old pin takes
	// them. Its loads are counted from before the restore: the replica
	// may see it at once (its poll), before this goroutine reads the
	// count.
	const grace = 300 * time.Millisecond
	trimGrace.Store(int64(grace))
	var writing atomic.Pointer[func() int64]
	stopWriting := func() {
		if stop := writing.Swap(nil); stop != nil {
			(*stop)()
		}
	}
	t.Cleanup(stopWriting)
	var hooked atomic.Bool
	hold := func() {
		if !hooked.CompareAndSwap(false, true) {
			return // a second load: counted, not held
		}
		if err := heldReload(t, a, b, db, grace, &writing); err != nil {
			t.Error(err)
		}
	}
	loadHook.Store(&hold)
	t.Cleanup(func() { loadHook.Store(nil) })
	before := b.replica.loads.Load()
	restoreLog(t, db, kept, keptHorizon)
	waitLoads(t, b, before+1)
	stopWriting()
	settled(t, b)
	if n := b.replica.loads.Load() - before; n != 1 {
		t.Errorf("the replica loaded %d times after the log went back; want once", n)
	}
}

// waitRowAt waits until s's replicas row holds the log at pos.
func waitRowAt(t *testing.T, db *pgxpool.Pool, s *Store, pos int64) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(10 * time.Millisecond) {
		var applied int64
		err := db.QueryRow(context.Background(), "SELECT applied FROM replicas WHERE name = $1", s.replica.name).Scan(&applied)
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			t.Fatal(err)
		}
		if err == nil && applied == pos {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the replica's row did not hold the log at %d within a minute", pos)
		}
	}
}

// restoreLog rewinds the change log as a restore of a backup taken when
// kept was its head and horizon its horizon does: the changes after kept
// are gone, their numbers handed out again, and the horizon is the
// backup's. It holds the trim lock, so that no trim runs between its
// statements or lands after them from an older snapshot.
func restoreLog(t *testing.T, db *pgxpool.Pool, kept, horizon int64) {
	t.Helper()
	ctx := context.Background()
	err := pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
		for _, q := range []struct {
			sql  string
			args []any
		}{
			{"SELECT pg_advisory_xact_lock($1, hashtext(current_schema()))", []any{trimLockKey}},
			{"DELETE FROM changes WHERE seq > $1", []any{kept}},
			{"UPDATE change_horizon SET trimmed = $1", []any{horizon}},
			{"SELECT setval(pg_get_serial_sequence('changes', 'seq'), $1)", []any{kept}},
		} {
			if _, err := tx.Exec(ctx, q.sql, q.args...); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// heldReload runs inside b's reload: once b's row says it loads (its pin
// landed), a keeps writing (into writing) until a change written since is
// older than grace, then a trim runs.
func heldReload(t *testing.T, a, b *Store, db *pgxpool.Pool, grace time.Duration, writing *atomic.Pointer[func() int64]) error {
	ctx := context.Background()
	deadline := time.Now().Add(time.Minute)
	pin := b.replica.pin.Load()
	for landed := false; !landed; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			return errors.New("the reload's row never said it loads")
		}
		var applied int64
		var loading bool
		if err := db.QueryRow(ctx, "SELECT applied, loading FROM replicas WHERE name = $1", b.replica.name).Scan(&applied, &loading); err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		landed = loading && applied == pin
	}
	stop := keepWriting(t, a, "tide")
	writing.Store(&stop)
	for old := false; !old; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			return errors.New("no change written during the reload grew older than the grace")
		}
		if err := db.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM changes WHERE seq > $1 AND at < now() - make_interval(secs => $2))",
			pin, grace.Seconds()).Scan(&old); err != nil {
			return err
		}
	}
	// Another trimmer may hold the trim lock at that moment (this one
	// then skips): a few passes.
	for range 3 {
		if _, err := trimChanges(ctx, a.pool, time.Hour); err != nil {
			return err
		}
	}
	return nil
}

// waitLoads waits until s's replica has applied n whole loads.
func waitLoads(t *testing.T, s *Store, n int64) {
	t.Helper()
	deadline := time.NewTimer(time.Minute)
	defer deadline.Stop()
	for {
		s.replica.mu.RLock()
		moved := s.replica.moved
		s.replica.mu.RUnlock()
		if s.replica.loads.Load() >= n {
			return
		}
		select {
		case <-moved:
		case <-deadline.C:
			t.Fatalf("the replica did not load again within a minute (%d loads)", s.replica.loads.Load())
		}
	}
}

// TestReplicaVectorLengthChangeInOneStep: a batch changing a model's
// vector length is applied whole even when a backlog is cut into steps
// inside it; cut there, the index refused the new length piecemeal and
// the replica lost those vectors until it reloaded.
func TestReplicaVectorLengthChangeInOneStep(t *testing.T) {
	old := maxApply
	t.Cleanup(func() { maxApply = old })
	maxApply = 1
	var plansB planLog
	a, b := twoStores(t, &plansB)
	ctx := context.Background()
	ids, err := a.Remember(ctx, realm, []sdk.Record{note("evening", "I usually read before bed"), note("morning", "coffee at seven")})
	if err != nil {
		t.Fatal(err)
	}
	for _, vecs := range [][]sdk.RecordVector{
		{{ID: ids[0], Model: testModel, Vector: []float32{1, 0, 0}}, {ID: ids[1], Model: testModel, Vector: []float32{0, 1, 0}}},
		{{ID: ids[0], Model: testModel, Vector: []float32{0, 1}}, {ID: ids[1], Model: testModel, Vector: []float32{1, 0}}},
	} {
		if err := a.PutVectors(ctx, realm, vecs); err != nil {
			t.Fatal(err)
		}
	}
	hits, err := b.Recall(ctx, sdk.RecallQuery{Realm: realm, QueryVector: []float32{0.1, 0.9}, VectorModel: testModel})
	if err != nil {
		t.Fatal(err)
	}
	if got := hitIDs(hits); len(got) != 2 || got[0] != ids[0] || plansB.last() != "replica" {
		t.Errorf("recall on the other store answered %v (by %s); want both records, %s first, by the replica", got, plansB.last(), ids[0])
	}
}

// TestReplicaThatCannotLoadHoldsNothing: a replica whose first load
// fails (here a stored vector it cannot read) drops its replicas row, so
// it does not hold the change log back for every host.
func TestReplicaThatCannotLoadHoldsNothing(t *testing.T) {
	schema := schemaFor(t, t.Name())
	a := openStoreWith(t, configJSON(schema, "replica", sqlOnly))
	ctx := context.Background()
	ids, err := a.Remember(ctx, realm, []sdk.Record{note("evening", "I usually read before bed")})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.PutVectors(ctx, realm, []sdk.RecordVector{{ID: ids[0], Model: testModel, Vector: []float32{1, 0, 0}}}); err != nil {
		t.Fatal(err)
	}
	db := rawPool(t, schema)
	for _, q := range []string{`ALTER TABLE vectors DROP CONSTRAINT vectors_check`, `UPDATE vectors SET vec = '\x01'::bytea`} {
		if _, err := db.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	b := openStoreWith(t, configJSON(schema, "replica", map[string]any{"poll_interval": "1m"}))
	deadline := time.Now().Add(time.Minute)
	for b.replica.firstLoadFailures.Load() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the replica's first load did not fail within a minute")
		}
		time.Sleep(10 * time.Millisecond)
	}
	// Between attempts it holds no pin (an attempt, woken say by its
	// LISTEN connection, registers again while it runs).
	for deadline := time.Now().Add(time.Minute); b.replica.pin.Load() >= 0; {
		if time.Now().After(deadline) {
			t.Fatalf("a replica that cannot load keeps its pin at %d a minute on", b.replica.pin.Load())
		}
		time.Sleep(10 * time.Millisecond)
	}
	// Its row is dropped at once, or (the drop failing on a loaded
	// machine) expires unrefreshed; refreshed, it would stay.
	for deadline := time.Now().Add(time.Minute); ; {
		var rows int
		if err := db.QueryRow(ctx, "SELECT count(*) FROM replicas WHERE name = $1", b.replica.name).Scan(&rows); err != nil {
			t.Fatal(err)
		}
		if rows == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("a replica that cannot load keeps its replicas row a minute on")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// trimAll trims every change the log holds (retention 0), trying again
// for up to a minute while another process's trim holds the trim lock,
// until a trim removes some.
func trimAll(t *testing.T, db *pgdb) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); ; {
		n, err := trimChanges(context.Background(), db, 0)
		if err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("no trim went through within a minute")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// heldReplica opens two stores on a schema of the test's own: a
// answering from SQL, b a serving replica whose next apply is held at
// its gate, entered once this returns.
func heldReplica(t *testing.T) (schema string, a, b *Store, gate *applyGate) {
	t.Helper()
	schema = schemaFor(t, t.Name())
	a = openStoreWith(t, configJSON(schema, "replica", sqlOnly))
	b = openStoreWith(t, configJSON(schema, "replica", replicaCfg("10s")))
	gate = holdApplies(t, b)
	waitServing(t, b)
	gate.held.Store(true)
	b.replica.poke()
	<-gate.entered
	return schema, a, b, gate
}
