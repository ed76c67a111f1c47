package layering

import (
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/memhost/memhost"

// layer names the part of the repository a package of either module is in:
// "sdk", "coordinator", "guide", "internal", "plugins" or "cmd".
func layer(pkg string) string {
	rel := strings.TrimPrefix(strings.TrimPrefix(pkg, module), "/")
	first, _, _ := strings.Cut(rel, "/")
	return first
}

// plugin names the plugin a package under plugins/ belongs to.
func plugin(pkg string) string {
	rel := strings.TrimPrefix(pkg, module+"/plugins/")
	name, _, _ := strings.Cut(rel, "/")
	return name
}

// rules are the edges no package may have. A rule with testsToo unset
// holds for a package's build alone: a test may reach further (the host's
// tests run real plugins in process, a plugin's tests build its binary).
var rules = []struct {
	name     string
	testsToo bool
	forbids  func(from, to string) bool
}{
	{"the sdk module imports nothing of the root module", true, func(from, to string) bool {
		return layer(from) == "sdk" && layer(to) != "sdk"
	}},
	{"coordinator and guide import neither internal, cmd nor plugins", true, func(from, to string) bool {
		switch layer(from) {
		case "coordinator", "guide":
			switch layer(to) {
			case "internal", "cmd", "plugins":
				return true
			}
		}
		return false
	}},
	{"coordinator does not import guide", true, func(from, to string) bool {
		return layer(from) == "coordinator" && layer(to) == "guide"
	}},
	{"internal does not import cmd", true, func(from, to string) bool {
		return layer(from) == "internal" && layer(to) == "cmd"
	}},
	{"internal does not import plugins", false, func(from, to string) bool {
		return layer(from) == "internal" && layer(to) == "plugins"
	}},
	{"a plugin imports the sdk module and its own packages alone", false, func(from, to string) bool {
		if layer(from) != "plugins" {
			return false
		}
		return layer(to) != "sdk" && (layer(to) != "plugins" || plugin(to) != plugin(from))
	}},
	{"a plugin's tests import no host package but the test harnesses", true, func(from, to string) bool {
		if layer(from) != "plugins" {
			return false
		}
		switch to {
		case module + "/internal/testbin", module + "/internal/pgtest":
			return false
		}
		switch layer(to) {
		case "coordinator", "guide", "internal", "cmd":
			return true
		}
		return false
	}},
}

// broken answers the rules an import from one package to another breaks,
// inTest saying whether only from's tests import it.
func broken(from, to string, inTest bool) []string {
	var names []string
	for _, r := range rules {
		if (r.testsToo || !inTest) && r.forbids(from, to) {
			names = append(names, r.name)
		}
	}
	return names
}

// TestImportsGoDownward lists every package of the root and sdk modules
// with go list and fails on each import a rule forbids.
func TestImportsGoDownward(t *testing.T) {
	out, err := exec.Command("go", "list", "-f",
		"{{.ImportPath}}\t{{join .Imports \" \"}}\t{{join .TestImports \" \"}} {{join .XTestImports \" \"}}",
		module+"/...").Output()
	if err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			t.Fatalf("go list: %v\n%s", err, ee.Stderr)
		}
		t.Fatalf("go list: %v", err)
	}
	packages := 0
	for line := range strings.Lines(string(out)) {
		fields := strings.Split(strings.TrimSuffix(line, "\n"), "\t")
		if len(fields) != 3 {
			t.Fatalf("go list answered an unexpected line %q", line)
		}
		from := fields[0]
		packages++
		check := func(imports string, inTest bool) {
			for _, to := range strings.Fields(imports) {
				if to == from || !strings.HasPrefix(to, module+"/") {
					continue
				}
				for _, name := range broken(from, to, inTest) {
					where := "imports"
					if inTest {
						where = "imports in its tests"
					}
					t.Errorf("%s %s %s: %s", from, where, to, name)
				}
			}
		}
		check(fields[1], false)
		check(fields[2], true)
	}
	if packages == 0 {
		t.Fatal("go list answered no packages")
	}
}

// TestRules: each rule forbids the edge it names and allows the downward
// ones, so a rule that never matches cannot pass unnoticed.
func TestRules(t *testing.T) {
	p := func(rel string) string { return module + "/" + rel }
	for _, c := range []struct {
		from, to string
		inTest   bool
		want     bool
	}{
		{p("sdk/host"), p("coordinator"), false, true},
		{p("sdk/host"), p("sdk/conformance"), true, false},
		{p("coordinator"), p("internal/statedb"), false, true},
		{p("coordinator"), p("internal/testbin"), true, true},
		{p("guide"), p("coordinator/lru"), false, false},
		{p("coordinator/speaker"), p("guide"), false, true},
		{p("internal/httpapi"), p("cmd/memhost"), false, true},
		{p("internal/httpapi"), p("coordinator"), false, false},
		{p("internal/proposal"), p("plugins/sqlite"), false, true},
		{p("internal/proposal"), p("plugins/sqlite"), true, false},
		{p("plugins/sqlite"), p("coordinator"), false, true},
		{p("plugins/sqlite"), p("internal/testbin"), false, true},
		{p("plugins/sqlite"), p("internal/testbin"), true, false},
		{p("plugins/sqlite"), p("internal/statedb"), true, true},
		{p("plugins/sqlite"), p("plugins/bleve"), false, true},
		{p("plugins/llm/cmd/memhost-plugin-llm"), p("plugins/llm"), false, false},
		{p("plugins/llm"), p("sdk/endpoint"), false, false},
	} {
		if got := len(broken(c.from, c.to, c.inTest)) > 0; got != c.want {
			t.Errorf("%s → %s (in tests: %v): forbidden %v, want %v", c.from, c.to, c.inTest, got, c.want)
		}
	}
}
