package console

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// The console's status line speaks for the console. A link another
// party crafts must not put words in it: "?flash=Tokens were rotated,
// sign in at https://evil.example" on the sign-in page is phishing in
// the host's own voice. Only the console's own actions set it.
func TestFlashIsNotTakenFromTheLink(t *testing.T) {
	const spoof = "Tokens were rotated: sign in at evil.example"
	c, api := newConsole(t, appToken)
	w := serve(c, "GET", "/ui/login?flash="+url.QueryEscape(spoof), nil, nil)
	if strings.Contains(w.Body.String(), spoof) {
		t.Errorf("the sign-in page shows the link's message %q", spoof)
	}
	h, csrf := signedIn(t, c)
	if w := serve(c, "GET", "/ui/proposals?flash="+url.QueryEscape(spoof), nil, h); strings.Contains(w.Body.String(), spoof) {
		t.Errorf("the proposals page shows the link's message %q", spoof)
	}

	// The console's own report of a decision still shows, once.
	w = serve(c, "POST", "/ui/proposals", url.Values{"csrf": {csrf}, "action": {"reject"}, "id": {"r1"}, "realm": {"acme"}}, h)
	if w.Code != http.StatusSeeOther || !strings.Contains(api.asked(), "/v1/records/r1/reject") {
		t.Fatalf("the decision = %d", w.Code)
	}
	next := w.Header().Get("Location")
	if strings.Contains(next, "1 rejected") || strings.Contains(next, "1+rejected") {
		t.Errorf("the decision's report travels in the link %q, where anyone can write one", next)
	}
	if body := serve(c, "GET", next, nil, h).Body.String(); !strings.Contains(body, "1 rejected") {
		t.Errorf("the page after the decision does not report it: %.2000s", body)
	}
	if body := serve(c, "GET", next, nil, h).Body.String(); strings.Contains(body, "1 rejected") {
		t.Errorf("the decision's report shows again on a reload")
	}
}
