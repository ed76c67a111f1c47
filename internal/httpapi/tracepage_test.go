package httpapi

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/memhost/memhost/coordinator"
	"github.com/memhost/memhost/internal/statedb"
	"github.com/memhost/memhost/internal/turntrace"
)

// TestTraceListingsPage: from an outside review. The trace listings
// answered their newest 1000 rows at most and no cursor, so a session, a
// record or a realm with more traced within retention (10,000 a realm by
// default) kept its older turns out of an operator's reach. Each answers
// a next now, sealed (the store's place counts every realm's traces), and
// following it reaches every row once; a cursor it did not give is 400.
func TestTraceListingsPage(t *testing.T) {
	db, err := statedb.Open(t.Context(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	store, err := turntrace.NewSQLStore(t.Context(), db)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	var batch []coordinator.TurnTrace
	for i := range 5 {
		batch = append(batch, coordinator.TurnTrace{Realm: "default", Identity: "alice", Session: fmt.Sprint("s", i%2), Kind: coordinator.TraceInject,
			At: now, Bytes: i + 1, Included: []coordinator.TraceRecord{{ID: "hot", Bytes: 10}}, Excluded: []coordinator.TraceRecord{}})
	}
	if err := store.Append(t.Context(), batch); err != nil {
		t.Fatal(err)
	}
	srv, _ := newTestServer(t, Options{Traces: store})
	for _, c := range []struct {
		path, rows string
		want       int
	}{
		{"/v1/sessions/s0/trace?identity=alice", "turns", 3},
		{"/v1/records/hot/trace?realm=default", "turns", 5},
		{"/v1/traces?realm=default", "sessions", 2},
	} {
		t.Run(c.path, func(t *testing.T) {
			seen := map[string]bool{}
			after := ""
			for page := 0; ; page++ {
				status, body := get(t, srv.URL+c.path+"&limit=1&after="+url.QueryEscape(after), "")
				if status != 200 {
					t.Fatalf("page %d = %d %s", page, status, body)
				}
				var answer map[string]json.RawMessage
				if err := json.Unmarshal([]byte(body), &answer); err != nil {
					t.Fatal(err)
				}
				var rows []map[string]any
				if err := json.Unmarshal(answer[c.rows], &rows); err != nil || len(rows) > 1 {
					t.Fatalf("page %d: %s", page, body)
				}
				for _, r := range rows {
					key := fmt.Sprint(r["session"], r["bytes"])
					if seen[key] {
						t.Fatalf("page %d repeats %s", page, key)
					}
					seen[key] = true
				}
				if err := json.Unmarshal(answer["next"], &after); err != nil {
					t.Fatalf("page %d has no next: %s", page, body)
				}
				if after == "" {
					break
				}
				if !strings.HasPrefix(after, sealedCursorPrefix) || page > 10 {
					t.Fatalf("page %d next %q", page, after)
				}
			}
			if len(seen) != c.want {
				t.Fatalf("the pages hold %d rows, want %d: %v", len(seen), c.want, seen)
			}
			for _, bad := range []string{"3", "~" + strings.Repeat("A", 40)} {
				var e errorBody
				status, body := get(t, srv.URL+c.path+"&after="+url.QueryEscape(bad), "")
				if json.Unmarshal([]byte(body), &e); status != 400 || e.Error.Field != "after" {
					t.Errorf("after=%s = %d %s, want 400 naming after", bad, status, body)
				}
			}
		})
	}
}
