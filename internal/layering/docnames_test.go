package layering

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// docPackages are the packages the documents name by their package name,
// and where each lives.
var docPackages = map[string]string{
	"sdk": "sdk", "host": "sdk/host", "conformance": "sdk/conformance", "index": "sdk/index",
	"kvprovider": "sdk/kvprovider", "strictjson": "sdk/strictjson", "tokenize": "sdk/tokenize",
	"coordinator": "coordinator", "guide": "guide",
}

// docName is a Go name in a document: pkg.Name, or pkg.Type.Member.
var docName = regexp.MustCompile(`\b(sdk|host|conformance|index|kvprovider|strictjson|tokenize|coordinator|guide)\.([A-Z][A-Za-z0-9_]*)(?:\.([A-Z][A-Za-z0-9_]*))?`)

// exported answers a package's exported names, and its types' exported
// methods and fields as "Type.Member".
func exported(t *testing.T, dir string) map[string]bool {
	t.Helper()
	pkgs, err := parser.ParseDir(token.NewFileSet(), dir, func(fi os.FileInfo) bool { return !strings.HasSuffix(fi.Name(), "_test.go") }, 0)
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, pkg := range pkgs {
		for _, f := range pkg.Files {
			for _, decl := range f.Decls {
				switch d := decl.(type) {
				case *ast.FuncDecl:
					if d.Recv == nil {
						names[d.Name.Name] = true
						continue
					}
					recv := d.Recv.List[0].Type
					if star, ok := recv.(*ast.StarExpr); ok {
						recv = star.X
					}
					if ix, ok := recv.(*ast.IndexExpr); ok {
						recv = ix.X
					}
					if id, ok := recv.(*ast.Ident); ok {
						names[id.Name+"."+d.Name.Name] = true
					}
				case *ast.GenDecl:
					for _, spec := range d.Specs {
						switch s := spec.(type) {
						case *ast.ValueSpec:
							for _, n := range s.Names {
								names[n.Name] = true
							}
						case *ast.TypeSpec:
							names[s.Name.Name] = true
							if st, ok := s.Type.(*ast.StructType); ok {
								for _, field := range st.Fields.List {
									for _, n := range field.Names {
										names[s.Name.Name+"."+n.Name] = true
									}
								}
							}
						}
					}
				}
			}
		}
	}
	return names
}

// TestDocsNameGoThatExists: every pkg.Name and pkg.Type.Member the README
// and docs/ name is in that package, so a reader who looks it up finds
// it. docs/architecture.md named sdk.Conn.Kill, which is host.Conn.Kill.
func TestDocsNameGoThatExists(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	docs, _ := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	known := map[string]map[string]bool{}
	for _, doc := range append(docs, filepath.Join(root, "README.md")) {
		data, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range docName.FindAllStringSubmatch(string(data), -1) {
			pkg, name, member := m[1], m[2], m[3]
			if known[pkg] == nil {
				known[pkg] = exported(t, filepath.Join(root, docPackages[pkg]))
			}
			names := known[pkg]
			if !names[name] {
				t.Errorf("%s names %s; package %s has no %s", filepath.Base(doc), m[0], docPackages[pkg], name)
			} else if member != "" && isType(names, name) && !names[name+"."+member] {
				t.Errorf("%s names %s; %s.%s has no %s", filepath.Base(doc), m[0], pkg, name, member)
			}
		}
	}
}

// isType reports whether name is a type with members (a method or a
// named field is recorded for it); a member promoted from an embedded
// type is not recorded, so name its own type instead.
func isType(names map[string]bool, name string) bool {
	for n := range names {
		if strings.HasPrefix(n, name+".") {
			return true
		}
	}
	return false
}
