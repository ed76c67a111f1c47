package sdk_test

import (
	"bytes"
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/printer"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

var updateAPI = flag.Bool("update-api", false, "record the SDK's exported API in testdata/api.txt")

const apiSnapshot = "testdata/api.txt"

// TestAPICompatible holds the SDK's exported API to the snapshot in
// testdata/api.txt, one line per exported identifier, field, method and
// constant value: a plugin built against a released SDK must still build
// against the next. A line that is gone (a removal, or a change, which
// shows as a removal and an addition) fails; new lines pass and are
// recorded with
//
//	go test ./sdk -run TestAPICompatible -update-api
func TestAPICompatible(t *testing.T) {
	cur := apiLines(t, ".")
	if *updateAPI {
		if err := os.WriteFile(apiSnapshot, []byte(strings.Join(cur, "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	data, err := os.ReadFile(apiSnapshot)
	if err != nil {
		t.Fatalf("read the API snapshot: %v", err)
	}
	old := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
	var gone, added []string
	for _, l := range old {
		if _, ok := slices.BinarySearch(cur, l); !ok {
			gone = append(gone, l)
		}
	}
	for _, l := range cur {
		if _, ok := slices.BinarySearch(old, l); !ok {
			added = append(added, l)
		}
	}
	if len(gone) > 0 {
		t.Errorf("the SDK's exported API changed incompatibly; a plugin built against it would stop building. Gone or changed:\n  %s", strings.Join(gone, "\n  "))
	}
	if len(added) > 0 {
		t.Logf("additions (record them with -update-api):\n  %s", strings.Join(added, "\n  "))
	}
}

// TestAPILinesSeeChanges holds apiLines to what it must notice.
func TestAPILinesSeeChanges(t *testing.T) {
	base := `package p
type T struct{ A int; b int }
func (T) M(x int) error { return nil }
func (t *T) unexported() {}
type I interface{ N() string }
const C Kind = "c"
type Kind string
func F(a, b string) (int, error) { return 0, nil }
var V = 3
`
	for _, tc := range []struct{ name, from, to string }{
		{"field type", "A int", "A int64"},
		{"method result", "M(x int) error", "M(x int) bool"},
		{"interface method", "N() string", "N() int"},
		{"constant value", `"c"`, `"d"`},
		{"function params", "F(a, b string)", "F(a string)"},
		{"receiver", "func (T) M", "func (*T) M"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before, after := apiOfSource(t, base), apiOfSource(t, strings.Replace(base, tc.from, tc.to, 1))
			if slices.Equal(before, after) {
				t.Fatalf("changing %q to %q left the API lines alike:\n%s", tc.from, tc.to, strings.Join(before, "\n"))
			}
		})
	}
	if got := apiOfSource(t, base); slices.ContainsFunc(got, func(l string) bool { return strings.Contains(l, "unexported") || strings.Contains(l, ".b ") }) {
		t.Fatalf("unexported names listed: %q", got)
	}
}

func apiOfSource(t *testing.T, src string) []string {
	t.Helper()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "p.go", src, 0)
	if err != nil {
		t.Fatal(err)
	}
	set := map[string]bool{}
	fileAPI(fset, "p", f, set)
	return sortedKeys(set)
}

// apiLines lists the exported API of every public package of the module
// rooted at root (internal packages, tests and testdata left out).
func apiLines(t *testing.T, root string) []string {
	t.Helper()
	set := map[string]bool{}
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case "internal", "testdata":
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		pkg := "github.com/memhost/memhost/sdk"
		if dir := filepath.ToSlash(filepath.Dir(path)); dir != "." {
			pkg += "/" + dir
		}
		fileAPI(fset, pkg, f, set)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return sortedKeys(set)
}

func sortedKeys(set map[string]bool) []string {
	out := make([]string, 0, len(set))
	for l := range set {
		out = append(out, l)
	}
	slices.Sort(out)
	return out
}

// fileAPI adds f's exported declarations to set, each as "pkg kind name
// detail".
func fileAPI(fset *token.FileSet, pkg string, f *ast.File, set map[string]bool) {
	str := func(n ast.Node) string {
		var b bytes.Buffer
		printer.Fprint(&b, fset, n)
		return strings.Join(strings.Fields(b.String()), " ")
	}
	add := func(format string, args ...any) { set[pkg+" "+fmt.Sprintf(format, args...)] = true }
	for _, decl := range f.Decls {
		switch d := decl.(type) {
		case *ast.FuncDecl:
			if !d.Name.IsExported() {
				continue
			}
			if d.Recv == nil {
				add("func %s%s", d.Name.Name, strings.TrimPrefix(str(d.Type), "func"))
				continue
			}
			recv := d.Recv.List[0].Type
			base := recv
			if s, ok := base.(*ast.StarExpr); ok {
				base = s.X
			}
			if ix, ok := base.(*ast.IndexExpr); ok {
				base = ix.X
			}
			if id, ok := base.(*ast.Ident); ok && id.IsExported() {
				add("method (%s) %s%s", str(recv), d.Name.Name, strings.TrimPrefix(str(d.Type), "func"))
			}
		case *ast.GenDecl:
			genAPI(d, str, add)
		}
	}
}

func genAPI(d *ast.GenDecl, str func(ast.Node) string, add func(string, ...any)) {
	var lastType ast.Expr // an iota run repeats the previous type
	for _, spec := range d.Specs {
		switch s := spec.(type) {
		case *ast.TypeSpec:
			if !s.Name.IsExported() {
				continue
			}
			typeAPI(s, str, add)
		case *ast.ValueSpec:
			if s.Type != nil || len(s.Values) > 0 {
				lastType = s.Type
			}
			for i, n := range s.Names {
				if !n.IsExported() {
					continue
				}
				line := d.Tok.String() + " " + n.Name
				if lastType != nil {
					line += " " + str(lastType)
				}
				// A constant's value is part of its contract (capability
				// names cross the wire); a variable's is not.
				if d.Tok == token.CONST && i < len(s.Values) {
					line += " = " + str(s.Values[i])
				}
				add("%s", line)
			}
		}
	}
}

func typeAPI(s *ast.TypeSpec, str func(ast.Node) string, add func(string, ...any)) {
	name := s.Name.Name
	params := ""
	if s.TypeParams != nil {
		params = "[" + str(s.TypeParams) + "]"
	}
	switch t := s.Type.(type) {
	case *ast.StructType:
		add("type %s%s struct", name, params)
		for _, fl := range t.Fields.List {
			if len(fl.Names) == 0 { // embedded
				add("field %s.%s embedded", name, str(fl.Type))
				continue
			}
			for _, n := range fl.Names {
				if n.IsExported() {
					add("field %s.%s %s", name, n.Name, str(fl.Type))
				}
			}
		}
	case *ast.InterfaceType:
		add("type %s%s interface", name, params)
		for _, m := range t.Methods.List {
			if len(m.Names) == 0 {
				add("imethod %s embeds %s", name, str(m.Type))
				continue
			}
			for _, n := range m.Names {
				add("imethod %s.%s%s", name, n.Name, strings.TrimPrefix(str(m.Type), "func"))
			}
		}
	default:
		alias := ""
		if s.Assign.IsValid() {
			alias = "= "
		}
		add("type %s%s %s%s", name, params, alias, str(s.Type))
	}
}
