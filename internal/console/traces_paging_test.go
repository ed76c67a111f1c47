package console

import (
	"encoding/json"
	"testing"

	"github.com/chromedp/chromedp"
)

// TestTracesPageLinksItsNextPage: from an outside review. The traces page
// asked the API for one page of sessions and dropped its sealed "next"
// cursor, so an operator never saw a session past the first page. The
// page now links its next page, carrying the cursor verbatim (escaped in
// the link, never markup), and asks the API for that page when followed.
func TestTracesPageLinksItsNextPage(t *testing.T) {
	for _, tc := range []struct{ name, cursor string }{
		{"sealed", "t1.AbC-_9xyz"},
		{"query and markup characters", `a&b=c+d/e?f#g "><b id=injected>x</b>%41`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			next := jsonString(t, tc.cursor)
			api := &scriptedAPI{answers: map[string]string{
				"/v1/traces": `{"next":` + next + `,"sessions":[{"identity":"alice","session":"chat-1","turns":1,"bytes":1}]}`,
			}}
			base := served(t, api)
			ctx := chrome(t)
			steps(t, ctx, chromedp.Navigate(base+"/ui/traces"), chromedp.WaitVisible(chromedp.CSS("table a")))
			if got := js(t, ctx, `String(document.querySelectorAll("#injected").length)`); got != "0" {
				t.Fatalf("the cursor became markup: %s elements named injected", got)
			}
			if got := js(t, ctx, `String([...document.querySelectorAll("a")].filter(a => a.textContent.includes("Next page")).length)`); got != "1" {
				t.Fatalf("the traces page shows %s next-page links over a listing with a next page, want 1", got)
			}
			steps(t, ctx, chromedp.Click(chromedp.Search(`//a[contains(., "Next page")]`)), chromedp.WaitVisible(chromedp.CSS("table a")))
			r := api.last("/v1/traces")
			if r == nil {
				t.Fatal("the next page did not ask the API for traces")
			}
			if got := r.URL.Query(); got.Get("after") != tc.cursor || got.Get("realm") != "default" {
				t.Errorf("the next page asked the API for after=%q realm=%q, want %q and %q", got.Get("after"), got.Get("realm"), tc.cursor, "default")
			}
		})
	}
}

func jsonString(t *testing.T, s string) string {
	t.Helper()
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestTracePageLinksItsNextPage: from an outside review. A session's trace
// page asked the API for 200 turns and dropped the sealed "next" cursor, so
// a session's older turns could not be reached from the console. The page
// now links the next (older) page, carrying the cursor, the session and the
// identity escaped in the link (never markup), and asks the API for that
// page when followed.
func TestTracePageLinksItsNextPage(t *testing.T) {
	for _, tc := range []struct{ name, cursor string }{
		{"sealed", "t1.AbC-_9xyz"},
		{"query and markup characters", `a&b=c+d/e?f#g "><b id=injected>x</b>%41`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			next := jsonString(t, tc.cursor)
			api := &scriptedAPI{answers: map[string]string{
				"/v1/sessions/chat-1/trace": `{"next":` + next + `,"session":"chat-1","turns":[{"kind":"inject","surface":"http","identity":"alice","bytes":1,"budget":10}]}`,
			}}
			base := served(t, api)
			ctx := chrome(t)
			steps(t, ctx, chromedp.Navigate(base+"/ui/trace?session=chat-1&identity=alice"), chromedp.WaitVisible(chromedp.CSS("ol.turns")))
			if got := js(t, ctx, `String(document.querySelectorAll("#injected").length)`); got != "0" {
				t.Fatalf("the cursor became markup: %s elements named injected", got)
			}
			if got := js(t, ctx, `String([...document.querySelectorAll("a")].filter(a => a.textContent.includes("Next page")).length)`); got != "1" {
				t.Fatalf("the trace page shows %s next-page links over a trace with a next page, want 1", got)
			}
			// Followed by navigating to its address, which waits for the page
			// (a click does not wait, and the old page has turns too).
			href := js(t, ctx, `[...document.querySelectorAll("a")].find(a => a.textContent.includes("Next page")).href`)
			steps(t, ctx, chromedp.Navigate(href), chromedp.WaitVisible(chromedp.CSS("ol.turns")))
			r := api.last("/v1/sessions/chat-1/trace")
			if r == nil || !r.URL.Query().Has("after") {
				t.Fatal("the next page did not ask the API for the session's turns after the cursor")
			}
			got := r.URL.Query()
			if got.Get("after") != tc.cursor || got.Get("realm") != "default" || got.Get("identity") != "alice" {
				t.Errorf("the next page asked the API for after=%q realm=%q identity=%q, want %q, %q and %q",
					got.Get("after"), got.Get("realm"), got.Get("identity"), tc.cursor, "default", "alice")
			}
		})
	}
}
