package coordinator

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/memhost/memhost/coordinator/coordinatortest"
	"github.com/memhost/memhost/sdk"
)

// TestBuildInjectionKeepsItsBudget: the protocol, the header and the
// index together must fit build_budget_bytes, which the config accepts
// from just above the index's 8 KiB; a long identity makes the header
// longer. The index shrinks to what is left rather than the block
// passing its budget.
func TestBuildInjectionKeepsItsBudget(t *testing.T) {
	long := sdk.Identity{Realm: "default", ID: strings.Repeat("x", sdk.MaxIDBytes)}
	for _, tc := range []struct {
		name   string
		id     sdk.Identity
		budget int
	}{
		{"smallest budget the config accepts", alice, 8<<10 + 1},
		{"smallest budget, longest identity", long, 8<<10 + 1},
		{"budget just above index and protocol", long, 9000},
		{"default budget", long, 20 << 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := coordinatortest.NewProvider(coordinatortest.AllCapabilities...)
			p.SetNow(func() time.Time { return testNow })
			f := newFixture(t, func(c *Config, o *Options) {
				o.Providers = RealmProviders{"default": p}
				c.Budgets.BuildBytes = tc.budget
			})
			f.p = p
			var recs []sdk.Record
			for i := range 40 {
				r := scoped(tc.id.Scope(), fmt.Sprintf("tea note %02d %s", i, strings.Repeat("word ", 20)), "tea body")
				r.Description = strings.Repeat("describing ", 10)
				recs = append(recs, r)
			}
			for i := range 40 {
				recs = append(recs, scoped("realm", fmt.Sprintf("realm note %02d %s", i, strings.Repeat("word ", 20)), "realm body"))
			}
			f.add(recs...)
			for _, query := range []string{"", "tea"} {
				res, err := f.c.AssembleBuildInjection(context.Background(), tc.id, query, nil)
				if err != nil {
					t.Fatal(err)
				}
				if len(res.Injection) > tc.budget {
					t.Fatalf("query %q: build of %d bytes, over its budget of %d", query, len(res.Injection), tc.budget)
				}
				if !strings.Contains(res.Injection, indexHeading) {
					t.Fatalf("query %q: no index although the budget leaves room for one:\n%.400s", query, res.Injection)
				}
			}
		})
	}
}

// TestObservationKeepsRecordBytes: record_bytes bounds one observation,
// tags included, whatever the record's title and labels hold. A title of
// quotes escapes to six times its bytes; with a record budget near the
// body budget the tags alone outgrow it, and such a record is skipped
// like one that does not fit the turn.
func TestObservationKeepsRecordBytes(t *testing.T) {
	for _, tc := range []struct {
		name        string
		title, body string
	}{
		{"quotes in the title", strings.Repeat(`"`, 160), "short body"},
		{"ampersands in the title", strings.Repeat("&", 160), strings.Repeat("é", 400)},
		{"plain record", "Plain", strings.Repeat("ü", 600)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, func(c *Config, _ *Options) {
				c.Budgets.RecordBytes, c.Budgets.BodyBytes, c.Budgets.TitleBytes = 700, 600, 160
			})
			ids := f.add(rec(tc.title+" coffee", tc.body), rec("Coffee small", "espresso"))
			res := f.turn(alice, "", "coffee")
			recs, err := f.p.Get(context.Background(), "default", ids)
			if err != nil {
				t.Fatal(err)
			}
			out := f.c.env.Render(RenderInput{Identity: alice, Records: recs, MaxBytes: 20 << 10, Now: testNow})
			for i, n := range out.RecordBytes {
				if n > 700 {
					t.Fatalf("observation of %s is %d bytes, over record_bytes 700:\n%s", out.IDs[i], n, out.Text)
				}
			}
			if res.SkipReason != SkipNone {
				t.Fatalf("turn skipped (%s): the small record fits", res.SkipReason)
			}
		})
	}
}
