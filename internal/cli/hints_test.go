package cli

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// placeholder is a part of a command a person must fill in: <name>, <your prompt>.
var placeholder = regexp.MustCompile(`<[^<>]*>`)

// TestNextLinesRunAsPrinted reads every command line the CLI prints after "next: run" (the
// third argument of Refuse and RefuseUsage, the second of WithNext, a Next field) and
// checks the literal text of each: no placeholder, no second command smuggled in with a
// backquote; a command that reaches the situation that prints it is tested in the scripts.
func TestNextLinesRunAsPrinted(t *testing.T) {
	n := 0
	inspectCommands(t, func(fset *token.FileSet, node ast.Node) bool {
		var next ast.Expr
		switch x := node.(type) {
		case *ast.CallExpr:
			switch name := calleeName(x); {
			case (name == "Refuse" || name == "RefuseUsage") && len(x.Args) == 3:
				next = x.Args[2]
			case name == "WithNext" && len(x.Args) == 2:
				next = x.Args[1]
			}
		case *ast.KeyValueExpr:
			if id, ok := x.Key.(*ast.Ident); ok && id.Name == "Next" {
				next = x.Value
			}
		case *ast.BasicLit: // a next line printed by hand
			if x.Kind == token.STRING && strings.Contains(x.Value, "next: ") {
				next = x
			}
		}
		if next == nil {
			return true
		}
		ast.Inspect(next, func(m ast.Node) bool {
			lit, ok := m.(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				return true
			}
			s, err := strconv.Unquote(lit.Value)
			if err != nil {
				return true
			}
			n++
			if p := placeholder.FindString(s); p != "" {
				t.Errorf("%s: next line holds the placeholder %s: %q", fset.Position(lit.Pos()), p, s)
			}
			if _, cmd, ok := strings.Cut(s, "next: run `"); ok {
				s, _, _ = strings.Cut(cmd, "`")
			}
			if strings.Contains(s, "`") {
				t.Errorf("%s: next line holds a backquote (two commands in one): %q", fset.Position(lit.Pos()), s)
			}
			return true
		})
		return true
	})
	if n < 50 {
		t.Fatalf("read %d next lines; the CLI prints more than that", n)
	}
}

// inspectCommands parses every Go file of the commands (not their tests) below this folder
// and walks each with visit, which places a node with fset.
func inspectCommands(t *testing.T, visit func(fset *token.FileSet, n ast.Node) bool) {
	t.Helper()
	fset := token.NewFileSet()
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool { return visit(fset, n) })
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// calleeName is the name a call's function goes by: Refuse for cmdutil.Refuse(...).
func calleeName(call *ast.CallExpr) string {
	switch fn := call.Fun.(type) {
	case *ast.SelectorExpr:
		return fn.Sel.Name
	case *ast.Ident:
		return fn.Name
	}
	return ""
}
