package pluginhost_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

const sdkPath = "github.com/memhost/memhost/sdk"

// capabilityInterfaces answers the interface names sdk/plugin.go pairs
// with capabilities (its capabilityImpls table), so the list below cannot
// fall behind the SDK.
func capabilityInterfaces(t *testing.T, root string) map[string]bool {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), filepath.Join(root, "sdk", "plugin.go"), nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	ast.Inspect(f, func(n ast.Node) bool {
		vs, ok := n.(*ast.ValueSpec)
		if !ok || len(vs.Names) != 1 || vs.Names[0].Name != "capabilityImpls" {
			return true
		}
		ast.Inspect(vs, func(n ast.Node) bool {
			if ta, ok := n.(*ast.TypeAssertExpr); ok {
				if id, ok := ta.Type.(*ast.Ident); ok {
					names[id.Name] = true
				}
			}
			return true
		})
		return false
	})
	if len(names) < 9 {
		t.Fatalf("found only %v in sdk/plugin.go's capabilityImpls", names)
	}
	return names
}

// TestNoCapabilityAssertions: no host code (outside tests) turns a
// provider into a capability interface with a type assertion or a type
// switch; it asks host.Provider's accessors, which answer what the plugin
// declared. The SDK's plugin side (sdk/*.go) serves the interfaces and
// may; sdk/host and sdk/conformance are host code.
func TestNoCapabilityAssertions(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	caps := capabilityInterfaces(t, root)
	hostDirs := []string{root, filepath.Join(root, "sdk", "host"), filepath.Join(root, "sdk", "conformance")}
	checked := 0
	for _, dir := range hostDirs {
		err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() {
				if path != dir && (d.Name() == "testdata" || hasGoMod(path)) {
					return filepath.SkipDir // another module: plugins, the SDK
				}
				return nil
			}
			if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return nil
			}
			checked++
			for _, bad := range assertions(t, path, caps) {
				rel, _ := filepath.Rel(root, path)
				t.Errorf("%s:%s", rel, bad)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if checked < 50 {
		t.Fatalf("checked only %d files; is the walk rooted right?", checked)
	}
}

func hasGoMod(dir string) bool {
	_, err := os.Stat(filepath.Join(dir, "go.mod"))
	return err == nil
}

// assertions answers "line: sdk.X" for each assertion to a capability
// interface in the file at path.
func assertions(t *testing.T, path string, caps map[string]bool) []string {
	t.Helper()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	pkg := ""
	for _, imp := range f.Imports {
		if p, _ := strconv.Unquote(imp.Path.Value); p == sdkPath {
			pkg = "sdk"
			if imp.Name != nil {
				pkg = imp.Name.Name
			}
		}
	}
	if pkg == "" {
		return nil
	}
	var out []string
	check := func(e ast.Expr) {
		if sel, ok := e.(*ast.SelectorExpr); ok {
			if x, ok := sel.X.(*ast.Ident); ok && x.Name == pkg && caps[sel.Sel.Name] {
				out = append(out, strconv.Itoa(fset.Position(sel.Pos()).Line)+": assertion to "+pkg+"."+sel.Sel.Name+"; use the host.Provider accessor")
			}
		}
	}
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.TypeAssertExpr:
			check(n.Type)
		case *ast.TypeSwitchStmt:
			for _, c := range n.Body.List {
				for _, e := range c.(*ast.CaseClause).List {
					check(e)
				}
			}
		}
		return true
	})
	return out
}

// TestAddingACapabilityDocListsRealFiles: every file the maintainers'
// "Adding a capability" section of docs/plugin-authoring.md names exists,
// so the list follows the code when a file moves.
func TestAddingACapabilityDocListsRealFiles(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile(filepath.Join(root, "docs", "plugin-authoring.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(doc), "\n## Adding a capability")
	if !ok {
		t.Fatal(`docs/plugin-authoring.md has no "Adding a capability" section`)
	}
	section, _, _ = strings.Cut(section, "\n## ")
	parts := strings.Split(section, "`")
	named := 0
	for i := 1; i < len(parts); i += 2 {
		p := parts[i]
		if !strings.Contains(p, "/") || strings.ContainsAny(p, "<> ") || filepath.Ext(p) == "" {
			continue
		}
		named++
		if _, err := os.Stat(filepath.Join(root, p)); err != nil {
			t.Errorf("the section names %s: %v", p, err)
		}
	}
	if named < 12 {
		t.Fatalf("the section names only %d files", named)
	}
}
