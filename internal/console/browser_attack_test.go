package console

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// These tests drive the console in headless chromium (as
// cmd/memhost/console_browser_e2e_test.go does) over a scripted API, so a
// page is judged by what a browser does with it, not by its markup.

// chrome starts a headless chromium that fetches only what the test
// points it at, or skips when there is none (fails in CI).
func chrome(t *testing.T) context.Context {
	t.Helper()
	path := ""
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			path = p
			break
		}
	}
	if path == "" {
		if os.Getenv("CI") == "true" {
			t.Fatal("chromium is not installed, and the console's browser tests need it")
		}
		t.Skip("chromium is not installed; the console's browser tests skip outside CI")
	}
	actx, cancel := chromedp.NewExecAllocator(context.Background(),
		chromedp.ExecPath(path),
		chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("no-default-browser-check", true),
		chromedp.WindowSize(1280, 900),
		chromedp.UserDataDir(t.TempDir()),
	)
	t.Cleanup(cancel)
	ctx, cancel2 := chromedp.NewContext(actx)
	t.Cleanup(cancel2)
	if err := chromedp.Do(ctx, chromedp.Navigate("about:blank")); err != nil {
		t.Fatalf("starting chromium: %v", err)
	}
	ctx, cancel3 := context.WithTimeout(ctx, 2*time.Minute)
	t.Cleanup(cancel3)
	return ctx
}

func steps(t *testing.T, ctx context.Context, s ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	if err := chromedp.Do(ctx, s...); err != nil {
		t.Fatal(err)
	}
}

// js answers a JavaScript expression's string value.
func js(t *testing.T, ctx context.Context, expr string) string {
	t.Helper()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[string](expr))
	if err != nil {
		t.Fatalf("%s: %v", expr, err)
	}
	return v
}

// scriptedAPI answers each API path with the body the test gave it ("{}"
// otherwise) and remembers each request's decoded path and query.
type scriptedAPI struct {
	mu      sync.Mutex
	answers map[string]string
	asked   []*http.Request
}

func (a *scriptedAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	a.mu.Lock()
	a.asked = append(a.asked, r)
	body, ok := a.answers[r.URL.Path]
	a.mu.Unlock()
	if !ok {
		body = "{}"
	}
	w.Header().Set("Content-Type", "application/json")
	w.Write([]byte(body))
}

// last answers the last request for path, or nil.
func (a *scriptedAPI) last(path string) *http.Request {
	a.mu.Lock()
	defer a.mu.Unlock()
	for i := len(a.asked) - 1; i >= 0; i-- {
		if a.asked[i].URL.Path == path {
			return a.asked[i]
		}
	}
	return nil
}

// served runs an open console (no tokens) over api and answers its base URL.
func served(t *testing.T, api http.Handler) string {
	t.Helper()
	c, err := New(Options{API: api, Realms: []string{"default"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	srv := httptest.NewServer(c)
	t.Cleanup(srv.Close)
	return strings.TrimSuffix(srv.URL, "/")
}
