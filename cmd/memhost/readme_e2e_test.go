package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/memhost/memhost/internal/testbin"
)

// readmeCommand is one curl command of the README's "Try it" block and the
// answer shape its comment promises.
type readmeCommand struct {
	line   string
	expect string // the "# {...}" comment after it, if any
}

// readmeCommands reads the curl commands of the README's first sh block
// after "## Try it", joining continuation lines.
func readmeCommands(t *testing.T) []readmeCommand {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(testbin.ModuleRoot(t), "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, after, ok := strings.Cut(string(data), "## Try it")
	if !ok {
		t.Fatal(`README.md has no "## Try it" section`)
	}
	_, block, _ := strings.Cut(after, "```sh\n")
	block, _, _ = strings.Cut(block, "```")
	var cmds []readmeCommand
	for _, line := range strings.Split(block, "\n") {
		switch {
		case strings.HasPrefix(line, "curl "):
			cmds = append(cmds, readmeCommand{line: line})
		case strings.HasPrefix(line, "# ") && len(cmds) > 0:
			cmds[len(cmds)-1].expect = strings.TrimPrefix(line, "# ")
		case strings.TrimSpace(line) != "" && len(cmds) > 0:
			cmds[len(cmds)-1].line += "\n" + line
		}
	}
	if len(cmds) < 4 {
		t.Fatalf("found %d curl commands in the README quick start", len(cmds))
	}
	return cmds
}

var (
	jsonKeyRE = regexp.MustCompile(`"([a-z_]+)":`)
	// docIDRE finds what a document shows as a record id; recordIDRE is
	// the shape sdk.NewRecordID gives.
	docIDRE    = regexp.MustCompile(`\br[0-9a-f]{8,}\b`)
	recordIDRE = regexp.MustCompile(`^r[0-9a-f]{27}$`)
	scoreRE    = regexp.MustCompile(`"score":[0-9.e-]+`)
)

func firstID(answer []byte) string { return strings.Trim(docIDRE.FindString(string(answer)), `"`) }

// TestReadmeQuickStart runs the README's curl examples verbatim (only the
// port differs) against memhost on its built-in defaults and checks each
// answer has the shape the README shows.
func TestReadmeQuickStart(t *testing.T) {
	t.Parallel()
	m := startMemhost(t, "")
	addr := strings.TrimPrefix(m.base, "http://")
	for _, c := range readmeCommands(t) {
		line := strings.ReplaceAll(c.line, "localhost:7077", addr)
		out, err := exec.Command("bash", "-c", line+" --fail-with-body").CombinedOutput()
		if err != nil {
			t.Fatalf("%s\n%v: %s\nlogs:\n%s", c.line, err, out, m.logs())
		}
		if strings.Contains(c.line, "/metrics") {
			if !strings.Contains(string(out), "memhost_http_requests_total") {
				t.Fatalf("%s: no memhost series in %.200s", c.line, out)
			}
			continue
		}
		var answer map[string]any
		if err := json.Unmarshal(out, &answer); err != nil {
			t.Fatalf("%s: answer %q is not a JSON object: %v", c.line, out, err)
		}
		for _, key := range jsonKeyRE.FindAllStringSubmatch(c.expect, -1) {
			if !strings.Contains(string(out), `"`+key[1]+`":`) {
				t.Errorf("%s: answer %s lacks %q, which the README shows", c.line, out, key[1])
			}
		}
		// Ids and scores shown are real ones: the id has the real shape
		// (the answer's differs only in time and randomness) and the score
		// is the one this one-record realm answers.
		for _, id := range docIDRE.FindAllString(c.expect, -1) {
			if !recordIDRE.MatchString(id) || !recordIDRE.MatchString(firstID(out)) {
				t.Errorf("%s: the README shows id %s, the server answered %s", c.line, id, firstID(out))
			}
		}
		if score := scoreRE.FindString(c.expect); score != "" && !strings.Contains(string(out), score) {
			t.Errorf("%s: the README shows %s, the server answered %s", c.line, score, out)
		}
		if strings.Contains(c.expect, "Coffee order") && !strings.Contains(string(out), "Coffee order") {
			t.Errorf("%s: answer %s does not recall the record the README stored", c.line, out)
		}
		if strings.Contains(c.expect, "Agent memory for identity") && !strings.Contains(string(out), "Agent memory for identity") {
			t.Errorf("%s: answer %s injects no memory", c.line, out)
		}
	}
}
