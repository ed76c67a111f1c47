package coordinator

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// renderPrimitives are the steps of the one renderer (modeltext.go) and
// the functions allowed to call each: the renderer itself, and the writers
// that put rendered text into markup. A new caller is a surface bypassing
// the renderer, and fails this test until it goes through render (or, for
// text no model reads, such as a recall query, is listed here with why).
// StripInjected reads the header (and inbound line breaks) to cut this
// host's injected memory out of evicted text; it renders nothing.
var renderPrimitives = map[string][]string{
	"defangTexts":        {"Defang"},
	"defangTextsUntil":   {"defangTexts", "defangContentUntil", "renderFieldsUntil"},
	"defangContentUntil": {"DefangContent", "DefangInbound"},
	"normalizeNewlines":  {"renderFieldsUntil", "StripInjected"},
	"replaceControls":    {"renderFieldsUntil"},
	// Queries are compacted too; no model reads them.
	"compactSpace":      {"renderFieldsUntil", "AssembleBuildInjection", "InjectForTurn", "injectForTurn"},
	"appendAttr":        {"appendObservation"},
	"appendEscaped":     {"appendObservation", "line", "RenderSummary"},
	"Header":            {"Render", "AssembleBuildInjection", "StripInjected"},
	"appendObservation": {"appendFitting"},
}

func TestModelTextHasOneRenderer(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	seen := map[string]bool{}
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Body == nil {
				continue
			}
			ast.Inspect(fn.Body, func(n ast.Node) bool {
				call, ok := n.(*ast.CallExpr)
				if !ok {
					return true
				}
				var callee string
				switch f := call.Fun.(type) {
				case *ast.Ident:
					callee = f.Name
				case *ast.SelectorExpr:
					callee = f.Sel.Name
				}
				allowed, ok := renderPrimitives[callee]
				if !ok {
					return true
				}
				seen[callee] = true
				if !slices.Contains(allowed, fn.Name.Name) {
					t.Errorf("%s: %s calls %s; model text goes through Envelope.render (modeltext.go)", fset.Position(call.Pos()), fn.Name.Name, callee)
				}
				return true
			})
		}
	}
	for p := range renderPrimitives {
		if !seen[p] {
			t.Errorf("%s is never called: the list is stale", p)
		}
	}
}
