package main

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/memhost/memhost/sdk"
)

// retireAnswer is POST /v1/import's answer.
type retireAnswer struct {
	Imported  int `json:"imported"`
	Skipped   int `json:"skipped"`
	Retired   int `json:"retired"`
	Conflicts []struct {
		Index int    `json:"index"`
		ID    string `json:"id"`
	} `json:"conflicts"`
}

// TestImportRetiresStoredRecords: for every first-party provider, a store
// holding record T active (an older export imported, or a first pass of a
// migration) takes a newer export in which T is superseded or tombstoned:
// T moves to that status, reported as retired (neither skipped nor a
// conflict), and leaves recall, so only its successor is recalled; an
// older export imported again after it moves nothing back. Stores skipped
// T as "already stored", leaving it active and recalled beside its
// successor.
func TestImportRetiresStoredRecords(t *testing.T) {
	t.Parallel()
	at := time.Date(2025, 2, 3, 4, 5, 6, 0, time.UTC)
	record := func(id, word string, status sdk.Status, updated time.Time) sdk.Record {
		r := sdk.Record{
			ID: id, Realm: "default", Scope: sdk.IdentityScope("u1"), Kind: sdk.KindFact,
			Title: "Note " + word, Body: "The " + word + " record.", Trust: sdk.TrustApplication,
			Status: status, CreatedAt: at, UpdatedAt: updated,
		}
		r.ContentHash = sdk.ContentHash(r.Title, r.Body)
		return r
	}
	cases := []struct {
		name      string
		old       sdk.Status // as the older export stored it
		newer     sdk.Status // as the newer export says
		successor bool       // the newer export holds an active successor
		want      sdk.Status
		answer    retireAnswer
	}{
		{"superseded", sdk.StatusActive, sdk.StatusSuperseded, true, sdk.StatusSuperseded, retireAnswer{Imported: 1, Retired: 1}},
		{"tombstoned", sdk.StatusActive, sdk.StatusTombstoned, false, sdk.StatusTombstoned, retireAnswer{Retired: 1}},
		{"superseded then tombstoned", sdk.StatusSuperseded, sdk.StatusTombstoned, false, sdk.StatusTombstoned, retireAnswer{Retired: 1}},
		{"never re-activated", sdk.StatusSuperseded, sdk.StatusActive, false, sdk.StatusSuperseded, retireAnswer{Skipped: 1}},
	}
	for _, pc := range providerConfigs {
		t.Run(pc.plugin, func(t *testing.T) {
			t.Parallel()
			m := startMemhost(t, providerDeployment(pc.plugin, pc.config), envFor(t, pc.env)...)
			for i, c := range cases {
				word := fmt.Sprintf("quillwort%c", 'a'+i)
				id := fmt.Sprintf("retire-%02d", i)
				older := record(id, word, c.old, at)
				var first retireAnswer
				if code := m.do("POST", "/v1/import", map[string]any{"records": []sdk.Record{older}}, &first); code != 200 || first.Imported != 1 {
					t.Fatalf("%s: import of the older export = %d %+v", c.name, code, first)
				}
				batch := []sdk.Record{record(id, word, c.newer, at.Add(time.Hour))}
				succID := fmt.Sprintf("retire-succ-%02d", i)
				if c.successor {
					succ := record(succID, word+" successor", sdk.StatusActive, at.Add(time.Hour))
					succ.Body = "The " + word + " record, as it now stands."
					succ.ContentHash = sdk.ContentHash(succ.Title, succ.Body)
					succ.Supersedes = id
					batch = append(batch, succ)
				}
				var got retireAnswer
				if code := m.do("POST", "/v1/import", map[string]any{"records": batch}, &got); code != 200 {
					t.Fatalf("%s: import of the newer export = %d", c.name, code)
				}
				if got.Imported != c.answer.Imported || got.Skipped != c.answer.Skipped || got.Retired != c.answer.Retired || len(got.Conflicts) != 0 {
					t.Errorf("%s: import of the newer export answered %+v; want %+v", c.name, got, c.answer)
				}
				if c.want == sdk.StatusSuperseded || c.want == sdk.StatusTombstoned {
					// An older export again moves nothing back.
					var again retireAnswer
					if code := m.do("POST", "/v1/import", map[string]any{"records": []sdk.Record{older}}, &again); code != 200 || again.Skipped != 1 || again.Retired != 0 {
						t.Errorf("%s: import of the older export again = %d %+v; want it skipped", c.name, code, again)
					}
				}
				var stored struct {
					Status string `json:"status"`
				}
				if code := m.do("GET", "/v1/records/"+id+"?realm=default", nil, &stored); code != 200 || stored.Status != string(c.want) {
					t.Errorf("%s: GET of the record = %d, %q; want %s", c.name, code, stored.Status, c.want)
				}
				var ids []string
				for _, h := range recall(t, m, "u1", word).Hits {
					ids = append(ids, h.Record.ID)
				}
				var want []string
				if c.successor {
					want = []string{succID}
				}
				if !slices.Equal(ids, want) {
					t.Errorf("%s: recall answered %v; want %v", c.name, ids, want)
				}
			}
		})
	}
}
