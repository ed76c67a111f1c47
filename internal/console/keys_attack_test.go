package console

import (
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
)

// The page's own script must not break on a key: it looks the key up in
// a selector, and a quote or a backslash is a key too.
func TestAnyKeyKeepsThePageScriptWorking(t *testing.T) {
	base := served(t, &scriptedAPI{})
	ctx := chrome(t)
	steps(t, ctx, chromedp.Navigate(base+"/ui/records"), chromedp.WaitVisible(chromedp.ID("q")))
	js(t, ctx, `window.errs = []; window.addEventListener("error", function (e) { window.errs.push(e.message); }); ""`)
	steps(t, ctx, chromedp.KeyEvent(`"`), chromedp.KeyEvent(`\`), chromedp.KeyEvent(kb.Escape), chromedp.KeyEvent("/"))
	if errs := js(t, ctx, `window.errs.join("; ")`); errs != "" {
		t.Errorf("pressing a key threw: %s", errs)
	}
	if focused := js(t, ctx, `document.activeElement.id`); focused != "q" {
		t.Errorf("after those keys / focused %q, want the search box", focused)
	}
}
