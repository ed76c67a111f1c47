package httpapi

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/memhost/memhost/coordinator/coordinatortest"
	"github.com/memhost/memhost/sdk"
)

// TestImportRefusesInconsistentRecords: an import holding one id twice
// is refused on the second (a provider skips an id it holds, so that
// record was dropped unseen and answered as skipped), and nothing is
// imported. A record updated before it was created is taken as it is: a
// host whose clock stepped back exports such records.
func TestImportRefusesInconsistentRecords(t *testing.T) {
	srv, p := newTestServer(t, Options{}, sdk.CapWrite, sdk.CapFetch, sdk.CapArchive)
	const rec = `{"id":%q,"scope":"realm","kind":"fact","title":%q,"body":"b","trust":"application","status":"active","created_at":"2023-05-27T09:00:00Z","updated_at":%q}`
	one := func(id, title, updated string) string { return fmt.Sprintf(rec, id, title, updated) }
	cases := []struct {
		name, body, field string
	}{
		{"one id twice", `{"records":[` + one("rgood1", "first", "2023-05-27T09:00:00Z") + `,` + one("rgood1", "second", "2023-05-27T09:00:00Z") + `]}`, "records[1].id"},
		// The zero instant, at any offset, stands for no time: sent, it was
		// read as absent (an expiry of year 1 kept as none, an occurrence
		// dropped), where POST /v1/records refuses it.
		{"an expiry of the zero time", `{"records":[` + strings.Replace(one("rz1", "t", "2023-05-27T09:00:00Z"), `"status"`, `"expires_at":"0001-01-01T00:00:00Z","status"`, 1) + `]}`, "records[0].expires_at"},
		{"an occurrence of the zero time elsewhere", `{"records":[` + strings.Replace(one("rz2", "t", "2023-05-27T09:00:00Z"), `"status"`, `"occurred_at":"0001-01-01T05:00:00+05:00","status"`, 1) + `]}`, "records[0].occurred_at"},
		{"an expiry in the zero time's millisecond", `{"records":[` + strings.Replace(one("rz5", "t", "2023-05-27T09:00:00Z"), `"status"`, `"expires_at":"0001-01-01T00:00:00.0005Z","status"`, 1) + `]}`, "records[0].expires_at"},
		{"a creation at the zero time", `{"records":[` + one("rz3", "t", "2023-05-27T09:00:00Z") + `,` + strings.Replace(one("rz4", "u", "2023-05-27T09:00:00Z"), `"2023-05-27T09:00:00Z"`, `"0001-01-01T00:00:00Z"`, 1) + `]}`, "records[1].created_at"},
	}
	for _, tc := range cases {
		status, e := call(t, srv, "POST", "/v1/import", "", []byte(tc.body))
		if status != http.StatusBadRequest || e.Error.Field != tc.field {
			t.Errorf("%s: import = %d %+v, want 400 on %s", tc.name, status, e, tc.field)
		}
	}
	if n := p.Calls(coordinatortest.MethodImport); n != 0 {
		t.Fatalf("refused imports reached the provider %d times", n)
	}
	if status, e := call(t, srv, "POST", "/v1/import", "", []byte(`{"records":[`+one("rgood2", "t", "2023-05-27T08:59:59Z")+`]}`)); status != http.StatusOK {
		t.Errorf("a record updated before it was created = %d %+v, want imported as it is", status, e)
	}
	if status, e := call(t, srv, "POST", "/v1/import", "", []byte(`{"records":[`+one("rgood3", "u", "2023-05-27t09:00:00z")+`]}`)); status != http.StatusOK {
		t.Errorf("a record whose time has a lower-case t and z = %d %+v, want imported", status, e)
	}
}

// TestImportReportsAnIDNamingAnotherRecord: an imported id the store
// gives a record of other content or another scope is not imported and is
// answered apart, in "conflicts" (its index and id), while the rest of the
// batch is imported; the same record again is skipped as already stored.
// Before, the store skipped it and the answer counted it as already
// stored, so a different record was dropped unseen (from an outside
// review).
func TestImportReportsAnIDNamingAnotherRecord(t *testing.T) {
	srv, p := newTestServer(t, Options{}, sdk.CapWrite, sdk.CapFetch, sdk.CapArchive)
	const rec = `{"id":%q,"scope":%q,"kind":"fact","title":%q,"body":%q,"trust":"application","status":"active","created_at":"2023-05-27T09:00:00Z","updated_at":"2023-05-27T09:00:00Z"}`
	one := func(id, scope, body string) string { return fmt.Sprintf(rec, id, scope, "t "+body, body) }
	type answer struct {
		Imported, Skipped int
		Conflicts         []struct {
			Index int
			ID    string
		}
	}
	var got answer
	if status := doJSON(t, srv, "POST", "/v1/import", "", `{"records":[`+one("rbob1", "identity:bob", "bob's")+`]}`, &got); status != http.StatusOK {
		t.Fatalf("first import = %d", status)
	}
	for i, tc := range []struct{ name, clash string }{
		{"other content", one("rbob1", "identity:bob", "mallory's")},
		{"another scope", one("rbob1", "identity:mallory", "bob's")},
	} {
		id := fmt.Sprintf("rnew%d", i)
		body := `{"records":[` + one(id, "identity:"+id, "new "+id) + `,` + tc.clash + `]}`
		got = answer{}
		status := doJSON(t, srv, "POST", "/v1/import", "", body, &got)
		if status != http.StatusOK || got.Imported != 1 || got.Skipped != 0 || len(got.Conflicts) != 1 || got.Conflicts[0].Index != 1 || got.Conflicts[0].ID != "rbob1" {
			t.Errorf("%s: import = %d %+v, want rnew imported and records[1] answered as a conflict", tc.name, status, got)
		}
		if stored, _ := p.Get(t.Context(), "default", []string{id}); len(stored) != 1 {
			t.Errorf("%s: the batch's other record %s was not stored (%+v)", tc.name, id, got)
		}
	}
	if stored, _ := p.Get(t.Context(), "default", []string{"rbob1"}); len(stored) != 1 || stored[0].Body != "bob's" || stored[0].Scope != "identity:bob" {
		t.Errorf("the stored record = %+v, want bob's unchanged", stored)
	}
	got = answer{}
	if status := doJSON(t, srv, "POST", "/v1/import", "", `{"records":[`+one("rbob1", "identity:bob", "bob's")+`]}`, &got); status != http.StatusOK || got.Skipped != 1 || len(got.Conflicts) != 0 {
		t.Errorf("the same record again = %d %+v, want it skipped as already stored", status, got)
	}
}
