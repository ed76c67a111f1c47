package console

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// searchingAPI answers the record listing as the API does: a search (q)
// with a status other than active is refused with 400 naming status.
type searchingAPI struct{ scriptedAPI }

func (a *searchingAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	if r.URL.Path == "/v1/records" && q.Get("q") != "" && q.Get("status") != "" && q.Get("status") != "active" {
		a.mu.Lock()
		a.asked = append(a.asked, r)
		a.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		w.Write([]byte(`{"error":{"code":"invalid_argument","message":"status: a search (q) finds active records only; leave status out, or leave q out to list ` + q.Get("status") + ` records"}}`))
		return
	}
	a.scriptedAPI.ServeHTTP(w, r)
}

// TestRecordsSearchIgnoresTheStatusFilter: from an outside review. The
// records page offers every status beside the search box, and the API
// refuses a search with a status other than active, so picking one while
// browsing and then searching answered an error page. A search now leaves
// the status out and the page says it finds active records only.
func TestRecordsSearchIgnoresTheStatusFilter(t *testing.T) {
	for _, status := range []string{"", "active", "superseded", "quarantined", "tombstoned"} {
		t.Run("status "+status, func(t *testing.T) {
			api := &searchingAPI{scriptedAPI{answers: map[string]string{
				"/v1/records": `{"records":[{"record":{"id":"r1","scope":"realm","kind":"fact","title":"Coffee","status":"active","trust":"application"},"score":0.5}]}`,
			}}}
			base := served(t, api)
			ctx := chrome(t)
			steps(t, ctx, chromedp.Navigate(base+"/ui/records?status="+url.QueryEscape(status)), chromedp.WaitVisible(chromedp.ID("q")))
			if got := js(t, ctx, `String(document.querySelectorAll("#status-note").length)`); got != "0" {
				t.Errorf("browsing without a search shows %s search notes, want 0", got)
			}
			// Type a search and submit the form with the status still picked,
			// going to the address the form submits (a click does not wait).
			steps(t, ctx, chromedp.SendKeys(chromedp.ID("q"), "coffee"))
			query := js(t, ctx, `new URLSearchParams(new FormData(document.querySelector("form.filters"))).toString()`)
			if !strings.Contains(query, "status="+url.QueryEscape(status)) {
				t.Fatalf("the form submits %q, want the picked status %q in it", query, status)
			}
			steps(t, ctx, chromedp.Navigate(base+"/ui/records?"+query), chromedp.WaitVisible(chromedp.ID("q")))
			if got := js(t, ctx, `(document.querySelector("p.error") || {}).textContent || ""`); got != "" {
				t.Fatalf("a search with status %q shows the error %q", status, got)
			}
			if got := js(t, ctx, `String(document.querySelectorAll("table.records tbody tr").length)`); got != "1" {
				t.Errorf("a search with status %q lists %s records, want the 1 the API found", status, got)
			}
			note := js(t, ctx, `(document.querySelector("#status-note") || {}).textContent || ""`)
			if !strings.Contains(note, "active records only") {
				t.Errorf("a search shows the status note %q, want it to say a search finds active records only", note)
			}
			if got := js(t, ctx, `document.querySelector("#status").getAttribute("aria-describedby") || ""`); got != "status-note" {
				t.Errorf("the status choice is described by %q during a search, want the note", got)
			}
			r := api.last("/v1/records")
			if r == nil || r.URL.Query().Get("q") != "coffee" {
				t.Fatal("the search did not ask the API for records matching it")
			}
			if got := r.URL.Query(); got.Has("status") {
				t.Errorf("the search asked the API with status %q, want no status", got.Get("status"))
			}
		})
	}
}
