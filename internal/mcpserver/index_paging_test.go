package mcpserver

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/memhost/memhost/coordinator/coordinatortest"
	"github.com/memhost/memhost/sdk"
)

// TestIndexPagesHoldWhileTheAgentWrites: from an outside review.
// memory_index's cursor was an offset into the rows, newest first, so a
// record remembered between two pages pushed the last row of the first
// page onto the second (listed twice), and one forgotten from the first
// page pulled a row past the cursor (never listed). The cursor is now a
// place in the order (updated time, then id), ties included.
func TestIndexPagesHoldWhileTheAgentWrites(t *testing.T) {
	base := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	cases := []struct {
		name   string
		change func(p *coordinatortest.Provider, ids []string)
		want   string // titles of the pages after the first
	}{
		{"nothing changes", func(*coordinatortest.Provider, []string) {}, "[r3 r2 r1 r0]"},
		{"a record is remembered", func(p *coordinatortest.Provider, _ []string) {
			p.MustAdd("default", sdk.Record{Scope: sdk.IdentityScope("alice"), Kind: sdk.KindFact, Title: "new", Body: "new body", UpdatedAt: base.Add(time.Hour)})
		}, "[r3 r2 r1 r0]"},
		{"the first page's first is forgotten", func(p *coordinatortest.Provider, ids []string) { forget(t, p, ids[5]) }, "[r3 r2 r1 r0]"},
		{"the cursor's own row is forgotten", func(p *coordinatortest.Provider, ids []string) { forget(t, p, ids[4]) }, "[r3 r2 r1 r0]"},
		{"the second page's first is forgotten", func(p *coordinatortest.Provider, ids []string) { forget(t, p, ids[3]) }, "[r2 r1 r0]"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			provider := coordinatortest.NewProvider(coordinatortest.AllCapabilities...)
			ids := make([]string, 6)
			for i := 5; i >= 0; i-- {
				// r4 and r3 share an updated time: the cut falls between them.
				at := base.Add(time.Duration(i-min(i/4, 1)) * time.Minute)
				ids[i] = provider.MustAdd("default", sdk.Record{ID: fmt.Sprintf("r%d", i), Scope: sdk.IdentityScope("alice"), Kind: sdk.KindFact,
					Title: fmt.Sprintf("r%d", i), Body: fmt.Sprintf("body %d", i), UpdatedAt: at})[0]
			}
			tl := tools{aliceOptions(t, provider)}
			ctx := context.Background()
			_, first, err := tl.index(ctx, nil, IndexInput{Limit: 2})
			if err != nil || len(first.Rows) != 2 || first.NextCursor == "" {
				t.Fatalf("first page: %+v, %v", first, err)
			}
			// r5 first, then of the tie r4 and r3 the greater id.
			if want := []string{"r5", "r4"}; first.Rows[0].Title != want[0] || first.Rows[1].Title != want[1] {
				t.Fatalf("first page %v %v, want %v", first.Rows[0].Title, first.Rows[1].Title, want)
			}
			c.change(provider, ids)
			var seen []string
			for page, cursor := 0, first.NextCursor; cursor != "" && page < 5; page++ {
				_, out, err := tl.index(ctx, nil, IndexInput{Limit: 2, Cursor: cursor})
				if err != nil {
					t.Fatal(err)
				}
				for _, r := range out.Rows {
					seen = append(seen, r.Title)
				}
				cursor = out.NextCursor
			}
			if fmt.Sprint(seen) != c.want {
				t.Errorf("the pages after the first listed %v, want %s", seen, c.want)
			}
		})
	}
}

func forget(t *testing.T, p *coordinatortest.Provider, id string) {
	t.Helper()
	if n, err := p.Forget(context.Background(), "default", []string{id}); err != nil || n != 1 {
		t.Fatalf("forget %s: %d, %v", id, n, err)
	}
}

// TestIndexRefusesForeignCursors: a cursor the index never gave is a
// tool error naming the cursor, whatever its shape.
func TestIndexRefusesForeignCursors(t *testing.T) {
	tl := tools{aliceOptions(t, coordinatortest.NewProvider(coordinatortest.AllCapabilities...))}
	for _, bad := range []string{"2", "-1", "1.5.x", "1.000000000", "1.00000000.r1", "01.000000000.r1", "1.000000000.a/b", "99999999999999999999.000000000.r1", "x.000000000.r1"} {
		if _, _, err := tl.index(context.Background(), nil, IndexInput{Cursor: bad}); err == nil || !strings.HasPrefix(err.Error(), "cursor:") {
			t.Errorf("cursor %q: %v, want a refusal naming the cursor", bad, err)
		}
	}
}
