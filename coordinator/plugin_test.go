package coordinator

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/memhost/memhost/coordinator/coordinatortest"
	"github.com/memhost/memhost/sdk"
	"github.com/memhost/memhost/sdk/host"
)

// servePlugin serves p through go-plugin's in-process test mode (real
// gRPC) and answers the host-side provider client.
func servePlugin(tb testing.TB, p *coordinatortest.Provider) sdk.Provider {
	tb.Helper()
	conn, err := host.ServeInProcess(context.Background(), p, nil)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(conn.Close)
	client, err := conn.Provider()
	if err != nil {
		tb.Fatal(err)
	}
	return client
}

func TestThroughThePlugin(t *testing.T) {
	if testing.Short() {
		t.Skip("serves a plugin")
	}
	backend := coordinatortest.NewProvider(coordinatortest.AllCapabilities...)
	backend.SetNow(func() time.Time { return testNow })
	ids := backend.MustAdd("default", rec("Coffee", "flat white"), rec("Coffee beans", "ethiopian"))
	client := servePlugin(t, backend)
	if !sdk.Supports(client, sdk.CapLedger) || !sdk.Supports(client, sdk.CapUsage) {
		t.Fatalf("client capabilities %v", sdk.CapabilitiesOf(client))
	}
	f := newFixture(t, func(_ *Config, o *Options) { o.Providers = RealmProviders{"default": client} })
	res := f.turn(alice, "s", "coffee")
	if !slices.Equal(res.RecordIDs, ids) {
		t.Fatalf("injected %v, want %v", res.RecordIDs, ids)
	}
	if n := backend.Calls(coordinatortest.MethodRecall); n != 1 {
		t.Fatalf("%d recall RPCs for one turn", n)
	}
	if q := backend.RecallQueries()[0]; q.Limit != 10 || !slices.Equal(q.Scopes, []sdk.Scope{"identity:alice", "realm"}) {
		t.Fatalf("recall over the wire: %+v", q)
	}
	second := f.turn(alice, "s", "coffee")
	if second.SkipReason != SkipNoRecords {
		t.Fatalf("second turn %q", second.SkipReason)
	}
	if q := backend.RecallQueries()[1]; !slices.Equal(q.ExcludeIDs, ids) {
		t.Fatalf("suppressed ids over the wire: %v", q.ExcludeIDs)
	}
	if err := f.c.Flush(closeCtx(t)); err != nil {
		t.Fatal(err)
	}
	if len(backend.Ledger()) != 2 || backend.UseCount(ids[0]) != 1 {
		t.Fatalf("ledger %v, use count %d", backend.Ledger(), backend.UseCount(ids[0]))
	}
	// Errors cross the boundary typed.
	backend.SetHook(coordinatortest.MethodRecall, failWith(sdk.ErrUnavailable))
	f.c.cfg.RecallFailurePolicy = FailureFail
	_, err := f.c.InjectForTurn(context.Background(), alice, "", TextContent("coffee"))
	if sdk.CodeOf(err) != sdk.CodeUnavailable {
		t.Fatalf("error through the plugin: %v (%s)", err, sdk.CodeOf(err))
	}
}

// fixedProvider answers the same hits at no cost, so a benchmark over it
// measures the coordinator's own work.
type fixedProvider struct{ hits []sdk.Hit }

func (p fixedProvider) Recall(context.Context, sdk.RecallQuery) ([]sdk.Hit, error) {
	return slices.Clone(p.hits), nil
}

func benchRecords(n int) []sdk.Record {
	recs := make([]sdk.Record, n)
	for i := range recs {
		recs[i] = sdk.Record{
			ID: fmt.Sprintf("r%04d", i), Realm: "default", Scope: sdk.IdentityScope("alice"), Kind: sdk.KindFact,
			Title: fmt.Sprintf("Deploy note %d", i), Trust: sdk.TrustAgentObserved, Status: sdk.StatusActive,
			Body:      strings.Repeat("The staging deploy needs the migration flag & a warm cache. ", 5), // ~300 B
			UpdatedAt: testNow.Add(-time.Duration(i) * time.Hour),
		}
	}
	return recs
}

func benchCoordinator(b *testing.B, p sdk.Provider) *Coordinator {
	b.Helper()
	c, err := New(DefaultConfig(), Options{Providers: RealmProviders{"default": p}, Now: func() time.Time { return testNow }})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = c.Close(context.Background()) })
	return c
}

// BenchmarkInjectForTurn reports one turn's cost: "own-work" over a
// provider that costs nothing (the coordinator alone), "in-process" over
// the in-memory provider holding 1,000 records, and "plugin" over the same
// provider behind go-plugin's gRPC.
func BenchmarkInjectForTurn(b *testing.B) {
	content := TextContent("how do I run the staging deploy with the migration flag?")
	ctx := context.Background()
	hits := make([]sdk.Hit, 0, 16)
	for _, r := range benchRecords(16) {
		hits = append(hits, sdk.Hit{Record: r, Score: 1})
	}
	run := func(b *testing.B, c *Coordinator, sessions bool) {
		b.ReportAllocs()
		i := 0
		cpu := processCPU()
		defer func() { b.ReportMetric(float64(processCPU()-cpu)/float64(b.N), "cpu-ns/op") }()
		for b.Loop() {
			session := ""
			if sessions {
				session = fmt.Sprintf("s%d", i) // a new session each turn: LRU evictions included
				i++
			}
			res, err := c.InjectForTurn(ctx, alice, session, content)
			if err != nil || res.SkipReason != SkipNone && res.SkipReason != SkipBudgetExhausted {
				b.Fatalf("%+v %v", res.SkipReason, err)
			}
		}
	}
	b.Run("own-work", func(b *testing.B) { run(b, benchCoordinator(b, fixedProvider{hits}), false) })
	b.Run("own-work-sessions", func(b *testing.B) { run(b, benchCoordinator(b, fixedProvider{hits}), true) })
	mem := func() *coordinatortest.Provider {
		p := coordinatortest.NewProvider(coordinatortest.AllCapabilities...)
		p.SetNow(func() time.Time { return testNow })
		recs := benchRecords(1000)
		for i := range recs {
			recs[i].ID = ""
			if i%4 != 0 {
				recs[i].Body = fmt.Sprintf("unrelated note %d about lunch and the weather", i)
			}
		}
		p.MustAdd("default", recs...)
		return p
	}
	b.Run("in-process", func(b *testing.B) { run(b, benchCoordinator(b, mem()), false) })
	b.Run("plugin", func(b *testing.B) { run(b, benchCoordinator(b, servePlugin(b, mem())), false) })
}

// BenchmarkRender measures rendering a full 20 KiB envelope.
func BenchmarkRender(b *testing.B) {
	e := mustEnvelope(b, nil)
	recs := benchRecords(8)
	for i := range recs {
		recs[i].Body = strings.Repeat("x<y & z ", 300)
	}
	b.ReportAllocs()
	cpu := processCPU()
	defer func() { b.ReportMetric(float64(processCPU()-cpu)/float64(b.N), "cpu-ns/op") }()
	for b.Loop() {
		e.Render(RenderInput{Identity: alice, Nonce: testNonce, Records: recs, MaxBytes: 20 << 10, MaxEntries: 8, Now: testNow})
	}
}
