package httpapi

import (
	"encoding/json"
	"testing"

	"github.com/memhost/memhost/sdk"
)

// TestSearchRefusesAStatusItCannotHonour: from an outside review. A
// search (GET /v1/records?q=) is the provider's recall, which holds
// active records only, so ?q=…&status=superseded answered an empty page
// as if nothing matched. A status other than active is now refused with
// a 400 naming status; the listing without q still filters by any status.
func TestSearchRefusesAStatusItCannotHonour(t *testing.T) {
	srv, p := newTestServer(t, Options{}, sdk.CapWrite, sdk.CapFetch, sdk.CapArchive)
	p.MustAdd("default",
		sdk.Record{Scope: sdk.RealmScope, Kind: sdk.KindFact, Title: "kumquat grove", Body: "planted in spring"},
		sdk.Record{Scope: sdk.RealmScope, Kind: sdk.KindFact, Title: "kumquat orchard", Body: "sold last year", Status: sdk.StatusSuperseded})
	for _, c := range []struct {
		name, query string
		status      int
		code        string
		titles      []string
	}{
		{"a search of active records", "q=kumquat&status=active", 200, "", []string{"kumquat grove"}},
		{"a search with no status", "q=kumquat", 200, "", []string{"kumquat grove"}},
		{"a search of superseded records", "q=kumquat&status=superseded", 400, "invalid_argument", nil},
		{"a search of quarantined records", "q=kumquat&status=quarantined", 400, "invalid_argument", nil},
		{"a search of tombstoned records", "q=kumquat&status=tombstoned", 400, "invalid_argument", nil},
		{"a listing of superseded records", "status=superseded", 200, "", []string{"kumquat orchard"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			status, body := get(t, srv.URL+"/v1/records?realm=default&"+c.query, "")
			if status != c.status {
				t.Fatalf("= %d %s, want %d", status, body, c.status)
			}
			if c.code != "" {
				var e errorBody
				if err := json.Unmarshal([]byte(body), &e); err != nil {
					t.Fatal(err)
				}
				if e.Error.Code != c.code || e.Error.Field != "status" || e.Error.Message == "" {
					t.Fatalf("= %+v, want code %q naming status", e.Error, c.code)
				}
				return
			}
			var list struct {
				Records []struct{ Record sdk.Record }
			}
			if err := json.Unmarshal([]byte(body), &list); err != nil {
				t.Fatal(err)
			}
			var titles []string
			for _, r := range list.Records {
				titles = append(titles, r.Record.Title)
			}
			if len(titles) != len(c.titles) || (len(titles) > 0 && titles[0] != c.titles[0]) {
				t.Fatalf("found %q, want %q", titles, c.titles)
			}
		})
	}
}
