package mcpserver

import (
	"go/ast"
	"go/parser"
	"go/token"
	"strings"
	"testing"
)

// plainFields are the fields of the tools' answers that carry no text a
// record's writer chose: numbers, times, memhost's own status words, and
// the lists that hold the rendered rows. Ids are rendered: a validated id
// is a token, and a token may spell a marker (an import or a hand-edited
// file chooses it).
var plainFields = map[string]bool{
	"Score": true, "UpdatedAt": true, "Status": true, "Forgotten": true,
	"NextCursor": true, "Rows": true, "Hits": true, "Content": true,
}

// TestAnswersGoThroughTheRenderer: every other field a tool's answer sets
// is the coordinator's rendering (RenderText, or the envelope's text), so a
// new field or tool that hands a model raw record text fails here.
func TestAnswersGoThroughTheRenderer(t *testing.T) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "mcpserver.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.CompositeLit:
			if !answerType(n.Type) {
				return true
			}
			for _, el := range n.Elts {
				kv, ok := el.(*ast.KeyValueExpr)
				if !ok {
					continue
				}
				key, ok := kv.Key.(*ast.Ident)
				if !ok || plainFields[key.Name] {
					continue
				}
				if !rendered(kv.Value) {
					t.Errorf("%s: field %s is set from %s, not from the coordinator's renderer", fset.Position(kv.Pos()), key.Name, types(kv.Value))
				}
				checked++
			}
		case *ast.AssignStmt:
			// out.Text = r.Text, where r is RenderEnvelope's answer, or an
			// error's text rendered by redact.ForClient.
			for _, lhs := range n.Lhs {
				if sel, ok := lhs.(*ast.SelectorExpr); ok && sel.Sel.Name == "Text" {
					if rhs, ok := n.Rhs[0].(*ast.SelectorExpr); (!ok || rhs.Sel.Name != "Text") && !forClient(n.Rhs[0]) {
						t.Errorf("%s: Text is not the envelope's text", fset.Position(n.Pos()))
					}
					checked++
				}
			}
		}
		return true
	})
	if checked < 6 {
		t.Fatalf("checked %d fields; the answers are not built where this test looks", checked)
	}
}

// answerType reports the types a tool answers with: the tools' outputs,
// their rows and hits, and the text content of a tool result.
func answerType(e ast.Expr) bool {
	switch e := e.(type) {
	case *ast.Ident:
		return strings.HasSuffix(e.Name, "Output") || strings.HasSuffix(e.Name, "Hit") || strings.HasSuffix(e.Name, "Row")
	case *ast.SelectorExpr:
		return e.Sel.Name == "TextContent"
	}
	return false
}

// rendered reports a value from the renderer: RenderText, or the
// envelope's text (out.Text, as textOrNone hands it on).
func rendered(e ast.Expr) bool {
	call, ok := e.(*ast.CallExpr)
	if !ok {
		return false
	}
	switch fn := call.Fun.(type) {
	case *ast.SelectorExpr:
		return fn.Sel.Name == "RenderText"
	case *ast.Ident:
		arg, ok := call.Args[0].(*ast.SelectorExpr)
		return fn.Name == "textOrNone" && ok && arg.Sel.Name == "Text"
	}
	return false
}

// forClient reports a call of redact.ForClient, which renders an error's
// text by the renderer's rules.
func forClient(e ast.Expr) bool {
	call, ok := e.(*ast.CallExpr)
	if !ok {
		return false
	}
	fn, ok := call.Fun.(*ast.SelectorExpr)
	return ok && fn.Sel.Name == "ForClient"
}

func types(e ast.Expr) string {
	switch e := e.(type) {
	case *ast.CallExpr:
		return "a call"
	case *ast.SelectorExpr:
		return "the value " + e.Sel.Name
	}
	return "another expression"
}
