package sessionstore

import (
	"fmt"
	"testing"

	"github.com/memhost/memhost/coordinator"
	"github.com/memhost/memhost/coordinator/coordinatortest"
	"github.com/memhost/memhost/internal/statedb"
	"github.com/memhost/memhost/sdk"
)

// BenchmarkTurn is a whole coordinator turn (recall from an in-process
// provider, render, account) on the in-memory store and on the durable one;
// the difference is the durable store's per-turn overhead. Each turn opens
// a new session that injects, the store's costliest path (a read that
// misses, an insert, the realm bound's count); "existing" turns of one
// session compacted every turn show the steady state; "at-bound" turns
// open new sessions in a realm already at its bound (DefaultPerRealm), so
// each one counts towards the next eviction step.
func BenchmarkTurn(b *testing.B) {
	stores := []struct {
		name string
		open func(b *testing.B) coordinator.SessionStore
	}{
		{"memory", func(*testing.B) coordinator.SessionStore { return coordinator.NewMemoryStore(DefaultPerRealm) }},
		{"durable", func(b *testing.B) coordinator.SessionStore {
			db, err := statedb.Open(ctx, b.TempDir())
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { db.Close() })
			s, err := Open(ctx, db, Options{})
			if err != nil {
				b.Fatal(err)
			}
			return s
		}},
	}
	alice := sdk.Identity{Realm: "default", ID: "alice"}
	for _, st := range stores {
		for _, mode := range []string{"new-session", "existing", "at-bound"} {
			b.Run(st.name+"/"+mode, func(b *testing.B) {
				p := coordinatortest.NewProvider()
				for i := range 50 {
					p.MustAdd("default", sdk.Record{Scope: sdk.RealmScope, Kind: sdk.KindFact, Title: fmt.Sprint("Coffee note ", i), Body: "espresso and coffee facts"})
				}
				c, err := coordinator.New(coordinator.DefaultConfig(), coordinator.Options{
					Providers: coordinator.RealmProviders{"default": p}, Sessions: st.open(b),
				})
				if err != nil {
					b.Fatal(err)
				}
				defer c.Close(ctx)
				i := 0
				if mode == "at-bound" {
					for ; i < DefaultPerRealm; i++ {
						if _, err := c.InjectForTurn(ctx, alice, fmt.Sprint("s-", i), coordinator.TextContent("coffee espresso")); err != nil {
							b.Fatal(err)
						}
					}
				}
				cpu := processCPU()
				defer func() { b.ReportMetric(float64(processCPU()-cpu)/float64(b.N), "cpu-ns/op") }()
				for b.Loop() {
					session := "s"
					if mode != "existing" {
						session = fmt.Sprint("s-", i)
					}
					res, err := c.InjectForTurn(ctx, alice, session, coordinator.TextContent("coffee espresso"))
					if err != nil || res.SkipReason != coordinator.SkipNone {
						b.Fatalf("turn %d: %+v %v", i, res, err)
					}
					if mode == "existing" {
						if err := c.OnSessionCompacted(ctx, alice, session); err != nil {
							b.Fatal(err)
						}
					}
					i++
				}
			})
		}
	}
}
