// Package tracetest checks a turntrace.Store against what every store
// owes its readers.
package tracetest

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/memhost/memhost/coordinator"
	"github.com/memhost/memhost/internal/turntrace"
)

// CheckPaging: each trace listing reaches every row a page at a time,
// following its next, none twice and none left out, also when traces are
// written between pages (the cursor is a place, not a count of rows). A
// listing answered only its newest 1000 rows, so a session, a record or
// a realm with more traced within retention kept its older ones out of
// reach.
func CheckPaging(t *testing.T, s turntrace.Store) {
	t.Helper()
	ctx := context.Background()
	now := time.Now().UTC().Truncate(time.Millisecond)
	trace := func(session string, i int) coordinator.TurnTrace {
		return coordinator.TurnTrace{Realm: "paged", Identity: "alice", Session: session, Surface: coordinator.SurfaceTurn,
			Kind: coordinator.TraceInject, At: now.Add(time.Duration(i) * time.Millisecond), Bytes: i + 1,
			Included: []coordinator.TraceRecord{{ID: "hot", Bytes: 10}}, Excluded: []coordinator.TraceRecord{}}
	}
	var batch []coordinator.TurnTrace
	for i := range 7 {
		batch = append(batch, trace("long", i), trace(fmt.Sprint("short", i), i))
	}
	if err := s.Append(ctx, batch); err != nil {
		t.Fatal(err)
	}
	// A listing's rows, page by page, with a trace of the session "late"
	// written after the first page.
	type row struct {
		session string
		bytes   int
	}
	for _, c := range []struct {
		name string
		page func(turntrace.Page) ([]row, int64, error)
		want []row
	}{
		{"a session's turns", func(p turntrace.Page) ([]row, int64, error) {
			got, next, err := s.SessionPage(ctx, "paged", nil, "long", p)
			var rows []row
			for _, g := range got {
				rows = append(rows, row{g.Session, g.Bytes})
			}
			// Each page is oldest first; the listing runs newest first.
			slices.Reverse(rows)
			return rows, next, err
		}, []row{{"long", 7}, {"long", 6}, {"long", 5}, {"long", 4}, {"long", 3}, {"long", 2}, {"long", 1}}},
		{"a record's turns", func(p turntrace.Page) ([]row, int64, error) {
			got, next, err := s.RecordPage(ctx, "paged", []string{"alice"}, "hot", p)
			var rows []row
			for _, g := range got {
				if g.Session == "long" {
					rows = append(rows, row{g.Session, g.Bytes})
				}
			}
			return rows, next, err
		}, []row{{"long", 7}, {"long", 6}, {"long", 5}, {"long", 4}, {"long", 3}, {"long", 2}, {"long", 1}}},
		{"the traced sessions", func(p turntrace.Page) ([]row, int64, error) {
			got, next, err := s.RecentPage(ctx, "paged", nil, p)
			var rows []row
			for _, g := range got {
				if g.Session != "late" {
					rows = append(rows, row{g.Session, g.Turns})
				}
			}
			return rows, next, err
		}, []row{{"short6", 1}, {"long", 7}, {"short5", 1}, {"short4", 1}, {"short3", 1}, {"short2", 1}, {"short1", 1}, {"short0", 1}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var got []row
			page := turntrace.Page{Limit: 3}
			for n := 0; ; n++ {
				rows, next, err := c.page(page)
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, rows...)
				if n == 0 {
					if err := s.Append(ctx, []coordinator.TurnTrace{trace("late", 99)}); err != nil {
						t.Fatal(err)
					}
				}
				if next == 0 {
					break
				}
				if n > 10 {
					t.Fatalf("no end after %d pages: %v", n, got)
				}
				page.After = next
			}
			if !slices.Equal(got, c.want) {
				t.Fatalf("pages = %v, want %v", got, c.want)
			}
		})
	}
}
