package httpapi

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/memhost/memhost/internal/compaction"
)

// docExample is a request docs/api.md shows, and the answer it shows
// when it shows one.
type docExample struct {
	method, path, body string
	answer             string // JSON (or JSON Lines); "" when not shown
}

var (
	// curl -s localhost:7077/v1/x -d '{...}' (the body may span lines).
	curlExample = regexp.MustCompile(`(?s)curl -s localhost:7077(/\S+) -d '(.*?)'`)
	// A fenced block: "METHOD /path", the JSON body, a blank line, then
	// "200 " and the answer (after any header line).
	rawExample = regexp.MustCompile("(?s)```\n(POST|GET|DELETE) (/\\S+)\n(.*?)\n\n200 (?:Content-Type: \\S+\n)?(.*?)\n```")
)

// apiDocExamples are the requests of docs/api.md.
func apiDocExamples(t *testing.T) []docExample {
	t.Helper()
	doc, err := os.ReadFile("../../docs/api.md")
	if err != nil {
		t.Fatal(err)
	}
	var out []docExample
	for _, m := range curlExample.FindAllStringSubmatch(string(doc), -1) {
		out = append(out, docExample{method: "POST", path: m[1], body: m[2]})
	}
	// A curl example's answer, when shown, is the line after the command.
	for _, m := range regexp.MustCompile(`(?s)curl -s localhost:7077(/\S+) -d '.*?'\n(\{.*?\})\n`).FindAllStringSubmatch(string(doc), -1) {
		for i := range out {
			if out[i].path == m[1] && out[i].answer == "" && strings.Contains(m[0], out[i].body) {
				out[i].answer = m[2]
			}
		}
	}
	for _, m := range rawExample.FindAllStringSubmatch(string(doc), -1) {
		out = append(out, docExample{method: m[1], path: m[2], body: m[3], answer: m[4]})
	}
	return out
}

// TestAPIDocExamples runs every request docs/api.md shows against a
// server, as curl sends it (any Content-Type is read as JSON) and as the
// document describes it: each is served (200), its answer matches
// docs/openapi.yaml, and an answer the page shows has the members the
// served one has (JSON Lines: line by line, by kind).
func TestAPIDocExamples(t *testing.T) {
	examples := apiDocExamples(t)
	if len(examples) < 5 {
		t.Fatalf("found %d examples in docs/api.md; the patterns no longer match the page", len(examples))
	}
	srv, _ := newSurfacesWith(t, Options{Compaction: compaction.New(compaction.Options{Compactor: &echoCompactor{}})})
	for _, ex := range examples {
		t.Run(ex.method+" "+ex.path, func(t *testing.T) {
			if !json.Valid([]byte(ex.body)) {
				t.Fatalf("the example's body is not JSON: %s", ex.body)
			}
			// What curl -d sends.
			req, _ := http.NewRequest(ex.method, srv.URL+ex.path, strings.NewReader(ex.body))
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			resp, err := srv.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			// Read to the end: a streamed answer (a reindex) is over only
			// then, and the next request may depend on it.
			_, err = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("as curl -d sends it: %d", resp.StatusCode)
			}
			req, _ = http.NewRequest(ex.method, srv.URL+ex.path, strings.NewReader(ex.body))
			req.Header.Set("Content-Type", "application/json")
			status, _, data := exchange(t, srv, req, []byte(ex.body))
			if status != http.StatusOK {
				t.Fatalf("= %d %s", status, data)
			}
			if ex.answer == "" {
				return
			}
			shown, served := memberSets(t, ex.answer), memberSets(t, string(data))
			for _, members := range shown {
				if !slices.ContainsFunc(served, func(s []string) bool { return slices.Equal(s, members) }) {
					t.Errorf("the page shows an answer with members %v; the server answered %s", members, data)
				}
			}
		})
	}
}

// memberSets answers the sorted top-level member names of each JSON
// object in s (one object, or JSON Lines).
func memberSets(t *testing.T, s string) [][]string {
	t.Helper()
	var out [][]string
	dec := json.NewDecoder(bytes.NewReader([]byte(s)))
	for dec.More() {
		var obj map[string]json.RawMessage
		if err := dec.Decode(&obj); err != nil {
			t.Fatalf("answer %q: %v", s, err)
		}
		var names []string
		for name := range obj {
			names = append(names, name)
		}
		slices.Sort(names)
		out = append(out, names)
	}
	return out
}
