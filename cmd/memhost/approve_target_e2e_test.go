package main

import (
	"fmt"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// TestApprovalNamesTheTargetItSaw: from an outside review. Approval found
// the record to supersede when it ran, not when the reviewer looked: a
// reviewer shown a proposal replacing R approved it after the application
// had deleted R and written R', and R' was superseded by the proposal, the
// newer edit lost without a word. The approval now names the target the
// reviewer saw (?target=, the CLI's --target, the console's form), and a
// target that changed since is a 409 target_changed that changes nothing.
func TestApprovalNamesTheTargetItSaw(t *testing.T) {
	t.Parallel()
	m, r, p := doorCodeProposal(t)
	var page proposalList
	if m.do("GET", "/v1/proposals", nil, &page); len(page.Proposals) != 1 || page.Proposals[0].Target != r {
		t.Fatalf("listing = %+v, want target %s", page, r)
	}
	// The application replaces the record meanwhile.
	if code := m.do("DELETE", "/v1/records/"+r, nil, nil); code != 204 {
		t.Fatalf("DELETE = %d", code)
	}
	r2 := remember(t, m, door("The door code is 3333."))[0]

	var e apiError
	code := m.do("POST", "/v1/records/"+p+"/approve?target="+r, nil, &e)
	if code != 409 || e.Error.Code != "target_changed" || !strings.Contains(e.Error.Message, r2) {
		t.Fatalf("approval naming the old target = %d %+v, want 409 target_changed naming %s", code, e, r2)
	}
	var rec struct{ Status, Body string }
	if m.do("GET", "/v1/records/"+r2, nil, &rec); rec.Status != "active" || !strings.Contains(rec.Body, "3333") {
		t.Errorf("the newer record after the refused approval = %+v, want active with 3333", rec)
	}
	if m.do("GET", "/v1/proposals", nil, &page); len(page.Proposals) != 1 || page.Proposals[0].ID != p || page.Proposals[0].Target != r2 {
		t.Fatalf("listing after the refused approval = %+v, want %s pending over %s", page, p, r2)
	}
	// "I saw no target" is a precondition too.
	e = apiError{}
	if code := m.do("POST", "/v1/records/"+p+"/approve?target=", nil, &e); code != 409 || e.Error.Code != "target_changed" || !strings.Contains(e.Error.Message, r2) {
		t.Errorf("approval expecting no target = %d %+v, want 409 naming %s", code, e, r2)
	}
	// The CLI sends what its reviewer names.
	env := []string{"MEMHOST_TOKEN=" + appSecret}
	addr := strings.TrimPrefix(m.base, "http://")
	if _, err := runCLI(t, env, "proposals", "approve", "--addr", addr, "--target", r, p); err == nil || !strings.Contains(err.Error(), "target_changed") {
		t.Errorf("proposals approve --target %s: %v, want target_changed", r, err)
	}
	if _, err := runCLI(t, env, "proposals", "approve", "--addr", addr, "--target", r2, p, r); err == nil || !strings.Contains(err.Error(), "one proposal") {
		t.Errorf("proposals approve --target with two ids: %v, want a refusal", err)
	}
	out, err := runCLI(t, env, "proposals", "approve", "--addr", addr, "--target", r2, p)
	if err != nil || !strings.Contains(out, p+" approved as ") {
		t.Fatalf("proposals approve --target %s = %q, %v", r2, out, err)
	}
	newID := strings.TrimSpace(out[strings.LastIndex(out, " ")+1:])
	var sup struct{ Status, Supersedes, Body string }
	if m.do("GET", "/v1/records/"+r2, nil, &rec); rec.Status != "superseded" {
		t.Errorf("the target the reviewer named = %+v, want superseded", rec)
	}
	if m.do("GET", "/v1/records/"+newID, nil, &sup); sup.Status != "active" || sup.Supersedes != r2 || !strings.Contains(sup.Body, "2222") {
		t.Errorf("approved record = %+v, want active with 2222, superseding %s", sup, r2)
	}
}

// doorCodeProposal starts memhost with roles, writes the record r ("Door
// code", 1111) as the application and has an agent propose p over it
// (2222).
func doorCodeProposal(t *testing.T) (m *instance, r, p string) {
	t.Helper()
	m = startMemhost(t, reviewConfig, reviewEnv...)
	m.token = appSecret
	r = remember(t, m, door("The door code is 1111."))[0]
	_, _, ids := propose(t, m, agentSecret, "default", "Door code", "The door code is 2222.")
	if len(ids) != 1 {
		t.Fatal("no proposal id")
	}
	return m, r, ids[0]
}

// door is a realm fact titled "Door code".
func door(body string) map[string]any {
	return map[string]any{"scope": "realm", "kind": "fact", "title": "Door code", "body": body}
}

// TestConsoleApprovesTheTargetItShowed: the console's Approve sends the
// record its card showed the proposal replacing. A record written in
// that one's place after the page loaded is not replaced: the flash says
// so and names it; the reloaded page shows it, and approving from there
// (selected, as a batch) replaces it.
func TestConsoleApprovesTheTargetItShowed(t *testing.T) {
	t.Parallel()
	m, r, p := doorCodeProposal(t)
	ctx := browser(t, 1280, 900)
	ui := m.base + "/ui/"
	css := func(s string) chromedp.CSS { return chromedp.CSS(s) }
	run(t, ctx, chromedp.Navigate(ui), chromedp.WaitVisible(chromedp.ID("token")),
		chromedp.SendKeys(chromedp.ID("token"), appSecret), chromedp.Submit(chromedp.ID("token")), chromedp.WaitVisible(css(".grid")))
	run(t, ctx, chromedp.Navigate(ui+"proposals?realm=default"), chromedp.WaitVisible(css(".proposals")))
	if body := text(t, ctx, ".proposals"); !strings.Contains(body, "1111") {
		t.Fatalf("proposals page = %q, want the diff against 1111", body)
	}
	// The application replaces the record while the page is open.
	if code := m.do("DELETE", "/v1/records/"+r, nil, nil); code != 204 {
		t.Fatalf("DELETE = %d", code)
	}
	r2 := remember(t, m, door("The door code is 3333."))[0]
	run(t, ctx, chromedp.Click(css(fmt.Sprintf(`button[value="approve:%s"]`, p))), chromedp.WaitVisible(css(".flash")))
	if body := text(t, ctx, ".flash"); !strings.HasPrefix(body, "0 approved") || !strings.Contains(body, "target_changed") || !strings.Contains(body, r2) {
		t.Fatalf("approve flash = %q, want the approval refused naming %s", body, r2)
	}
	var rec struct{ Status string }
	if m.do("GET", "/v1/records/"+r2, nil, &rec); rec.Status != "active" {
		t.Fatalf("the record written since the page loaded is %q, want active", rec.Status)
	}
	if body := text(t, ctx, ".proposals"); !strings.Contains(body, "3333") {
		t.Fatalf("reloaded proposals page = %q, want the diff against 3333", body)
	}
	// The refusal's flash goes first, so the one waited for is the answer's.
	eval(t, ctx, `document.querySelector(".flash").remove(), "removed"`)
	run(t, ctx, chromedp.Click(css(fmt.Sprintf(`input[name="id"][value="%s"]`, p))),
		chromedp.Click(css(`button[name="action"][value="approve"]`)), chromedp.WaitVisible(css(".flash")))
	if body := text(t, ctx, ".flash"); !strings.HasPrefix(body, "1 approved") {
		t.Fatalf("approve flash = %q", body)
	}
	if m.do("GET", "/v1/records/"+r2, nil, &rec); rec.Status != "superseded" {
		t.Errorf("after approval the record shown is %q, want superseded", rec.Status)
	}
}
