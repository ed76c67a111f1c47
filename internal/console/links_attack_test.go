package console

import (
	"testing"

	"github.com/chromedp/chromedp"
)

// The console's links carry memory's own values (scopes, identities,
// sessions, cursors) in their query strings. Following one must ask
// the API about exactly that value: a link that encodes it twice sends
// the operator to an empty page (or another identity's), and a "Next
// page" link that loses its query never leaves the first page.
func TestLinksCarryValuesVerbatim(t *testing.T) {
	const (
		scope    = "identity:alice@example.com"
		identity = "alice@example.com"
		session  = "chat 1/2+3"
		cursor   = "r1:2/3+4"
	)
	api := &scriptedAPI{answers: map[string]string{
		"/v1/scopes":  `{"scopes":[{"scope":"` + scope + `","total":1,"by_status":{"active":1}}]}`,
		"/v1/records": `{"next":"` + cursor + `","records":[{"record":{"id":"r1","scope":"` + scope + `","kind":"fact","title":"T","body":"b","trust":"operator","status":"active"}}]}`,
		"/v1/traces":  `{"sessions":[{"identity":"` + identity + `","session":"` + session + `","turns":1,"bytes":1}]}`,
	}}
	base := served(t, api)
	ctx := chrome(t)

	// The realms page links each scope to its records.
	steps(t, ctx, chromedp.Navigate(base+"/ui/"), chromedp.Click(chromedp.CSS(`.card table a`)), chromedp.WaitVisible(chromedp.ID("scope")))
	if got := js(t, ctx, `document.getElementById("scope").value`); got != scope {
		t.Errorf("the scope link opened the records of scope %q, want %q", got, scope)
	}
	r := api.last("/v1/records")
	if r == nil || r.URL.Query().Get("scope") != scope {
		t.Fatalf("the scope link did not ask the API for scope %q", scope)
	}

	// "Next page" keeps the filters and moves the cursor.
	steps(t, ctx, chromedp.Click(chromedp.Search(`//a[contains(., "Next page")]`)), chromedp.WaitVisible(chromedp.ID("scope")))
	r = api.last("/v1/records")
	if got := r.URL.Query(); got.Get("after") != cursor || got.Get("scope") != scope {
		t.Errorf("the next page asked the API for after=%q scope=%q, want %q and %q", got.Get("after"), got.Get("scope"), cursor, scope)
	}

	// A traced session opens its own turns, as its own identity.
	steps(t, ctx, chromedp.Navigate(base+"/ui/traces"), chromedp.Click(chromedp.CSS(`table a`)), chromedp.WaitVisible(chromedp.CSS("h1 code")))
	r = api.last("/v1/sessions/" + session + "/trace")
	if r == nil {
		t.Fatalf("the session link did not ask for session %q's trace", session)
	}
	if got := r.URL.Query().Get("identity"); got != identity {
		t.Errorf("the session link asked for identity %q, want %q", got, identity)
	}
}
