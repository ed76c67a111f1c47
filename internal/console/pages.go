package console

import (
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/memhost/memhost/coordinator"
	"github.com/memhost/memhost/internal/proposal"
	"github.com/memhost/memhost/internal/redact"
	"github.com/memhost/memhost/sdk"
)

var funcs = template.FuncMap{
	"when": func(t time.Time) string {
		if t.IsZero() {
			return "—"
		}
		return t.UTC().Format("2006-01-02 15:04:05")
	},
	"visible": func(v any) string { return visible(fmt.Sprint(v)) },
	// q escapes a value for a link's query string. Every use sits in an
	// href's query, where html/template escapes a plain string again (a
	// scope "a:b" would reach the next page as "a%3Ab"): the escaped
	// value is handed over as a URL, which it only normalises.
	"q": func(v any) template.URL { return template.URL(url.QueryEscape(fmt.Sprint(v))) },
	"short": func(v any, n int) string {
		s := visible(fmt.Sprint(v))
		if len([]rune(s)) <= n {
			return s
		}
		return string([]rune(s)[:n]) + "…"
	},
	"kb": func(n int) string {
		if n < 1024 {
			return fmt.Sprintf("%d B", n)
		}
		return fmt.Sprintf("%.1f KiB", float64(n)/1024)
	},
	"score": func(f float64) string {
		if f == 0 {
			return "—"
		}
		return fmt.Sprintf("%.3g", f)
	},
	"skip": func(r coordinator.SkipReason) string { return string(r) },
}

// visible shows control characters (which memory may hold to confuse a
// terminal or a reader) as their code points; html/template escapes the
// rest.
func visible(s string) string {
	if !strings.ContainsFunc(s, isHidden) {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		if isHidden(r) {
			fmt.Fprintf(&b, "\\u%04x", r)
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

func isHidden(r rune) bool {
	return r != '\n' && r != '\t' && (unicode.IsControl(r) || unicode.Is(unicode.Cf, r))
}

type scopeCount struct {
	Scope    string         `json:"scope"`
	Total    int            `json:"total"`
	ByStatus map[string]int `json:"by_status"`
}

type realmSummary struct {
	Name    string
	Scopes  []scopeCount
	Partial bool
	Pending int
	Records int
	Error   string
	// PendingUnknown: the queue could not be read, so no count is shown.
	PendingUnknown bool
}

func (c *Console) home(w http.ResponseWriter, r *http.Request, s *session) {
	var out []realmSummary
	for _, realm := range c.realms(s) {
		sum := realmSummary{Name: realm}
		var sc struct {
			Scopes  []scopeCount `json:"scopes"`
			Partial bool         `json:"partial"`
		}
		if err := c.call(r.Context(), s, "GET", "/v1/scopes?realm="+url.QueryEscape(realm), &sc); err != nil {
			sum.Error = err.Error()
		}
		sum.Scopes, sum.Partial = sc.Scopes, sc.Partial
		for _, x := range sc.Scopes {
			sum.Records += x.Total
		}
		var pq struct {
			Pending int `json:"pending"`
		}
		if err := c.call(r.Context(), s, "GET", "/v1/proposals?limit=1&realm="+url.QueryEscape(realm), &pq); err != nil {
			sum.PendingUnknown = true
			if sum.Error == "" {
				sum.Error = err.Error()
			}
		} else {
			sum.Pending = pq.Pending
		}
		out = append(out, sum)
	}
	c.render(w, r, s, "home", map[string]any{"Realms": out})
}

func (c *Console) records(w http.ResponseWriter, r *http.Request, s *session) {
	realm := c.realm(r, s)
	q := r.URL.Query()
	api := url.Values{"realm": {realm}, "limit": {"100"}}
	for _, k := range []string{"scope", "q", "kind", "tag", "status", "trust", "after"} {
		if v := strings.TrimSpace(q.Get(k)); v != "" {
			api.Set(k, v)
		}
	}
	if v := q.Get("since"); v != "" {
		if t, err := time.Parse("2006-01-02", v); err == nil {
			api.Set("since", t.Format(time.RFC3339))
		}
	}
	// A search finds active records only (the API refuses another status
	// with q): the page leaves the status choice out of a search and says
	// so, rather than answering the filter's pick with an error.
	searching := api.Get("q") != ""
	if searching {
		api.Del("status")
	}
	var list struct {
		Records []struct {
			Record sdk.Record `json:"record"`
			Score  float64    `json:"score"`
		} `json:"records"`
		Next string `json:"next"`
	}
	data := map[string]any{"Q": q, "Kinds": kinds, "Statuses": statuses, "Trusts": trusts, "Searching": searching}
	if err := c.call(r.Context(), s, "GET", "/v1/records?"+api.Encode(), &list); err != nil {
		data["Error"] = err.Error()
	}
	data["Records"], data["Next"] = list.Records, list.Next
	next := url.Values{}
	for k, v := range q {
		next[k] = v
	}
	next.Set("realm", realm)
	next.Set("after", list.Next)
	// Already encoded: as a plain string html/template would escape its
	// "=" and "&" too, and the link would lose every filter and the cursor.
	data["NextQuery"] = template.URL(next.Encode())
	c.render(w, r, s, "records", data)
}

var (
	kinds    = []string{"preference", "fact", "gotcha", "procedure", "relationship", "open_loop", "reference", "episode"}
	statuses = []string{"active", "superseded", "quarantined", "tombstoned"}
	trusts   = []string{"untrusted", "agent_observed", "agent_verified", "application", "operator"}
)

// maxChain bounds the supersede chain a record page follows.
const maxChain = 20

func (c *Console) record(w http.ResponseWriter, r *http.Request, s *session) {
	realm := c.realm(r, s)
	id := r.URL.Query().Get("id")
	if id == "" {
		c.fail(w, r, s, "record", &apiError{Status: http.StatusBadRequest, Message: "no record named: the page needs ?id="})
		return
	}
	var rec sdk.Record
	path := func(id string) string {
		return "/v1/records/" + url.PathEscape(id) + "?realm=" + url.QueryEscape(realm)
	}
	if err := c.call(r.Context(), s, "GET", path(id), &rec); err != nil {
		c.fail(w, r, s, "record", err)
		return
	}
	var chain []sdk.Record
	data := map[string]any{"Record": rec}
	for prev := rec.Supersedes; prev != "" && len(chain) < maxChain; {
		var older sdk.Record
		if err := c.call(r.Context(), s, "GET", path(prev), &older); err != nil {
			// Said, not read as a record that supersedes no other.
			data["ChainError"] = err.Error()
			break
		}
		chain = append(chain, older)
		prev = older.Supersedes
	}
	data["Chain"] = chain
	var injections struct {
		Turns []coordinator.TurnTrace `json:"turns"`
	}
	if err := c.call(r.Context(), s, "GET", "/v1/records/"+url.PathEscape(id)+"/trace?limit=50&realm="+url.QueryEscape(realm), &injections); err != nil {
		data["TraceError"] = err.Error()
	}
	data["Injections"] = injections.Turns
	c.render(w, r, s, "record", data)
}

type proposalItem struct {
	ID         string      `json:"id"`
	Proposer   string      `json:"proposer"`
	Identity   string      `json:"identity"`
	Imported   bool        `json:"imported"`
	CreatedAt  time.Time   `json:"created_at"`
	Record     sdk.Record  `json:"record"`
	Target     string      `json:"target"`
	Supersedes *sdk.Record `json:"supersedes"`
	Diff       []struct {
		Field string `json:"field"`
		Op    string `json:"op"`
		Text  string `json:"text"`
	} `json:"diff"`
	// What the queue shows: the body and the difference cut short, and
	// how much of each it left out (the proposal's own page has it all).
	Body     string `json:"-"`
	BodyMore int    `json:"-"`
	DiffMore int    `json:"-"`
	// Tags are the tags the approved record carries: the proposal's less
	// the proposal mark.
	Tags []string `json:"-"`
}

// The queue shows this much of each proposal: agents write proposals, and
// a page of them at the SDK's limits would be tens of megabytes.
// (proposals.html cuts each line of the difference to 240 characters.)
const (
	maxQueueBody = 1200 // characters
	maxQueueDiff = 40   // lines
)

// proposalPage is how many proposals a page of the queue shows, and so
// the most one form may decide.
const proposalPage = 100

func (c *Console) proposals(w http.ResponseWriter, r *http.Request, s *session) {
	realm := c.realm(r, s)
	api := url.Values{"realm": {realm}, "limit": {strconv.Itoa(proposalPage)}}
	if a := r.URL.Query().Get("after"); a != "" {
		api.Set("after", a)
	}
	var list struct {
		Pending   int            `json:"pending"`
		Next      string         `json:"next"`
		Proposals []proposalItem `json:"proposals"`
	}
	if err := c.call(r.Context(), s, "GET", "/v1/proposals?"+api.Encode(), &list); err != nil {
		c.fail(w, r, s, "proposals", err)
		return
	}
	for i := range list.Proposals {
		p := &list.Proposals[i]
		p.Body = visible(p.Record.Body)
		if rs := []rune(p.Body); len(rs) > maxQueueBody {
			p.Body, p.BodyMore = string(rs[:maxQueueBody]), len(rs)-maxQueueBody
		}
		// A new record has no diff: its description and tags, which
		// approval makes active as its body, are shown as the body is.
		p.Tags = slices.DeleteFunc(slices.Clone(p.Record.Tags), func(t string) bool { return strings.EqualFold(t, proposal.Tag) })
		if len(p.Diff) > maxQueueDiff {
			p.Diff, p.DiffMore = p.Diff[:maxQueueDiff], len(p.Diff)-maxQueueDiff
		}
	}
	c.render(w, r, s, "proposals", map[string]any{"Pending": list.Pending, "Next": list.Next, "Proposals": list.Proposals})
}

// decide approves or rejects the proposals a form names, one by one, and
// reports what happened to each.
func (c *Console) decide(w http.ResponseWriter, r *http.Request, s *session) {
	realm := c.realm(r, s)
	if v := r.PostForm.Get("realm"); v != "" {
		realm = ""
		for _, x := range c.realms(s) {
			if x == v {
				realm = x
			}
		}
		if realm == "" {
			http.Error(w, "realm not visible to this token", http.StatusForbidden)
			return
		}
	}
	action, ids := r.PostForm.Get("action"), r.PostForm["id"]
	if one := r.PostForm.Get("one"); one != "" {
		// A row's own button: "approve:ID" or "reject:ID".
		a, id, _ := strings.Cut(one, ":")
		action, ids = a, []string{id}
	}
	if action != "approve" && action != "reject" {
		http.Error(w, "unknown action", http.StatusBadRequest)
		return
	}
	if len(ids) > proposalPage {
		// One API call each, in the request: no more than a page shows.
		http.Error(w, fmt.Sprintf("%d proposals named; decide at most %d (a page) at once", len(ids), proposalPage), http.StatusBadRequest)
		return
	}
	done, failed := 0, []string{}
	for _, id := range ids {
		q := url.Values{"realm": {realm}}
		// The page names the record each proposal replaces ("" for none):
		// approved, it must be that one, not one written in its place since.
		if shown, ok := r.PostForm["target:"+id]; ok && action == "approve" {
			q.Set("target", shown[0])
		}
		err := c.call(r.Context(), s, "POST", "/v1/records/"+url.PathEscape(id)+"/"+action+"?"+q.Encode(), nil)
		if err != nil {
			failed = append(failed, id+": "+err.Error())
			continue
		}
		done++
	}
	verb := map[string]string{"approve": "approved", "reject": "rejected"}[action]
	flash := fmt.Sprintf("%d %s", done, verb)
	if len(failed) > 0 {
		flash += "; failed: " + strings.Join(failed, "; ")
	}
	c.mu.Lock()
	s.flash = flash
	c.mu.Unlock()
	http.Redirect(w, r, Prefix+"/proposals?realm="+url.QueryEscape(realm), http.StatusSeeOther)
}

// tracesPage is how many traced sessions a page of the traces page shows.
const tracesPage = 200

func (c *Console) traces(w http.ResponseWriter, r *http.Request, s *session) {
	realm := c.realm(r, s)
	api := url.Values{"realm": {realm}, "limit": {strconv.Itoa(tracesPage)}}
	if a := r.URL.Query().Get("after"); a != "" {
		api.Set("after", a)
	}
	var list struct {
		Next     string `json:"next"`
		Sessions []struct {
			Identity string    `json:"identity"`
			Session  string    `json:"session"`
			Turns    int       `json:"turns"`
			Bytes    int       `json:"bytes"`
			Last     time.Time `json:"last"`
		} `json:"sessions"`
	}
	if err := c.call(r.Context(), s, "GET", "/v1/traces?"+api.Encode(), &list); err != nil {
		c.fail(w, r, s, "traces", err)
		return
	}
	c.render(w, r, s, "traces", map[string]any{"Sessions": list.Sessions, "Next": list.Next})
}

// tracePage is how many turns a page of a session's trace shows.
const tracePage = 200

func (c *Console) trace(w http.ResponseWriter, r *http.Request, s *session) {
	realm := c.realm(r, s)
	q := r.URL.Query()
	api := url.Values{"realm": {realm}, "limit": {strconv.Itoa(tracePage)}}
	if id := q.Get("identity"); id != "" {
		api.Set("identity", id)
	}
	if a := q.Get("after"); a != "" {
		api.Set("after", a)
	}
	if q.Get("session") == "" {
		c.fail(w, r, s, "trace", &apiError{Status: http.StatusBadRequest, Message: "no session named: the page needs ?session="})
		return
	}
	var out struct {
		Next  string                  `json:"next"`
		Turns []coordinator.TurnTrace `json:"turns"`
	}
	if err := c.call(r.Context(), s, "GET", "/v1/sessions/"+url.PathEscape(q.Get("session"))+"/trace?"+api.Encode(), &out); err != nil {
		c.fail(w, r, s, "trace", err)
		return
	}
	// Newest first: the turn an operator asks about is usually the last.
	turns := out.Turns
	for i, j := 0, len(turns)-1; i < j; i, j = i+1, j-1 {
		turns[i], turns[j] = turns[j], turns[i]
	}
	c.render(w, r, s, "trace", map[string]any{"Session": q.Get("session"), "Identity": q.Get("identity"), "Turns": turns, "Next": out.Next})
}

type pluginStatus struct {
	Instance     string     `json:"instance"`
	Kind         string     `json:"kind"`
	Name         string     `json:"name"`
	Version      string     `json:"version"`
	Healthy      bool       `json:"healthy"`
	State        string     `json:"state"`
	Restarts     int        `json:"restarts"`
	Pid          int        `json:"pid"`
	Capabilities []string   `json:"capabilities"`
	LastError    string     `json:"last_error"`
	NextAttempt  *time.Time `json:"next_attempt"`
}

func (c *Console) plugins(w http.ResponseWriter, r *http.Request, s *session) {
	var out struct {
		Plugins []pluginStatus `json:"plugins"`
	}
	if err := c.call(r.Context(), s, "GET", "/v1/plugins", &out); err != nil {
		c.fail(w, r, s, "plugins", err)
		return
	}
	for i := range out.Plugins {
		// As /readyz words them: no paths or pids of the host in the text.
		out.Plugins[i].LastError, _ = redact.Message(out.Plugins[i].LastError)
	}
	c.charts.takeIfStale()
	c.render(w, r, s, "plugins", map[string]any{"Plugins": out.Plugins, "Charts": c.charts.charts()})
}
