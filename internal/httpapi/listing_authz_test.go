package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/memhost/memhost/coordinator"
	"github.com/memhost/memhost/coordinator/coordinatortest"
	"github.com/memhost/memhost/internal/proposal"
	"github.com/memhost/memhost/internal/statedb"
	"github.com/memhost/memhost/internal/turntrace"
	"github.com/memhost/memhost/sdk"
)

// An identity-bound token touches no other identity's own scope, and may
// not export: GET /v1/records (which pages through the archive) and
// GET /v1/scopes must not hand it another identity's records or scope
// names either, whatever the query. A token bound to no identity still
// sees the whole realm.
func TestBoundTokenListsNoOtherIdentity(t *testing.T) {
	tokens := []Token{
		{Name: "app", Secret: "app-secret-0123456789", Realms: []string{"default"}, Role: RoleApplication},
		{Name: "alice-app", Secret: "alice-secret-0123456789", Realms: []string{"default"}, Role: RoleApplication, Identities: []string{"alice"}},
	}
	srv, p := newTestServer(t, Options{Tokens: tokens}, sdk.CapWrite, sdk.CapFetch, sdk.CapArchive)
	p.MustAdd("default",
		sdk.Record{Scope: sdk.IdentityScope("alice"), Kind: sdk.KindFact, Title: "alice kumquat"},
		sdk.Record{Scope: sdk.IdentityScope("bob"), Kind: sdk.KindFact, Title: "bob kumquat secret"},
		sdk.Record{Scope: sdk.RealmScope, Kind: sdk.KindFact, Title: "realm kumquat"},
	)
	cases := []struct {
		name, token, path string
		status            int
		code              string
		// bob is whether bob's scope may appear in the answer.
		bob bool
	}{
		{"unbound lists all", "app-secret-0123456789", "/v1/records?realm=default", 200, "", true},
		{"unbound scope counts", "app-secret-0123456789", "/v1/scopes?realm=default", 200, "", true},
		{"bound lists", "alice-secret-0123456789", "/v1/records?realm=default", 200, "", false},
		{"bound searches", "alice-secret-0123456789", "/v1/records?realm=default&q=kumquat", 200, "", false},
		{"bound filters by tag", "alice-secret-0123456789", "/v1/records?realm=default&status=active", 200, "", false},
		{"bound names bob's scope", "alice-secret-0123456789", "/v1/records?realm=default&scope=identity:bob", 403, "permission_denied", false},
		{"bound searches bob's scope", "alice-secret-0123456789", "/v1/records?realm=default&q=kumquat&scope=identity:bob", 403, "permission_denied", false},
		{"bound scope counts", "alice-secret-0123456789", "/v1/scopes?realm=default", 200, "", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			status, body := get(t, srv.URL+tc.path, tc.token)
			if status != tc.status {
				t.Fatalf("status %d, want %d: %s", status, tc.status, body)
			}
			if tc.code != "" {
				var e errorBody
				if err := json.Unmarshal([]byte(body), &e); err != nil || e.Error.Code != tc.code {
					t.Fatalf("answer %s, want code %s", body, tc.code)
				}
				return
			}
			if got := strings.Contains(body, "identity:bob"); got != tc.bob {
				t.Fatalf("bob's scope in the answer: %v, want %v: %s", got, tc.bob, body)
			}
			if !strings.Contains(body, "identity:alice") || !strings.Contains(body, `"realm"`) {
				t.Fatalf("the token's own and shared records are missing: %s", body)
			}
		})
	}
}

// A request carrying two Authorization headers is ambiguous: a proxy in
// front may have checked one and the server would act on the other. It
// is refused, whichever token comes first, and reaches no handler.
func TestTwoAuthorizationHeadersAreRefused(t *testing.T) {
	tokens := []Token{
		{Name: "app", Secret: "app-secret-0123456789", Realms: []string{"default"}, Role: RoleApplication},
		{Name: "bot", Secret: "bot-secret-0123456789", Realms: []string{"default"}, Role: RoleAgent},
	}
	srv, p := newTestServer(t, Options{Tokens: tokens}, sdk.CapWrite, sdk.CapFetch, sdk.CapForget)
	id := p.MustAdd("default", sdk.Record{Scope: sdk.RealmScope, Kind: sdk.KindFact, Title: "shared"})[0]
	cases := []struct {
		name    string
		secrets []string
		status  int
	}{
		{"one application token", []string{"app-secret-0123456789"}, 204},
		{"agent then application", []string{"bot-secret-0123456789", "app-secret-0123456789"}, 401},
		{"application then agent", []string{"app-secret-0123456789", "bot-secret-0123456789"}, 401},
		{"the same token twice", []string{"app-secret-0123456789", "app-secret-0123456789"}, 401},
	}
	// The refusals first: the one allowed forget removes the record.
	for i := len(cases) - 1; i >= 0; i-- {
		tc := cases[i]
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequest("DELETE", srv.URL+"/v1/records/"+id+"?realm=default", nil)
			for _, s := range tc.secrets {
				req.Header.Add("Authorization", "Bearer "+s)
			}
			before := p.Calls("Forget")
			resp, err := srv.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tc.status, body)
			}
			if tc.status == 401 {
				var e errorBody
				if err := json.Unmarshal(body, &e); err != nil || e.Error.Code != "unauthenticated" {
					t.Fatalf("answer %s, want code unauthenticated", body)
				}
				for _, s := range tc.secrets {
					if strings.Contains(string(body), s) {
						t.Fatalf("the refusal echoes a secret: %s", body)
					}
				}
				if n := p.Calls("Forget") - before; n != 0 {
					t.Fatalf("a refused request reached the provider %d times", n)
				}
			}
		})
	}
}

// traceFake answers one turn of alice and one of bob to every read, less
// those of identities the read leaves out.
type traceFake struct{}

func (traceFake) turns(realm string, identities []string) []coordinator.TurnTrace {
	return slices.DeleteFunc([]coordinator.TurnTrace{{Realm: realm, Identity: "alice", Session: "s1"}, {Realm: realm, Identity: "bob", Session: "s1"}},
		func(t coordinator.TurnTrace) bool {
			return identities != nil && !slices.Contains(identities, t.Identity)
		})
}

func (f traceFake) SessionPage(_ context.Context, realm string, identities []string, _ string, _ turntrace.Page) ([]coordinator.TurnTrace, int64, error) {
	return f.turns(realm, identities), 0, nil
}

func (f traceFake) RecentPage(_ context.Context, realm string, identities []string, _ turntrace.Page) ([]turntrace.SessionSummary, int64, error) {
	var out []turntrace.SessionSummary
	for _, t := range f.turns(realm, identities) {
		out = append(out, turntrace.SessionSummary{Realm: realm, Identity: t.Identity, Session: t.Session})
	}
	return out, 0, nil
}

func (f traceFake) RecordPage(_ context.Context, realm string, identities []string, _ string, _ turntrace.Page) ([]coordinator.TurnTrace, int64, error) {
	return f.turns(realm, identities), 0, nil
}

func (traceFake) Forget(context.Context, string, []string) error { return nil }

// forgetSpy is a trace store that keeps the forgets it was asked.
type forgetSpy struct {
	traceFake
	asks *[]string
}

func (f forgetSpy) Forget(_ context.Context, realm string, ids []string) error {
	for _, id := range ids {
		*f.asks = append(*f.asks, realm+"/"+id)
	}
	return nil
}

// sqlQueue is a proposal queue on a ledger in a fresh state database.
func sqlQueue(t *testing.T) *proposal.Queue {
	t.Helper()
	db, err := statedb.Open(t.Context(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	ledger, err := proposal.NewSQLLedger(t.Context(), db)
	if err != nil {
		t.Fatal(err)
	}
	return &proposal.Queue{Ledger: ledger, MaxPending: 10}
}

// TestForgettingBlanksTheTraces: a record forgotten (DELETE) or a
// proposal rejected has its title blanked in the turn traces too, where
// it would otherwise stay readable for the whole retention.
func TestForgettingBlanksTheTraces(t *testing.T) {
	var asks []string
	srv, p := newTestServer(t, Options{Traces: forgetSpy{asks: &asks}, Proposals: sqlQueue(t)})
	ids := p.MustAdd("default",
		sdk.Record{Scope: sdk.IdentityScope("alice"), Kind: sdk.KindFact, Title: "kumquat allergy", Body: "see the clinic"},
		sdk.Record{Scope: sdk.IdentityScope("alice"), Kind: sdk.KindFact, Title: "proposed", Body: "by an agent", Status: sdk.StatusQuarantined, Tags: []string{proposal.Tag}})
	if status, body := call(t, srv, "DELETE", "/v1/records/"+ids[0], "", nil); status != 204 {
		t.Fatalf("DELETE = %d %+v", status, body)
	}
	if status, body := call(t, srv, "POST", "/v1/records/"+ids[1]+"/reject", "", nil); status != 200 {
		t.Fatalf("reject = %d %+v", status, body)
	}
	if want := []string{"default/" + ids[0], "default/" + ids[1]}; !slices.Equal(asks, want) {
		t.Fatalf("the traces were asked to forget %v, want %v", asks, want)
	}
}

// A turn trace names what was injected for an identity: a bound token
// reads only its own identities' turns, and naming another is 403.
func TestBoundTokenReadsNoOtherIdentitysTrace(t *testing.T) {
	tokens := []Token{
		{Name: "app", Secret: "app-secret-0123456789", Realms: []string{"default"}, Role: RoleApplication},
		{Name: "alice-app", Secret: "alice-secret-0123456789", Realms: []string{"default"}, Role: RoleApplication, Identities: []string{"alice"}},
	}
	srv, _ := newTestServer(t, Options{Tokens: tokens, Traces: traceFake{}})
	const app, alice = "app-secret-0123456789", "alice-secret-0123456789"
	cases := []struct {
		name, token, path string
		status            int
		bob               bool
	}{
		{"unbound session", app, "/v1/sessions/s1/trace?realm=default", 200, true},
		{"unbound recent", app, "/v1/traces?realm=default", 200, true},
		{"unbound record", app, "/v1/records/r1/trace?realm=default", 200, true},
		{"bound session", alice, "/v1/sessions/s1/trace?realm=default", 200, false},
		{"bound session as bob", alice, "/v1/sessions/s1/trace?realm=default&identity=bob", 403, false},
		{"bound recent", alice, "/v1/traces?realm=default", 200, false},
		{"bound record", alice, "/v1/records/r1/trace?realm=default", 200, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			status, body := get(t, srv.URL+tc.path, tc.token)
			if status != tc.status {
				t.Fatalf("status %d, want %d: %s", status, tc.status, body)
			}
			if status == 403 {
				if !strings.Contains(body, `"code":"permission_denied"`) {
					t.Fatalf("answer %s, want code permission_denied", body)
				}
				return
			}
			if got := strings.Contains(body, `"identity":"bob"`); got != tc.bob {
				t.Fatalf("bob's turns in the answer: %v, want %v: %s", got, tc.bob, body)
			}
			if !strings.Contains(body, `"identity":"alice"`) {
				t.Fatalf("alice's turns are missing: %s", body)
			}
		})
	}
}

// scopeBlindRecall ignores the scopes of its recalls, as a buggy provider
// plugin might.
type scopeBlindRecall struct{ *coordinatortest.Provider }

func (p scopeBlindRecall) Recall(ctx context.Context, q sdk.RecallQuery) ([]sdk.Hit, error) {
	q.Scopes = nil
	return p.Provider.Recall(ctx, q)
}

// TestBoundTokenReadsNoForeignTitleInATrace: when a scope-blind provider
// answers bob's record on alice's turn, the host keeps it out of the
// injection, and the trace alice's bound token reads counts it without
// naming it.
func TestBoundTokenReadsNoForeignTitleInATrace(t *testing.T) {
	ctx := context.Background()
	db, err := statedb.Open(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	store, err := turntrace.NewSQLStore(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	rec := turntrace.NewRecorder(store, turntrace.Options{Retention: time.Hour, MaxTurnsPerRealm: 100})
	t.Cleanup(rec.Close)
	p := coordinatortest.NewProvider(sdk.CapWrite, sdk.CapFetch, sdk.CapForget)
	p.MustAdd("default",
		sdk.Record{Scope: sdk.IdentityScope("alice"), Kind: sdk.KindFact, Title: "harbour walk", Body: "alice likes the harbour"},
		sdk.Record{Scope: sdk.IdentityScope("bob"), Kind: sdk.KindFact, Title: "BOB-PRIVATE harbour diagnosis", Body: "bob only"})
	providers := func(string) (sdk.Provider, error) { return scopeBlindRecall{p}, nil }
	coord, err := coordinator.New(testConfig(), coordinator.Options{Providers: coordinator.ProvidersFunc(providers), Trace: rec})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { coord.Close(context.Background()) })
	tokens := []Token{{Name: "alice-app", Secret: "alice-secret-0123456789", Realms: []string{"default"}, Role: RoleApplication, Identities: []string{"alice"}}}
	srv := httptest.NewServer(New(Options{Tokens: tokens, Provider: providers, Coordinator: coord, Traces: rec}).Handler())
	t.Cleanup(srv.Close)
	const alice = "alice-secret-0123456789"
	status, body := call(t, srv, "POST", "/v1/turns/inject", alice, []byte(`{"identity":{"id":"alice"},"session":"s1","content":"harbour"}`))
	if status != 200 {
		t.Fatalf("inject = %d %+v", status, body)
	}
	st, tr := get(t, srv.URL+"/v1/sessions/s1/trace?realm=default", alice)
	if st != 200 {
		t.Fatalf("trace = %d %s", st, tr)
	}
	if strings.Contains(tr, "BOB-PRIVATE") || strings.Contains(tr, "identity:bob") {
		t.Fatalf("alice's bound token reads bob's record in the trace: %s", tr)
	}
	if !strings.Contains(tr, `"out_of_scope":1`) {
		t.Fatalf("the trace does not count the record left out of scope: %s", tr)
	}
}

// TestBoundSearchIsNotCrowdedOut: a bound token's search is ranked among
// the records it may read. Bob's 150 records match "kumquat secret" better
// than alice's one; the provider's first answer (its limit is 100) holds
// only his, which the token may not see, so alice's own record used to be
// missing: an empty answer that also told her that many of his matched.
func TestBoundSearchIsNotCrowdedOut(t *testing.T) {
	tokens := []Token{
		{Name: "alice-app", Secret: "alice-secret-0123456789", Realms: []string{"default"}, Role: RoleApplication, Identities: []string{"alice"}},
	}
	srv, p := newTestServer(t, Options{Tokens: tokens}, sdk.CapWrite, sdk.CapFetch, sdk.CapArchive)
	var recs []sdk.Record
	for i := range 150 {
		recs = append(recs, sdk.Record{Scope: sdk.IdentityScope("bob"), Kind: sdk.KindFact, Title: fmt.Sprintf("bob kumquat secret %d", i)})
	}
	recs = append(recs,
		sdk.Record{Scope: sdk.IdentityScope("alice"), Kind: sdk.KindFact, Title: "alice kumquat"},
		sdk.Record{Scope: sdk.RealmScope, Kind: sdk.KindFact, Title: "shared kumquat"})
	p.MustAdd("default", recs...)
	status, body := get(t, srv.URL+"/v1/records?realm=default&q=kumquat+secret", "alice-secret-0123456789")
	if status != 200 {
		t.Fatalf("status %d: %s", status, body)
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
	slices.Sort(titles)
	if want := []string{"alice kumquat", "shared kumquat"}; !slices.Equal(titles, want) {
		t.Fatalf("bound search found %q, want %q", titles, want)
	}
}

// TestSearchFiltersBeforeItsLimit: from an outside review. A search's
// filters (kind, trust, tag) applied after the provider's best 100 hits,
// so 150 facts matching better than a gotcha made ?q=…&kind=gotcha answer
// nothing. They apply before the limit now, as a bound token's hidden
// scopes do, for bound and unbound tokens alike.
func TestSearchFiltersBeforeItsLimit(t *testing.T) {
	tokens := []Token{
		{Name: "app", Secret: "app-secret-0123456789abc", Realms: []string{"default"}, Role: RoleApplication},
		{Name: "alice-app", Secret: "alice-secret-0123456789", Realms: []string{"default"}, Role: RoleApplication, Identities: []string{"alice"}},
	}
	srv, p := newTestServer(t, Options{Tokens: tokens}, sdk.CapWrite, sdk.CapFetch, sdk.CapArchive)
	var recs []sdk.Record
	for i := range 150 {
		recs = append(recs, sdk.Record{Scope: sdk.RealmScope, Kind: sdk.KindFact, Trust: sdk.TrustApplication, Title: fmt.Sprintf("kumquat grove kumquat %d", i), Tags: []string{"grove"}})
	}
	recs = append(recs,
		sdk.Record{Scope: sdk.RealmScope, Kind: sdk.KindGotcha, Trust: sdk.TrustOperator, Title: "kumquat frost", Body: "cover the trees on cold nights", Tags: []string{"frost"}})
	p.MustAdd("default", recs...)
	for _, c := range []struct{ name, secret, filter string }{
		{"by kind", "app-secret-0123456789abc", "kind=gotcha"},
		{"by trust", "app-secret-0123456789abc", "trust=operator"},
		{"by tag", "app-secret-0123456789abc", "tag=frost"},
		{"by kind, bound", "alice-secret-0123456789", "kind=gotcha"},
	} {
		t.Run(c.name, func(t *testing.T) {
			status, body := get(t, srv.URL+"/v1/records?realm=default&q=kumquat+grove&"+c.filter, c.secret)
			if status != 200 {
				t.Fatalf("status %d: %s", status, body)
			}
			var list struct {
				Records []struct{ Record sdk.Record }
			}
			if err := json.Unmarshal([]byte(body), &list); err != nil {
				t.Fatal(err)
			}
			if len(list.Records) != 1 || list.Records[0].Record.Title != "kumquat frost" {
				t.Fatalf("search %s found %d records, want the gotcha alone: %s", c.filter, len(list.Records), body)
			}
		})
	}
}

// failingForget is a trace store whose Forget fails while down is set.
type failingForget struct {
	traceFake
	down  *bool
	calls *int
}

func (f failingForget) Forget(context.Context, string, []string) error {
	*f.calls++
	if *f.down {
		return errors.New("the trace store is briefly down")
	}
	return nil
}

// TestAFailedTraceBlankingLeavesTheRecord: from an outside review. The
// traces were blanked after the forget, and a failure there asked for the
// DELETE again; but the record was gone by then, and a bound or agent
// token's DELETE of a missing id answers 204 at once, so the title stayed
// readable in the traces. The traces are now blanked first: a failure
// leaves the record as it was, and the DELETE made again does it all.
func TestAFailedTraceBlankingLeavesTheRecord(t *testing.T) {
	tokens := []Token{
		{Name: "alice", Secret: "alice-secret-0123456789", Realms: []string{"default"}, Identities: []string{"alice"}},
	}
	down, calls := true, 0
	srv, p := newTestServer(t, Options{Tokens: tokens, Traces: failingForget{down: &down, calls: &calls}})
	ids := p.MustAdd("default", sdk.Record{Scope: sdk.IdentityScope("alice"), Kind: sdk.KindFact, Title: "kumquat allergy", Body: "see the clinic"})
	const alice = "alice-secret-0123456789"
	if status, body := call(t, srv, "DELETE", "/v1/records/"+ids[0], alice, nil); status < 500 {
		t.Fatalf("DELETE with the trace store down = %d %+v, want a failure", status, body)
	}
	if status, _ := call(t, srv, "GET", "/v1/records/"+ids[0], alice, nil); status != 200 {
		t.Fatalf("after the failed DELETE the record answers %d, want it still there", status)
	}
	down = false
	if status, body := call(t, srv, "DELETE", "/v1/records/"+ids[0], alice, nil); status != 204 {
		t.Fatalf("DELETE again = %d %+v", status, body)
	}
	if status, _ := call(t, srv, "GET", "/v1/records/"+ids[0], alice, nil); status != 404 || calls != 2 {
		t.Fatalf("after the DELETE made again: GET %d, the trace store asked %d times; want the record gone and the traces blanked", status, calls)
	}
}

// TestARefusedRejectionBlanksNothing: the traces are blanked before a
// rejection (so a failure there leaves the proposal for the request made
// again), but only a pending proposal's: rejecting an active record is a
// conflict that changes nothing, its title in the traces included.
func TestARefusedRejectionBlanksNothing(t *testing.T) {
	var asks []string
	srv, p := newTestServer(t, Options{Traces: forgetSpy{asks: &asks}, Proposals: sqlQueue(t)})
	ids := p.MustAdd("default", sdk.Record{Scope: sdk.IdentityScope("alice"), Kind: sdk.KindFact, Title: "kumquat allergy", Body: "see the clinic"})
	if status, body := call(t, srv, "POST", "/v1/records/"+ids[0]+"/reject", "", nil); status != 409 {
		t.Fatalf("reject of an active record = %d %+v, want 409", status, body)
	}
	if len(asks) != 0 {
		t.Fatalf("a refused rejection asked the traces to forget %v", asks)
	}
}

// mobsOf is a mob resolver over a fixed membership.
type mobsOf map[string][]string

func (m mobsOf) ResolveMobs(_ context.Context, id sdk.Identity) ([]string, error) {
	return m[id.ID], nil
}

// A bound token's listings hide what its by-id reads hide: a mob's records
// and proposals none of its identities is in. GET /v1/records (archive
// pages, search and a scope filter), GET /v1/scopes and GET /v1/proposals
// used to hand them over in full while GET /v1/records/{id} answered 404.
func TestBoundTokenListsNoOtherMob(t *testing.T) {
	tokens := []Token{
		{Name: "app", Secret: "app-secret-0123456789", Realms: []string{"default"}, Role: RoleApplication},
		{Name: "alice-app", Secret: "alice-secret-0123456789", Realms: []string{"default"}, Role: RoleApplication, Identities: []string{"alice"}},
		{Name: "runtime", Secret: "runtime-secret-0123456789", Realms: []string{"default"}},
	}
	const app, alice, runtime = "app-secret-0123456789", "alice-secret-0123456789", "runtime-secret-0123456789"
	p := coordinatortest.NewProvider(sdk.CapWrite, sdk.CapFetch, sdk.CapForget, sdk.CapArchive)
	providers := func(string) (sdk.Provider, error) { return p, nil }
	coord, err := coordinator.New(testConfig(), coordinator.Options{Providers: coordinator.ProvidersFunc(providers),
		MobResolver: mobsOf{"alice": {"team-a"}, "bob": {"team-b"}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { coord.Close(t.Context()) })
	srv := newServerOver(t, Options{Tokens: tokens, Coordinator: coord, Provider: providers, Proposals: sqlQueue(t)})
	p.MustAdd("default",
		sdk.Record{Scope: sdk.MobScope("team-a"), Kind: sdk.KindFact, Title: "team-a kumquat"},
		sdk.Record{Scope: sdk.MobScope("team-b"), Kind: sdk.KindFact, Title: "team-b kumquat secret"},
		sdk.Record{Scope: sdk.RealmScope, Kind: sdk.KindFact, Title: "realm kumquat"},
	)
	for _, mob := range []string{"team-a", "team-b"} {
		body := fmt.Sprintf(`{"realm":"default","records":[{"scope":"mob:%s","kind":"fact","title":"%s kumquat proposal"}]}`, mob, mob)
		var answer map[string]any
		if status := doJSON(t, srv, "POST", "/v1/records", runtime, body, &answer); status != 202 {
			t.Fatalf("proposal into %s = %d, want 202", mob, status)
		}
	}
	cases := []struct {
		name, token, path string
		status            int
		teamB             bool // whether mob:team-b may appear in the answer
	}{
		{"unbound lists", app, "/v1/records?realm=default", 200, true},
		{"unbound proposals", app, "/v1/proposals?realm=default", 200, true},
		{"bound lists", alice, "/v1/records?realm=default", 200, false},
		{"bound lists proposals by status", alice, "/v1/records?realm=default&status=quarantined", 200, false},
		{"bound searches", alice, "/v1/records?realm=default&q=kumquat", 200, false},
		{"bound scope counts", alice, "/v1/scopes?realm=default", 200, false},
		{"bound proposals", alice, "/v1/proposals?realm=default", 200, false},
		{"bound names the other mob", alice, "/v1/records?realm=default&scope=mob:team-b", 403, false},
		{"bound searches the other mob", alice, "/v1/records?realm=default&q=kumquat&scope=mob:team-b", 403, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			status, body := get(t, srv.URL+tc.path, tc.token)
			if status != tc.status {
				t.Fatalf("status %d, want %d: %s", status, tc.status, body)
			}
			if status != 200 {
				return
			}
			if got := strings.Contains(body, "team-b"); got != tc.teamB {
				t.Fatalf("mob:team-b in the answer: %v, want %v: %s", got, tc.teamB, body)
			}
			if !strings.Contains(body, "team-a") {
				t.Fatalf("the mob the token's identity is in is missing: %s", body)
			}
			if strings.Contains(tc.path, "proposals") {
				var list struct{ Pending int }
				if err := json.Unmarshal([]byte(body), &list); err != nil || list.Pending != map[bool]int{true: 2, false: 1}[tc.teamB] {
					t.Fatalf("pending %d (%v), want the proposals the token may touch: %s", list.Pending, err, body)
				}
			}
		})
	}
}

// TestBoundListingCursorNamesNoHiddenRecord: GET /v1/records reads at
// most maxListScan records a request. The records a bound token may not
// read used to count toward that bound, and a listing that stopped there
// answered as next the id of the last record it read, often another
// identity's: the token learnt an id it could not read, and, moving
// after= past a guessed id, whether that id exists (the ids of archived
// conversations can be computed from a guessed name). Hidden records now
// neither count nor end a page: the answer and its cursor depend on the
// records the token may read alone.
func TestBoundListingCursorNamesNoHiddenRecord(t *testing.T) {
	tokens := []Token{
		{Name: "app", Secret: "app-secret-0123456789", Realms: []string{"default"}, Role: RoleApplication},
		{Name: "alice-app", Secret: "alice-secret-0123456789", Realms: []string{"default"}, Role: RoleApplication, Identities: []string{"alice"}},
	}
	const app, alice = "app-secret-0123456789", "alice-secret-0123456789"
	srv, p := newTestServer(t, Options{Tokens: tokens}, sdk.CapWrite, sdk.CapFetch, sdk.CapArchive)
	// Alice's records among more of bob's than one listing reads.
	var recs []sdk.Record
	for i := range maxListScan + 2*sdk.MaxExportPage {
		scope, kind := sdk.IdentityScope("bob"), sdk.KindFact
		if i%5000 == 0 {
			scope = sdk.IdentityScope("alice")
		}
		recs = append(recs, sdk.Record{Scope: scope, Kind: kind, Title: fmt.Sprintf("note %d", i), Body: fmt.Sprintf("body %d", i)})
	}
	ids := p.MustAdd("default", recs...)
	hidden := map[string]bool{}
	var aliceIDs []string
	for i, id := range ids {
		if recs[i].Scope == sdk.IdentityScope("bob") {
			hidden[id] = true
		} else {
			aliceIDs = append(aliceIDs, id)
		}
	}
	slices.Sort(aliceIDs)
	type page struct {
		Records []struct{ Record sdk.Record }
		Next    string
	}
	list := func(token, query string) page {
		t.Helper()
		status, body := get(t, srv.URL+"/v1/records?realm=default"+query, token)
		if status != 200 {
			t.Fatalf("GET /v1/records%s = %d %s", query, status, body)
		}
		var out page
		if err := json.Unmarshal([]byte(body), &out); err != nil {
			t.Fatal(err)
		}
		return out
	}
	for _, tc := range []struct {
		query, after string
		want         []string
	}{
		{"&kind=procedure", "", nil},
		{"&kind=procedure", aliceIDs[1], nil},
		{"", "", aliceIDs},
		{"&limit=1", "", aliceIDs},
		{"&limit=2", aliceIDs[1], aliceIDs[2:]},
	} {
		var got []string
		after := tc.after
		for pages := 0; ; pages++ {
			if pages == len(aliceIDs)+1 {
				t.Fatalf("%s: %d pages and the listing goes on", tc.query, pages)
			}
			q := tc.query
			if after != "" {
				q += "&after=" + after
			}
			pg := list(alice, q)
			for _, r := range pg.Records {
				if hidden[r.Record.ID] {
					t.Fatalf("%s: the listing answered bob's record %s", tc.query, r.Record.ID)
				}
				got = append(got, r.Record.ID)
			}
			if hidden[pg.Next] {
				t.Fatalf("%s: the cursor names bob's record %s", tc.query, pg.Next)
			}
			if pg.Next == "" {
				break
			}
			after = pg.Next
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s: listed %v, want %v", tc.query, got, tc.want)
		}
	}
	// The unbound application still pages through everything.
	if pg := list(app, "&kind=procedure"); pg.Next == "" || len(pg.Records) != 0 {
		t.Errorf("the unbound listing of no match = %d records, next %q; want none and a cursor to go on", len(pg.Records), pg.Next)
	}
}

// TestSealedCursorIsCheckedWhole: a bound token's listing cursor is
// sealed by the host's key and bound to its realm; a cursor altered,
// made up, or given by a host of another key is refused as one, naming
// after, rather than read as a place to start.
func TestSealedCursorIsCheckedWhole(t *testing.T) {
	seal := newCursorSeal([]byte("host key one"))
	good := seal.seal("default", "r1")
	if id, err := seal.open("default", good); err != nil || id != "r1" {
		t.Fatalf("open(seal(r1)) = %q, %v", id, err)
	}
	if again := seal.seal("default", "r1"); again == good {
		t.Errorf("two seals of one id are alike (%s): a token could compare cursors", good)
	}
	// One length whatever the id's: a cursor's length would tell an
	// imported record's id length.
	if long := seal.seal("default", strings.Repeat("r", sdk.MaxIDBytes)); len(long) != len(good) {
		t.Errorf("a cursor of a %d-byte id is %d long, of a 2-byte id %d", sdk.MaxIDBytes, len(long), len(good))
	}
	flipped := []byte(good)
	flipped[len(flipped)-2] ^= 1
	for _, c := range []struct{ name, realm, cursor string }{
		{"altered", "default", string(flipped)},
		{"made up", "default", sealedCursorPrefix + "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"},
		{"not base64", "default", sealedCursorPrefix + "!!"},
		{"empty", "default", sealedCursorPrefix},
		{"another realm's", "other", good},
		{"another key's", "default", newCursorSeal([]byte("host key two")).seal("default", "r1")},
	} {
		if id, err := seal.open(c.realm, c.cursor); err == nil {
			t.Errorf("%s cursor opened as %q", c.name, id)
		}
	}
	// Through the API: refused as invalid, naming after.
	tokens := []Token{{Name: "alice-app", Secret: "alice-secret-0123456789", Realms: []string{"default"}, Role: RoleApplication, Identities: []string{"alice"}}}
	srv, _ := newTestServer(t, Options{Tokens: tokens}, sdk.CapWrite, sdk.CapFetch, sdk.CapArchive)
	status, body := get(t, srv.URL+"/v1/records?realm=default&after="+string(flipped), "alice-secret-0123456789")
	if status != http.StatusBadRequest || !strings.Contains(body, `"field":"after"`) {
		t.Errorf("an altered cursor = %d %s, want 400 naming after", status, body)
	}
}

// TestBoundListingEndTellsNothingOfLaterRecords: a bound token's page
// that ends on its own record answered no cursor when that record was
// the realm's last and a cursor when another identity's record came
// after it: listing its newest record (ids grow with time), alice
// learnt whether anyone had written a record since. A bound token's
// page filled to its limit now always answers a cursor, the next page
// telling the end.
func TestBoundListingEndTellsNothingOfLaterRecords(t *testing.T) {
	tokens := []Token{
		{Name: "app", Secret: "app-secret-0123456789", Realms: []string{"default"}, Role: RoleApplication},
		{Name: "alice-app", Secret: "alice-secret-0123456789", Realms: []string{"default"}, Role: RoleApplication, Identities: []string{"alice"}},
	}
	const app, alice = "app-secret-0123456789", "alice-secret-0123456789"
	type page struct {
		Records []struct{ Record sdk.Record }
		Next    string
	}
	for _, c := range []struct {
		name  string
		later []sdk.Record
	}{
		{"alice's record last", nil},
		{"bob's record after it", []sdk.Record{{ID: "r2-bob", Scope: sdk.IdentityScope("bob"), Kind: sdk.KindFact, Title: "later"}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv, p := newTestServer(t, Options{Tokens: tokens}, sdk.CapWrite, sdk.CapFetch, sdk.CapArchive)
			p.MustAdd("default", append([]sdk.Record{{ID: "r1-alice", Scope: sdk.IdentityScope("alice"), Kind: sdk.KindFact, Title: "mine"}}, c.later...)...)
			list := func(token, after string) page {
				t.Helper()
				q := "/v1/records?realm=default&limit=1"
				if after != "" {
					q += "&after=" + url.QueryEscape(after)
				}
				status, body := get(t, srv.URL+q, token)
				var out page
				if status != 200 || json.Unmarshal([]byte(body), &out) != nil {
					t.Fatalf("GET %s = %d %s", q, status, body)
				}
				return out
			}
			first := list(alice, "")
			if len(first.Records) != 1 || first.Records[0].Record.ID != "r1-alice" || first.Next == "" {
				t.Fatalf("alice's first page = %+v; want her record and a cursor, whatever follows it", first)
			}
			if rest := list(alice, first.Next); len(rest.Records) != 0 || rest.Next != "" {
				t.Fatalf("alice's second page = %+v; want the end", rest)
			}
			// The unbound application, which reads every record, is told
			// the end at once.
			if pg := list(app, ""); (pg.Next == "") != (len(c.later) == 0) {
				t.Fatalf("the application's first page = %+v", pg)
			}
		})
	}
}
