package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/memhost/memhost/internal/testbin"
)

const agent2Secret = "agent2-token-0123456789abcdef01"

const proposalBound = 100

// reviewConfig is a sqlite deployment with an application token and two
// agent tokens, each bounded to proposalBound pending proposals per realm.
var reviewConfig = providerDeployment("sqlite", `{ path = "memory.db" }`) + fmt.Sprintf(`
proposals {
  max_pending         = %d
  retry_after_seconds = 30
}
token "platform" {
  secret_env = "MEMHOST_TEST_APP"
  realms     = ["default", "acme"]
  role       = "application"
}
token "agent" {
  secret_env = "MEMHOST_TEST_AGENT"
  realms     = ["default", "acme"]
}
token "agent2" {
  secret_env = "MEMHOST_TEST_AGENT2"
  realms     = ["default"]
}
`, proposalBound)

var reviewEnv = []string{"MEMHOST_TEST_APP=" + appSecret, "MEMHOST_TEST_AGENT=" + agentSecret, "MEMHOST_TEST_AGENT2=" + agent2Secret}

type proposalList struct {
	Realm     string `json:"realm"`
	Pending   int    `json:"pending"`
	Next      string `json:"next"`
	Proposals []struct {
		ID         string `json:"id"`
		Proposer   string `json:"proposer"`
		Target     string `json:"target"`
		Record     struct{ Title, Body, Status string }
		Supersedes *struct{ ID, Body string }
		Diff       []struct{ Field, Op, Text string }
	} `json:"proposals"`
}

// propose sends one realm-scope proposal as token and answers the status
// and the Retry-After header.
func propose(t *testing.T, m *instance, token, realm, title, body string) (int, string, []string) {
	t.Helper()
	var out struct {
		IDs []string `json:"ids"`
	}
	req := map[string]any{"realm": realm, "records": []map[string]any{{"scope": "realm", "kind": "fact", "title": title, "body": body}}}
	code, header := m.as(token).doHeader("POST", "/v1/records", req, &out)
	return code, header.Get("Retry-After"), out.IDs
}

// rawPropose sends one proposal without the document check (the flood's
// refusal is checked against it once, below), so the flood is quick.
func rawPropose(t *testing.T, base, token, title string) (int, string) {
	body := fmt.Sprintf(`{"records":[{"scope":"realm","kind":"fact","title":%q,"body":"Flood body about marmalade."}]}`, title)
	req, err := http.NewRequest("POST", base+"/v1/records", strings.NewReader(body))
	if err != nil {
		t.Error(err)
		return 0, ""
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Error(err)
		return 0, ""
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, resp.Header.Get("Retry-After")
}

// as answers a client of the same server that sends token (its logs
// are the original's: read them there).
func (i *instance) as(token string) *instance {
	return &instance{t: i.t, cmd: i.cmd, base: i.base, dataDir: i.dataDir, drained: i.drained, token: token}
}

// doHeader is do that also answers the response header.
func (i *instance) doHeader(method, path string, body, out any) (int, http.Header) {
	i.t.Helper()
	var h http.Header
	code := i.doWith(method, path, body, out, func(resp *http.Response) { h = resp.Header })
	return code, h
}

// TestProposalFloodIsBounded sends 3,000 proposals at once: exactly the
// bound is stored, the rest are refused 429 with a Retry-After, another
// token in the realm and the same token in another realm still propose,
// and the application sees the queue, each proposal attributed.
func TestProposalFloodIsBounded(t *testing.T) {
	t.Parallel()
	m := startMemhost(t, reviewConfig, reviewEnv...)
	const flood = 3000
	var accepted, refused, other atomic.Int64
	var wg sync.WaitGroup
	next := atomic.Int64{}
	for w := 0; w < 16; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				n := next.Add(1)
				if n > flood {
					return
				}
				code, retry := rawPropose(t, m.base, agentSecret, fmt.Sprintf("Flood %d", n))
				switch {
				case code == 202:
					accepted.Add(1)
				case code == 429 && retry == "30":
					refused.Add(1)
				default:
					other.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	if accepted.Load() != proposalBound || refused.Load() != flood-proposalBound || other.Load() != 0 {
		t.Fatalf("flood: %d accepted, %d refused with Retry-After 30, %d other; want %d, %d, 0", accepted.Load(), refused.Load(), other.Load(), proposalBound, flood-proposalBound)
	}
	// The refusal names the problem and its code.
	var e apiError
	mm := m.as(agentSecret)
	if code := mm.do("POST", "/v1/records", map[string]any{"records": []map[string]any{{"scope": "realm", "kind": "fact", "title": "One more", "body": "x"}}}, &e); code != 429 || e.Error.Code != "too_many_proposals" || !strings.Contains(e.Error.Message, "limit of 100") {
		t.Errorf("proposal beyond the bound = %d %+v", code, e)
	}
	// Another token in the realm, and the same token in another realm, are unaffected.
	if code, _, _ := propose(t, m, agent2Secret, "default", "Second agent", "The second agent has its own bound."); code != 202 {
		t.Errorf("another token's proposal = %d, want 202", code)
	}
	if code, _, _ := propose(t, m, agentSecret, "acme", "Other realm", "Acme's queue is its own."); code != 202 {
		t.Errorf("the same token in another realm = %d, want 202", code)
	}
	// An agent may not list the queue; the application pages through it.
	if code := mm.do("GET", "/v1/proposals", nil, &e); code != 403 {
		t.Errorf("agent list = %d, want 403", code)
	}
	m.token = appSecret
	seen, byProposer := map[string]bool{}, map[string]int{}
	after := ""
	for {
		var page proposalList
		if code := m.do("GET", "/v1/proposals?limit=37&after="+after, nil, &page); code != 200 {
			t.Fatalf("list = %d", code)
		}
		if page.Pending != proposalBound+1 {
			t.Fatalf("pending = %d, want %d", page.Pending, proposalBound+1)
		}
		for _, p := range page.Proposals {
			if seen[p.ID] || p.Record.Status != "quarantined" {
				t.Fatalf("proposal %s listed twice or not pending: %+v", p.ID, p)
			}
			seen[p.ID] = true
			byProposer[p.Proposer]++
		}
		if page.Next == "" {
			break
		}
		after = page.Next
	}
	if len(seen) != proposalBound+1 || byProposer["agent"] != proposalBound || byProposer["agent2"] != 1 {
		t.Fatalf("listed %d proposals by %v; want %d by agent and 1 by agent2", len(seen), byProposer, proposalBound)
	}
	// Rejecting one makes room for exactly one more.
	var first proposalList
	m.do("GET", "/v1/proposals?limit=1", nil, &first)
	var rej struct{ Rejected, Status string }
	if code := m.do("POST", "/v1/records/"+first.Proposals[0].ID+"/reject", nil, &rej); code != 200 || rej.Rejected != first.Proposals[0].ID {
		t.Fatalf("reject = %d %+v", code, rej)
	}
	if code, _, _ := propose(t, m, agentSecret, "default", "Room again", "Made room by a rejection."); code != 202 {
		t.Errorf("after a rejection = %d, want 202", code)
	}
	if code, _, _ := propose(t, m, agentSecret, "default", "No room", "The bound holds again."); code != 429 {
		t.Errorf("past the bound again = %d, want 429", code)
	}
}

// TestProposalReview: a proposal restating an active record shows that
// record and a diff, and approving it supersedes that record; a rejected
// proposal is gone; agents can do neither; the CLI lists, approves and
// rejects.
func TestProposalReview(t *testing.T) {
	t.Parallel()
	m := startMemhost(t, reviewConfig, reviewEnv...)
	m.token = appSecret
	old := remember(t, m, map[string]any{"scope": "realm", "kind": "fact", "title": "Deploy day", "body": "Deploys go out on Tuesdays.\nUse the checklist."})
	_, _, ids := propose(t, m, agentSecret, "default", "Deploy day", "Deploys go out on Wednesdays.\nUse the checklist.")
	if len(ids) != 1 {
		t.Fatal("no proposal id")
	}
	var page proposalList
	m.do("GET", "/v1/proposals", nil, &page)
	if len(page.Proposals) != 1 || page.Proposals[0].Target != old[0] || page.Proposals[0].Supersedes == nil || page.Proposals[0].Supersedes.ID != old[0] {
		t.Fatalf("proposal listing = %+v, want it to name %s", page, old[0])
	}
	diff := fmt.Sprint(page.Proposals[0].Diff)
	for _, want := range []string{"{body - Deploys go out on Tuesdays.}", "{body + Deploys go out on Wednesdays.}", "{body = Use the checklist.}"} {
		if !strings.Contains(diff, want) {
			t.Errorf("diff %s lacks %s", diff, want)
		}
	}
	// Agents may neither approve nor reject.
	var e apiError
	mm := m.as(agentSecret)
	if code := mm.do("POST", "/v1/records/"+ids[0]+"/reject", nil, &e); code != 403 {
		t.Errorf("agent reject = %d, want 403", code)
	}
	// The CLI approves it: the old record is superseded by the approved copy.
	env := []string{"MEMHOST_TOKEN=" + appSecret}
	addr := strings.TrimPrefix(m.base, "http://")
	out, err := runCLI(t, env, "proposals", "list", "--addr", addr, "--diff")
	if err != nil || !strings.Contains(out, ids[0]) || !strings.Contains(out, "agent") || !strings.Contains(out, "+ body: Deploys go out on Wednesdays.") {
		t.Fatalf("proposals list = %q, %v", out, err)
	}
	out, err = runCLI(t, env, "proposals", "approve", "--addr", addr, ids[0])
	if err != nil || !strings.Contains(out, ids[0]+" approved as ") {
		t.Fatalf("proposals approve = %q, %v", out, err)
	}
	newID := strings.TrimSpace(out[strings.LastIndex(out, " ")+1:])
	var rec struct{ ID, Status, Supersedes, Body string }
	m.do("GET", "/v1/records/"+old[0], nil, &rec)
	if rec.Status != "superseded" {
		t.Errorf("the restated record is %q, want superseded", rec.Status)
	}
	rec = struct{ ID, Status, Supersedes, Body string }{}
	if code := m.do("GET", "/v1/records/"+newID, nil, &rec); code != 200 {
		t.Fatalf("GET approved record %q = %d (cli said %q)", newID, code, out)
	}
	if rec.Status != "active" || rec.Supersedes != old[0] || !strings.Contains(rec.Body, "Wednesdays") {
		t.Errorf("approved record = %+v, want active, superseding %s", rec, old[0])
	}
	if code := m.do("GET", "/v1/records/"+ids[0], nil, &e); code != 404 {
		t.Errorf("the applied proposal = %d, want 404 (dropped)", code)
	}
	// Rejected through the CLI, a proposal is gone; a second rejection fails.
	_, _, ids = propose(t, m, agentSecret, "default", "Lunch", "Quince tart on Fridays.")
	if out, err := runCLI(t, env, "proposals", "reject", "--addr", addr, ids[0]); err != nil || !strings.Contains(out, "rejected") {
		t.Fatalf("proposals reject = %q, %v", out, err)
	}
	if code := m.do("GET", "/v1/records/"+ids[0], nil, &e); code != 404 {
		t.Errorf("rejected proposal = %d, want 404", code)
	}
	if _, err := runCLI(t, env, "proposals", "reject", "--addr", addr, ids[0]); err == nil || !strings.Contains(err.Error(), "not_found") {
		t.Errorf("second reject: %v, want not_found", err)
	}
	m.do("GET", "/v1/proposals", nil, &page)
	if page.Pending != 0 || len(page.Proposals) != 0 {
		t.Errorf("queue after review = %+v, want empty", page)
	}
}

// TestImportedProposalsReachTheReview: from an outside review. A pending
// proposal exported from one realm and imported into another was stored
// but listed by no review (the queue's note of it is not exported); the
// import now notes it, proposer unknown, and it is approved as any other.
func TestImportedProposalsReachTheReview(t *testing.T) {
	t.Parallel()
	m := startMemhost(t, reviewConfig, reviewEnv...)
	m.token = appSecret
	code, _, ids := propose(t, m, agentSecret, "default", "Parking", "Parking is on level 2.")
	if code != 202 || len(ids) != 1 {
		t.Fatalf("propose = %d %v", code, ids)
	}
	var page struct {
		Records []map[string]any `json:"records"`
	}
	if code := m.do("POST", "/v1/export", map[string]any{"realm": "default"}, &page); code != 200 || len(page.Records) != 1 {
		t.Fatalf("export = %d %+v", code, page)
	}
	// As memhost import --realm acme sends it; twice, as a rerun would.
	page.Records[0]["realm"] = "acme"
	for range 2 {
		if code := m.do("POST", "/v1/import", map[string]any{"realm": "acme", "records": page.Records}, nil); code != 200 {
			t.Fatalf("import = %d", code)
		}
	}
	var list proposalList
	if code := m.do("GET", "/v1/proposals?realm=acme", nil, &list); code != 200 || list.Pending != 1 || len(list.Proposals) != 1 || list.Proposals[0].ID != ids[0] || list.Proposals[0].Record.Title != "Parking" {
		t.Fatalf("proposals of acme after the import = %d %+v, want the imported one", code, list)
	}
	if code := m.do("POST", "/v1/records/"+ids[0]+"/approve?realm=acme", nil, nil); code != 200 {
		t.Fatalf("approve the imported proposal = %d", code)
	}
	if code := m.do("GET", "/v1/proposals?realm=acme", nil, &list); code != 200 || list.Pending != 0 {
		t.Fatalf("proposals of acme after approval = %d %+v, want none", code, list)
	}
}

// TestProposalDiffShowsTheExpiry: from an outside review. An agent
// restated the realm's refund policy with one character changed and an
// expires_at a few seconds out; the diff (API, CLI --diff, console) showed
// the character and the trust, never the expiry, and approving it
// superseded the permanent policy with a copy that expired moments
// later. The diff now holds every field approval writes, the CLI shows
// the expiry, and a proposal already expired is not approved (409).
func TestProposalDiffShowsTheExpiry(t *testing.T) {
	t.Parallel()
	m := startMemhost(t, providerDeployment("sqlite", `{ path = "memory.db" }`)+matrixTokens, matrixEnv...)
	remember(t, m.as(mxApp), map[string]any{"scope": "realm", "kind": "procedure", "title": "Refund policy",
		"body": "Refunds are granted within 30 days of purchase.", "trust": "application"})
	proposeExpiring := func(body string, expires time.Time) string {
		t.Helper()
		var prop struct{ IDs []string }
		if code := m.as(mxRuntime).do("POST", "/v1/records", map[string]any{"records": []any{map[string]any{
			"scope": "realm", "kind": "procedure", "title": "Refund policy", "body": body,
			"expires_at": expires.UTC().Format(time.RFC3339), "thread": map[string]any{"id": "support-chat", "seq": 7}}}}, &prop); code != 202 || len(prop.IDs) != 1 {
			t.Fatalf("proposal = %d %+v", code, prop)
		}
		return prop.IDs[0]
	}
	expires := time.Now().Add(time.Hour).Truncate(time.Second).UTC()
	id := proposeExpiring("Refunds are granted within 30 days of purchase!", expires)
	var list proposalList
	if code := m.as(mxApp).do("GET", "/v1/proposals", nil, &list); code != 200 || len(list.Proposals) != 1 {
		t.Fatalf("listed %d %+v", code, list)
	}
	diff := fmt.Sprint(list.Proposals[0].Diff)
	for _, want := range []string{"{expires_at - }", "{expires_at + " + expires.Format(time.RFC3339) + "}", "{thread - }", "{thread + support-chat #7}"} {
		if !strings.Contains(diff, want) {
			t.Errorf("the diff %s lacks %s", diff, want)
		}
	}
	out, err := runCLI(t, []string{"MEMHOST_TOKEN=" + mxApp}, "proposals", "list", "--addr", strings.TrimPrefix(m.base, "http://"), "--diff")
	if err != nil || !strings.Contains(out, "+ expires_at: "+expires.Format(time.RFC3339)) || !strings.Contains(out, "EXPIRES") {
		t.Errorf("proposals list --diff = %q, %v; want the expiry shown", out, err)
	}
	if code := m.as(mxApp).do("POST", "/v1/records/"+id+"/reject", nil, nil); code != 200 {
		t.Fatalf("reject = %d", code)
	}
	// Already expired: approved, it would replace the policy with a
	// record no recall finds.
	id = proposeExpiring("Refunds are granted within 14 days of purchase.", time.Now().Add(-time.Minute))
	var e apiError
	if code := m.as(mxApp).do("POST", "/v1/records/"+id+"/approve", nil, &e); code != 409 || !strings.Contains(e.Error.Message, "expired") {
		t.Errorf("approval of an expired proposal = %d %+v, want 409 naming the expiry", code, e)
	}
	if got := recall(t, m.as(mxApp), "alice", "refund policy purchase days"); len(got.Hits) == 0 || !strings.Contains(got.Hits[0].Record.Body, "30 days of purchase.") {
		t.Errorf("recall after the refused approval = %+v, want the permanent policy", got.Hits)
	}
}

// TestDeletedProposalsFreeTheirPlace: from an outside review. An
// application that drops an agent's pending proposals with DELETE
// /v1/records/{id} left their notes in the queue's ledger: the agent
// stayed at its bound and was told 429 until a listing happened to page
// over the ghosts. The delete now frees the place.
func TestDeletedProposalsFreeTheirPlace(t *testing.T) {
	t.Parallel()
	m := startMemhost(t, providerDeployment("sqlite", `{ path = "memory.db" }`)+matrixTokens+`
proposals {
  max_pending = 2
}
`, matrixEnv...)
	propose := func(title string) (int, []string, apiError) {
		var out struct {
			IDs []string
			apiError
		}
		code := m.as(mxRuntime).do("POST", "/v1/records", map[string]any{"records": []any{
			map[string]any{"scope": "realm", "kind": "fact", "title": title, "body": title + " body."}}}, &out)
		return code, out.IDs, out.apiError
	}
	var ids []string
	for _, title := range []string{"First plum", "Second plum"} {
		code, got, e := propose(title)
		if code != 202 {
			t.Fatalf("proposal %q = %d %+v", title, code, e)
		}
		ids = append(ids, got...)
	}
	for _, id := range ids {
		if code := m.as(mxApp).do("DELETE", "/v1/records/"+id, nil, nil); code != 204 {
			t.Fatalf("application DELETE of proposal %s = %d", id, code)
		}
	}
	for _, title := range []string{"Third plum", "Fourth plum"} {
		if code, _, e := propose(title); code != 202 {
			t.Errorf("proposal %q after the application deleted both pending ones = %d %q: %s", title, code, e.Error.Code, e.Error.Message)
		}
	}
	if code, _, _ := propose("Fifth plum"); code != 429 {
		t.Errorf("a proposal past the bound of live ones = %d, want 429", code)
	}
}

// TestReviewDecisionsAreLogged: from an outside review. An approval over
// a record drops the proposal and a rejection forgets it, and either
// drops the queue's note of who proposed it: nothing told an operator
// afterwards who proposed what, or which token decided it. Each decision
// is now a line in the host's log.
func TestReviewDecisionsAreLogged(t *testing.T) {
	t.Parallel()
	m := startMemhost(t, reviewConfig, reviewEnv...)
	m.token = appSecret
	remember(t, m, map[string]any{"scope": "realm", "kind": "fact", "title": "Gate code", "body": "The gate code is 1234."})
	_, _, approved := propose(t, m, agentSecret, "default", "Gate code", "The gate code is 5678.")
	_, _, rejected := propose(t, m, agent2Secret, "default", "Parking", "Park on level three.")
	if len(approved) != 1 || len(rejected) != 1 {
		t.Fatalf("proposals = %v, %v", approved, rejected)
	}
	var ok struct{ ID string }
	if code := m.do("POST", "/v1/records/"+approved[0]+"/approve", nil, &ok); code != 200 {
		t.Fatalf("approve = %d\n%s", code, m.logs())
	}
	if code := m.do("POST", "/v1/records/"+rejected[0]+"/reject", nil, nil); code != 200 {
		t.Fatalf("reject = %d\n%s", code, m.logs())
	}
	// The host's log reaches the test through a pipe, after the answer.
	waitForLog(t, m, "proposal approved", "proposal rejected")
	logs := m.logs()
	for _, want := range [][]string{
		{"proposal approved", "proposal=" + approved[0], "record=" + ok.ID, "proposer=agent ", "token=platform"},
		{"proposal rejected", "proposal=" + rejected[0], "proposer=agent2", "token=platform"},
	} {
		found := false
		for _, line := range strings.Split(logs, "\n") {
			hit := true
			for _, w := range want {
				hit = hit && strings.Contains(line+" ", w)
			}
			found = found || hit
		}
		if !found {
			t.Errorf("no log line holds %q:\n%s", want, logs)
		}
	}
}

// TestProposalsListPages: from an outside review. `memhost proposals
// list` printed one page (at most 500) and dropped the answer's next, so
// a reviewer with more pending proposals could not see them all. The
// page's cursor is now printed for --after, and --all follows the pages.
func TestProposalsListPages(t *testing.T) {
	t.Parallel()
	m := startMemhost(t, reviewConfig, reviewEnv...)
	want := map[string]bool{}
	for i := range 5 {
		code, _, ids := propose(t, m, agentSecret, "default", fmt.Sprintf("Tart %d", i), "Quince tart on Fridays.")
		if code != 202 || len(ids) != 1 {
			t.Fatalf("proposal %d = %d %v", i, code, ids)
		}
		want[ids[0]] = true
	}
	list := func(args ...string) (ids map[string]bool, stdout, stderr string) {
		t.Helper()
		cmd := testbin.Command(testbin.Build(t, "./cmd/memhost"), append([]string{"proposals", "list", "--addr", strings.TrimPrefix(m.base, "http://"), "--limit", "2"}, args...)...)
		cmd.Env = append(cmd.Environ(), "MEMHOST_TOKEN="+appSecret)
		var errOut strings.Builder
		cmd.Stderr = &errOut
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("proposals list %v: %v: %s", args, err, errOut.String())
		}
		ids = map[string]bool{}
		for id := range want {
			if strings.Contains(string(out), id) {
				ids[id] = true
			}
		}
		return ids, string(out), errOut.String()
	}
	first, _, stderr := list()
	cursor := regexp.MustCompile(`--after (\S+)`).FindStringSubmatch(stderr)
	if len(first) != 2 || cursor == nil {
		t.Fatalf("the first page shows %d proposals and says %q; want 2 and the next page's cursor", len(first), stderr)
	}
	for _, c := range []struct {
		name       string
		args       []string
		seen       int
		more, json bool
	}{
		{"the page after the cursor", []string{"--after", cursor[1]}, 2, true, false},
		{"every page", []string{"--all"}, 5, false, false},
		{"every page from the cursor", []string{"--all", "--after", cursor[1]}, 3, false, false},
		{"every page as JSON", []string{"--all", "--json"}, 5, false, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			ids, stdout, stderr := list(c.args...)
			if len(ids) != c.seen || strings.Contains(stderr, "--after") != c.more {
				t.Fatalf("shows %d proposals and says %q; want %d, more pages %v", len(ids), stderr, c.seen, c.more)
			}
			if slices.Contains(c.args, "--after") {
				for id := range first {
					if ids[id] {
						t.Errorf("%s, already on the first page, is shown again", id)
					}
				}
			}
			if c.json {
				var page struct {
					Pending   int    `json:"pending"`
					Next      string `json:"next"`
					Proposals []any  `json:"proposals"`
				}
				if err := json.Unmarshal([]byte(stdout), &page); err != nil || page.Pending != 5 || page.Next != "" || len(page.Proposals) != 5 {
					t.Errorf("JSON = %+v, %v; want 5 pending, 5 proposals and no next", page, err)
				}
			}
		})
	}
}
